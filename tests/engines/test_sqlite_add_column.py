"""SQLite adds columns with ADD COLUMN whatever table constraints the table has.

For each table-constraint shape, each column SQLite's ALTER TABLE ADD COLUMN
accepts is planned as exactly that one statement (the author's own text),
applied on a table with rows, and re-planned to no changes; each column it
does not accept is planned as the table rebuild, which keeps the rows and runs
``foreign_key_check`` before commit.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ptah.engines import planner
from ptah.engines.connect import open_target

pytestmark = pytest.mark.integration

PARENT = "CREATE TABLE parent (id INTEGER PRIMARY KEY);\n"
# shape -> (table constraints after the columns, table options)
SHAPES: dict[str, tuple[str, str]] = {
    "none": ("", ""),
    "composite primary key": (",\n  PRIMARY KEY (a, b)", ""),
    "named primary key": (",\n  CONSTRAINT pk_t PRIMARY KEY (a)", ""),
    "unique": (",\n  UNIQUE (b)", ""),
    "check": (",\n  CHECK (a > 0)", ""),
    "foreign key": (",\n  FOREIGN KEY (c) REFERENCES parent (id)", ""),
    "without rowid": (",\n  PRIMARY KEY (a)", " WITHOUT ROWID"),
    "strict": (",\n  PRIMARY KEY (a),\n  UNIQUE (b, c)", " STRICT"),
    "all of them": (
        ",\n  CONSTRAINT pk PRIMARY KEY (a, b),\n  UNIQUE (c),\n  CHECK (b <> ''),"
        "\n  FOREIGN KEY (c) REFERENCES parent (id) ON DELETE CASCADE",
        "",
    ),
}
ADDABLE = {
    "nullable": "note TEXT",
    "constant default": "n INTEGER DEFAULT 7",
    "negative default": "m INTEGER DEFAULT -1",
    "not null with default": "s TEXT NOT NULL DEFAULT 'x'",
    "references, null default": "p2 INTEGER REFERENCES parent (id)",
    "check on the column": "k INTEGER DEFAULT 3 CHECK (k > 0)",
    "collate": "w TEXT COLLATE NOCASE",
}
REBUILT = {
    "not null without default": "s TEXT NOT NULL",
    "unique column": "u TEXT UNIQUE",
    "current timestamp default": "at TEXT DEFAULT CURRENT_TIMESTAMP",
    "expression default": "e INTEGER DEFAULT (1 + 2)",
    "references, non-null default": "p2 INTEGER DEFAULT 1 REFERENCES parent (id)",
    "stored generated": "g INTEGER GENERATED ALWAYS AS (a * 2) STORED",
}


def _table(shape: str, extra: str = "") -> str:
    tail, options = SHAPES[shape]
    extra_col = f",\n  {extra}" if extra else ""
    return (
        PARENT + "CREATE TABLE t (\n  a INTEGER NOT NULL,\n  b TEXT NOT NULL,\n"
        f"  c INTEGER{extra_col}{tail}\n){options};\n"
    )


def _start(url: str, shape: str) -> None:
    with open_target(url) as t:
        plan = planner.plan(t, _table(shape))
        result = planner.apply(t, plan.statements, plan.fingerprint_before, True)
        assert result.outcome == "succeeded", result.message
        t.connection.execute("INSERT INTO parent VALUES (1)")
        t.connection.execute("INSERT INTO t (a, b, c) VALUES (1, 'one', 1), (2, 'two', NULL)")


def _apply(url: str, sql: str) -> list[str]:
    with open_target(url) as t:
        plan = planner.plan(t, sql)
        result = planner.apply(
            t, plan.statements, plan.fingerprint_before, True, plan.fingerprint_after
        )
        assert result.outcome == "succeeded", result.message
        assert planner.plan(t, sql).statements == []
        rows = t.connection.execute("SELECT a, b, c FROM t ORDER BY a").fetchall()
        assert rows == [(1, "one", 1), (2, "two", None)]
    return [s.sql for s in plan.statements]


@pytest.mark.parametrize("column", sorted(ADDABLE))
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_addable_column_is_one_add_column(tmp_path: Path, shape: str, column: str) -> None:
    url = f"sqlite:///{tmp_path}/t.db"
    _start(url, shape)
    definition = ADDABLE[column]
    assert _apply(url, _table(shape, definition)) == [f'ALTER TABLE "t" ADD COLUMN {definition}']


@pytest.mark.parametrize("column", sorted(REBUILT))
@pytest.mark.parametrize("shape", ["none", "composite primary key", "foreign key", "strict"])
def test_other_columns_rebuild_the_table(tmp_path: Path, shape: str, column: str) -> None:
    url = f"sqlite:///{tmp_path}/t.db"
    _start(url, shape)
    definition = REBUILT[column]
    if "NOT NULL" in definition or "UNIQUE" in definition:
        with open_target(url) as t:  # rows the new column cannot hold: an empty table
            t.connection.execute("DELETE FROM t")
        with open_target(url) as t:
            plan = planner.plan(t, _table(shape, definition))
            result = planner.apply(t, plan.statements, plan.fingerprint_before, True)
        assert result.outcome == "succeeded", result.message
        statements = [s.sql for s in plan.statements]
    else:
        statements = _apply(url, _table(shape, definition))
    assert statements[1] == 'ALTER TABLE "t" RENAME TO "ptah_old_t"', statements
    assert any(
        s.startswith('INSERT INTO "t"') and s.endswith('FROM "ptah_old_t"') for s in statements
    )


def test_a_column_in_the_middle_or_a_changed_constraint_rebuilds(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/t.db"
    _start(url, "unique")
    middle = _table("unique").replace("  b TEXT NOT NULL,\n", "  b TEXT NOT NULL,\n  x TEXT,\n")
    assert _apply(url, middle)[1] == 'ALTER TABLE "t" RENAME TO "ptah_old_t"'
    # a new column together with a new table constraint: ADD COLUMN cannot add the constraint
    tail = ",\n  UNIQUE (b),\n  CHECK (a > 0)"
    both = _table("unique", "y TEXT").replace(",\n  UNIQUE (b)", tail)
    assert _apply(url, both)[1] == 'ALTER TABLE "t" RENAME TO "ptah_old_t"'


def test_rebuild_that_breaks_a_foreign_key_is_rolled_back(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/t.db"
    _start(url, "none")
    with open_target(url) as t:
        t.connection.execute("INSERT INTO t (a, b, c) VALUES (3, 'orphan', 99)")
    with open_target(url) as t:
        t.connection.execute("PRAGMA foreign_keys = ON")
        plan = planner.plan(t, _table("foreign key"))
        assert plan.statements[1].sql == 'ALTER TABLE "t" RENAME TO "ptah_old_t"'
        result = planner.apply(t, plan.statements, plan.fingerprint_before, True)
        assert result.outcome == "failed" and "t -> parent" in result.message, result.message
        assert result.progress.committed == 0
        # rolled back whole, and the connection's foreign_keys setting restored
        assert planner.current_fingerprint(t) == plan.fingerprint_before
        assert t.connection.execute("PRAGMA foreign_keys").fetchone() == (1,)
        assert t.connection.execute("SELECT count(*) FROM t").fetchone() == (3,)


def test_violations_that_were_there_before_do_not_block_a_change(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/t.db"
    _start(url, "foreign key")
    with open_target(url) as t:  # foreign_keys is off on a new connection: an orphan gets in
        t.connection.execute("INSERT INTO t (a, b, c) VALUES (3, 'orphan', 99)")
    path = tmp_path / "t.db"
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA foreign_key_check").fetchall()
    raw.close()
    with open_target(url) as t:
        sql = _table("foreign key").replace("  c INTEGER,", "  c INTEGER,\n  z TEXT UNIQUE,")
        plan = planner.plan(t, sql)
        result = planner.apply(t, plan.statements, plan.fingerprint_before, True)
        assert result.outcome == "succeeded", result.message
