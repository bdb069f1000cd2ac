"""Bare names in letters of any script plan, apply and converge on every engine.

The splitter read a bare word as ASCII only and failed on ``CREATE TABLE naïve`` with an
internal error, on every engine, before anything was checked or loaded.
"""

from __future__ import annotations

import pytest

from ptah.engines import planner
from ptah.engines.connect import open_target

pytestmark = pytest.mark.integration

SOURCE = (
    "CREATE TABLE naïve (id integer PRIMARY KEY, é integer, größe varchar(9));\n"
    "CREATE INDEX ïdx ON naïve (é);\n"
    "CREATE VIEW übersicht AS SELECT id, größe FROM naïve;\n"
)


@pytest.mark.parametrize("db", ["pg_db", "mysql_db", "sqlite_db"])
def test_unicode_bare_names_apply_and_converge(db: str, request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue(db)
    with open_target(url) as t:
        plan = planner.plan(t, SOURCE)
        assert len(plan.statements) >= 2, plan.statements  # MariaDB: the index in the table
        done = planner.apply(
            t, plan.statements, plan.fingerprint_before, True, plan.fingerprint_after
        )
        assert done.outcome == "succeeded", done.message
        assert planner.plan(t, SOURCE).statements == []
