"""SQLite table rebuilds keep what the old table had beyond its columns' values.

Each case starts a real database file from one schema (written by SQLite itself, with
rows), plans and applies a second schema that needs the table rebuilt (the 12 steps),
and then checks: the apply succeeded, a second plan is empty (nothing was lost that
the desired file has: triggers, views, INSTEAD OF triggers on views) and what a copy
of the columns alone would lose is still there (rowids, the AUTOINCREMENT high-water
mark, an FTS index's rows).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest

from ptah.engines import planner
from ptah.engines.connect import open_target

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class Case:
    before: str
    after: str
    rows: str  # run after ``before``
    query: str  # after the apply, must give ``expected``
    expected: list[tuple[object, ...]]


CASES = {
    "autoincrement keeps its high-water mark": Case(
        "CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, v TEXT);",
        "CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, v TEXT, w TEXT UNIQUE);",
        "INSERT INTO t (v) VALUES ('a'), ('b'), ('c'); DELETE FROM t WHERE id = 3;",
        "SELECT seq FROM sqlite_sequence WHERE name = 't'",
        [(3,)],
    ),
    "autoincrement of an emptied table": Case(
        "CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, v TEXT);",
        "CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, v TEXT NOT NULL DEFAULT '');",
        "INSERT INTO t (v) VALUES ('a'), ('b'); DELETE FROM t;",
        "SELECT seq FROM sqlite_sequence WHERE name = 't'",
        [(2,)],
    ),
    "rowids of a table without INTEGER PRIMARY KEY": Case(
        "CREATE TABLE t (v TEXT);",
        "CREATE TABLE t (v TEXT, w INT UNIQUE);",
        "INSERT INTO t (rowid, v) VALUES (10, 'a'), (20, 'b');",
        "SELECT rowid, v FROM t ORDER BY rowid",
        [(10, "a"), (20, "b")],
    ),
    "rowids when a column is named rowid": Case(
        "CREATE TABLE t (rowid TEXT, v TEXT);",
        "CREATE TABLE t (rowid TEXT, v TEXT, w INT UNIQUE);",
        "INSERT INTO t (_rowid_, rowid, v) VALUES (7, 'r', 'a');",
        "SELECT _rowid_, rowid, v FROM t",
        [(7, "r", "a")],
    ),
    "a trigger on another table that writes to the rebuilt one": Case(
        "CREATE TABLE t (a INT, b INT);\nCREATE TABLE u (x INT);\n"
        "CREATE TRIGGER tr AFTER INSERT ON u BEGIN INSERT INTO t (a) VALUES (new.x); END;",
        "CREATE TABLE t (a INT, b INT, c INT UNIQUE);\nCREATE TABLE u (x INT);\n"
        "CREATE TRIGGER tr AFTER INSERT ON u BEGIN INSERT INTO t (a) VALUES (new.x); END;",
        "INSERT INTO t VALUES (1, 2);",
        "SELECT a, b, c FROM t",
        [(1, 2, None)],
    ),
    "an INSTEAD OF trigger on a view over the rebuilt table": Case(
        "CREATE TABLE t (a INT, b INT);\nCREATE VIEW v AS SELECT a FROM t;\n"
        "CREATE TRIGGER tv INSTEAD OF INSERT ON v BEGIN INSERT INTO t (a) VALUES (new.a); END;",
        "CREATE TABLE t (a INT, b INT NOT NULL DEFAULT 0, c TEXT UNIQUE);\n"
        "CREATE VIEW v AS SELECT a FROM t;\n"
        "CREATE TRIGGER tv INSTEAD OF INSERT ON v BEGIN INSERT INTO t (a) VALUES (new.a); END;",
        "INSERT INTO t VALUES (1, 2);",
        "SELECT name FROM sqlite_master WHERE type = 'trigger'",
        [("tv",)],
    ),
    "an INSTEAD OF trigger on a changed view": Case(
        "CREATE TABLE t (a INT, b INT);\nCREATE VIEW v AS SELECT a FROM t;\n"
        "CREATE TRIGGER tv INSTEAD OF INSERT ON v BEGIN INSERT INTO t (a) VALUES (new.a); END;",
        "CREATE TABLE t (a INT, b INT);\nCREATE VIEW v AS SELECT a, b FROM t;\n"
        "CREATE TRIGGER tv INSTEAD OF INSERT ON v BEGIN INSERT INTO t (a) VALUES (new.a); END;",
        "INSERT INTO t VALUES (1, 2);",
        "SELECT name FROM sqlite_master WHERE type = 'trigger'",
        [("tv",)],
    ),
    "an FTS5 table whose columns change": Case(
        "CREATE VIRTUAL TABLE f USING fts5(a);",
        "CREATE VIRTUAL TABLE f USING fts5(a, b);",
        "INSERT INTO f (rowid, a) VALUES (7, 'hello');",
        "SELECT rowid, a, b FROM f WHERE f MATCH 'hello'",
        [(7, "hello", None)],
    ),
    "an external-content FTS5 table whose columns change": Case(
        "CREATE TABLE doc (id INTEGER PRIMARY KEY, title TEXT, body TEXT);\n"
        "CREATE VIRTUAL TABLE f USING fts5(title, content='doc', content_rowid='id');",
        "CREATE TABLE doc (id INTEGER PRIMARY KEY, title TEXT, body TEXT);\n"
        "CREATE VIRTUAL TABLE f USING fts5(title, body, content='doc', content_rowid='id');",
        "INSERT INTO doc VALUES (4, 'x', 'hello'); INSERT INTO f (f) VALUES ('rebuild');",
        "SELECT rowid FROM f WHERE f MATCH 'hello'",
        [(4,)],
    ),
    "an R*Tree whose dimensions change": Case(
        "CREATE VIRTUAL TABLE r USING rtree(id, minx, maxx);",
        "CREATE VIRTUAL TABLE r USING rtree(id, minx, maxx, miny, maxy);",
        "INSERT INTO r VALUES (3, 0, 1);",
        "SELECT id, minx, maxx FROM r",
        [(3, 0.0, 1.0)],
    ),
    "a table named like the rebuild's temporary table": Case(
        "CREATE TABLE t (a INT);\nCREATE TABLE ptah_new_t (z INT);",
        "CREATE TABLE t (a INT, b INT UNIQUE);\nCREATE TABLE ptah_new_t (z INT);",
        "INSERT INTO t VALUES (1); INSERT INTO ptah_new_t VALUES (9);",
        "SELECT (SELECT a FROM t), (SELECT z FROM ptah_new_t)",
        [(1, 9)],
    ),
    "a column spelled in other letters' case is the same column": Case(
        "CREATE TABLE t (Name TEXT, b INT);",
        "CREATE TABLE t (name TEXT, b INT, c INT UNIQUE);",
        "INSERT INTO t VALUES ('x', 1);",
        "SELECT name, b FROM t",
        [("x", 1)],
    ),
    "a table spelled in other letters' case is the same table": Case(
        "CREATE TABLE Users (id INTEGER PRIMARY KEY, n TEXT);\nCREATE INDEX i ON Users (n);",
        "CREATE TABLE users (id INTEGER PRIMARY KEY, n TEXT);\nCREATE INDEX i ON users (n);",
        "INSERT INTO Users VALUES (1, 'x');",
        "SELECT name, (SELECT n FROM users WHERE id = 1) FROM sqlite_master WHERE type = 'table'",
        [("users", "x")],
    ),
    "a generated column that becomes a plain one keeps its values": Case(
        "CREATE TABLE t (a INT, g INT GENERATED ALWAYS AS (a * 2) STORED);",
        "CREATE TABLE t (a INT, g INT);",
        "INSERT INTO t (a) VALUES (3);",
        "SELECT a, g FROM t",
        [(3, 6)],
    ),
    "a plain column that becomes a generated one": Case(
        "CREATE TABLE t (a INT, g INT);",
        "CREATE TABLE t (a INT, g INT GENERATED ALWAYS AS (a * 2) VIRTUAL);",
        "INSERT INTO t VALUES (3, 99);",
        "SELECT a, g FROM t",
        [(3, 6)],
    ),
    "unicode, keyword and quoted names": Case(
        'CREATE TABLE "Ünï cödé" ("sélect" INT, "a""b" TEXT, [order] INT);\n'
        'CREATE INDEX "ïdx" ON "Ünï cödé" ("sélect");',
        'CREATE TABLE "Ünï cödé" ("sélect" INT, "a""b" TEXT, [order] INT, "from" INT UNIQUE);\n'
        'CREATE INDEX "ïdx" ON "Ünï cödé" ("sélect");',
        "INSERT INTO \"Ünï cödé\" VALUES (1, 'x', 2);",
        'SELECT "sélect", "a""b", [order], "from" FROM "Ünï cödé"',
        [(1, "x", 2, None)],
    ),
    "strict, without rowid and a self reference": Case(
        "CREATE TABLE t (k TEXT PRIMARY KEY, up TEXT REFERENCES t (k)) STRICT, WITHOUT ROWID;",
        "CREATE TABLE t (k TEXT PRIMARY KEY, up TEXT REFERENCES t (k) ON DELETE CASCADE,"
        " n INT NOT NULL DEFAULT 0) STRICT, WITHOUT ROWID;",
        "PRAGMA foreign_keys = ON; INSERT INTO t VALUES ('a', NULL), ('b', 'a');",
        "SELECT k, up, n FROM t ORDER BY k",
        [("a", None, 0), ("b", "a", 0)],
    ),
    "a table created with comments and main. before its name": Case(
        "CREATE /* c */ TABLE main.t (a INT);",
        "CREATE /* c */ TABLE -- x\n main . t (a INT, b INT UNIQUE);",
        "INSERT INTO t VALUES (1);",
        "SELECT a, b FROM t",
        [(1, None)],
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_rebuild_keeps_what_the_table_had(tmp_path: Path, name: str) -> None:
    case = CASES[name]
    path = tmp_path / "t.db"
    raw = sqlite3.connect(path, isolation_level=None)
    raw.executescript(case.before + "\n" + case.rows)
    raw.close()
    with open_target(f"sqlite:///{path}") as t:
        plan = planner.plan(t, case.after)
        assert plan.statements, "the change must plan something"
        result = planner.apply(
            t, plan.statements, plan.fingerprint_before, True, plan.fingerprint_after
        )
        assert result.outcome == "succeeded", result.message
        assert planner.plan(t, case.after).statements == [], [s.sql for s in plan.statements]
        assert t.connection.execute(case.query).fetchall() == case.expected


def test_a_foreign_key_to_columns_that_are_not_unique_is_refused_when_planned(
    tmp_path: Path,
) -> None:
    """Such a schema loads, but every write to the child fails ("foreign key mismatch"),
    the apply's own foreign_key_check too: the plan says so instead."""
    desired = (
        "CREATE TABLE p (id INTEGER PRIMARY KEY, k TEXT);\n"
        "CREATE TABLE c (k TEXT REFERENCES p (k));\n"
    )
    with open_target(f"sqlite:///{tmp_path}/t.db") as t, pytest.raises(Exception) as caught:
        planner.plan(t, desired)
    message = str(caught.value)
    assert "foreign key mismatch" in message and "\n" not in message, message


def test_rebuilding_a_parent_keeps_its_cascading_children(tmp_path: Path) -> None:
    """The 12 steps' foreign_keys off around the rebuild: with them on, DROP TABLE of the
    old parent would delete every child row (ON DELETE CASCADE). The connection's own
    setting is back on after the apply."""
    path = tmp_path / "t.db"
    raw = sqlite3.connect(path, isolation_level=None)
    raw.executescript(
        "CREATE TABLE p (id INTEGER PRIMARY KEY, n TEXT);\n"
        "CREATE TABLE c (pid INT REFERENCES p (id) ON DELETE CASCADE DEFERRABLE INITIALLY"
        " DEFERRED);\nINSERT INTO p VALUES (1, 'a'); INSERT INTO c VALUES (1);"
    )
    raw.close()
    desired = (
        "CREATE TABLE p (id INTEGER PRIMARY KEY, n TEXT, m INT UNIQUE);\n"
        "CREATE TABLE c (pid INT REFERENCES p (id) ON DELETE CASCADE DEFERRABLE INITIALLY"
        " DEFERRED);\n"
    )
    with open_target(f"sqlite:///{path}") as t:
        t.connection.execute("PRAGMA foreign_keys = ON")
        plan = planner.plan(t, desired)
        assert plan.statements[0].sql.startswith('CREATE TABLE "ptah_new_p"')
        result = planner.apply(
            t, plan.statements, plan.fingerprint_before, True, plan.fingerprint_after
        )
        assert result.outcome == "succeeded", result.message
        assert t.connection.execute("SELECT pid FROM c").fetchall() == [(1,)]
        assert t.connection.execute("PRAGMA foreign_keys").fetchone() == (1,)
        assert t.connection.execute("PRAGMA foreign_key_check").fetchall() == []
