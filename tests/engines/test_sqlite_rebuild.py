"""SQLite table rebuilds keep what the old table had beyond its columns' values.

Each case starts a real database file from one schema (written by SQLite itself, with
rows), plans and applies a second schema that needs the table rebuilt (the 12 steps),
and then checks: the apply succeeded, a second plan is empty (nothing was lost that
the desired file has: triggers, views, INSTEAD OF triggers on views), what a copy
of the columns alone would lose is still there (rowids, the AUTOINCREMENT high-water
mark, an FTS index's rows), and ``sqlite_master`` holds what a direct load of the
second schema holds, text for text (a table renamed into its name was kept as
``CREATE TABLE "t"``, a virtual table's shadow tables as ``CREATE TABLE "f_data"``).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
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
        "CREATE TABLE t (a INT);\nCREATE TABLE ptah_old_t (z INT);",
        "CREATE TABLE t (a INT, b INT UNIQUE);\nCREATE TABLE ptah_old_t (z INT);",
        "INSERT INTO t VALUES (1); INSERT INTO ptah_old_t VALUES (9);",
        "SELECT (SELECT a FROM t), (SELECT z FROM ptah_old_t)",
        [(1, 9)],
    ),
    "a table named like the shadow tables of a virtual table renamed aside": Case(
        "CREATE VIRTUAL TABLE f USING fts5(a);\nCREATE TABLE ptah_old_f_data (z INT);",
        "CREATE VIRTUAL TABLE f USING fts5(a, b);\nCREATE TABLE ptah_old_f_data (z INT);",
        "INSERT INTO f (rowid, a) VALUES (7, 'hello'); INSERT INTO ptah_old_f_data VALUES (9);",
        "SELECT (SELECT rowid FROM f WHERE f MATCH 'hello'), (SELECT z FROM ptah_old_f_data)",
        [(7, 9)],
    ),
    "a contentless FTS5 table whose columns change": Case(
        "CREATE VIRTUAL TABLE f USING fts5(a, content='');",
        "CREATE VIRTUAL TABLE f USING fts5(a, b, content='');",
        "INSERT INTO f (rowid, a) VALUES (7, 'hello');",
        "SELECT count(*) FROM f_docsize",
        [(0,)],  # nothing to copy: a contentless table cannot give its rows back
    ),
    "a parent named by another table's foreign key, a view and a trigger": Case(
        "CREATE TABLE p (id INTEGER PRIMARY KEY, n TEXT);\n"
        "CREATE TABLE c (pid INT REFERENCES p (id) ON DELETE CASCADE);\n"
        "CREATE VIEW v AS SELECT c.pid, p.n FROM c JOIN p ON p.id = c.pid;\n"
        "CREATE TRIGGER tr AFTER INSERT ON c BEGIN UPDATE p SET n = n || '+' WHERE id = new.pid;"
        " END;",
        "CREATE TABLE p (id INTEGER PRIMARY KEY, n TEXT, m INT UNIQUE);\n"
        "CREATE TABLE c (pid INT REFERENCES p (id) ON DELETE CASCADE);\n"
        "CREATE VIEW v AS SELECT c.pid, p.n FROM c JOIN p ON p.id = c.pid;\n"
        "CREATE TRIGGER tr AFTER INSERT ON c BEGIN UPDATE p SET n = n || '+' WHERE id = new.pid;"
        " END;",
        "INSERT INTO p VALUES (1, 'a'); INSERT INTO c VALUES (1);",
        "SELECT (SELECT \"table\" FROM pragma_foreign_key_list('c')), pid, n FROM v",
        [("p", 1, "a+")],
    ),
    "a table that stops being WITHOUT ROWID and STRICT": Case(
        "CREATE TABLE t (k TEXT PRIMARY KEY, v INT) STRICT, WITHOUT ROWID;",
        "CREATE TABLE t (k TEXT PRIMARY KEY, v INT);",
        "INSERT INTO t VALUES ('a', 1);",
        "SELECT k, v FROM t",
        [("a", 1)],
    ),
    "a table that stops being AUTOINCREMENT": Case(
        "CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, v TEXT);",
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);",
        "INSERT INTO t (v) VALUES ('a');",
        "SELECT id, v, (SELECT count(*) FROM sqlite_sequence) FROM t",
        [(1, "a", 0)],
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


def _master(conn: sqlite3.Connection) -> list[tuple[object, ...]]:
    """What ``sqlite_master`` holds, but sqlite_sequence: SQLite makes it for the first
    AUTOINCREMENT table and never drops it (a table that stops being AUTOINCREMENT leaves
    it where a direct load has none). In rowid order it would differ too: a rebuilt
    table comes last."""
    return sorted(
        conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name <> 'sqlite_sequence'"
        ).fetchall(),
        key=repr,
    )


def direct_load(path: Path, sql: str) -> list[tuple[object, ...]]:
    raw = sqlite3.connect(path, isolation_level=None)
    try:
        raw.executescript(sql)
        return _master(raw)
    finally:
        raw.close()


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
        assert t.connection.execute("PRAGMA foreign_key_check").fetchall() == []
        assert _master(t.connection) == direct_load(tmp_path / "direct.db", case.after)


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
        assert plan.statements[1].sql == 'ALTER TABLE "p" RENAME TO "ptah_old_p"'
        result = planner.apply(
            t, plan.statements, plan.fingerprint_before, True, plan.fingerprint_after
        )
        assert result.outcome == "succeeded", result.message
        assert t.connection.execute("SELECT pid FROM c").fetchall() == [(1,)]
        assert t.connection.execute("PRAGMA foreign_keys").fetchone() == (1,)
        assert t.connection.execute("PRAGMA foreign_key_check").fetchall() == []


PARENT = (
    "CREATE TABLE p (id INTEGER PRIMARY KEY, n TEXT);\n"
    "CREATE TABLE c (pid INT REFERENCES p (id));\n"
    "CREATE VIEW v AS SELECT n FROM p;\n"
)


@pytest.mark.parametrize("before", [False, True], ids=["was off", "was on"])
@pytest.mark.parametrize("outcome", ["succeeded", "failed"])
def test_legacy_alter_table_is_set_back_whatever_happens(
    tmp_path: Path, before: bool, outcome: str
) -> None:
    """The rename aside runs with SQLite's legacy ALTER TABLE behaviour, which the plan
    sets itself; the connection has its own setting again after the apply, whether
    the apply committed or rolled back (here: a new NOT NULL column the rows lack),
    and a rolled-back rebuild left the table, its name, its text and what names it as
    they were."""
    path = tmp_path / "t.db"
    raw = sqlite3.connect(path, isolation_level=None)
    raw.executescript(PARENT + "INSERT INTO p VALUES (1, 'a'); INSERT INTO c VALUES (1);")
    raw.close()
    column = "m INT UNIQUE" if outcome == "succeeded" else "m INT NOT NULL"
    desired = PARENT.replace("n TEXT)", f"n TEXT, {column})")
    with open_target(f"sqlite:///{path}") as t:
        master = _master(t.connection)
        t.connection.execute(f"PRAGMA legacy_alter_table = {'ON' if before else 'OFF'}")
        plan = planner.plan(t, desired)
        sqls = [s.sql for s in plan.statements]
        rename = sqls.index('ALTER TABLE "p" RENAME TO "ptah_old_p"')
        assert sqls[rename - 1 : rename + 2] == [
            "PRAGMA legacy_alter_table = ON",
            'ALTER TABLE "p" RENAME TO "ptah_old_p"',
            "PRAGMA legacy_alter_table = OFF",
        ]
        result = planner.apply(
            t, plan.statements, plan.fingerprint_before, True, plan.fingerprint_after
        )
        assert result.outcome == outcome, result.message
        assert t.connection.execute("PRAGMA legacy_alter_table").fetchone() == (int(before),)
        assert t.connection.execute("PRAGMA foreign_key_list(c)").fetchall()[0][2] == "p"
        if outcome == "failed":
            assert "NOT NULL" in result.message and result.progress.committed == 0
            assert _master(t.connection) == master
        else:
            assert _master(t.connection) == direct_load(tmp_path / "direct.db", desired)
        assert t.connection.execute("SELECT n FROM v").fetchall() == [("a",)]


def test_a_plan_may_set_legacy_alter_table_and_the_apply_sets_it_back(tmp_path: Path) -> None:
    """The one pragma a plan may set that a desired file may not: a forged plan that
    sets it and leaves it on leaves nothing of it on the connection (the apply sets it
    back); every other setting is still refused (test_sqlite_confine)."""
    from ptah.engines.model import PlanError, Statement

    with open_target(f"sqlite:///{tmp_path}/t.db") as t:
        t.connection.execute("CREATE TABLE a (id INTEGER PRIMARY KEY)")
        before = planner.current_fingerprint(t)
        forged = [Statement("PRAGMA legacy_alter_table = ON"), Statement("CREATE TABLE b (x)")]
        result = planner.apply(t, forged, before, True)
        assert result.outcome == "succeeded", result.message
        assert t.connection.execute("PRAGMA legacy_alter_table").fetchone() == (0,)
        with pytest.raises(PlanError) as caught:
            planner.plan(t, "PRAGMA legacy_alter_table = ON;\nCREATE TABLE a (id INTEGER);\n")
        assert "PRAGMA legacy_alter_table" in str(caught.value)


# A declared type and another sqlglot reads as the same one: compared in sqlglot's
# rendering (INT as INTEGER, NUMERIC as REAL, ...), a change between them planned nothing.
DECLARED_TYPES = {
    "INT PRIMARY KEY becomes the rowid's INTEGER PRIMARY KEY": (
        "CREATE TABLE t (id INT PRIMARY KEY, v TEXT);",
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);",
        "SELECT id, rowid = id FROM t",
        [(7, 1)],
    ),
    "REAL affinity becomes NUMERIC": (
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v REAL);",
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v NUMERIC);",
        "INSERT INTO t VALUES (8, '2'); SELECT typeof(v) FROM t WHERE id = 8",
        [("integer",)],
    ),
    "BOOLEAN becomes INTEGER": (
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v BOOLEAN);",
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER);",
        "SELECT type FROM pragma_table_info('t') WHERE name = 'v'",
        [("INTEGER",)],
    ),
    "VARCHAR(10) becomes TEXT(10)": (
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v VARCHAR(10));",
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT(10));",
        "SELECT type FROM pragma_table_info('t') WHERE name = 'v'",
        [("TEXT(10)",)],
    ),
    "INTEGER becomes INT in a STRICT table": (
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER) STRICT;",
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v INT) STRICT;",
        "SELECT type FROM pragma_table_info('t') WHERE name = 'v'",
        [("INT",)],
    ),
}


@pytest.mark.parametrize("name", sorted(DECLARED_TYPES))
def test_a_changed_declared_type_is_a_change(tmp_path: Path, name: str) -> None:
    """SQLite keeps a column's declared type as written: ``table_info`` reports it, a
    STRICT table checks it, its affinity comes from its letters, and only INTEGER
    PRIMARY KEY is the rowid. A change of it is planned, and the table is then the one
    a direct load makes."""
    before, after, query, expected = DECLARED_TYPES[name]
    with _changed(tmp_path, before, "INSERT INTO t (id, v) VALUES (7, 1);", after) as conn:
        assert conn.execute("SELECT id, v = 1 FROM t").fetchall() == [(7, 1)]
        *writes, read = query.split("; ")
        for sql in writes:
            conn.execute(sql)
        assert conn.execute(read).fetchall() == expected


@contextlib.contextmanager
def _changed(tmp_path: Path, before: str, rows: str, after: str) -> Iterator[sqlite3.Connection]:
    """A database loaded with ``before`` and ``rows``, then planned and applied to
    ``after``: a change is planned, converges, and leaves what a direct load makes.
    Yields the target's connection for the case's own reads."""
    path = tmp_path / "t.db"
    raw = sqlite3.connect(path, isolation_level=None)
    raw.executescript(before + "\n" + rows)
    raw.close()
    with open_target(f"sqlite:///{path}") as t:
        plan = planner.plan(t, after)
        assert plan.statements, "the change must plan something"
        result = planner.apply(
            t, plan.statements, plan.fingerprint_before, True, plan.fingerprint_after
        )
        assert result.outcome == "succeeded", result.message
        assert planner.plan(t, after).statements == []
        assert _master(t.connection) == direct_load(tmp_path / "direct.db", after)
        yield t.connection


# The same for a CAST's type, which sqlglot also reads as one of its own: to SQLite a
# CAST converts by its type's affinity, and CAST('2.0' AS NUMERIC) is 2, AS REAL 2.0.
CAST_TYPES = {
    "in a generated column": (
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT, g AS (CAST(v AS {})));",
        "SELECT typeof(g) FROM t",
    ),
    "in a view": (
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);\n"
        "CREATE VIEW w AS SELECT CAST(v AS {}) AS g FROM t;",
        "SELECT typeof(g) FROM w",
    ),
    "in an index's expression": (
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);\nCREATE INDEX i ON t (CAST(v AS {}));",
        "SELECT typeof(CAST(v AS NUMERIC)) FROM t INDEXED BY i WHERE CAST(v AS NUMERIC) = 2",
    ),
}


@pytest.mark.parametrize("name", sorted(CAST_TYPES))
def test_a_changed_cast_type_is_a_change(tmp_path: Path, name: str) -> None:
    schema, query = CAST_TYPES[name]
    before, after = schema.format("REAL"), schema.format("NUMERIC")
    with _changed(tmp_path, before, "INSERT INTO t (id, v) VALUES (1, '2.0');", after) as conn:
        assert conn.execute(query).fetchall() == [("integer",)]


# What the canonical spelling once folded away though SQLite keeps it apart: a plan
# against the old shape was empty, and the database kept it.
SPELLED_APART = {
    "a default's inner spaces": (
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT DEFAULT 'a  b');",
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT DEFAULT 'a b');",
        "INSERT INTO t (id) VALUES (8); SELECT v FROM t WHERE id = 8",
        [("a b",)],
    ),
    "a default's line break, CRLF to LF": (
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT DEFAULT 'a\r\nb');",
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT DEFAULT 'a\nb');",
        "INSERT INTO t (id) VALUES (8); SELECT v FROM t WHERE id = 8",
        [("a\nb",)],
    ),
    "a check's string": (
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT CHECK (v <> 'a  b'));",
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT CHECK (v <> 'a b'));",
        "INSERT INTO t VALUES (8, 'a  b'); SELECT v FROM t WHERE id = 8",
        [("a  b",)],
    ),
    # A view's column without an alias is named by its expression as written.
    "a view column named by its expression's spacing": (
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v INT);\nCREATE VIEW w AS SELECT v+1 FROM t;",
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v INT);\nCREATE VIEW w AS SELECT v + 1 FROM t;",
        'SELECT "v + 1" FROM w',
        [(2,)],
    ),
    "a view column named by its function's letters' case": (
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v INT);\n"
        "CREATE VIEW w AS SELECT abs(v) FROM t;\n"
        "CREATE TRIGGER wd INSTEAD OF DELETE ON w BEGIN DELETE FROM t; END;",
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v INT);\n"
        "CREATE VIEW w AS SELECT ABS(v) FROM t;\n"
        "CREATE TRIGGER wd INSTEAD OF DELETE ON w BEGIN DELETE FROM t; END;",
        'SELECT "ABS(v)" FROM w',
        [(1,)],
    ),
    # A double-quoted word that names nothing is a string to SQLite: "Neg" is not "neg".
    "a trigger's double-quoted string": (
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v INT);\nCREATE TABLE l (m TEXT);\n"
        'CREATE TRIGGER tr AFTER INSERT ON t BEGIN INSERT INTO l VALUES ("Neg"); END;',
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v INT);\nCREATE TABLE l (m TEXT);\n"
        'CREATE TRIGGER tr AFTER INSERT ON t BEGIN INSERT INTO l VALUES ("neg"); END;',
        "INSERT INTO t VALUES (2, 2); SELECT m FROM l ORDER BY rowid",
        [("Neg",), ("neg",)],
    ),
}


@pytest.mark.parametrize("name", sorted(SPELLED_APART))
def test_what_sqlite_keeps_apart_is_a_change(tmp_path: Path, name: str) -> None:
    """Whitespace inside a string literal, a view's column names (taken from the
    expressions' text) and a double-quoted string in a trigger are the database's, not
    spelling: each change is planned, and the database is then what a direct load makes."""
    before, after, query, expected = SPELLED_APART[name]
    with _changed(tmp_path, before, "INSERT INTO t (id, v) VALUES (1, 1);", after) as conn:
        *writes, read = query.split("; ")
        for sql in writes:
            conn.execute(sql)
        assert conn.execute(read).fetchall() == expected


@pytest.mark.parametrize(
    ("before", "after", "lossy"),
    [
        ("TEXT", "INTEGER", True),  # '012' is copied as 12
        ("VARCHAR(10)", "DECIMAL(10,2)", True),  # '1.50' as 1.5
        ("", "REAL", True),  # no type (BLOB affinity) keeps text as it is; REAL does not
        ("INTEGER", "TEXT", True),  # a number becomes text (a REAL rounded, below)
        ("REAL", "NUMERIC", False),
        ("INTEGER", "NUMERIC", False),
        ("NUMERIC", "INT", False),
        ("TEXT", "CLOB", False),
    ],
)
def test_a_copy_that_turns_text_into_numbers_is_destructive(
    tmp_path: Path, before: str, after: str, lossy: bool
) -> None:
    """A rebuild's copy converts each value by the new column's affinity: text to a
    numeric affinity keeps '012' as 12, which no plan gives back. Such a copy is
    destructive (so ``allowDestructive`` decides); one between TEXT affinities or from
    REAL to another numeric one keeps what a value says."""
    table = "CREATE TABLE t (id INTEGER PRIMARY KEY, v {});"
    path = tmp_path / "t.db"
    raw = sqlite3.connect(path, isolation_level=None)
    raw.executescript(table.format(before) + "INSERT INTO t VALUES (1, '012');")
    raw.close()
    with open_target(f"sqlite:///{path}") as t:
        plan = planner.plan(t, table.format(after))
        copy = next(s for s in plan.statements if s.sql.startswith('INSERT INTO "t"'))
        assert ("destructive" in copy.hazards) == lossy, copy
        result = planner.apply(
            t, plan.statements, plan.fingerprint_before, True, plan.fingerprint_after
        )
        assert result.outcome == "succeeded", result.message
        value = t.connection.execute("SELECT v FROM t").fetchone()[0]
        if lossy or before == "TEXT":  # (a numeric column held 12 from the start)
            assert (value != "012") == lossy, value


@pytest.mark.parametrize(
    ("before", "after", "value", "kept"),
    [
        ("REAL", "TEXT", "0.30000000000000004", "0.3"),  # 15 digits
        ("", "VARCHAR(20)", "0.30000000000000004", "0.3"),  # no affinity holds a REAL too
        ("INTEGER", "REAL", "9007199254740993", 9007199254740992.0),  # past 2^53
        ("NUMERIC", "DOUBLE", "9007199254740993", 9007199254740992.0),
    ],
)
def test_a_copy_that_rounds_numbers_is_destructive(
    tmp_path: Path, before: str, after: str, value: str, kept: object
) -> None:
    """A number copied into TEXT becomes its text, a REAL's rounded to 15 digits; an
    integer copied into REAL is rounded past 2^53. The plan was not destructive: applied
    without ``allowDestructive``, it changed the values."""
    strict = " STRICT" if after == "TEXT" else ""  # a STRICT table converts alike
    table = "CREATE TABLE t (id INTEGER PRIMARY KEY, v {}){};"
    path = tmp_path / "t.db"
    raw = sqlite3.connect(path, isolation_level=None)
    raw.executescript(table.format(before, "") + f"INSERT INTO t VALUES (1, {value});")
    raw.close()
    with open_target(f"sqlite:///{path}") as t:
        plan = planner.plan(t, table.format(after, strict))
        assert plan.destructive, plan.statements
        refused = planner.apply(t, plan.statements, plan.fingerprint_before, False)
        assert refused.reason == "DestructiveNotAllowed"
        assert t.connection.execute("SELECT v FROM t").fetchone()[0] != kept
        result = planner.apply(t, plan.statements, plan.fingerprint_before, True)
        assert result.outcome == "succeeded", result.message
        assert t.connection.execute("SELECT v FROM t").fetchone()[0] == kept
