"""SQLite diff: ADD COLUMN where SQLite can express it, otherwise a table rebuild.

The rebuild is SQLite's documented procedure: create the new shape under a
temporary name, copy the common columns, drop the old table, rename the new
one, then recreate its indexes and triggers. Views are recreated around any
rebuild because SQLite re-parses them on rename.
"""

from __future__ import annotations

import re
from typing import Any

from ptah.engines.model import DATA_DEPENDENT, DESTRUCTIVE, LOCK_HEAVY, Schema, Statement
from ptah.engines.sqlite.inspect import table_parts

_CREATE_TABLE = re.compile(
    r"^\s*CREATE\s+TABLE\s+(IF\s+NOT\s+EXISTS\s+)?(\"(?:[^\"]|\"\")+\"|`[^`]+`|\[[^\]]+\]|[\w$]+)",
    re.IGNORECASE,
)


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _addable(cur_sql: str, want_sql: str) -> list[str] | None:
    """Column definitions to ADD when ``want`` is ``cur`` plus trailing simple columns."""
    old, new = table_parts(cur_sql), table_parts(want_sql)
    if old is None or new is None or len(new) <= len(old):
        return None
    extra = new[len(old) :]
    # Constraints (not columns) come after columns in SQLite DDL: compare without them.
    if new[: len(old)] != old:
        return None
    for coldef in extra:
        upper = coldef.upper()
        if any(
            w in upper for w in ("PRIMARY KEY", "UNIQUE", "CONSTRAINT", "CHECK(", "FOREIGN KEY")
        ):
            return None
        if "NOT NULL" in upper and "DEFAULT" not in upper:
            return None
        if upper.startswith(("PRIMARY", "UNIQUE", "CHECK", "FOREIGN", "CONSTRAINT")):
            return None
    return extra


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
