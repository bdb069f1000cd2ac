"""Diff two inspected PostgreSQL schemas into ordered, hazard-classified statements.

Written for Ptah: the inspected definitions are server-normalised text, so the
diff is dict comparison. Ordering is by phase (drops of dependents before
drops of what they depend on, then creates in the reverse order), and views
are ordered among themselves by their recorded dependencies. A statement that
touches an existing table is classified by what it does to existing rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ptah.engines.model import (
    DATA_DEPENDENT,
    DESTRUCTIVE,
    LOCK_HEAVY,
    PlanError,
    Schema,
    Statement,
    canonical,
)


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _column_sql(name: str, col: dict[str, Any]) -> str:
    parts = [name, col["type"]]
    if col.get("collation"):
        parts.append(f"COLLATE {col['collation']}")
    if col.get("generated") == "s":
        parts.append(f"GENERATED ALWAYS AS ({col['default']}) STORED")
    elif col.get("default") is not None:
        parts.append(f"DEFAULT {col['default']}")
    if col.get("identity"):
        kind = "ALWAYS" if col["identity"] == "a" else "BY DEFAULT"
        parts.append(f"GENERATED {kind} AS IDENTITY")
    if col.get("notNull"):
        parts.append("NOT NULL")
    return " ".join(parts)


def _topo(names: Iterable[str], deps: dict[str, list[str]]) -> list[str]:
    """Names ordered so each comes after the names it depends on (stable, cycle-safe)."""
    wanted = set(names)
    out: list[str] = []
    seen: set[str] = set()

    def visit(name: str, stack: frozenset[str]) -> None:
        if name in seen or name in stack:
            return
        for dep in deps.get(name, []):
            if dep in wanted:
                visit(dep, stack | {name})
        seen.add(name)
        out.append(name)

    for name in sorted(wanted):
        visit(name, frozenset())
    return out


class _Diff:
    def __init__(self, cur: Schema, want: Schema) -> None:
        self.cur = cur
        self.want = want
        self.drops: dict[int, list[Statement]] = {}
        self.creates: dict[int, list[Statement]] = {}
        self.rewritten: set[str] = set()  # tables whose column shapes change (views must follow)
        self.rebuilt_views: set[str] = set()

    def drop(self, phase: int, sql: str, *hazards: str) -> None:
        self.drops.setdefault(phase, []).append(Statement(sql, tuple(hazards)))

    def create(self, phase: int, sql: str, *hazards: str) -> None:
        self.creates.setdefault(phase, []).append(Statement(sql, tuple(hazards)))

    def pair(self, kind: str) -> tuple[dict[str, Any], dict[str, Any]]:
        return self.cur.get(kind, {}), self.want.get(kind, {})

    def existing_table(self, table: str) -> bool:
        return table in self.cur.get("table", {})

    # phases: drops run 9..0 (views first), creates 0..11
    def run(self) -> list[Statement]:
        self.extensions()
        self.schemas()
        self.enums()
        self.sequences()
        self.tables()
        self.constraints()
        self.indexes()
        self.views()
        self.comments()
        ordered: list[Statement] = []
        for phase in sorted(self.drops, reverse=True):
            ordered.extend(self.drops[phase])
        for phase in sorted(self.creates):
            ordered.extend(self.creates[phase])
        return ordered

    def extensions(self) -> None:
        cur, want = self.pair("extension")
        for name in sorted(cur.keys() - want.keys()):
            self.drop(0, f"DROP EXTENSION {name}", DESTRUCTIVE)
        for name in sorted(want.keys() - cur.keys()):
            self.create(
                0, f"CREATE EXTENSION IF NOT EXISTS {name} WITH SCHEMA {want[name]['schema']}"
            )

    def schemas(self) -> None:
        cur, want = self.pair("schema")
        for name in sorted(cur.keys() - want.keys()):
            self.drop(1, f"DROP SCHEMA {name}", DESTRUCTIVE)
        for name in sorted(want.keys() - cur.keys()):
            self.create(1, f"CREATE SCHEMA {name}")

    def enums(self) -> None:
        cur, want = self.pair("enum")
        for name in sorted(cur.keys() - want.keys()):
            self.drop(2, f"DROP TYPE {name}", DESTRUCTIVE)
        for name in sorted(want.keys() - cur.keys()):
            labels = ", ".join(_lit(v) for v in want[name]["labels"])
            self.create(2, f"CREATE TYPE {name} AS ENUM ({labels})")
        for name in sorted(cur.keys() & want.keys()):
            old, new = cur[name]["labels"], want[name]["labels"]
            if old == new:
                continue
            if [v for v in new if v in old] != old:
                raise PlanError(
                    f"enum {name} removes or reorders values; PostgreSQL cannot do that in place",
                    "Unsupported",
                )
            for i, value in enumerate(new):
                if value in old:
                    continue
                after = next((v for v in reversed(new[:i]) if v in old or v in new[:i]), None)
                where = f" AFTER {_lit(after)}" if after else f" BEFORE {_lit(new[i + 1])}"
                if after is None and i + 1 >= len(new):
                    where = ""
                self.create(2, f"ALTER TYPE {name} ADD VALUE {_lit(value)}{where}")

    def sequences(self) -> None:
        cur, want = self.pair("sequence")
        for name in sorted(cur.keys() - want.keys()):
            owner = cur[name]["ownedBy"]
            if owner and not self._column_kept(owner):
                continue  # goes with its owning column or table
            self.drop(3, f"DROP SEQUENCE {name}", DESTRUCTIVE)
        for name in sorted(want.keys() - cur.keys()):
            s = want[name]
            cycle = "CYCLE" if s["cycle"] else "NO CYCLE"
            self.create(
                3,
                f"CREATE SEQUENCE {name} AS {s['type']} INCREMENT BY {s['increment']}"
                f" MINVALUE {s['min']} MAXVALUE {s['max']} START WITH {s['start']}"
                f" CACHE {s['cache']} {cycle}",
            )
        for name in sorted(cur.keys() & want.keys()):
            old, new = cur[name], want[name]
            opts = []
            if old["type"] != new["type"]:
                opts.append(f"AS {new['type']}")
            for key, word in (
                ("increment", "INCREMENT BY"),
                ("min", "MINVALUE"),
                ("max", "MAXVALUE"),
                ("start", "START WITH"),
                ("cache", "CACHE"),
            ):
                if old[key] != new[key]:
                    opts.append(f"{word} {new[key]}")
            if old["cycle"] != new["cycle"]:
                opts.append("CYCLE" if new["cycle"] else "NO CYCLE")
            if opts:
                self.create(3, f"ALTER SEQUENCE {name} " + " ".join(opts))
        for name in sorted(want):
            owned = want[name]["ownedBy"]
            if owned and (name not in cur or cur[name]["ownedBy"] != owned):
                self.create(6, f"ALTER SEQUENCE {name} OWNED BY {owned}")
            elif not owned and name in cur and cur[name]["ownedBy"]:
                self.create(6, f"ALTER SEQUENCE {name} OWNED BY NONE")

    def _column_kept(self, qualified: str) -> bool:
        table, col = qualified.rsplit(".", 1)
        return col in self.want.get("table", {}).get(table, {}).get("columns", {})

    def tables(self) -> None:
        cur, want = self.pair("table")
        for name in sorted(cur.keys() - want.keys()):
            self.drop(5, f"DROP TABLE {name}", DESTRUCTIVE)
        for name in sorted(want.keys() - cur.keys()):
            cols = sorted(want[name]["columns"].items(), key=lambda kv: kv[1]["_n"])
            body = ",\n".join(f"  {_column_sql(c, d)}" for c, d in cols)
            self.create(4, f"CREATE TABLE {name} (\n{body}\n)")
        for name in sorted(cur.keys() & want.keys()):
            self.columns(name, cur[name]["columns"], want[name]["columns"])

    def columns(self, table: str, cur: dict[str, Any], want: dict[str, Any]) -> None:
        # A dropped column cannot be used by a kept view (the view would have changed too).
        for col in sorted(cur.keys() - want.keys()):
            self.drop(4, f"ALTER TABLE {table} DROP COLUMN {col}", DESTRUCTIVE)
        for col in sorted(want.keys() - cur.keys(), key=lambda c: want[c]["_n"]):
            d = want[col]
            hazards = []
            if d["notNull"] and d["default"] is None and not d["identity"]:
                hazards.append(DATA_DEPENDENT)
            if d["identity"] or d["generated"]:
                hazards.append(LOCK_HEAVY)  # fills every existing row: a table rewrite
            self.create(5, f"ALTER TABLE {table} ADD COLUMN {_column_sql(col, d)}", *hazards)
        for col in sorted(cur.keys() & want.keys()):
            self.alter_column(table, col, cur[col], want[col])

    def alter_column(self, table: str, col: str, old: dict[str, Any], new: dict[str, Any]) -> None:
        if canonical(old) == canonical(new):
            return
        at = f"ALTER TABLE {table} ALTER COLUMN {col}"
        if old["generated"] != new["generated"] or (
            new["generated"] and old["default"] != new["default"]
        ):
            self.rewritten.add(table)
            self.drop(4, f"ALTER TABLE {table} DROP COLUMN {col}", DESTRUCTIVE)
            self.create(5, f"ALTER TABLE {table} ADD COLUMN {_column_sql(col, new)}", LOCK_HEAVY)
            return
        if old["identity"] and old["identity"] != new["identity"] and not new["identity"]:
            self.create(5, f"{at} DROP IDENTITY")
        if old["default"] != new["default"] and old["default"] is not None:
            self.create(5, f"{at} DROP DEFAULT")
        if old["type"] != new["type"] or old["collation"] != new["collation"]:
            self.rewritten.add(table)
            coll = f" COLLATE {new['collation']}" if new["collation"] else ""
            self.create(
                5,
                f"{at} TYPE {new['type']}{coll} USING {col}::{new['type']}",
                DATA_DEPENDENT,
                LOCK_HEAVY,
            )
        if old["default"] != new["default"] and new["default"] is not None:
            self.create(5, f"{at} SET DEFAULT {new['default']}")
        if new["identity"] and old["identity"] != new["identity"]:
            kind = "ALWAYS" if new["identity"] == "a" else "BY DEFAULT"
            if old["identity"]:
                self.create(5, f"{at} SET GENERATED {kind}")
            else:
                self.create(5, f"{at} ADD GENERATED {kind} AS IDENTITY")
        if old["notNull"] != new["notNull"]:
            if new["notNull"]:
                self.create(5, f"{at} SET NOT NULL", DATA_DEPENDENT, LOCK_HEAVY)
            else:
                self.create(5, f"{at} DROP NOT NULL")

    def constraints(self) -> None:
        cur, want = self.pair("constraint")
        for key in sorted(cur.keys() - want.keys()):
            c = cur[key]
            if self.existing_table(c["table"]) and c["table"] in self.want.get("table", {}):
                self.drop(
                    8 if c["type"] == "f" else 7,
                    f"ALTER TABLE {c['table']} DROP CONSTRAINT {c['name']}",
                )
        changed = {k for k in cur.keys() & want.keys() if cur[k] != want[k]}
        for key in sorted(changed):
            c = cur[key]
            self.drop(
                8 if c["type"] == "f" else 7,
                f"ALTER TABLE {c['table']} DROP CONSTRAINT {c['name']}",
            )
        for key in sorted((want.keys() - cur.keys()) | changed):
            c = want[key]
            hazards: list[str] = []
            if self.existing_table(c["table"]):
                hazards = [DATA_DEPENDENT, LOCK_HEAVY]
            elif c["type"] == "f":
                ref = c["def"].split(" REFERENCES ", 1)[-1].split("(", 1)[0].strip()
                if self.existing_table(ref):
                    hazards = [LOCK_HEAVY]  # takes a lock on the referenced, existing table
            phase = 9 if c["type"] == "f" else 7
            self.create(
                phase, f"ALTER TABLE {c['table']} ADD CONSTRAINT {c['name']} {c['def']}", *hazards
            )

    def indexes(self) -> None:
        cur, want = self.pair("index")
        changed = {k for k in cur.keys() & want.keys() if cur[k] != want[k]}
        for name in sorted((cur.keys() - want.keys()) | changed):
            if cur[name]["table"] in self.want.get("table", {}) or name in changed:
                self.drop(6, f"DROP INDEX {name}")
        for name in sorted((want.keys() - cur.keys()) | changed):
            i = want[name]
            hazards: list[str] = []
            if self.existing_table(i["table"]):
                hazards = [LOCK_HEAVY] + ([DATA_DEPENDENT] if i["unique"] else [])
            self.create(8, i["def"], *hazards)

    def views(self) -> None:
        cur, want = self.pair("view")
        deps = {n: v["_deps"] for n, v in {**cur, **want}.items()}
        changed = {n for n in cur.keys() & want.keys() if canonical(cur[n]) != canonical(want[n])}
        # A view over a table whose columns change, or over a changed view, is rebuilt.
        for name in _topo(cur.keys() & want.keys(), deps):
            if any(d in self.rewritten or d in changed for d in deps.get(name, [])):
                changed.add(name)
        self.rebuilt_views = changed
        gone = (cur.keys() - want.keys()) | changed
        for name in reversed(_topo(gone, deps)):
            kind = "MATERIALIZED VIEW" if cur[name]["materialized"] else "VIEW"
            self.drop(9, f"DROP {kind} {name}")
        for name in _topo((want.keys() - cur.keys()) | changed, deps):
            v = want[name]
            kind = "MATERIALIZED VIEW" if v["materialized"] else "VIEW"
            self.create(10, f"CREATE {kind} {name} AS\n{v['def'].rstrip(';')}")

    def comments(self) -> None:
        cur, want = self.pair("comment")
        rebuilt_views = self.rebuilt_views
        for key in sorted(cur.keys() | want.keys()):
            c = want.get(key) or cur[key]
            text = want[key]["text"] if key in want else None
            was = cur[key]["text"] if key in cur else None
            on_rebuilt = c["on"].rsplit(".", 1)[0] in rebuilt_views or c["on"] in rebuilt_views
            if text == was and not (text and on_rebuilt):
                continue
            if text is None and self._gone_with_parent(c):
                continue
            value = _lit(text) if text is not None else "NULL"
            self.create(11, f"COMMENT ON {c['kind']} {c['on']} IS {value}")

    def _gone_with_parent(self, c: dict[str, Any]) -> bool:
        on: str = c["on"]
        want = self.want
        if c["kind"] == "COLUMN":
            table, col = on.rsplit(".", 1)
            return col not in want.get("table", {}).get(table, {}).get("columns", {})
        kinds = {
            "TABLE": "table",
            "VIEW": "view",
            "MATERIALIZED VIEW": "view",
            "SEQUENCE": "sequence",
            "INDEX": "index",
            "SCHEMA": "schema",
            "TYPE": "enum",
        }
        return on not in want.get(kinds.get(c["kind"], ""), {})


def diff(current: Schema, desired: Schema) -> list[Statement]:
    """Statements that turn ``current`` into ``desired``, in executable order."""
    return _Diff(current, desired).run()
