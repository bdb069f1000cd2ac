"""MariaDB/MySQL diff over SHOW CREATE TABLE lines: one atomic ALTER TABLE per changed table."""

from __future__ import annotations

from typing import Any

from ptah.engines.model import DATA_DEPENDENT, DESTRUCTIVE, LOCK_HEAVY, Schema, Statement


def q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _drop_clause(key: str) -> str:
    kind, _, name = key.partition(" ")
    return {
        "column": f"DROP COLUMN {q(name)}",
        "primary": "DROP PRIMARY KEY",
        "index": f"DROP INDEX {q(name)}",
        "fk": f"DROP FOREIGN KEY {q(name)}",
        "check": f"DROP CONSTRAINT {q(name)}",
    }.get(kind, "")


def _alter(name: str, cur: dict[str, Any], want: dict[str, Any]) -> Statement | None:
    old, new = cur["elements"], want["elements"]
    clauses: list[str] = []
    hazards: set[str] = set()
    for key in old:
        if key not in new or (old[key] != new[key] and not key.startswith("column ")):
            clause = _drop_clause(key)
            if clause:
                clauses.append(clause)
                if key.startswith("column "):
                    hazards.add(DESTRUCTIVE)
    prev = None
    for key in want["_order"]:
        line = new[key]
        if key.startswith("column "):
            where = f" AFTER {q(prev)}" if prev else " FIRST"
            cur_cols = [k for k in cur["_order"] if k.startswith("column ") and k in new]
            new_cols = [k for k in want["_order"] if k.startswith("column ") and k in old]
            moved = key in old and cur_cols.index(key) != new_cols.index(key)
            if key not in old:
                clauses.append(f"ADD COLUMN {line}{where}")
                hazards.add(LOCK_HEAVY)
            elif old[key] != line or moved:
                clauses.append(f"MODIFY COLUMN {line}{where}")
                hazards.update((DATA_DEPENDENT, LOCK_HEAVY))
            prev = key.split(" ", 1)[1]
        elif key not in old or old[key] != line:
            clauses.append(f"ADD {line}")
            hazards.add(LOCK_HEAVY)
            if key == "primary" or line.startswith(("UNIQUE", "CONSTRAINT")):
                hazards.add(DATA_DEPENDENT)
    if cur["options"] != want["options"]:
        clauses.append(want["options"])
        hazards.add(LOCK_HEAVY)
    if not clauses:
        return None
    order = [h for h in (DESTRUCTIVE, DATA_DEPENDENT, LOCK_HEAVY) if h in hazards]
    return Statement(f"ALTER TABLE {q(name)}\n  " + ",\n  ".join(clauses), tuple(order))


def diff(current: Schema, desired: Schema) -> list[Statement]:
    cur_t, want_t = current["table"], desired["table"]
    cur_v, want_v = current["view"], desired["view"]
    out: list[Statement] = []
    changed_views = [n for n in cur_v if n not in want_v or cur_v[n] != want_v[n]]
    out += [Statement(f"DROP VIEW {q(n)}") for n in changed_views]
    for name in sorted(cur_t.keys() & want_t.keys()):
        stmt = _alter(name, cur_t[name], want_t[name])
        if stmt:
            out.append(stmt)
    out += [
        Statement(f"DROP TABLE {q(n)}", (DESTRUCTIVE,))
        for n in sorted(cur_t.keys() - want_t.keys())
    ]
    out += [Statement(want_t[n]["_sql"]) for n in sorted(want_t.keys() - cur_t.keys())]
    for name in sorted(want_v):
        if name not in cur_v or name in changed_views:
            check = want_v[name]["check"]
            suffix = f" WITH {check} CHECK OPTION" if check and check != "NONE" else ""
            out.append(Statement(f"CREATE VIEW {q(name)} AS {want_v[name]['def']}{suffix}"))
    return out
