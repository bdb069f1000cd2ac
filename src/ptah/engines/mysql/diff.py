"""MariaDB/MySQL diff over SHOW CREATE TABLE lines: one atomic ALTER TABLE per changed table."""

from __future__ import annotations

import re
from typing import Any

from ptah.engines.model import DATA_DEPENDENT, DESTRUCTIVE, LOCK_HEAVY, Schema, Statement

_REFERENCES = re.compile(r"REFERENCES `((?:[^`]|``)+)`")


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


def references(entry: dict[str, Any]) -> set[str]:
    """Tables this table's foreign keys reference (itself excluded)."""
    found: set[str] = set()
    for key, line in entry["elements"].items():
        if key.startswith("fk "):
            m = _REFERENCES.search(line)
            if m:
                found.add(m.group(1).replace("``", "`"))
    return found


def _ordered(nodes: dict[str, Statement], after: dict[str, set[str]]) -> list[Statement]:
    """``nodes`` so that each comes after those it depends on; name order otherwise.

    A cycle (tables referencing each other) cannot be ordered: what is left is
    emitted in name order and the server's own check reports it.
    """
    pending = {k: {d for d in after.get(k, set()) if d in nodes and d != k} for k in nodes}
    out: list[Statement] = []
    while pending:
        ready = sorted(k for k, deps in pending.items() if not deps) or sorted(pending)[:1]
        key = ready[0]
        out.append(nodes[key])
        del pending[key]
        for deps in pending.values():
            deps.discard(key)
    return out


def diff(current: Schema, desired: Schema) -> list[Statement]:
    """Statements in an order that foreign-key checks accept, as the plan's load had them on.

    A new table comes after the new tables it references and after the
    alteration of an existing table it references (which may add the key it
    needs); an altered table comes after the new tables its keys reference;
    a dropped table after every alteration (which removes keys to it) and
    after the dropped tables that reference it.
    """
    cur_t, want_t = current["table"], desired["table"]
    cur_v, want_v = current["view"], desired["view"]
    out: list[Statement] = []
    changed_views = [n for n in cur_v if n not in want_v or cur_v[n] != want_v[n]]
    out += [Statement(f"DROP VIEW {q(n)}") for n in changed_views]
    nodes: dict[str, Statement] = {}
    after: dict[str, set[str]] = {}
    altered: list[str] = []
    for name in sorted(cur_t.keys() & want_t.keys()):
        stmt = _alter(name, cur_t[name], want_t[name])
        if stmt:
            nodes["alter " + name] = stmt
            altered.append(name)
    created = sorted(want_t.keys() - cur_t.keys())
    for name in created:
        nodes["create " + name] = Statement(want_t[name]["_sql"])
    dropped = sorted(cur_t.keys() - want_t.keys())
    for name in dropped:
        nodes["drop " + name] = Statement(f"DROP TABLE {q(name)}", (DESTRUCTIVE,))
    for name in altered:
        after["alter " + name] = {"create " + r for r in references(want_t[name])}
    for name in created:
        after["create " + name] = {"create " + r for r in references(want_t[name])} | {
            "alter " + r for r in references(want_t[name])
        }
    for name in dropped:
        referencing = {o for o in dropped if name in references(cur_t[o])}
        after["drop " + name] = {"alter " + a for a in altered} | {"drop " + o for o in referencing}
    out += _ordered(nodes, after)
    for name in sorted(want_v):
        if name not in cur_v or name in changed_views:
            check = want_v[name]["check"]
            suffix = f" WITH {check} CHECK OPTION" if check and check != "NONE" else ""
            out.append(Statement(f"CREATE VIEW {q(name)} AS {want_v[name]['def']}{suffix}"))
    return out
