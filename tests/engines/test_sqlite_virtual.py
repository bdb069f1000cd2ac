"""SQLite virtual tables round-trip: their shadow tables belong to them, not to the plan."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ptah.engines import planner
from ptah.engines.connect import open_target

pytestmark = pytest.mark.integration

SQL = """CREATE TABLE doc (id INTEGER PRIMARY KEY, title TEXT NOT NULL);
CREATE VIRTUAL TABLE doc_fts USING fts5(title, content='doc', content_rowid='id');
CREATE TRIGGER doc_ai AFTER INSERT ON doc BEGIN
  INSERT INTO doc_fts(rowid, title) VALUES (new.id, new.title);
END;
"""


def test_fts5_table_applies_and_replans_to_nothing(sqlite_db: str) -> None:
    with open_target(sqlite_db) as t:
        plan = planner.plan(t, SQL)
        # The virtual table is one statement; its shadow tables (doc_fts_data, ...) come
        # with it and are never planned on their own.
        assert not [s.sql for s in plan.statements if "doc_fts_" in s.sql]
        result = planner.apply(
            t, plan.statements, plan.fingerprint_before, True, plan.fingerprint_after
        )
        assert result.outcome == "succeeded", result.message
        assert planner.plan(t, SQL).statements == []
    path = sqlite_db.removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO doc (title) VALUES ('hello world')")
        hits = conn.execute("SELECT rowid FROM doc_fts WHERE doc_fts MATCH 'hello'").fetchall()
    assert hits == [(1,)]


def test_a_virtual_table_of_a_module_sqlite_lacks_refuses_the_plan_naming_it(
    tmp_path: Path,
) -> None:
    """An application that loads an extension (sqlite-vec, SpatiaLite) has virtual tables
    this SQLite cannot open: the plan was an internal error with a traceback; it is a
    refusal naming the table and the module."""
    from ptah.engines.model import PlanError

    path = tmp_path / "app.db"
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("CREATE TABLE a (x INT)")
    raw.execute("PRAGMA writable_schema = ON")  # as if made where the module was loaded
    raw.execute(
        "INSERT INTO sqlite_master (type, name, tbl_name, rootpage, sql) VALUES"
        " ('table', 'v', 'v', 0, 'CREATE VIRTUAL TABLE v USING vec0(embedding float[3])')"
    )
    raw.close()
    with open_target(f"sqlite:///{path}") as t, pytest.raises(PlanError) as caught:
        planner.plan(t, "CREATE TABLE a (x INT);\n")
    message = str(caught.value)
    assert "'v'" in message and "no such module: vec0" in message and "\n" not in message
    assert caught.value.reason == "Unsupported"
