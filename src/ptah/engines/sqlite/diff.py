"""SQLite diff: ADD COLUMN where SQLite can express it, otherwise a table rebuild.

The rebuild is SQLite's documented procedure: create the new shape under a
temporary name, copy the common columns, drop the old table, rename the new
one, then recreate its indexes and triggers. Views are recreated around any
rebuild because SQLite re-parses them on rename.
"""

from __future__ import annotations

import re
from typing import Any

from sqlglot import expressions as exp

from ptah.engines.model import DATA_DEPENDENT, DESTRUCTIVE, LOCK_HEAVY, Schema, Statement
from ptah.engines.sqlite.inspect import body_segments, canonical_sql, parse, table_options

_CREATE_TABLE = re.compile(
    r"^\s*CREATE\s+TABLE\s+(IF\s+NOT\s+EXISTS\s+)?(\"(?:[^\"]|\"\")+\"|`[^`]+`|\[[^\]]+\]|[\w$]+)",
    re.IGNORECASE,
)


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


_CONSTANTS = (exp.Literal, exp.Null, exp.Boolean, exp.HexString)


def _constant(value: exp.Expression | None) -> bool:
    """A default SQLite accepts for ADD COLUMN: a literal, a signed number, NULL, a blob."""
    if isinstance(value, exp.Neg):
        value = value.this
    return isinstance(value, _CONSTANTS)


def column_addable(column: exp.ColumnDef) -> bool:
    """Whether ``ALTER TABLE ADD COLUMN`` can add this column (SQLite's documented limits).

    No PRIMARY KEY or UNIQUE; a default that is a constant (not CURRENT_*,
    not an expression in parentheses); NOT NULL only with a non-NULL default;
    a REFERENCES clause only with a NULL default (foreign keys may be on);
    a generated column only VIRTUAL. CHECK and COLLATE are allowed: SQLite
    checks CHECK constraints against the existing rows.
    """
    kinds = [c.args.get("kind") for c in column.args.get("constraints") or []]
    default: exp.Expression | None = None
    has_default = not_null = references = False
    for kind in kinds:
        if isinstance(kind, exp.PrimaryKeyColumnConstraint | exp.UniqueColumnConstraint):
            return False
        if isinstance(kind, exp.ComputedColumnConstraint) and kind.args.get("persisted"):
            return False
        if isinstance(kind, exp.DefaultColumnConstraint):
            has_default, default = True, kind.this
            if not _constant(default):
                return False
        if isinstance(kind, exp.NotNullColumnConstraint) and not kind.args.get("allow_null"):
            not_null = True
        if isinstance(kind, exp.Reference):
            references = True
    is_null = not has_default or isinstance(default, exp.Null)
    if not_null and is_null:
        return False
    return not (references and not is_null)


def _addable(cur_sql: str, want_sql: str) -> list[str] | None:
    """Column definitions to ADD when ``want`` is ``cur`` plus new columns after its last.

    Table constraints and options (PRIMARY KEY (...), UNIQUE, CHECK, FOREIGN
    KEY, WITHOUT ROWID, STRICT) do not matter as long as they are unchanged:
    SQLite places an added column after the last column, before them, and the
    result is the table as written whole.
    """
    cur, want = parse(cur_sql), parse(want_sql)
    if not isinstance(cur, exp.Create) or not isinstance(want, exp.Create):
        return None
    if not isinstance(cur.this, exp.Schema) or not isinstance(want.this, exp.Schema):
        return None
    cur_cols = [e for e in cur.this.expressions if isinstance(e, exp.ColumnDef)]
    want_cols = [e for e in want.this.expressions if isinstance(e, exp.ColumnDef)]
    extra = want_cols[len(cur_cols) :]
    if not extra or not all(column_addable(c) for c in extra):
        return None
    if table_options(cur_sql)[1] != table_options(want_sql)[1]:
        return None
    without = want.copy()
    assert isinstance(without.this, exp.Schema)
    without.this.set("expressions", [e for e in without.this.expressions if e not in extra])
    if canonical_sql(without.sql(dialect="sqlite")) != canonical_sql(table_options(cur_sql)[0]):
        return None
    segments = body_segments(want_sql)
    if len(segments) != len(want.this.expressions):
        return None
    return [" ".join(segments[want.this.expressions.index(c)].split()) for c in extra]


def _rebuild(name: str, cur: dict[str, Any], want: dict[str, Any]) -> list[Statement]:
    tmp = f"ptah_new_{name}"
    create = _CREATE_TABLE.sub(
        lambda m: f"CREATE TABLE {m.group(1) or ''}{q(tmp)}", want["_sql"], count=1
    )
    common = [c for c in want["_columns"] if c in cur["_columns"]]
    dropped = [c for c in cur["_columns"] if c not in want["_columns"]]
    cols = ", ".join(q(c) for c in common)
    copy_hazards = (DATA_DEPENDENT, LOCK_HEAVY) + ((DESTRUCTIVE,) if dropped else ())
    return [
        Statement(create),
        Statement(f"INSERT INTO {q(tmp)} ({cols}) SELECT {cols} FROM {q(name)}", copy_hazards),
        Statement(f"DROP TABLE {q(name)}", (DESTRUCTIVE,) if dropped else (LOCK_HEAVY,)),
        Statement(f"ALTER TABLE {q(tmp)} RENAME TO {q(name)}"),
    ]


def diff(current: Schema, desired: Schema) -> list[Statement]:
    cur_t, want_t = current["table"], desired["table"]
    drops: list[Statement] = []
    tables: list[Statement] = []
    rebuilt: set[str] = set()
    for name in cur_t.keys() - want_t.keys():
        drops.append(Statement(f"DROP TABLE {q(name)}", (DESTRUCTIVE,)))
    for name in want_t:  # desired order: parents usually first
        if name not in cur_t:
            tables.append(Statement(want_t[name]["_sql"]))
        elif cur_t[name]["def"] != want_t[name]["def"]:
            extra = _addable(cur_t[name]["_sql"], want_t[name]["_sql"])
            if extra is not None:
                tables.extend(Statement(f"ALTER TABLE {q(name)} ADD COLUMN {c}") for c in extra)
            else:
                rebuilt.add(name)
                tables.extend(_rebuild(name, cur_t[name], want_t[name]))
    out_drops: list[Statement] = []
    creates: list[Statement] = []
    for kind in ("view", "trigger", "index"):
        cur, want = current[kind], desired[kind]
        for name in cur:
            goes_with_table = kind != "view" and (
                cur[name]["table"] not in want_t or cur[name]["table"] in rebuilt
            )
            changed = name not in want or cur[name]["def"] != want[name]["def"]
            if not goes_with_table and (changed or (kind == "view" and bool(rebuilt))):
                out_drops.append(Statement(f"DROP {kind.upper()} {q(name)}"))
        for name, obj in want.items():
            fresh = (
                name not in cur
                or cur[name]["def"] != obj["def"]
                or (kind != "view" and obj["table"] in rebuilt)
                or (kind == "view" and bool(rebuilt))
            )
            if not fresh:
                continue
            hazards: tuple[str, ...] = ()
            if kind == "index" and obj["table"] in cur_t and obj["table"] not in rebuilt:
                hazards = (LOCK_HEAVY,)
                if "UNIQUE" in obj["def"].upper().split(" ON ", 1)[0]:
                    hazards = (DATA_DEPENDENT, LOCK_HEAVY)
            creates.append(Statement(obj["_sql"], hazards))
    order = {"index": 0, "trigger": 1, "view": 2}
    creates.sort(key=lambda s: order.get(s.sql.split()[1].lower(), 0) if s.sql.split() else 0)
    return out_drops + drops + tables + creates
