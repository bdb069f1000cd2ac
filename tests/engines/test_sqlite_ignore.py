"""SQLite has no census and cannot leave a managed object alone: a policy that ignores
anything is refused, instead of planned as if it were not there (the plan would drop the
table the entry names)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ptah.engines import planner
from ptah.engines.connect import open_target
from ptah.engines.model import PlanError, SchemaPolicy

pytestmark = pytest.mark.integration


def test_a_policy_that_ignores_anything_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "target.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE flyway_schema_history (rank INTEGER PRIMARY KEY)")
    url = f"sqlite:///{path}"
    desired = "CREATE TABLE t (id INTEGER PRIMARY KEY);"
    with open_target(url) as t:
        assert "DROP TABLE" in " ".join(s.sql for s in planner.plan(t, desired).statements)
        with pytest.raises(PlanError) as refused:
            planner.plan(t, desired, policy=SchemaPolicy(ignore=("table flyway_*",)))
    assert refused.value.reason == "Unsupported"
    assert "spec.policy.ignore (table flyway_*) is not supported" in str(refused.value)
