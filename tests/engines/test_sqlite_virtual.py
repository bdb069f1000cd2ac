"""SQLite virtual tables round-trip: their shadow tables belong to them, not to the plan."""

from __future__ import annotations

import sqlite3

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
