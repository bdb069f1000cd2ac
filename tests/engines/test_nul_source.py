"""A desired file with a NUL character is refused on every engine, before anything loads.

PostgreSQL's client library ends a query string at a NUL, so a scratch load of such a
file ran the statements before it and never saw the rest: the plan silently left out
every object after it (a SQLite plan failed with an internal error instead).
"""

from __future__ import annotations

import pytest

from ptah.engines import planner
from ptah.engines.base import DesiredSchemaInvalid
from ptah.engines.connect import open_target

pytestmark = pytest.mark.integration

SOURCE = "CREATE TABLE a (id integer);\n\0CREATE TABLE b (id integer);\n"


@pytest.mark.parametrize("db", ["pg_db", "mysql_db", "sqlite_db"])
def test_a_nul_character_is_refused_with_its_line(db: str, request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue(db)
    with open_target(url) as t:
        with pytest.raises(DesiredSchemaInvalid, match="line 2: a NUL character"):
            planner.plan(t, SOURCE)
        plan = planner.plan(t, SOURCE.replace("\0", ""))
    assert len(plan.statements) == 2, "the same file without the NUL plans both tables"
