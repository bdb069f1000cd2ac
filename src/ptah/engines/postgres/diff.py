"""Diff two inspected PostgreSQL schemas into ordered, hazard-classified statements.

Written for Ptah: the inspected definitions are server-normalised text, so the
diff is dict comparison. It works in three steps:

1. each kind decides, per object, whether it is created, dropped, changed in
   place or replaced (dropped and created again);
2. replacement spreads along the target's dependency graph: what depends on a
   replaced object (a view on a view, an index on a materialized view, a
   trigger on a function whose signature changed, a foreign key on a rebuilt
   unique constraint) is rebuilt with it, and its comments and grants are
   given back; something that cannot be rebuilt without losing data (a
   table, a sequence) stops the plan with the reason;
3. statements are ordered by the catalogs' dependency graphs: drops walk the
   target's graph (dependents first), creates walk the desired graph
   (dependencies first), with a fixed rank of kinds only breaking ties.

A statement that touches an existing table is classified by what it does to
existing rows.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field, replace
from typing import Any

from ptah.engines.model import (
    BRIEF,
    BUILDS_INDEX,
    DATA_DEPENDENT,
    DESTRUCTIVE,
    LOCK_HEAVY,
    NEW,
    REWRITES_TABLE,
    SCANS_TABLE,
    SHARED,
    Online,
    PlanError,
    Schema,
    Statement,
    same,
)
from ptah.engines.postgres import online as pgonline
from ptah.engines.postgres.online import (
    ACCESS_EXCLUSIVE,
    SHARE,
    SHARE_ROW_EXCLUSIVE,
    SHARE_UPDATE_EXCLUSIVE,
)

# Tie-break rank of kinds (lower first among independent creates).
_RANK = {
    "extension": 0,
    "schema": 1,
    "collation": 2,
    "ts_dict": 2,
    "ts_config": 3,
    "enum": 2,
    "range": 2,
    "domain": 3,
    "ctype": 3,
    "sequence": 4,
    "table": 5,
    "constraint": 7,
    "index": 8,
    "statistics": 8,
    "function": 9,
    "view": 10,
    "trigger": 11,
    "rule": 11,
    "policy": 11,
    "event_trigger": 12,
    "publication": 12,
    "pub_table": 12,
    "pub_schema": 12,
    "owned": 13,
    "comment": 14,
    "acl": 15,
    "default_acl": 16,
    "owner": 17,
}
# Kinds the plan may drop and create again without losing data.
_REBUILDABLE = {
    "view",
    "index",
    "statistics",
    "constraint",
    "trigger",
    "rule",
    "policy",
    "function",
    "event_trigger",
    "ts_dict",
    "ts_config",
    "pub_table",
}


# Kinds of objects that are part of a table or view (their "table"), dropped with it.
_OWNED = {"constraint", "index", "trigger", "rule", "policy", "statistics"}

# A qualified name as the server quotes it: its schema, and the rest.
_QUALIFIED = re.compile(r'^("(?:[^"]|"")*"|[^".]+)\.(.+)$')


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def storage_option_steps(was: list[str], now: list[str]) -> tuple[list[str], list[str]]:
    """The keys to ``RESET`` and the ``key=value`` options to ``SET`` (in this order) that
    take a relation's storage options from ``was`` to ``now``, both as the catalog lists
    them, so that it lists them in ``now``'s order, as a direct load of ``now`` does.

    The server (transformRelOptions) keeps the options a SET does not name in their
    places and appends the ones it names, in its order, a changed one included. When
    setting only what changed would leave another order, every option is set again.
    ``toast.`` options live in the TOAST table's own list: each list is ordered alone."""

    def key(option: str) -> str:
        return option.split("=", 1)[0]

    keys = {key(o) for o in now}
    gone = sorted({key(o) for o in was} - keys)
    changed = [o for o in now if o not in was]
    named = {key(o) for o in changed}
    for toast in (False, True):
        kept = [key(o) for o in was if key(o).startswith("toast.") is toast]
        lands = [k for k in kept if k in keys and k not in named]
        lands += [key(o) for o in changed if key(o).startswith("toast.") is toast]
        if lands != [key(o) for o in now if key(o).startswith("toast.") is toast]:
            return gone, list(now)
    return gone, changed


def _kind(node: str) -> str:
    return node.split(":", 1)[0]


def _name(node: str) -> str:
    return node.split(":", 1)[1]


def _column_sql(name: str, col: dict[str, Any]) -> str:
    parts = [name, col["type"]]
    if col.get("collation"):
        parts.append(f"COLLATE {col['collation']}")
    if col.get("compression"):
        parts.append(f"COMPRESSION {col['compression']}")
    if col.get("generated") == "s":
        parts.append(f"GENERATED ALWAYS AS ({col['default']}) STORED")
    elif col.get("default") is not None:
        parts.append(f"DEFAULT {col['default']}")
    if col.get("identity"):
        kind = "ALWAYS" if col["identity"] == "a" else "BY DEFAULT"
        parts.append(f"GENERATED {kind} AS IDENTITY{_identity_options(col)}")
    if col.get("notNull"):
        parts.append("NOT NULL")
    return " ".join(parts)


def _identity_options(col: dict[str, Any]) -> str:
    seq = col.get("identitySequence")
    if not seq:
        return ""
    cycle = " CYCLE" if seq["cycle"] else ""
    return (
        f" (SEQUENCE NAME {seq['name']} START WITH {seq['start']} INCREMENT BY"
        f" {seq['increment']} MINVALUE {seq['min']} MAXVALUE {seq['max']} CACHE"
        f" {seq['cache']}{cycle})"
    )


def _identity_changes(old: dict[str, Any], new: dict[str, Any]) -> str:
    """``SET`` clauses that take an identity's sequence from ``old`` to ``new`` options."""
    o, n = old.get("identitySequence") or {}, new.get("identitySequence") or {}
    words = (
        ("start", "START WITH"),
        ("increment", "INCREMENT BY"),
        ("min", "MINVALUE"),
        ("max", "MAXVALUE"),
        ("cache", "CACHE"),
    )
    out = [f"SET {w} {n[k]}" for k, w in words if k in n and o.get(k) != n[k]]
    if n and o.get("cycle") != n["cycle"]:
        out.append("SET CYCLE" if n["cycle"] else "SET NO CYCLE")
    return " ".join(out)


@dataclass
class _Step:
    node: str
    stmt: Statement
    seq: int


@dataclass
class _Changes:
    """What step 1 decided, and what step 2 added."""

    replaced: set[str] = field(default_factory=set)  # dropped and created again
    recreated: set[str] = field(default_factory=set)  # created again (dropped with a parent)
    rewritten: set[str] = field(default_factory=set)  # tables whose column shapes change
    # (table, column): a default dropped before what it uses is rebuilt, and set again.
    defaults: set[tuple[str, str]] = field(default_factory=set)
    # (table, column): a column whose type or collation changes in place.
    retyped: set[tuple[str, str]] = field(default_factory=set)
    # (table, column): a generated column dropped and added again (a new expression, or
    # one over a column the server cannot retype under it); what uses it goes with it.
    readded: set[tuple[str, str]] = field(default_factory=set)
    # Keys, primary keys and exclusion constraints whose index's storage parameters
    # alone change: ALTER INDEX ... SET/RESET.
    reoptioned: set[str] = field(default_factory=set)
    # SQL-standard function bodies replaced as they stand (CREATE OR REPLACE), parsed
    # again over a composite type whose attributes change under them.
    reparsed: set[str] = field(default_factory=set)
    # domain -> its checks (and "" for its default) that use a function dropped and
    # created again: dropped before it and added again after, the domain kept.
    rechecked: dict[str, set[str]] = field(default_factory=dict)
    # domain -> the name it is renamed to while its columns move to it created anew (its
    # base type or collation changes): dropped by that name once they did.
    redomained: dict[str, str] = field(default_factory=dict)


class _Diff:
    def __init__(self, cur: Schema, want: Schema, online: Online | None = None) -> None:
        self.cur = cur
        self.want = want
        self.online = online or Online()
        self.cur_deps: dict[str, dict[str, str]] = cur.get("_deps", {})
        self.want_deps: dict[str, dict[str, str]] = want.get("_deps", {})
        self.drops: list[_Step] = []
        self.creates: list[_Step] = []
        self.extra_deps: dict[str, set[str]] = {}
        self.ch = _Changes()
        self._seq = 0
        self._work: list[str] = []
        # Children made to inherit again (NO INHERIT, INHERIT): their copies of the
        # parent's checks become their own on the NO INHERIT.
        self.reinherited: set[str] = set()
        # Drops that wait among the creates for the users moving off what they drop
        # (drop_type): a schema they are in is dropped after them.
        self.late_drops: set[str] = set()

    # -- emitting -------------------------------------------------------------------------
    def drop(self, node: str, sql: str, *hazards: str) -> None:
        self._seq += 1
        self.drops.append(_Step(node, Statement(sql, tuple(hazards)), self._seq))

    def create(self, node: str, sql: str, *hazards: str) -> None:
        self._seq += 1
        self.creates.append(_Step(node, Statement(sql, tuple(hazards)), self._seq))

    def locking(
        self,
        node: str,
        sql: str,
        mode: str,
        effect: str,
        *hazards: str,
        transaction: str = SHARED,
        phase: str = "create",
    ) -> None:
        """A statement on an existing table, with the lock it takes and what it does."""
        self._seq += 1
        stmt = Statement(
            sql, (*hazards, pgonline.hazard(mode, effect)), transaction=transaction, lock=mode
        )
        (self.drops if phase == "drop" else self.creates).append(_Step(node, stmt, self._seq))

    def emit(self, node: str, stmt: Statement, phase: str = "create") -> None:
        self._seq += 1
        (self.drops if phase == "drop" else self.creates).append(_Step(node, stmt, self._seq))

    def drop_type(self, node: str, sql: str, *hazards: str) -> None:
        """Drop a type, collation or extension that goes for good. Where a table or a
        composite type that stays still uses it, its columns move off it (ALTER COLUMN
        ... TYPE, ALTER ATTRIBUTE ... TYPE) among the creates, so the drop follows them:
        in the drops the server refused it, the columns still depending on it."""
        users = {
            child
            for child, _ in self.dependents(node)
            if _kind(child) in ("table", "ctype") and self._in(self.want, child)
        }
        if not users:
            self.drop(node, sql, *hazards)
            return
        self.extra_deps.setdefault(node, set()).update(users)
        self.late_drops.add(node)
        self.create(node, sql, *hazards)

    def plain_table(self, table: str) -> bool:
        """An existing, ordinary table that stays: what the online techniques apply to
        (a partitioned table takes no concurrent index and no NOT VALID constraint)."""
        old = self.cur.get("table", {}).get(table)
        new = self.want.get("table", {}).get(table)
        return bool(old and new and not old.get("partitionBy") and not new.get("partitionBy"))

    def pair(self, kind: str) -> tuple[dict[str, Any], dict[str, Any]]:
        return self.cur.get(kind, {}), self.want.get(kind, {})

    def existing_table(self, table: str) -> bool:
        return table in self.cur.get("table", {})

    def rebuilt(self, node: str) -> bool:
        return node in self.ch.replaced or node in self.ch.recreated

    # -- the three steps ------------------------------------------------------------------
    def run(self) -> list[Statement]:
        self.decide()
        self.spread()
        for emit in (
            self.extensions,
            self.schemas,
            self.collations,
            self.text_search,
            self.enums,
            self.domains,
            self.composites,
            self.ranges,
            self.functions,
            self.sequences,
            self.tables,
            self.constraints,
            self.indexes,
            self.views,
            self.statistics,
            self.triggers,
            self.rules,
            self.policies,
            self.event_triggers,
            self.publications,
            self.comments,
            self.acls,
            self.identity_acls,
            self.default_acls,
            self.owners,
        ):
            emit()
        self.late_schema_drops()
        existing = set(self.cur.get("table", {}))
        indexes = {k: v["table"] for k, v in self.cur.get("index", {}).items()}
        return _commit_enum_values([pgonline.describe(s, existing, indexes) for s in self.order()])

    def decide(self) -> None:
        """Step 1 for the kinds whose change is a replacement."""
        self.moved_extensions()
        for kind in (
            "view",
            "index",
            "constraint",
            "statistics",
            "trigger",
            "rule",
            "policy",
            "event_trigger",
        ):
            cur, want = self.pair(kind)
            for name in cur.keys() & want.keys():
                if kind == "statistics" and cur[name]["def"] == want[name]["def"]:
                    continue  # its target alone changes: ALTER STATISTICS, in statistics()
                if not same(cur[name], want[name]):
                    if kind == "constraint" and self.validates(cur[name], want[name]):
                        continue
                    if kind == "constraint" and self.reoptions(cur[name], want[name]):
                        self.ch.reoptioned.add(name)
                        continue
                    self.ch.replaced.add(f"{kind}:{name}")
        cur, want = self.pair("function")
        for name in cur.keys() & want.keys():
            if not same(cur[name], want[name]) and not _replaceable(cur[name], want[name]):
                self.ch.replaced.add(f"function:{name}")
        cur, want = self.pair("ctype")
        for name in sorted(cur.keys() & want.keys()):
            if not _attributes_in_place(cur[name]["attributes"], want[name]["attributes"]):
                self.reordered_composite(name, cur[name], want[name])
            elif _attributes_dropped_or_altered(cur[name]["attributes"], want[name]["attributes"]):
                self.composite_users_parsed_again(name)
        for kind in ("range", "collation", "ts_dict", "ts_config"):
            cur, want = self.pair(kind)
            for name in cur.keys() & want.keys():
                if cur[name] != want[name]:
                    self.ch.replaced.add(f"{kind}:{name}")
        cur, want = self.pair("publication")
        for name in cur.keys() & want.keys():
            if cur[name]["allTables"] != want[name]["allTables"]:
                self.ch.replaced.add(f"publication:{name}")
        cur, want = self.pair("pub_table")
        for key in cur.keys() & want.keys():
            if cur[key] != want[key]:  # a row filter or a column list: dropped and added
                self.ch.replaced.add(f"pub_table:{key}")
        cur, want = self.pair("domain")
        for name in cur.keys() & want.keys():
            if (cur[name]["type"], cur[name]["collation"]) != (
                want[name]["type"],
                want[name]["collation"],
            ):
                self.ch.replaced.add(f"domain:{name}")
                self.domain_retyped(name)
        tables_cur, tables_want = self.pair("table")
        for name in tables_cur.keys() & tables_want.keys():
            old, new = tables_cur[name]["columns"], tables_want[name]["columns"]
            for col in old.keys() & new.keys():
                o, n = old[col], new[col]
                if (o["type"], o["collation"]) != (n["type"], n["collation"]) or (
                    o["generated"] != n["generated"]
                    or (n["generated"] and o["default"] != n["default"])
                ):
                    self.ch.rewritten.add(name)
                if (o["type"], o["collation"]) != (n["type"], n["collation"]):
                    # Also where the change comes down from a parent to a sub-partitioned
                    # partition's key.
                    _refuse_partition_key_change(name, tables_cur[name], col, o, n)
                    self.refuse_merged_column_change(name, col, o, n)
                if o.get("_inherited") and n.get("_inherited"):
                    continue  # the parent's column changes; the change comes down
                if (o["type"], o["collation"]) != (n["type"], n["collation"]):
                    self.ch.retyped.add((name, col))
                if _readded(o, n):
                    self.ch.readded.add((name, col))
                elif o["type"] != n["type"]:
                    self.converts(name, col, o, n)

    def refuse_merged_column_change(
        self, table: str, col: str, old: dict[str, Any], new: dict[str, Any]
    ) -> None:
        """A column a child merges from several parents (plain inheritance): the server
        changes its type from no parent (cannot alter inherited column: each parent's
        ``ALTER COLUMN ... TYPE`` reaches it as one of several); the plan says so instead
        of failing on apply."""
        parents = [
            p
            for p in self.cur["table"][table].get("inherits", [])
            if col in self.cur["table"].get(p, {}).get("columns", {})
        ]
        if len(parents) < 2:
            return
        raise PlanError(
            f"table {table}: column {col} changes from {old['type']} to {new['type']}, and"
            f" it is merged from several parents ({', '.join(parents)}); PostgreSQL cannot"
            " change the type of such a column: detach the child (NO INHERIT), change the"
            " parents and the child, and inherit again, in a versioned migration",
            "Unsupported",
        )

    def reordered_composite(self, name: str, old: dict[str, Any], new: dict[str, Any]) -> None:
        """A composite type whose attributes would not stand in the desired order after
        changes in place (``ADD ATTRIBUTE`` appends; nothing moves one): its order is its
        meaning (``ROW(...)``, ``(x).*``, a function's result), so it is dropped and created
        again where nothing stores it (what uses it, a function, is rebuilt with it), and
        refused where a column or another type stores it (its values would be lost)."""
        node = f"ctype:{name}"
        users = sorted(
            child.replace(":", " ", 1)
            for child, _ in self.dependents(node)
            if _kind(child) in ("table", "ctype")
        )
        if users:
            was = ", ".join(a[0] for a in old["attributes"])
            now = ", ".join(a[0] for a in new["attributes"])
            raise PlanError(
                f"composite type {name}: its attributes would stand as ({was}) plus new ones"
                f" at the end, not as the desired file has them ({now}); PostgreSQL adds"
                " attributes at the end and cannot move one, and the type cannot be created"
                f" again while {', '.join(users)} stores it: put new attributes last in the"
                " desired file, or move the data to a new type in a versioned migration",
                "Unsupported",
            )
        self.ch.replaced.add(node)

    def composite_users_parsed_again(self, name: str) -> None:
        """A composite type changed in place by ``DROP ATTRIBUTE`` or ``ALTER ATTRIBUTE ...
        TYPE``: a stored expression that builds or casts to it (``ROW(1, 'x')::c`` in a
        view, a SQL-standard function body) was parsed against its attributes by position,
        and the server leaves it as it was (it printed ``ROW(1, NULL)::c`` after, and
        never matched the desired file): views that use it are created again, SQL-standard
        bodies replaced as they stand."""
        for child, deptype in self.dependents(f"ctype:{name}"):
            if deptype != "n" or not self._in(self.want, child) or self.rebuilt(child):
                continue
            if _kind(child) == "view":
                self.ch.replaced.add(child)
            elif _kind(child) == "function":
                function = self.cur["function"].get(_name(child), {})
                if function.get("_sqlBody"):
                    self.ch.reparsed.add(child)

    def domain_retyped(self, name: str) -> None:
        """A domain whose base type or collation changes, stored by table columns:
        PostgreSQL has no ``ALTER DOMAIN ... TYPE``, and dropping it would drop the
        columns. It is renamed out of the way, created anew under its name, its columns
        moved to it (``ALTER COLUMN ... TYPE``, converting the rows by the server's
        assignment cast, as any type change), and the old one dropped. What else uses
        it is rebuilt with it (views, functions, checks); a domain, composite or range
        type over it, or a column storing it in an array, is refused."""
        node = f"domain:{name}"
        columns = [col for table in self.cur["table"].values() for col in table["columns"].values()]
        if not any(col["type"] == name or col["type"].startswith(f"{name}[") for col in columns):
            return  # nothing stores it: dropped and created again
        inside = sorted(
            [
                child.replace(":", " ", 1)
                for child, _ in self.dependents(node)
                if _kind(child) in ("domain", "ctype", "range")
            ]
            + [
                f"column {t}.{c}"
                for t, table in sorted(self.cur.get("table", {}).items())
                for c, col in table["columns"].items()
                if col["type"].startswith(f"{name}[")
            ]
        )
        if inside:
            old, new = self.cur["domain"][name], self.want["domain"][name]
            raise PlanError(
                f"domain {name}: its base type changes from {old['type']} to {new['type']}"
                f"{' (or its collation)' if old['type'] == new['type'] else ''}, and"
                f" {', '.join(inside)} stores it in another type or an array; PostgreSQL"
                " cannot change a domain's type in place, and Ptah moves only columns of the"
                " domain itself to a new one: create a new domain and move the data in a"
                " versioned migration",
                "Unsupported",
            )
        qualified = _QUALIFIED.match(name)
        schema, bare = (qualified.group(1), qualified.group(2)) if qualified else ("", name)
        if bare.startswith('"'):
            bare = bare[1:-1].replace('""', '"')
        renamed = bare.encode()[:50].decode(errors="ignore") + "_ptah_was"
        renamed = '"' + renamed.replace('"', '""') + '"'
        renamed = f"{schema}.{renamed}" if schema else renamed
        self.ch.redomained[name] = renamed
        # The target's columns read as of the renamed domain: each is then a type change.
        # A default that names the domain (a cast to it) is dropped first and set again;
        # a generated column's expression that does is added again.
        tables = dict(self.cur["table"])
        for t, table in tables.items():
            for c, col in table["columns"].items():
                if col["default"] is not None and name in col["default"]:
                    if col["generated"]:
                        self.ch.readded.add((t, c))
                    else:
                        self.ch.defaults.add((t, c))
            if any(col["type"] == name for col in table["columns"].values()):
                moved = {
                    c: {**col, "type": renamed} if col["type"] == name else col
                    for c, col in table["columns"].items()
                }
                tables[t] = {**table, "columns": moved}
        self.cur = {**self.cur, "table": tables}

    def moved_extensions(self) -> None:
        """An extension in another schema than the target's is refused first, before what
        its move would seem to change: ``ALTER EXTENSION ... SET SCHEMA`` renames every
        member (types, functions, operator classes) under what uses them, while the plan,
        reading members by their names, would retype columns to types not there yet (the
        apply failed, and every plan after it too)."""
        cur, want = self.pair("extension")
        for name in sorted(cur.keys() & want.keys()):
            was, now = cur[name]["schema"], want[name]["schema"]
            if was != now:
                raise PlanError(
                    f"extension {name} moves from schema {was} to {now}; Ptah does not plan"
                    f" that: run ALTER EXTENSION {name} SET SCHEMA {now} in a versioned"
                    " migration, then plan again",
                    "Unsupported",
                )

    def converts(self, table: str, col: str, old: dict[str, Any], new: dict[str, Any]) -> None:
        """A column changes type in place by ``ALTER COLUMN ... TYPE`` without ``USING``:
        the server converts its rows by its own assignment coercion, as an ``INSERT``
        would (a value that does not fit fails the apply, rolled back; nothing is cut to
        fit as an explicit cast would: ``'abcdefghij'::varchar(5)`` is ``'abcde'``). Where
        the server has no such conversion (text to integer, to an enum, integer to
        boolean) the plan refuses here: how to convert rows is the author's decision, a
        ``USING`` expression of a versioned migration, never a guess of the plan."""
        src, dst = old.get("_typ"), new.get("_typ")
        if not src or not dst:
            return  # an inspection without the types' reading: the server decides
        cur, want = self.cur.get("_coercion") or {}, self.want.get("_coercion") or {}
        old_types, new_types = cur.get("types", {}), want.get("types", {})
        casts = {(a, b) for a, b in (*cur.get("casts", []), *want.get("casts", []))}
        if _assignable(src, dst, {**new_types, **old_types}, {**old_types, **new_types}, casts):
            return
        domain = next((d for d, r in self.ch.redomained.items() if r == old["type"]), None)
        if domain is not None:
            was, now = self.cur["domain"][domain]["type"], self.want["domain"][domain]["type"]
            raise PlanError(
                f"domain {domain}: its base type changes from {was} to {now}, and PostgreSQL"
                f" has no assignment cast between them to move column {col} of {table} to it"
                " (ALTER COLUMN ... TYPE needs a USING expression); Ptah does not guess how"
                " to convert the rows: create the new domain and move the data in a"
                " versioned migration, then plan again",
                "Unsupported",
            )
        raise PlanError(
            f"table {table}: column {col} changes type from {old['type']} to {new['type']},"
            f" and PostgreSQL has no assignment cast from {src} to {dst} (ALTER COLUMN ..."
            " TYPE needs a USING expression); Ptah does not guess how to convert the rows:"
            f" change it in a versioned migration (ALTER TABLE {table} ALTER COLUMN {col}"
            f" TYPE {new['type']} USING ...), then plan again",
            "Unsupported",
        )

    def dependents(self, node: str) -> list[tuple[str, str]]:
        if not hasattr(self, "_rdeps"):
            rdeps: dict[str, list[tuple[str, str]]] = {}
            for child, edges in self.cur_deps.items():
                for parent, deptype in edges.items():
                    rdeps.setdefault(parent, []).append((child, deptype))
            self._rdeps = rdeps
        return sorted(self._rdeps.get(node, []))

    def spread(self) -> None:
        """Step 2: what depends on a replaced object is rebuilt with it; so is a foreign
        key on a unique constraint or index that is dropped (the desired has it on
        another one: the server moves it there only when it is added again)."""
        work = sorted(self.ch.replaced)
        self._work = work
        for kind in ("constraint", "index"):
            cur, want = self.pair(kind)
            for name in sorted(cur.keys() - want.keys()):
                for child, _ in self.dependents(f"{kind}:{name}"):
                    if _kind(child) == "constraint" and self._in(self.want, child):
                        self._rebuild(child, work, f"{kind} {name} is dropped")
        for table, col in sorted(self.ch.retyped):
            # The server retypes no column that a SQL-standard function body or a rule
            # uses (they are rebuilt), nor one a generated column's expression reads (that
            # column is dropped and added again around the change).
            for child, _ in self.column_users(table, col):
                if child.startswith("column:"):
                    generated = child.split(":", 1)[1]
                    if generated in self.want["table"][table]["columns"]:
                        self.ch.readded.add((table, generated))
                elif _kind(child) in ("function", "rule", "pub_table") and self._in(
                    self.want, child
                ):
                    self._rebuild(child, work, f"the type of column {col} of {table} changes")
        for table, col in sorted(self.ch.readded):
            self.readd(table, col, work)
        self.gone_function_users(work)
        for users in self.gone_columns_and_tables():
            # A SQL-standard function body that reads a column or table the plan drops
            # holds the drop until it goes (its new body comes after).
            for child, deptype in users:
                if deptype == "n" and _kind(child) == "function" and self._in(self.want, child):
                    self._rebuild(child, work, "what it reads is dropped")
        for table in sorted(self.ch.rewritten):
            # A column type change: views and policies over the table must be rebuilt
            # (PostgreSQL refuses to change a column they use); indexes and constraints
            # follow the column by themselves.
            for child, deptype in self.dependents(f"table:{table}"):
                if deptype == "n" and _kind(child) in ("view", "policy", "trigger"):
                    self._rebuild(child, work, f"column types of {table} change")
        while work:
            node = work.pop()
            for child, deptype in self.dependents(node):
                if self.rebuilt(child) or not self._in(self.cur, child):
                    continue
                if not self._in(self.want, child):
                    continue  # dropped anyway
                if _kind(child) == "table" and _name(node) in self.ch.redomained:
                    # Its columns move to the new domain (ALTER COLUMN ... TYPE); a
                    # default that casts to the domain is set again.
                    self.reset_defaults(child, node)
                    continue
                if self.reset_defaults(child, node) or self.reset_domain_checks(child, node):
                    continue
                if deptype == "a" and _kind(child) not in ("function",):
                    self.ch.recreated.add(child)  # dropped by the server with its parent
                    work.append(child)
                else:
                    self._rebuild(child, work, f"{node} is dropped and created again")

    def gone_function_users(self, work: list[str]) -> None:
        """What uses a function the plan drops for good and stays is rebuilt (a column
        default set again): the server refuses the drop under it. Its definition may read
        the same in both files: an overload whose argument types change (``f(text[])`` to
        ``f(varchar[])``) is called by the same name, so nothing else rebuilt it. So for a
        text search configuration or dictionary dropped for good (a default that names
        it as ``regconfig`` is set again after the drop)."""
        gone = [
            f"{kind}:{name}"
            for kind in ("function", "ts_config", "ts_dict", "extension")
            for name in sorted(self.cur.get(kind, {}).keys() - self.want.get(kind, {}).keys())
        ]
        for node in gone:
            for child, _ in self.dependents(node):
                if self.rebuilt(child) or not self._in(self.want, child):
                    continue
                # A domain's default or check that used it: dropped before it, set again
                # (an ALTER DOMAIN ... SET DEFAULT among the creates came after the drop).
                if self.reset_defaults(child, node) or self.reset_domain_checks(
                    child, node, gone=True
                ):
                    continue
                # Of an extension's users that stay, a table or composite type storing one
                # of its types moves off it before the drop (drop_type); a function (its
                # body replaced in place came after DROP EXTENSION) is rebuilt.
                if _kind(child) in _REBUILDABLE:
                    self._rebuild(child, work, f"{node} is dropped")

    def gone_columns_and_tables(self) -> list[list[tuple[str, str]]]:
        """What uses each column or table the plan drops (a table's own columns left out
        when the whole table goes)."""
        cur, want = self.pair("table")
        out = [self.dependents(f"table:{t}") for t in sorted(cur.keys() - want.keys())]
        for table in sorted(cur.keys() & want.keys()):
            kept = want[table]["columns"]
            for col, c in sorted(cur[table]["columns"].items()):
                if col not in kept and not c.get("_inherited"):
                    out.append(self.column_users(table, col))
        return out

    @functools.cached_property
    def gone_column_users(self) -> set[str]:
        """What uses a column or table the plan drops: an index on a dropped column goes
        with it (``DROP COLUMN`` drops it), so it is never swapped for one built beside it
        (the swap's ``DROP INDEX CONCURRENTLY`` failed: the index was gone)."""
        return {user for users in self.gone_columns_and_tables() for user, _ in users}

    def column_users(self, table: str, col: str) -> list[tuple[str, str]]:
        """What uses a column on the target (node, deptype), and what uses the column of
        the same name in its partitions and inheriting children (it goes with it)."""
        edges: dict[str, dict[str, dict[str, str]]] = self.cur.get("_columnDeps", {})
        out = sorted(edges.get(f"table:{table}", {}).get(col, {}).items())
        for name, t in sorted(self.cur.get("table", {}).items()):
            parents = (t.get("partitionOf"), *t.get("inherits", []))
            if table in parents and t["columns"].get(col, {}).get("_inherited"):
                out += self.column_users(name, col)
        return out

    def readd(self, table: str, col: str, work: list[str]) -> None:
        """A generated column dropped and added again: what the server drops with it (an
        index, a check) is created again; what would stop the drop (a view, a trigger, a
        policy) is dropped first and created again."""
        self.ch.readded.add((table, col))
        self.ch.rewritten.add(table)
        why = f"column {col} of {table} is dropped and added again"
        for child, deptype in self.column_users(table, col):
            if child.startswith("column:") or not self._in(self.want, child):
                continue
            if self.rebuilt(child):
                continue
            if deptype == "a" and _kind(child) in _REBUILDABLE:
                self.ch.recreated.add(child)
                work.append(child)
            else:
                self._rebuild(child, work, why)

    def reset_defaults(self, child: str, node: str) -> bool:
        """A table that uses ``node`` only in column defaults keeps its rows: the defaults
        are dropped before ``node`` is and set again after (not generated columns: their
        expression cannot be dropped without the column)."""
        columns = self.cur.get("_defaultDeps", {}).get(child, {}).get(node)
        if not columns or _kind(child) != "table":
            return False
        table = _name(child)
        want = self.want.get("table", {}).get(table, {}).get("columns", {})
        for c in columns:
            if not self.cur["table"][table]["columns"][c]["generated"]:
                self.ch.defaults.add((table, c))
            elif want.get(c, {}).get("generated"):
                # An expression cannot be dropped without its column: the column is
                # dropped and added again (its rows computed again).
                self.readd(table, c, self._work)
            # else: the desired column is no longer generated: DROP EXPRESSION, in the drops
        return True

    def reset_domain_checks(self, child: str, node: str, gone: bool = False) -> bool:
        """A domain that uses a function dropped and created again (its argument names
        or result change) in a check or its default keeps its columns' rows: those
        checks and the default are dropped before the function and added again after it
        (the checks validated again), the domain kept. So for what the plan drops for
        good (``gone``: a function, text search object or extension the desired domain
        no longer uses). Where its base type or collation changes too, it is replaced
        (and refused while a table stores it)."""
        kinds = ("function", "ts_config", "ts_dict", "extension") if gone else ("function",)
        if _kind(child) != "domain" or _kind(node) not in kinds:
            return False
        name = _name(child)
        old, new = self.cur["domain"][name], self.want.get("domain", {}).get(name)
        if new is None or (old["type"], old["collation"]) != (new["type"], new["collation"]):
            return False
        if _kind(node) == "function":
            called = _name(node).split("(", 1)[0] + "("
            used = {k for k, v in old["checks"].items() if called in v}
            if old["default"] is not None and called in old["default"]:
                used.add("")
        else:
            # Gone for good: what used it reads otherwise in the desired file.
            used = {k for k, v in old["checks"].items() if new["checks"].get(k) != v}
            if old["default"] is not None and old["default"] != new["default"]:
                used.add("")
        if not used:  # not found by its name in the text: every check and the default
            used = set(old["checks"]) | ({""} if old["default"] is not None else set())
        self.ch.rechecked.setdefault(name, set()).update(used)
        return True

    def _rebuild(self, node: str, work: list[str], why: str) -> None:
        if self.rebuilt(node):
            return
        if _kind(node) not in _REBUILDABLE:
            raise PlanError(
                f"{node.replace(':', ' ', 1)} depends on something that must be dropped and"
                f" created again ({why}); Ptah does not drop it, because that would lose data",
                "Unsupported",
            )
        self.ch.replaced.add(node)
        work.append(node)

    @staticmethod
    def _in(schema: Schema, node: str) -> bool:
        return _name(node) in schema.get(_kind(node), {})

    def check_held(self) -> None:
        """A managed object that unmanaged ones, or ones spec.policy.ignore leaves alone,
        depend on is never dropped under them; nor is a column they use dropped, dropped
        and added again, or retyped (the server refuses the one, or takes the ignored
        object's use of the column with it)."""
        meta = self.cur.get("_meta", {})
        held: dict[str, list[str]] = meta.get("heldBy", {})
        for step in self.drops:
            node = step.node
            if node in held and (self.rebuilt(node) or not self._in(self.want, node)):
                raise PlanError(
                    f"{node.replace(':', ' ', 1)} would be dropped, but objects Ptah does not"
                    f" manage depend on it on the target ({'; '.join(sorted(held[node]))});"
                    " Ptah never drops those: remove them by hand or keep the object",
                    "Unmanaged",
                )
        ignored: dict[str, str] = meta.get("ignored", {})
        if not ignored:
            return
        changed = sorted(self.ch.retyped | self.ch.readded)
        for table, col in changed + self._gone_columns():
            users = sorted({ignored[u] for u, _ in self.column_users(table, col) if u in ignored})
            if users:
                raise PlanError(
                    f"column {col} of {table} would be dropped or changed, but objects"
                    f" spec.policy.ignore leaves alone use it on the target ({'; '.join(users)});"
                    " Ptah never changes those: change them by hand first, or keep the column",
                    "Unmanaged",
                )

    def _gone_columns(self) -> list[tuple[str, str]]:
        """The columns of tables that stay that the plan drops."""
        cur, want = self.pair("table")
        return [
            (table, col)
            for table in sorted(cur.keys() & want.keys())
            for col, c in sorted(cur[table]["columns"].items())
            if col not in want[table]["columns"] and not c.get("_inherited")
        ]

    def order(self) -> list[Statement]:
        """Step 3: drops by the target's graph, creates by the desired graph."""
        self.check_held()
        out: list[Statement] = []
        by_node: dict[str, list[_Step]] = {}
        for step in self.drops:
            by_node.setdefault(step.node, []).append(step)
        rdeps: dict[str, list[str]] = {}
        for child, edges in self.cur_deps.items():
            for parent in edges:
                rdeps.setdefault(parent, []).append(child)
        self.owned_drop_order(by_node, rdeps)
        seen: set[str] = set()

        def visit_drop(node: str) -> None:
            if node in seen:
                return
            seen.add(node)
            for child in sorted(rdeps.get(node, [])):
                visit_drop(child)
            out.extend(s.stmt for s in by_node.get(node, []))

        for node in sorted(by_node, key=lambda n: (-_RANK.get(_kind(n), 6), by_node[n][0].seq)):
            visit_drop(node)

        by_node = {}
        for step in self.creates:
            by_node.setdefault(step.node, []).append(step)
        deps = self.want_deps
        seen = set()

        def visit_create(node: str, stack: frozenset[str]) -> None:
            if node in seen or node in stack:
                return
            for dep in sorted(set(deps.get(node, {})) | self.extra_deps.get(node, set())):
                visit_create(dep, stack | {node})
            seen.add(node)
            out.extend(s.stmt for s in by_node.get(node, []))

        for node in sorted(by_node, key=lambda n: (_RANK.get(_kind(n), 6), by_node[n][0].seq)):
            visit_create(node, frozenset())
        return out

    def owner(self, node: str) -> str:
        """The table or view on the target an object is part of (a constraint, index,
        trigger, rule, policy or statistics object), which the server drops with it; "" if
        none, or if it stays (the object's own drop, if any, is a step of its own)."""
        kind = _kind(node)
        if kind not in _OWNED:
            return ""
        relation = self.cur.get(kind, {}).get(_name(node), {}).get("table")
        if not relation:
            return ""
        owner = (
            f"table:{relation}" if self._in(self.cur, f"table:{relation}") else f"view:{relation}"
        )
        if self._in(self.want, owner) and not self.rebuilt(owner):
            return ""
        return self.dropped_with(owner)

    def dropped_with(self, node: str) -> str:
        """The table whose ``DROP TABLE`` drops ``node``: a partition the plan drops with
        its partitioned parent (no statement of its own, ``tables()``) goes with the
        topmost such ancestor; any other node is its own."""
        if _kind(node) != "table":
            return node
        tables, name = self.cur.get("table", {}), _name(node)
        seen = {name}
        while (parent := tables.get(name, {}).get("partitionOf")) and parent not in seen:
            if name in self.want.get("table", {}) or parent in self.want.get("table", {}):
                break
            seen.add(parent)
            name = parent
        return f"table:{name}"

    def owned_drop_order(
        self, by_node: dict[str, list[_Step]], rdeps: dict[str, list[str]]
    ) -> None:
        """A part of a table or view the plan drops (a foreign key, trigger, policy, rule,
        index), which the server drops with it, may use something else the plan drops (the
        referenced table, the trigger's function): the owner's drop goes first (an edge
        added to ``rdeps``). Where the owner's drop must wait on that other one (a rule on
        a parent table inserting into its inheriting child, two tables' foreign keys to
        each other), the part is dropped by a statement of its own first."""

        def dropper(node: str) -> str:
            if node in by_node:
                return node
            owner = self.owner(node) or self.dropped_with(node)
            return owner if owner in by_node else ""

        def reaches(start: str, goal: str) -> bool:
            stack, reached = [start], {start}
            while stack:
                at = stack.pop()
                if at == goal:
                    return True
                for child in rdeps.get(at, []):
                    if child not in reached:
                        reached.add(child)
                        stack.append(child)
            return False

        for name, seq in sorted(self.cur.get("sequence", {}).items()):
            # A sequence that goes with its owning table or column (OWNED BY): what uses it
            # (another table's default) is dropped before that drop.
            node, owned = f"sequence:{name}", seq["ownedBy"]
            owner = f"table:{owned.rsplit('.', 1)[0]}" if owned else ""
            if node not in by_node and owner in by_node and not self._in(self.want, node):
                rdeps.setdefault(owner, []).append(node)
        for node in sorted(self.cur_deps):
            # A partition that goes with its parent's drop (its own defaults, say) is
            # part of that drop as an index or trigger is of its table's.
            owner = self.owner(node) or self.dropped_with(node)
            if node in by_node or owner not in by_node or owner == node:
                continue
            for used in sorted(self.cur_deps[node]):
                other = dropper(used)
                if not other or other == owner:
                    continue
                if reaches(owner, other) and _kind(node) in _OWNED:
                    self._seq += 1
                    step = _Step(node, Statement(self.drop_owned_sql(node)), self._seq)
                    by_node[node] = [step]
                    break
                rdeps.setdefault(other, []).append(owner)

    def drop_owned_sql(self, node: str) -> str:
        kind, name = _kind(node), _name(node)
        o = self.cur[kind][name]
        if kind == "constraint":
            return f"ALTER TABLE {o['table']} DROP CONSTRAINT {o['name']}"
        if kind in ("index", "statistics"):
            return f"DROP {kind.upper()} {name}"
        return f"DROP {kind.upper()} {o['name']} ON {o['table']}"

    # -- kinds ----------------------------------------------------------------------------
    def extensions(self) -> None:
        cur, want = self.pair("extension")
        for name in sorted(cur.keys() - want.keys()):
            self.drop_type(f"extension:{name}", f"DROP EXTENSION {name}", DESTRUCTIVE)
        for name in sorted(want.keys() - cur.keys()):
            node, schema = f"extension:{name}", want[name]["schema"]
            # The extension's objects take the plan role's default privileges, and no
            # GRANT in the plan touches them (they are the extension's): created under the
            # built-in ones, as a desired file creating it before its ALTER DEFAULT
            # PRIVILEGES has them, the target's own set back right after.
            defaults = [
                d
                for d in self.cur.get("default_acl", {}).values()
                if not d["role"]
                and d["schema"] in ("", schema)
                and set(d["entries"]) != _default_acl_baseline(d)
            ]
            for d in defaults:
                for sql in _default_acl_sql(d, set(d["entries"]), _default_acl_baseline(d)):
                    self.create(node, sql)
            self.create(node, f"CREATE EXTENSION IF NOT EXISTS {name} WITH SCHEMA {schema}")
            for d in defaults:
                for sql in _default_acl_sql(d, _default_acl_baseline(d), set(d["entries"])):
                    self.create(node, sql)

    def schemas(self) -> None:
        cur, want = self.pair("schema")
        for name in sorted(cur.keys() - want.keys()):
            self.drop(f"schema:{name}", f"DROP SCHEMA {name}", DESTRUCTIVE)
        for name in sorted(want.keys() - cur.keys()):
            self.create(f"schema:{name}", f"CREATE SCHEMA {name}")

    def late_schema_drops(self) -> None:
        """A schema the plan drops that holds a type, collation or extension whose drop
        waits among the creates (its users that stay move off it first): the schema's
        drop follows it there (DROP SCHEMA among the drops failed under it)."""
        for step in list(self.drops):
            if _kind(step.node) != "schema":
                continue
            inside = {c for c, _ in self.dependents(step.node) if c in self.late_drops}
            if inside:
                self.drops.remove(step)
                self.creates.append(step)
                self.extra_deps.setdefault(step.node, set()).update(inside)

    def _simple(self, kind: str, word: str, make: Any, alter: Any = None) -> None:
        """Create/drop/replace for a kind; ``alter`` handles in-place changes."""
        cur, want = self.pair(kind)
        for name in sorted(cur.keys() - want.keys()):
            self.drop_type(f"{kind}:{name}", f"DROP {word} {name}", DESTRUCTIVE)
        for name in sorted(cur.keys() & want.keys()):
            node = f"{kind}:{name}"
            if kind == "domain" and name in self.ch.redomained:
                renamed = self.ch.redomained[name]
                self.drop(node, f"ALTER DOMAIN {name} RENAME TO {renamed.rpartition('.')[2]}")
                self.made(node, make(name, want[name]))
                # Once its columns moved to the new one.
                gone = f"domain:{renamed}"
                self.extra_deps[gone] = {
                    f"table:{t}"
                    for t, table in self.cur["table"].items()
                    if any(c["type"] == renamed for c in table["columns"].values())
                }
                self.create(gone, f"DROP DOMAIN {renamed}")
            elif self.rebuilt(node):
                self.drop(node, f"DROP {word} {name}")
                self.made(node, make(name, want[name]))
            elif alter is not None and (cur[name] != want[name] or name in self.ch.rechecked):
                alter(name, cur[name], want[name])
        for name in sorted(want.keys() - cur.keys()):
            self.made(f"{kind}:{name}", make(name, want[name]))

    def made(self, node: str, sql: str | list[str]) -> None:
        """The statement(s) that make an object: some need a second (a domain's NOT VALID
        check, which ``CREATE DOMAIN`` cannot say)."""
        for one in [sql] if isinstance(sql, str) else sql:
            self.create(node, one)

    def collations(self) -> None:
        def make(name: str, c: dict[str, Any]) -> str:
            provider = {"i": "icu", "c": "libc", "d": "libc"}[c["provider"]]
            opts = [f"provider = {provider}"]
            if provider == "icu":
                opts.append(f"locale = {_lit(c['icuLocale'] or '')}")
            elif c["collate"] == c["ctype"]:
                opts.append(f"locale = {_lit(c['collate'] or '')}")
            else:
                opts += [f"lc_collate = {_lit(c['collate'])}", f"lc_ctype = {_lit(c['ctype'])}"]
            if not c["deterministic"]:
                opts.append("deterministic = false")
            return f"CREATE COLLATION {name} ({', '.join(opts)})"

        self._simple("collation", "COLLATION", make)

    def text_search(self) -> None:
        """Text search dictionaries and configurations: created (a configuration by its
        parser, then its mappings, token types that share dictionaries in one ``ADD
        MAPPING``), dropped, and dropped and created again when they change; what uses
        them (a configuration its dictionaries; an index, a generated column, a view that
        names a configuration) is rebuilt with them by step 2."""

        def dictionary(name: str, d: dict[str, Any]) -> list[str]:
            options = f", {d['options']}" if d["options"] else ""
            return [f"CREATE TEXT SEARCH DICTIONARY {name} (TEMPLATE = {d['template']}{options})"]

        def configuration(name: str, c: dict[str, Any]) -> list[str]:
            out = [f"CREATE TEXT SEARCH CONFIGURATION {name} (PARSER = {c['parser']})"]
            groups: dict[str, list[str]] = {}
            for token, dicts in c["mapping"]:
                groups.setdefault(dicts, []).append(token)
            for dicts, tokens in groups.items():
                out.append(
                    f"ALTER TEXT SEARCH CONFIGURATION {name} ADD MAPPING FOR"
                    f" {', '.join(tokens)} WITH {dicts}"
                )
            return out

        self._rebuildable_kind(
            "ts_dict", lambda n, d: f"DROP TEXT SEARCH DICTIONARY {n}", dictionary
        )
        self._rebuildable_kind(
            "ts_config", lambda n, c: f"DROP TEXT SEARCH CONFIGURATION {n}", configuration
        )

    def enums(self) -> None:
        cur, want = self.pair("enum")
        for name in sorted(cur.keys() - want.keys()):
            self.drop_type(f"enum:{name}", f"DROP TYPE {name}", DESTRUCTIVE)
        for name in sorted(want.keys() - cur.keys()):
            labels = ", ".join(_lit(v) for v in want[name]["labels"])
            self.create(f"enum:{name}", f"CREATE TYPE {name} AS ENUM ({labels})")
        for name in sorted(cur.keys() & want.keys()):
            old, new = cur[name]["labels"], want[name]["labels"]
            if old == new:
                continue
            if [v for v in new if v in old] != old:
                raise PlanError(_enum_refusal(name, old, new), "Unsupported")
            for i, value in enumerate(new):
                if value in old:
                    continue
                after = next((v for v in reversed(new[:i]) if v in old or v in new[:i]), None)
                where = f" AFTER {_lit(after)}" if after else f" BEFORE {_lit(new[i + 1])}"
                if after is None and i + 1 >= len(new):
                    where = ""
                self.create(f"enum:{name}", f"ALTER TYPE {name} ADD VALUE {_lit(value)}{where}")

    def domains(self) -> None:
        def make(name: str, d: dict[str, Any]) -> list[str]:
            parts = [f"CREATE DOMAIN {name} AS {d['type']}"]
            if d["collation"]:
                parts.append(f"COLLATE {d['collation']}")
            if d["default"] is not None:
                parts.append(f"DEFAULT {d['default']}")
            if d["notNull"]:
                parts.append("NOT NULL")
            checks = sorted(d["checks"].items())
            parts += [f"CONSTRAINT {k} {v}" for k, v in checks if not v.endswith(" NOT VALID")]
            # CREATE DOMAIN takes no NOT VALID (a syntax error): those are added after it.
            return [" ".join(parts)] + [
                f"ALTER DOMAIN {name} ADD CONSTRAINT {k} {v}"
                for k, v in checks
                if v.endswith(" NOT VALID")
            ]

        def alter(name: str, old: dict[str, Any], new: dict[str, Any]) -> None:
            node, at = f"domain:{name}", f"ALTER DOMAIN {name}"
            rechecked = self.ch.rechecked.get(name, set())
            for k in sorted(old["checks"].keys() - new["checks"].keys()):
                self.drop(node, f"{at} DROP CONSTRAINT {k}")
            for k in sorted(old["checks"].keys() & new["checks"].keys()):
                if old["checks"][k] != new["checks"][k] or k in rechecked:
                    self.validated_domain(name, f"check {k}", new["checks"][k])
                    self.drop(node, f"{at} DROP CONSTRAINT {k}")
                    self.create(node, f"{at} ADD CONSTRAINT {k} {new['checks'][k]}", DATA_DEPENDENT)
            for k in sorted(new["checks"].keys() - old["checks"].keys()):
                self.validated_domain(name, f"check {k}", new["checks"][k])
                self.create(node, f"{at} ADD CONSTRAINT {k} {new['checks'][k]}", DATA_DEPENDENT)
            if "" in rechecked:
                # Before the function it uses is dropped.
                self.drop(node, f"{at} DROP DEFAULT")
            if old["default"] != new["default"] or "" in rechecked:
                if new["default"] is None:
                    if "" not in rechecked:
                        self.create(node, f"{at} DROP DEFAULT")
                else:
                    self.create(node, f"{at} SET DEFAULT {new['default']}")
            if old["notNull"] != new["notNull"]:
                if new["notNull"]:
                    self.validated_domain(name, "NOT NULL", "NOT NULL")
                    self.create(node, f"{at} SET NOT NULL", DATA_DEPENDENT)
                else:
                    self.create(node, f"{at} DROP NOT NULL")

        self._simple("domain", "DOMAIN", make, alter)

    def validated_domain(self, name: str, what: str, definition: str) -> None:
        """A domain's check or NOT NULL added in place is validated against every column
        of the domain, and the server refuses that (cannot alter type ... because column
        ... uses it) where a column stores the domain inside an array or a composite type:
        the plan says so instead of failing on apply. A check the desired file adds NOT
        VALID is not validated, so it passes."""
        if definition.endswith(" NOT VALID"):
            return
        inside = {f"{name}[]"}
        for ctype, t in self.cur.get("ctype", {}).items():
            if any(a[1] in (name, f"{name}[]") for a in t["attributes"]):
                inside |= {ctype, f"{ctype}[]"}
        users = [
            f"{table}.{col}"
            for table, t in sorted(self.cur.get("table", {}).items())
            for col, c in t["columns"].items()
            if c["type"] in inside and not c.get("_inherited")
        ]
        if users:
            raise PlanError(
                f"domain {name}: its {what} would be validated in place, and PostgreSQL"
                f" refuses that while column {', '.join(users)} stores the domain inside an"
                " array or a composite type; add the check NOT VALID in the desired file"
                " (ALTER DOMAIN ... ADD CONSTRAINT ... NOT VALID), or move that column off",
                "Unsupported",
            )

    def composites(self) -> None:
        def attr_sql(a: list[str]) -> str:
            return f"{a[0]} {a[1]}" + (f" COLLATE {a[2]}" if a[2] else "")

        def make(name: str, t: dict[str, Any]) -> str:
            return (
                f"CREATE TYPE {name} AS (" + ", ".join(attr_sql(a) for a in t["attributes"]) + ")"
            )

        def alter(name: str, old: dict[str, Any], new: dict[str, Any]) -> None:
            node = f"ctype:{name}"
            o = {a[0]: a for a in old["attributes"]}
            n = {a[0]: a for a in new["attributes"]}
            kept = [a[0] for a in old["attributes"] if a[0] in n]
            for a in sorted(o.keys() - n.keys()):
                self.drop(node, f"ALTER TYPE {name} DROP ATTRIBUTE {a}", DESTRUCTIVE)
            users = [
                child.replace(":", " ", 1)
                for child, _ in self.dependents(node)
                if _kind(child) in ("table", "ctype")
                and not self.cur.get("_defaultDeps", {}).get(child, {}).get(node)
            ]
            for a in kept:
                if o[a] != n[a] and users:
                    raise PlanError(
                        f"composite type {name}: attribute {a} changes type or collation"
                        f" while {', '.join(users)} stores it; PostgreSQL cannot alter a"
                        " stored composite's attribute: add a new attribute and move the data",
                        "Unsupported",
                    )
                if o[a] != n[a]:
                    self.create(
                        node,
                        f"ALTER TYPE {name} ALTER ATTRIBUTE {attr_sql(n[a])}".replace(
                            f"ATTRIBUTE {a} ", f"ATTRIBUTE {a} TYPE ", 1
                        ),
                        DATA_DEPENDENT,
                    )
            for a in new["attributes"]:
                if a[0] not in o:
                    self.create(node, f"ALTER TYPE {name} ADD ATTRIBUTE {attr_sql(a)}")

        self._simple("ctype", "TYPE", make, alter)

    def ranges(self) -> None:
        def make(name: str, r: dict[str, Any]) -> str:
            opts = [f"SUBTYPE = {r['subtype']}"]
            for key, word in (
                ("opclass", "SUBTYPE_OPCLASS"),
                ("collation", "COLLATION"),
                ("canonical", "CANONICAL"),
                ("subdiff", "SUBTYPE_DIFF"),
            ):
                if r[key]:
                    opts.append(f"{word} = {r[key]}")
            opts.append(f"MULTIRANGE_TYPE_NAME = {r['multirange']}")
            return f"CREATE TYPE {name} AS RANGE ({', '.join(opts)})"

        self._simple("range", "TYPE", make)

    def functions(self) -> None:
        cur, want = self.pair("function")
        words = {"p": "PROCEDURE", "a": "AGGREGATE"}
        for name in sorted(cur.keys() - want.keys()):
            self.drop(f"function:{name}", f"DROP {words.get(cur[name]['kind'], 'FUNCTION')} {name}")
        for name in sorted(cur.keys() & want.keys()):
            node = f"function:{name}"
            if self.rebuilt(node):
                self.drop(node, f"DROP {words.get(cur[name]['kind'], 'FUNCTION')} {name}")
                self.create(node, want[name]["def"])
            elif not same(cur[name], want[name]) or node in self.ch.reparsed:
                self.create(node, want[name]["def"])  # CREATE OR REPLACE keeps dependents
        for name in sorted(want.keys() - cur.keys()):
            self.create(f"function:{name}", want[name]["def"])

    def sequences(self) -> None:
        cur, want = self.pair("sequence")
        for name in sorted(cur.keys() - want.keys()):
            owner = cur[name]["ownedBy"]
            if owner and not self._column_kept(owner):
                continue  # goes with its owning column or table
            self.drop(f"sequence:{name}", f"DROP SEQUENCE {name}", DESTRUCTIVE)
        for name in sorted(want.keys() - cur.keys()):
            s = want[name]
            cycle = "CYCLE" if s["cycle"] else "NO CYCLE"
            unlogged = "UNLOGGED " if s.get("unlogged") else ""
            self.create(
                f"sequence:{name}",
                f"CREATE {unlogged}SEQUENCE {name} AS {s['type']} INCREMENT BY {s['increment']}"
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
                self.create(f"sequence:{name}", f"ALTER SEQUENCE {name} " + " ".join(opts))
            if bool(old.get("unlogged")) != bool(new.get("unlogged")):
                word = "UNLOGGED" if new.get("unlogged") else "LOGGED"
                self.create(f"sequence:{name}", f"ALTER SEQUENCE {name} SET {word}")
        for name in sorted(want):
            owned = want[name]["ownedBy"]
            node = f"owned:{name}"
            was = cur[name]["ownedBy"] if name in cur else None
            if was and was != owned and not self._column_kept(was):
                # The column (or table) that owns it goes: the server would drop the
                # sequence with it, so it is released first, among the drops.
                self.drop(node, f"ALTER SEQUENCE {name} OWNED BY NONE")
                was = None
            if owned and was != owned:
                table = owned.rsplit(".", 1)[0]
                self.extra_deps[node] = {f"sequence:{name}", f"table:{table}"}
                self.create(node, f"ALTER SEQUENCE {name} OWNED BY {owned}")
                table, col = owned.rsplit(".", 1)
                held = self.cur.get("table", {}).get(table, {}).get("columns", {})
                if (
                    name not in cur
                    and held.get(col, {}).get("type") in ("smallint", "integer", "bigint")
                    and (table, col) not in self.ch.readded
                ):
                    self.past_rows(node, name, want[name], table, col)
            elif not owned and was:
                self.create(node, f"ALTER SEQUENCE {name} OWNED BY NONE")

    def _column_kept(self, qualified: str) -> bool:
        table, col = qualified.rsplit(".", 1)
        return col in self.want.get("table", {}).get(table, {}).get("columns", {})

    # -- tables ---------------------------------------------------------------------------
    def tables(self) -> None:
        cur, want = self.pair("table")
        for name in sorted(cur.keys() - want.keys()):
            parent = cur[name].get("partitionOf")
            if parent and parent not in want:
                continue  # goes with its partitioned parent
            if parent and self.referenced(parent):
                # The server drops no partition of a table a foreign key references (the
                # key's copies on it stand); detached first (checking no row refers to
                # its rows), it goes.
                self.drop(f"table:{name}", f"ALTER TABLE {parent} DETACH PARTITION {name}")
            self.drop(f"table:{name}", f"DROP TABLE {name}", DESTRUCTIVE)
        for name in sorted(want.keys() - cur.keys()):
            self.create_table(name, want[name])
        for name in sorted(cur.keys() & want.keys()):
            self.alter_table(name, cur[name], want[name])

    def default_partition(self, t: dict[str, Any]) -> str | None:
        """The target's default partition that a new partition of the same parent takes
        rows from (it is not new itself, and it stays the parent's)."""
        parent = t.get("partitionOf")
        if not parent or t.get("bound") == "DEFAULT":
            return None
        for name, other in sorted(self.cur.get("table", {}).items()):
            if other.get("partitionOf") == parent and other.get("bound") == "DEFAULT":
                kept = self.want.get("table", {}).get(name, {})
                if kept.get("partitionOf") == parent:
                    return name
        return None

    def referenced(self, table: str) -> bool:
        """Whether a foreign key of the target references ``table`` or a partitioned table
        it is a partition of."""
        tables = self.cur.get("table", {})
        chain = set()
        while table and table not in chain:
            chain.add(table)
            table = tables.get(table, {}).get("partitionOf")
        return any(
            c["type"] == "f" and c["def"].split(" REFERENCES ", 1)[1].split("(", 1)[0] in chain
            for c in self.cur.get("constraint", {}).values()
        )

    def create_table(self, name: str, t: dict[str, Any]) -> None:
        node = f"table:{name}"
        unlogged = "UNLOGGED " if t.get("unlogged") else ""
        if t.get("partitionOf"):
            sql = f"CREATE {unlogged}TABLE {name} PARTITION OF {t['partitionOf']} {t['bound']}"
            self.extra_deps.setdefault(node, set()).add(f"table:{t['partitionOf']}")
        else:
            cols = sorted(t["columns"].items(), key=lambda kv: kv[1]["_n"])
            # A child lists its own columns; the inherited ones come from its parents.
            body = ",\n".join(f"  {_column_sql(c, d)}" for c, d in cols if not d.get("_inherited"))
            sql = f"CREATE {unlogged}TABLE {name} (\n{body}\n)"
            if t.get("inherits"):
                sql += f" INHERITS ({', '.join(t['inherits'])})"
                for parent in t["inherits"]:
                    self.extra_deps.setdefault(node, set()).add(f"table:{parent}")
        if t.get("partitionBy"):
            sql += f" PARTITION BY {t['partitionBy']}"
        if t.get("accessMethod"):
            sql += f" USING {t['accessMethod']}"
        if t.get("reloptions"):
            sql += f" WITH ({', '.join(t.get('_reloptions') or t['reloptions'])})"
        if default := self.default_partition(t):
            # The server scans the default partition (under its lock) for rows the new
            # partition's bound takes: one there fails the apply.
            self.locking(node, sql, ACCESS_EXCLUSIVE, SCANS_TABLE, DATA_DEPENDENT)
            self.extra_deps.setdefault(node, set()).add(f"table:{default}")
        else:
            self.create(node, sql)
        if t.get("partitionOf"):
            parent = self.want["table"].get(t["partitionOf"], {}).get("columns", {})
            for col, d in sorted(t["columns"].items(), key=lambda kv: kv[1]["_n"]):
                base = parent.get(col)
                if base is not None:
                    self.column_properties(name, col, base, d, partition=True)
        else:
            parents = [self.want["table"].get(p, {}) for p in t.get("inherits", [])]
            for col, d in sorted(t["columns"].items(), key=lambda kv: kv[1]["_n"]):
                base = _inherited_base(parents, col) if d.get("_inherited") else None
                if base is not None:
                    # A new child starts with no statistics target of its own.
                    base["statistics"] = -1
                    self.column_properties(name, col, base, d, partition=False)
                else:
                    self.column_storage(name, col, {}, d)
        self.table_properties(name, {}, t)

    def alter_table(self, name: str, old: dict[str, Any], new: dict[str, Any]) -> None:
        node = f"table:{name}"
        if old.get("partitionBy") != new.get("partitionBy"):
            raise PlanError(
                f"table {name}: the partition key changes ({old.get('partitionBy') or 'none'} ->"
                f" {new.get('partitionBy') or 'none'}); PostgreSQL cannot change a table's"
                " partitioning in place: create a new table and move the rows",
                "Unsupported",
            )
        if old.get("unlogged", False) != new.get("unlogged", False):
            word = "UNLOGGED" if new.get("unlogged") else "LOGGED"
            self.row_type_kept(name, f"SET {word}")
            self.create(node, f"ALTER TABLE {name} SET {word}", LOCK_HEAVY)
            self.owned_sequences_persist(name, bool(new.get("unlogged")))
            self.persistence_order(name, bool(new.get("unlogged")))
        if self.attaching(name):
            if old.get("partitionOf"):
                self.drop(node, f"ALTER TABLE {old['partitionOf']} DETACH PARTITION {name}")
            # The server attaches a table only once its columns match the parent's (types,
            # NOT NULL) and it has each of the parent's checks: the column changes and the
            # missing checks come first, on the table as it stands alone.
            self.columns(name, {**old, "partitionOf": None}, new)
            for check, definition in sorted(self.merged_on_attach(name).items()):
                if self.attach_finds(name, check) != definition:
                    c = {"table": name, "name": check, "type": "c", "def": definition}
                    self.add_constraint(node, c)
            self.extra_deps.setdefault(node, set()).add(f"table:{new['partitionOf']}")
            self.create(
                node,
                f"ALTER TABLE {new['partitionOf']} ATTACH PARTITION {name} {new['bound']}",
                DATA_DEPENDENT,
                LOCK_HEAVY,
            )
        elif old.get("partitionOf") and not new.get("partitionOf"):
            self.drop(node, f"ALTER TABLE {old['partitionOf']} DETACH PARTITION {name}")
        was, now = old.get("inherits", []), new.get("inherits", [])
        for parent in was:
            if parent not in now:
                self.drop(node, f"ALTER TABLE {name} NO INHERIT {parent}")
        inheriting = [p for p in now if p not in was] + self.locality(name, old, new)
        if inheriting:
            # The server lets a table inherit only once its columns match the parent's
            # (types, NOT NULL): its column changes come first.
            self.columns(name, old, new)
        inode = f"inherit:{name}"
        for parent in inheriting:
            # After the table's own checks of the parent's names: the server merges them.
            self.extra_deps.setdefault(inode, set()).update(
                {node, f"table:{parent}"}
                | {
                    f"constraint:{k}"
                    for k, c in self.want.get("constraint", {}).items()
                    if c["table"] == name and c["type"] == "c"
                }
            )
            self.create(inode, f"ALTER TABLE {name} INHERIT {parent}", LOCK_HEAVY)
        if not self.attaching(name) and not inheriting:
            self.columns(name, old, new)
        self.table_properties(name, old, new)

    def locality(self, table: str, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
        """Where a child of plain inheritance has a column (or check) of its own that the
        desired has from its parent only, or the other way round. ``INHERIT`` keeps the
        table's columns and checks its own (the desired's ``INHERITS`` makes them the
        parent's only), and nothing makes them the parent's only afterwards: refused.
        The desired may name them in the child too (its own as well): a child that
        has them from one parent only becomes so by ``NO INHERIT`` (which makes them
        its own) and ``INHERIT`` again: the parents returned are inherited again."""
        if new.get("partitionOf") or old.get("partitionOf"):
            # A partition's columns and checks are its parent's only, always; detached,
            # they are its own.
            return []
        cols = set(old["columns"]) & set(new["columns"])
        to_parent = sorted(
            c
            for c in cols
            if new["columns"][c].get("_inherited") and not old["columns"][c].get("_inherited")
        )
        # A column the table lacks that the desired has from a parent it newly inherits
        # only: INHERIT needs it there first (ADD COLUMN), which makes it the table's own.
        staying = [p for p in old.get("inherits", []) if p in new.get("inherits", [])]
        parents = self.parents(self.want, {"inherits": staying})
        to_parent += sorted(
            c
            for c in new["columns"].keys() - old["columns"].keys()
            if new["columns"][c].get("_inherited") and _inherited_base(parents, c) is None
        )
        clones = old.get("_clones", {}) if old.get("inherits") else {}
        newly = any(p not in old.get("inherits", []) for p in new.get("inherits", []))
        own = self.cur.get("constraint", {})
        checks = sorted(
            k
            for k, v in new.get("_clones", {}).items()
            if v.startswith("CHECK ")
            and clones.get(k) != v
            and (newly or f"{table}.{k}" in own)  # else the parent's ADD brings it
        )
        if to_parent or checks:
            what = ", ".join([*(f"column {c}" for c in to_parent), *(f"check {k}" for k in checks)])
            raise PlanError(
                f"table {table}: {what} would stay its own, while the desired file has"
                f" {'it' if len(to_parent) + len(checks) == 1 else 'them'} from"
                f" {', '.join(new.get('inherits', []))} only (INHERITS); PostgreSQL cannot"
                " make a table's own column or check inherited-only: name them in the"
                " table's CREATE TABLE as well, or create the table anew",
                "Unsupported",
            )
        to_own = sorted(
            c
            for c in cols
            if old["columns"][c].get("_inherited") and not new["columns"][c].get("_inherited")
        )
        kept = [p for p in new.get("inherits", []) if p in old.get("inherits", [])]
        if not to_own or not kept:
            return []  # leaving its parents, the table makes them its own by NO INHERIT
        if (
            len(kept) != 1
            or any(c.get("_inherited") for c in new["columns"].values())
            or new.get("_clones")
        ):
            raise PlanError(
                f"table {table}: columns {', '.join(to_own)} become its own (named in its"
                " CREATE TABLE) while others stay its parents' only; PostgreSQL cannot do"
                " that to some columns of a child alone: name all of them, or create the"
                " table anew",
                "Unsupported",
            )
        self.drop(f"table:{table}", f"ALTER TABLE {table} NO INHERIT {kept[0]}")
        self.reinherited.add(table)
        return kept

    def attaching(self, table: str) -> bool:
        """An existing table that the plan attaches as a partition: a plain table that
        becomes one, or a partition whose parent or bound changes (detached first)."""
        old = self.cur.get("table", {}).get(table, {})
        new = self.want.get("table", {}).get(table, {})
        return bool(new.get("partitionOf")) and (
            (old.get("partitionOf"), old.get("bound")) != (new["partitionOf"], new["bound"])
        )

    def merged_on_attach(self, table: str) -> dict[str, str]:
        """The parent's checks an attached table must already have (by name and
        definition): the ATTACH merges them into its copies; the desired partition has
        them as such copies (not its own constraints)."""
        if not self.attaching(table):
            return {}
        clones: dict[str, str] = self.want["table"][table].get("_clones", {})
        return {k: v for k, v in clones.items() if v.startswith("CHECK ")}

    def attach_finds(self, table: str, check: str) -> str | None:
        """The definition of the check named ``check`` the table has when it is attached:
        its own, or one it had from the same parent (kept by the DETACH before)."""
        own = self.cur.get("constraint", {}).get(f"{table}.{check}")
        if own is not None:
            return str(own["def"])
        old, new = self.cur["table"][table], self.want["table"][table]
        if old.get("partitionOf") == new.get("partitionOf"):
            clone = old.get("_clones", {}).get(check)
            return str(clone) if clone is not None else None
        return None

    def persistence_order(self, table: str, unlogged: bool) -> None:
        """A logged table references no unlogged one (a foreign key): of two tables whose
        key between them stays, both made logged, the referenced one is first; both made
        unlogged, the referencing one is. The server refused the other order."""
        tables = self.cur.get("table", {})
        for key, c in self.cur.get("constraint", {}).items():
            if c["type"] != "f" or key not in self.want.get("constraint", {}):
                continue
            for parent in self.cur_deps.get(f"constraint:{key}", {}):
                other = _name(parent)
                if _kind(parent) != "table" or other == c["table"]:
                    continue
                if table not in (c["table"], other):
                    continue
                referencing, referenced = f"table:{c['table']}", parent
                both = all(
                    bool(tables.get(t, {}).get("unlogged"))
                    != bool(self.want["table"].get(t, {}).get("unlogged", unlogged))
                    for t in (c["table"], other)
                )
                if not both:
                    continue
                if unlogged:
                    self.extra_deps.setdefault(referenced, set()).add(referencing)
                else:
                    self.extra_deps.setdefault(referencing, set()).add(referenced)

    def owned_sequences_persist(self, table: str, unlogged: bool) -> None:
        """``ALTER TABLE ... SET LOGGED/UNLOGGED`` changes the sequences the table owns with
        it (PostgreSQL 15); a direct load gives an owned sequence the persistence it is
        declared with. Each sequence the table owns before or after the plan that the
        desired file declares otherwise is set back right after the table's change."""
        cur, want = self.pair("sequence")
        prefix = f"{table}."
        for seq in sorted(want):
            owners = (cur.get(seq, {}).get("ownedBy"), want[seq]["ownedBy"])
            if not any(o and o.startswith(prefix) for o in owners):
                continue
            if bool(want[seq].get("unlogged")) != unlogged:
                word = "UNLOGGED" if want[seq].get("unlogged") else "LOGGED"
                self.create(f"table:{table}", f"ALTER SEQUENCE {seq} SET {word}")

    def table_properties(self, name: str, old: dict[str, Any], new: dict[str, Any]) -> None:
        node, at = f"table:{name}", f"ALTER TABLE {name}"
        was = list(old.get("_reloptions") or old.get("reloptions", []))
        now = list(new.get("_reloptions") or new.get("reloptions", []))
        if old and set(was) != set(now):
            gone, changed = storage_option_steps(was, now)
            if gone:
                self.create(node, f"{at} RESET ({', '.join(gone)})")
            if changed:
                self.create(node, f"{at} SET ({', '.join(changed)})")
        rls_old = old.get("rls", {"enabled": False, "forced": False})
        rls_new = new.get("rls", {"enabled": False, "forced": False})
        if rls_old["enabled"] != rls_new["enabled"]:
            word = "ENABLE" if rls_new["enabled"] else "DISABLE"
            self.create(node, f"{at} {word} ROW LEVEL SECURITY")
        if rls_old["forced"] != rls_new["forced"]:
            word = "FORCE" if rls_new["forced"] else "NO FORCE"
            self.create(node, f"{at} {word} ROW LEVEL SECURITY")
        ident_old = old.get("replicaIdentity", "DEFAULT")
        ident_new = new.get("replicaIdentity", "DEFAULT")
        if ident_old != ident_new or (
            ident_new.startswith("USING INDEX") and self._index_rebuilt(name, ident_new)
        ):
            rnode = f"replident:{name}"
            self.extra_deps[rnode] = {node}
            if ident_new.startswith("USING INDEX"):
                index = ident_new.split()[-1]
                schema = name.split(".", 1)[0]
                self.extra_deps[rnode] = {
                    node,
                    f"index:{schema}.{index}",
                    *(
                        f"constraint:{k}"
                        for k in self.want.get("constraint", {})
                        if k == f"{name}.{index}"
                    ),
                }
            self.create(rnode, f"{at} REPLICA IDENTITY {ident_new}")

    def _index_rebuilt(self, table: str, ident: str) -> bool:
        index = ident.split()[-1]
        schema = table.split(".", 1)[0]
        return self.rebuilt(f"index:{schema}.{index}") or self.rebuilt(
            f"constraint:{table}.{index}"
        )

    def columns(self, table: str, old_t: dict[str, Any], new_t: dict[str, Any]) -> None:
        cur, want = old_t["columns"], new_t["columns"]
        node = f"table:{table}"
        partition = bool(new_t.get("partitionOf")) and bool(old_t.get("partitionOf"))
        child = partition or (bool(new_t.get("inherits")) and bool(old_t.get("inherits")))
        added = [c for c in want.keys() - cur.keys() if not (child and want[c].get("_inherited"))]
        added += [c for c in cur.keys() & want.keys() if (table, c) in self.ch.readded]
        for col in sorted(cur.keys() & want.keys()):
            if child and not partition and want[col].get("_inherited"):
                # The parent's change reaches its children, all but SET COMPRESSION (and
                # its type change resets the child's compression): that one is set here,
                # with the child's own default and NOT NULL beside its parents'.
                pold = _inherited_base(self.parents(self.cur, old_t), col)
                pnew = _inherited_base(self.parents(self.want, new_t), col)
                was = cur[col]
                if pold is not None and pnew is not None:
                    was = _merge_inherited(cur[col], pold, pnew)
                self.column_properties(table, col, was, want[col], partition=False)
                continue
            if partition and want[col].get("_inherited"):
                parent = self.want["table"].get(new_t["partitionOf"], {}).get("columns", {})
                pold = self.cur["table"].get(old_t["partitionOf"], {}).get("columns", {})
                if col in parent and col in pold:
                    # What the parent's change brings down is not changed twice.
                    self.column_properties(
                        table,
                        col,
                        _merge(cur[col], pold[col], parent[col]),
                        want[col],
                        partition=True,
                    )
                continue
            self.alter_column(table, col, cur[col], want[col])
        # Dropped after the kept columns' own drops: a generated column that stays (its
        # expression dropped) or is added again may read a column that goes.
        for col in sorted(cur.keys() - want.keys()):
            if child and cur[col].get("_inherited"):
                continue  # goes with the parent's column
            self.drop(node, f"ALTER TABLE {table} DROP COLUMN {col}", DESTRUCTIVE)
        # New columns, and generated ones added again, after the other columns changed
        # (a generated column reads them), in the desired file's order.
        for col in sorted(added, key=lambda c: want[c]["_n"]):
            d = want[col]
            if d["default"] is not None or d["identity"] or d["generated"]:
                self.row_type_kept(table, f"ADD COLUMN {col} with a default or a generation")
            hazards = []
            if d["notNull"] and d["default"] is None and not d["identity"]:
                hazards.append(DATA_DEPENDENT)
            if d["identity"] or d["generated"]:
                hazards.append(LOCK_HEAVY)  # fills every existing row: a table rewrite
            self.create(node, f"ALTER TABLE {table} ADD COLUMN {_column_sql(col, d)}", *hazards)
            self.column_storage(table, col, {}, d)

    def column_storage(
        self, table: str, col: str, old: dict[str, Any], new: dict[str, Any]
    ) -> None:
        """Statistics target, storage and compression. A storage set back to the type's
        own is set to it by name (PostgreSQL 15 has no ``SET STORAGE DEFAULT``): left
        alone, the column kept the old one, and the plan never converged. A type change
        (``ALTER COLUMN ... TYPE``) resets storage and compression to the new type's, so
        after one they are set again as the desired has them."""
        node, at = f"table:{table}", f"ALTER TABLE {table} ALTER COLUMN {col}"
        if "type" in old and old["type"] != new["type"]:
            old = {**old, "storage": None, "compression": None}
        if old.get("statistics", -1) != new.get("statistics", -1):
            self.create(node, f"{at} SET STATISTICS {new.get('statistics', -1)}")
        if old.get("storage") != new.get("storage"):
            storage = new.get("storage") or new.get("_typeStorage")
            if storage:
                self.create(node, f"{at} SET STORAGE {storage}")
        if old and old.get("compression") != new.get("compression"):
            self.create(node, f"{at} SET COMPRESSION {new.get('compression') or 'default'}")

    def column_properties(
        self, table: str, col: str, old: dict[str, Any], new: dict[str, Any], partition: bool
    ) -> None:
        """A partition's own column settings beside what it inherits from its parent."""
        node, at = f"table:{table}", f"ALTER TABLE ONLY {table} ALTER COLUMN {col}"
        if old["default"] != new["default"] and not new["generated"]:
            if new["default"] is None:
                self.create(node, f"{at} DROP DEFAULT")
            else:
                self.create(node, f"{at} SET DEFAULT {new['default']}")
        if old["notNull"] != new["notNull"] and new["notNull"]:
            self.create(node, f"{at} SET NOT NULL", DATA_DEPENDENT, LOCK_HEAVY)
        elif old["notNull"] != new["notNull"]:
            # Its own NOT NULL, or (an inheriting child) the one its parent gave it: a
            # partition's column is nullable in the desired only where its parent's is.
            self.create(node, f"{at} DROP NOT NULL")
        # Its statistics target too: without it the partition's own target was set again
        # on every plan (the plan never came out empty).
        base = {
            "_": 1,
            "storage": old.get("storage"),
            "compression": old.get("compression"),
            "statistics": old.get("statistics", -1),
        }
        self.column_storage(table, col, base, new)

    @staticmethod
    def parents(schema: Schema, t: dict[str, Any]) -> list[dict[str, Any]]:
        """The tables ``t`` inherits from (INHERITS), as ``schema`` has them."""
        tables = schema.get("table", {})
        return [tables.get(p, {}) for p in t.get("inherits", [])]

    def alter_column(self, table: str, col: str, old: dict[str, Any], new: dict[str, Any]) -> None:
        if (table, col) in self.ch.defaults:
            old = {**old, "default": None}  # dropped before what it uses is rebuilt
            self.drop(f"table:{table}", f"ALTER TABLE {table} ALTER COLUMN {col} DROP DEFAULT")
        node = f"table:{table}"
        if (table, col) in self.ch.readded:
            # Added again with the table's new columns (columns()). Destructive where the
            # column held its own values (it becomes generated); a generated column's are
            # computed again from the row as the column is added back: nothing is lost
            # that its (new) expression does not give again.
            hazards = () if old["generated"] else (DESTRUCTIVE,)
            self.drop(node, f"ALTER TABLE {table} DROP COLUMN {col}", *hazards)
            return
        if same(old, new):
            return
        at = f"ALTER TABLE {table} ALTER COLUMN {col}"
        if old["generated"] and not new["generated"]:
            # The column keeps its rows and its place; in the drops, before what the
            # expression uses may go.
            self.drop(node, f"{at} DROP EXPRESSION")
            old = {**old, "generated": "", "default": None}
        if old["identity"] and old["identity"] != new["identity"] and not new["identity"]:
            # In the drops: its sequence goes with it, and a new one may take the name.
            self.drop(node, f"{at} DROP IDENTITY")
        if old["default"] != new["default"] and old["default"] is not None:
            self.drop(node, f"{at} DROP DEFAULT")
        if old["type"] != new["type"] or old["collation"] != new["collation"]:
            self.row_type_kept(table, f"ALTER COLUMN {col} TYPE")
            coll = f" COLLATE {new['collation']}" if new["collation"] else ""
            # A conversion that changes values without an error loses data: destructive.
            # A domain converts as the type it stores (a domain whose base type changes
            # reads as of its renamed old self).
            was_domains = {
                **self.cur["domain"],
                **{r: self.cur["domain"][d] for d, r in self.ch.redomained.items()},
            }
            was = _stored_type(was_domains, old["type"])
            now = _stored_type(self.want["domain"], new["type"])
            lossy = (DESTRUCTIVE,) if _narrows(was, now) else ()
            self.locking(
                node,
                f"{at} TYPE {new['type']}{coll}",
                ACCESS_EXCLUSIVE,
                REWRITES_TABLE,
                *lossy,
                DATA_DEPENDENT,
                LOCK_HEAVY,
            )
        if old["default"] != new["default"] and new["default"] is not None:
            self.create(node, f"{at} SET DEFAULT {new['default']}")
        if old["notNull"] != new["notNull"]:
            # Before an identity is added: the server adds one to a NOT NULL column only.
            if new["notNull"]:
                self.set_not_null(table, col)
            else:
                self.create(node, f"{at} DROP NOT NULL")
        if new["identity"] and old["identity"] != new["identity"]:
            kind = "ALWAYS" if new["identity"] == "a" else "BY DEFAULT"
            if old["identity"]:
                self.create(node, f"{at} SET GENERATED {kind}")
            else:
                self.create(node, f"{at} ADD GENERATED {kind} AS IDENTITY{_identity_options(new)}")
                self.identity_past_rows(table, col, new)
        if new["identity"] and old["identity"] and (changes := _identity_changes(old, new)):
            self.create(node, f"{at} {changes}")
        self.column_storage(table, col, {**old, "_": 1}, new)

    def row_type_kept(self, table: str, change: str) -> None:
        """Refuse a change PostgreSQL makes by rewriting the table (a type change, a
        column added with a default, identity or generation, SET LOGGED/UNLOGGED) while
        a column that stays stores the table's row type (``r public.b``, ``public.b[]``):
        the server refuses it then (cannot alter table ... because column ... uses its
        row type), and the plan failed on apply, and every plan after it."""
        stored = {table, f"{table}[]"}
        users = [
            f"{name}.{col}"
            for name, t in sorted(self.cur.get("table", {}).items())
            for col, c in sorted(t["columns"].items())
            if c["type"] in stored
            and self.want.get("table", {}).get(name, {}).get("columns", {}).get(col, {}).get("type")
            == c["type"]
        ]
        users += [
            f"type {name}"
            for name, t in sorted(self.cur.get("ctype", {}).items())
            if any(a[1] in stored for a in t["attributes"]) and name in self.want.get("ctype", {})
        ]
        if users:
            raise PlanError(
                f"table {table}: {change} would rewrite the table, and PostgreSQL refuses that"
                f" while {', '.join(users)} {'stores' if len(users) == 1 else 'store'} its"
                " row type; move that off the row type in a versioned migration, then plan"
                " again",
                "Unsupported",
            )

    def column_order(self) -> list[str]:
        """Where a table's columns stand in an order other than the desired file's once the
        plan ran: PostgreSQL adds a column (and one dropped and added again) at the end
        and has no way to move one. Reordering would mean rebuilding the table (a copy of
        its rows under a new table, its dependents, grants and sequences rebuilt), which
        a plan does not do; it says so instead, since the difference is real (``SELECT
        *``, ``INSERT`` and ``COPY`` without a column list see the table's order).

        A table's column order is not part of the compared schema (the inspection keeps
        it private, ``_n``): the plan that adds the column converges, and every plan
        after it is empty (never planned again), each saying the order still differs
        until the desired file lists the columns as the table has them. (A composite
        type's attribute order is compared: :meth:`reordered_composite`.)"""
        out = []
        cur, want = self.pair("table")
        for name in sorted(cur.keys() & want.keys()):
            wanted = sorted(want[name]["columns"], key=lambda c: want[name]["columns"][c]["_n"])
            kept = [
                c
                for c in sorted(cur[name]["columns"], key=lambda c: cur[name]["columns"][c]["_n"])
                if c in want[name]["columns"] and not self.moves(name, c)
            ]
            result = kept + [c for c in wanted if c not in kept]
            if result == wanted:
                continue
            first = next(i for i, (a, b) in enumerate(zip(result, wanted, strict=True)) if a != b)
            out.append(
                f"table {name}: from its column {first + 1} on, the columns stand (once"
                f" this plan ran) as ({', '.join(result[first:])}), not in the desired"
                f" file's order ({', '.join(wanted[first:])}): PostgreSQL adds columns at"
                " the end and cannot reorder them without rebuilding the table, which Ptah"
                " does not do; the order is not compared, so nothing is planned for it:"
                " write them in that order in the desired file to keep it in step"
            )
        for name in sorted(want.keys() - cur.keys()):
            parent = want[name].get("partitionOf")
            if not parent or parent not in want:
                continue
            # Created PARTITION OF its parent: in the parent's order, whatever the file's.
            own = want[name]["columns"]
            wanted = sorted(own, key=lambda c: own[c]["_n"])
            pcols = want[parent]["columns"]
            result = [c for c in sorted(pcols, key=lambda c: pcols[c]["_n"]) if c in own]
            result += [c for c in wanted if c not in result]
            if result != wanted:
                out.append(
                    f"table {name}: created as a partition of {parent}, its columns stand in"
                    f" the parent's order ({', '.join(result)}), not in the desired file's"
                    f" ({', '.join(wanted)}); the order is not compared, so nothing is"
                    " planned for it: write them in that order in the desired file to keep"
                    " it in step"
                )
        return out

    def moves(self, table: str, col: str) -> bool:
        """A column the plan drops and adds again, on the table itself or (inherited) on
        a parent: either way it comes back at the table's end."""
        if (table, col) in self.ch.readded:
            return True
        t = self.cur.get("table", {}).get(table, {})
        if not t.get("columns", {}).get(col, {}).get("_inherited"):
            return False
        parents = [t["partitionOf"]] if t.get("partitionOf") else t.get("inherits", [])
        return any(self.moves(p, col) for p in parents)

    def identity_past_rows(self, table: str, col: str, new: dict[str, Any]) -> None:
        """An identity added to a column that already holds values (a ``serial`` made an
        identity; an identity made a ``serial`` is the same, :meth:`sequences`) starts at
        its START: the next insert would take a value a row has (a
        duplicate key, or two rows under one id). Its sequence is moved past the column's
        largest value, as a migration by hand does; ascending identities only (a
        descending one counts down from its START, below the rows). The sequence's
        position is no part of the schema: the plan's fingerprint is the same."""
        seq = new.get("identitySequence") or {}
        if seq.get("name"):
            self.past_rows(f"table:{table}", seq["name"], seq, table, col)

    def past_rows(
        self, node: str, sequence: str, seq: dict[str, Any], table: str, col: str
    ) -> None:
        """A new sequence that numbers a column with values already (an identity added,
        a serial's sequence created for it): moved past the column's largest value."""
        if int(seq.get("increment", 1)) <= 0:
            return
        self.create(
            node,
            f"SELECT pg_catalog.setval({_lit(sequence)}, max({col})) FROM {table}"
            f" HAVING max({col}) IS NOT NULL",
            DATA_DEPENDENT,
        )

    def set_not_null(self, table: str, col: str) -> None:
        """``SET NOT NULL``; under online not-null, proved first by a check added ``NOT
        VALID`` and validated on its own (reads and writes go on), so the ``SET NOT NULL``
        that follows skips its scan; the check is dropped after."""
        node, at = f"table:{table}", f"ALTER TABLE {table}"
        plain = f"{at} ALTER COLUMN {col} SET NOT NULL"
        if not (self.online.not_null and self.plain_table(table)):
            self.locking(node, plain, ACCESS_EXCLUSIVE, SCANS_TABLE, DATA_DEPENDENT, LOCK_HEAVY)
            return
        check = pgonline.temporary_name(col, "_ptah_not_null")
        self.locking(
            node,
            f"{at} ADD CONSTRAINT {check} CHECK ({col} IS NOT NULL) NOT VALID",
            ACCESS_EXCLUSIVE,
            BRIEF,
        )
        self.validate(node, {"table": table, "name": check})
        self.locking(node, plain, ACCESS_EXCLUSIVE, BRIEF, transaction=NEW)
        self.locking(node, f"{at} DROP CONSTRAINT {check}", ACCESS_EXCLUSIVE, BRIEF)

    # -- things on tables -----------------------------------------------------------------
    def detached(self, table: str) -> bool:
        """A partition that leaves its parent and stays: what it had from the parent
        (indexes, constraints) becomes its own on the DETACH."""
        old = self.cur.get("table", {}).get(table, {})
        new = self.want.get("table", {}).get(table)
        if new is None or not old.get("partitionOf"):
            return False
        return bool(old["partitionOf"] != new.get("partitionOf"))

    def kept_detached(self, index: str) -> bool:
        """A detached partition's index (attached to its parent's until then) that the
        desired has as it is."""
        old, new = self.cur["index"][index], self.want.get("index", {}).get(index)
        if not old.get("parent") or not self.detached(old["table"]):
            return False
        return bool(
            new and not new.get("parent") and same({**old, "parent": None}, {**new, "parent": None})
        )

    def indexed_by_parent(self, index: dict[str, Any]) -> bool:
        """A partition's index the server makes by itself: an index of its parent's (or of
        its parent's parent's, a partition of a new sub-partitioned partition) exists and
        stays, so the new partition gets its own copy as it is created. Created again by
        the plan, it failed (relation already exists)."""
        cur, want = self.cur.get("index", {}), self.want.get("index", {})
        parent, seen = index.get("parent"), set()
        while parent and parent not in seen:
            seen.add(parent)
            if parent in cur:
                return not self.rebuilt(f"index:{parent}")
            parent = want.get(parent, {}).get("parent")
        return False

    def with_parent_index(self, index: str) -> bool:
        """A detached partition's index that goes with its parent's index: that one is
        dropped (or dropped and created again) in the drops, before the DETACH, and the
        server drops the partitions' indexes attached to it. A DROP INDEX of it after the
        DETACH failed (index does not exist); one the desired keeps is created again."""
        old = self.cur["index"][index]
        parent = old.get("parent")
        if not parent or not self.detached(old["table"]):
            return False
        return parent not in self.want.get("index", {}) or self.rebuilt(f"index:{parent}")

    def detached_constraints(self, want: dict[str, Any]) -> set[str]:
        """Constraints a detached partition keeps from its parent as the desired has them;
        the others are dropped after the DETACH."""
        kept: set[str] = set()
        for table, t in sorted(self.cur.get("table", {}).items()):
            if not t.get("_clones") or not self.detached(table):
                continue
            for name, definition in sorted(t["_clones"].items()):
                key = f"{table}.{name}"
                if key in want and want[key]["def"] == definition:
                    kept.add(key)
                else:
                    self.create(f"constraint:{key}", f"ALTER TABLE {table} DROP CONSTRAINT {name}")
                    if key not in want:
                        # Before the table's column changes: a NOT NULL dropped under the
                        # primary key it kept is refused while that key stands.
                        self.extra_deps.setdefault(f"table:{table}", set()).add(f"constraint:{key}")
        return kept

    def left_checks(self) -> dict[tuple[str, str], str]:
        """Checks a child of plain inheritance has from a parent it leaves (``NO
        INHERIT``) and from no parent it keeps: the server makes them the child's own
        (``conislocal``), so they stay after it. Keyed (table, name): kept where the
        desired has the same check of that name on the child, else dropped after the
        ``NO INHERIT`` (left there, every plan after it dropped it again)."""
        out: dict[tuple[str, str], str] = {}
        cur, want = self.pair("table")
        for table in sorted(cur.keys() & want.keys()):
            was, now = cur[table].get("inherits", []), want[table].get("inherits", [])
            if not any(p not in now for p in was):
                continue
            staying: set[str] = set()
            for parent in (p for p in was if p in now):
                staying |= set(cur.get(parent, {}).get("_clones", {}))
                staying |= {
                    c["name"]
                    for c in self.cur.get("constraint", {}).values()
                    if c["table"] == parent and c["type"] == "c"
                }
            for name, definition in sorted(cur[table].get("_clones", {}).items()):
                if definition.startswith("CHECK ") and name not in staying:
                    out[(table, name)] = definition
        return out

    def constraints(self) -> None:
        cur, want = self.pair("constraint")
        kept = self.detached_constraints(want)
        for (table, name), definition in sorted(self.left_checks().items()):
            key = f"{table}.{name}"
            if key in want and want[key]["def"] == definition:
                kept.add(key)
                continue
            self.create(f"constraint:{key}", f"ALTER TABLE {table} DROP CONSTRAINT {name}")
        for key in sorted(cur.keys()):
            c = cur[key]
            node = f"constraint:{key}"
            gone = key not in want and c["table"] in self.want.get("table", {})
            if gone and self.merged_on_attach(c["table"]).get(c["name"]) == c["def"]:
                continue  # the ATTACH makes it the copy of its parent's
            if gone and self.uninherited(c):
                # Also the parent's: the server drops it only once NO INHERIT ran.
                self.create(node, f"ALTER TABLE {c['table']} DROP CONSTRAINT {c['name']}")
            elif gone or (key in want and node in self.ch.replaced):
                self.drop(node, f"ALTER TABLE {c['table']} DROP CONSTRAINT {c['name']}")
        for key in sorted(want.keys()):
            node = f"constraint:{key}"
            if key in kept:
                continue
            table = want[key]["table"]
            if table in self.reinherited and key not in cur:
                clones = self.cur["table"][table].get("_clones", {})
                if clones.get(want[key]["name"]) == want[key]["def"]:
                    continue  # its own once the NO INHERIT ran
            if key in cur and not self.rebuilt(node):
                if self.validates(cur[key], want[key]):
                    self.validate(node, want[key])
                if key in self.ch.reoptioned:
                    was, now = cur[key]["_options"], want[key]["_options"]
                    self.index_options(node, want[key], was, now)
                continue
            self.add_constraint(node, want[key])
            c = want[key]
            if c.get("clustered"):
                self.create(node, f"ALTER TABLE {c['table']} CLUSTER ON {c['name']}")
        for key in sorted(cur.keys() & want.keys()):
            node = f"constraint:{key}"
            if (
                cur[key].get("clustered")
                and not want[key].get("clustered")
                and not self.rebuilt(node)
            ):
                self.create(node, f"ALTER TABLE {want[key]['table']} SET WITHOUT CLUSTER")

    def reoptions(self, old: dict[str, Any], new: dict[str, Any]) -> bool:
        """Only the storage parameters of a constraint's index change (not on a
        partitioned table: the server sets none on a partitioned index)."""
        table = self.want.get("table", {}).get(new["table"], {})
        return (
            "_bare" in old
            and "_bare" in new
            and old["_bare"] == new["_bare"]
            and old.get("clustered") == new.get("clustered")
            and not table.get("partitionBy")
            and self.existing_table(new["table"])
        )

    def index_options(self, node: str, c: dict[str, Any], was: list[str], now: list[str]) -> None:
        """``ALTER INDEX ... RESET`` what goes, ``SET`` what comes or changes, in the desired
        file's order (the index then lists them as a direct load does)."""
        at = f"ALTER INDEX {c['table'].split('.', 1)[0]}.{c['name']}"
        gone, changed = storage_option_steps(was, now)
        if gone:
            self.create(node, f"{at} RESET ({', '.join(gone)})")
        if changed:
            pairs = (o.split("=", 1) for o in changed)
            self.create(node, f"{at} SET ({', '.join(f'{k}={_lit(v)}' for k, v in pairs)})")

    def uninherited(self, c: dict[str, Any]) -> bool:
        """A child's own check that its parent has too (merged), on a table that leaves
        that parent."""
        old = self.cur["table"].get(c["table"], {})
        new = self.want["table"].get(c["table"], {})
        return any(
            f"{parent}.{c['name']}" in self.cur.get("constraint", {})
            for parent in old.get("inherits", [])
            if parent not in new.get("inherits", []) or c["table"] in self.reinherited
        )

    def validate(self, node: str, c: dict[str, Any]) -> None:
        """``VALIDATE CONSTRAINT`` in a transaction of its own: what ran before (the ``NOT
        VALID`` add and its lock) commits first; reads and writes go on while it scans."""
        self.locking(
            node,
            f"ALTER TABLE {c['table']} VALIDATE CONSTRAINT {c['name']}",
            SHARE_UPDATE_EXCLUSIVE,
            SCANS_TABLE,
            DATA_DEPENDENT,
            transaction=NEW,
        )

    def validates(self, old: dict[str, Any], new: dict[str, Any]) -> bool:
        """The target has the constraint ``NOT VALID`` (an online add stopped before its
        validation, or one added so by hand) and the desired has it validated: under
        online constraints it is validated in place, not dropped and added again."""
        return bool(
            self.online.constraints
            and old["type"] in ("f", "c")
            and old["def"] != new["def"]
            and same({**old, "def": old["def"].removesuffix(" NOT VALID")}, new)
        )

    def add_constraint(self, node: str, c: dict[str, Any]) -> None:
        """A new constraint; on an existing table with its lock named, and a foreign key
        or check under online constraints added ``NOT VALID`` (a brief lock, no scan),
        then validated in a transaction of its own (reads and writes go on)."""
        sql = f"ALTER TABLE {c['table']} ADD CONSTRAINT {c['name']} {_written(c)}"
        kind = c["type"]
        if not self.existing_table(c["table"]):
            ref = c["def"].split(" REFERENCES ", 1)[-1].split("(", 1)[0].strip()
            if kind == "f" and self.existing_table(ref):
                # The new table is empty: nothing to scan, a brief lock on the referenced one.
                self.locking(node, sql, SHARE_ROW_EXCLUSIVE, BRIEF)
            else:
                self.create(node, sql)
            return
        if kind not in ("f", "c"):  # primary key, unique, exclusion: an index is built
            columns = pgonline.unique_columns(c["def"]) if kind == "u" else None
            fresh = _name(node) not in self.cur.get("constraint", {})
            if columns and fresh and self.online.indexes and self.plain_table(c["table"]):
                # Its index built concurrently first; the constraint then only adopts it.
                index = f"CREATE UNIQUE INDEX {c['name']} ON {c['table']} USING btree {columns}"
                self.emit(node, pgonline.build_index(index, unique=True))
                self.locking(
                    node,
                    f"{sql.removesuffix(_written(c))}UNIQUE USING INDEX {c['name']}",
                    ACCESS_EXCLUSIVE,
                    BRIEF,
                )
                return
            self.locking(node, sql, ACCESS_EXCLUSIVE, BUILDS_INDEX, DATA_DEPENDENT, LOCK_HEAVY)
            return
        mode = SHARE_ROW_EXCLUSIVE if kind == "f" else ACCESS_EXCLUSIVE
        if c["def"].endswith(" NOT VALID"):
            self.locking(node, sql, mode, BRIEF)  # existing rows are not checked
        elif self.online.constraints and self.plain_table(c["table"]):
            self.locking(node, sql + " NOT VALID", mode, BRIEF)
            self.validate(node, c)
        else:
            self.locking(node, sql, mode, SCANS_TABLE, DATA_DEPENDENT, LOCK_HEAVY)

    def indexes(self) -> None:
        cur, want = self.pair("index")
        swapped: set[str] = set()
        for name in sorted(cur.keys()):
            node = f"index:{name}"
            if node in self.ch.recreated:
                continue  # went with its parent
            if cur[name].get("parent"):
                if self.with_parent_index(name):
                    continue  # dropped with its parent's index, before the DETACH
                if self.detached(cur[name]["table"]) and not self.kept_detached(name):
                    # Its own once its table is detached (in the drops): dropped after.
                    self.create(node, f"DROP INDEX {name}")
                continue  # an attached partition index goes with its parent's index
            gone = name not in want and cur[name]["table"] in self._relations(self.want)
            if not gone and not (name in want and node in self.ch.replaced):
                continue
            if self._concurrent(name, cur[name]):
                if not gone and self._swappable(node, cur[name]):
                    swapped.add(name)  # built beside it first, then swapped in
                else:
                    self.emit(node, pgonline.drop_index(name), "drop")
            else:
                self.drop(node, f"DROP INDEX {name}")
        for name in sorted(want.keys()):
            node = f"index:{name}"
            i = want[name]
            if i.get("invalid"):
                raise PlanError(_invalid_index_refusal(name, i), "Unsupported")
            if i.get("parent"):
                # Created before its parent's index, which then attaches it (keeping its
                # name); when the parent's index exists, a new partition gets one by itself.
                parent = f"index:{i['parent']}"
                if self.indexed_by_parent(i):
                    continue
                if (
                    name in cur
                    and not cur[name].get("parent")
                    and same({**cur[name], "parent": None}, {**i, "parent": None})
                ):
                    # A table's own index, the table attached: the parent's CREATE INDEX
                    # attaches it (a CREATE of it failed: it exists).
                    self.extra_deps.setdefault(parent, set()).add(f"table:{i['table']}")
                    continue
                self.extra_deps.setdefault(parent, set()).add(node)
            elif name in cur and (
                not self.rebuilt(node)
                or (self.kept_detached(name) and not self.with_parent_index(name))
            ):
                self.statistics_after_retype(name, i)
                continue
            if self._concurrent(name, i):
                self.build_concurrently(name, i, swapped)
            elif self.existing_table(i["table"]) and not self.rebuilt(f"view:{i['table']}"):
                hazards = [DATA_DEPENDENT] if i["unique"] else []
                self.locking(node, _written(i), SHARE, BUILDS_INDEX, *hazards, LOCK_HEAVY)
            else:
                self.create(node, _written(i))
            for col, target in sorted(i.get("statistics", {}).items()):
                self.create(node, f"ALTER INDEX {name} ALTER COLUMN {col} SET STATISTICS {target}")
        for name in sorted(want.keys()):
            clustered = want[name].get("clustered", False)
            was = (
                name in cur
                and cur[name].get("clustered", False)
                and not self.rebuilt(f"index:{name}")
            )
            if clustered and not was:
                index = name.split(".", 1)[1]
                self.create(
                    f"index:{name}", f"ALTER TABLE {want[name]['table']} CLUSTER ON {index}"
                )
            elif was and not clustered:
                self.create(
                    f"index:{name}", f"ALTER TABLE {want[name]['table']} SET WITHOUT CLUSTER"
                )

    def statistics_after_retype(self, name: str, index: dict[str, Any]) -> None:
        """An index the server builds again under a column whose type or collation
        changes (``ALTER COLUMN ... TYPE``) loses its columns' statistics targets: they
        are set again after the change."""
        targets = sorted(index.get("statistics", {}).items())
        node = f"index:{name}"
        if targets and any(
            node == user
            for table, col in sorted(self.ch.retyped)
            for user, _ in self.column_users(table, col)
        ):
            for col, target in targets:
                self.create(node, f"ALTER INDEX {name} ALTER COLUMN {col} SET STATISTICS {target}")

    def _concurrent(self, name: str, index: dict[str, Any]) -> bool:
        """Built or dropped ``CONCURRENTLY``: online indexes, on an ordinary table that
        exists and stays, not a partition's index attached to its parent's."""
        return (
            self.online.indexes
            and not index.get("parent")
            and self.plain_table(index["table"])
            and not self.rebuilt(f"table:{index['table']}")
        )

    def _swappable(self, node: str, old: dict[str, Any]) -> bool:
        """A valid index whose definition changed is replaced by one built beside it; an
        invalid one serves nothing (it goes first), nor does one whose dependencies are
        dropped under it, rebuilt or gone for good (a function whose signature changed),
        or one on a column whose type changes: it goes with them, in the drops."""
        if old.get("invalid"):
            return False
        if any(
            node == user
            for table, col in self.ch.retyped
            for user, _ in self.column_users(table, col)
        ):
            # On a column whose type changes: the server rebuilds it under the new type
            # by its old definition (which may no longer hold: 's = ''a''::text' on an
            # enum), so it goes before the change.
            return False
        if node in self.gone_column_users:
            return False  # the server drops it with the column, before any swap
        return not any(
            self.rebuilt(parent) or not self._in(self.want, parent)
            for parent in self.cur_deps.get(node, {})
        )

    def build_concurrently(self, name: str, index: dict[str, Any], swapped: set[str]) -> None:
        """A concurrent build; replacing a valid index: under a temporary name, then the
        old one dropped concurrently and the new one renamed, so the table is never
        without one."""
        node = f"index:{name}"
        if name not in swapped:
            self.emit(node, pgonline.build_index(_written(index), index["unique"]))
            return
        schema, bare = pgonline.split_index(name)
        temporary = pgonline.temporary_name(bare, "_ptah_swap")
        self.emit(node, pgonline.build_index(_written(index), index["unique"], temporary))
        self.emit(node, pgonline.drop_index(name))
        self.locking(
            node,
            f"ALTER INDEX {schema}.{temporary} RENAME TO {bare}",
            SHARE_UPDATE_EXCLUSIVE,
            BRIEF,
        )

    @staticmethod
    def _relations(schema: Schema) -> set[str]:
        return set(schema.get("table", {})) | set(schema.get("view", {}))

    def views(self) -> None:
        cur, want = self.pair("view")
        for name in sorted(cur.keys()):
            node = f"view:{name}"
            if node in self.ch.recreated:
                continue
            if name not in want or node in self.ch.replaced:
                kind = "MATERIALIZED VIEW" if cur[name]["materialized"] else "VIEW"
                self.drop(node, f"DROP {kind} {name}")
        for name in sorted(want.keys()):
            node = f"view:{name}"
            if name in cur and not self.rebuilt(node):
                continue
            v = want[name]
            kind = "MATERIALIZED VIEW" if v["materialized"] else "VIEW"
            opts = v.get("_reloptions") or v.get("reloptions")
            opts = f" WITH ({', '.join(opts)})" if opts else ""
            self.create(node, f"CREATE {kind} {name}{opts} AS\n{v['def'].rstrip(';')}")

    def _rebuildable_kind(self, kind: str, drop_sql: Any, create_sql: Any) -> None:
        cur, want = self.pair(kind)
        for name in sorted(cur.keys()):
            node = f"{kind}:{name}"
            if node in self.ch.recreated:
                continue
            table = cur[name].get("table")
            dropped = name not in want and (table is None or table in self._relations(self.want))
            if dropped or (name in want and node in self.ch.replaced):
                self.drop(node, drop_sql(name, cur[name]))
        for name in sorted(want.keys()):
            node = f"{kind}:{name}"
            if name in cur and not self.rebuilt(node):
                continue
            for sql in create_sql(name, want[name]):
                self.create(node, sql)

    def statistics(self) -> None:
        """Extended statistics objects: created as the server prints them, dropped and
        created again when that changes (they hold no data: ``ANALYZE`` computes them);
        their statistics target set in place."""

        def target(name: str, st: dict[str, Any]) -> str:
            return f"ALTER STATISTICS {name} SET STATISTICS {st['target']}"

        def create(name: str, st: dict[str, Any]) -> list[str]:
            return [st["def"]] + ([target(name, st)] if st["target"] >= 0 else [])

        self._rebuildable_kind("statistics", lambda n, st: f"DROP STATISTICS {n}", create)
        cur, want = self.pair("statistics")
        for name in sorted(cur.keys() & want.keys()):
            node = f"statistics:{name}"
            if not self.rebuilt(node) and cur[name]["target"] != want[name]["target"]:
                self.create(node, target(name, want[name]))

    def triggers(self) -> None:
        def create(name: str, t: dict[str, Any]) -> list[str]:
            out = [t["def"]]
            word = {"D": "DISABLE", "R": "ENABLE REPLICA", "A": "ENABLE ALWAYS"}.get(t["enabled"])
            if word:
                out.append(f"ALTER TABLE {t['table']} {word} TRIGGER {t['name']}")
            return out

        self._rebuildable_kind(
            "trigger", lambda n, t: f"DROP TRIGGER {t['name']} ON {t['table']}", create
        )

    def rules(self) -> None:
        def create(name: str, r: dict[str, Any]) -> list[str]:
            out = [r["def"]]
            word = {"D": "DISABLE", "R": "ENABLE REPLICA", "A": "ENABLE ALWAYS"}.get(r["enabled"])
            if word:
                out.append(f"ALTER TABLE {r['table']} {word} RULE {r['name']}")
            return out

        self._rebuildable_kind(
            "rule", lambda n, r: f"DROP RULE {r['name']} ON {r['table']}", create
        )

    def policies(self) -> None:
        def create(name: str, p: dict[str, Any]) -> list[str]:
            sql = f"CREATE POLICY {p['name']} ON {p['table']}"
            if not p["permissive"]:
                sql += " AS RESTRICTIVE"
            sql += f" FOR {p['command']} TO {', '.join(p['roles'])}"
            if p["using"] is not None:
                sql += f" USING ({p['using']})"
            if p["check"] is not None:
                sql += f" WITH CHECK ({p['check']})"
            return [sql]

        self._rebuildable_kind(
            "policy", lambda n, p: f"DROP POLICY {p['name']} ON {p['table']}", create
        )

    def event_triggers(self) -> None:
        def create(name: str, e: dict[str, Any]) -> list[str]:
            when = ""
            if e["tags"]:
                when = " WHEN TAG IN (" + ", ".join(_lit(t) for t in e["tags"]) + ")"
            out = [
                f"CREATE EVENT TRIGGER {name} ON {e['event']}{when}"
                f" EXECUTE FUNCTION {e['function']}()"
            ]
            word = {"D": "DISABLE", "R": "ENABLE REPLICA", "A": "ENABLE ALWAYS"}.get(e["enabled"])
            if word:
                out.append(f"ALTER EVENT TRIGGER {name} {word}")
            return out

        self._rebuildable_kind("event_trigger", lambda n, e: f"DROP EVENT TRIGGER {n}", create)

    def publications(self) -> None:
        """Publications: created (``FOR ALL TABLES`` or empty, then their tables and
        schemas added), dropped, dropped and created again when ``FOR ALL TABLES``
        changes, their options set in place. A table whose row filter or column list
        changes (or whose filter reads a column retyped, a column dropped and added
        again) is dropped from the publication and added again; the membership of a
        table or schema the plan drops, or of a publication it drops, goes with it.

        Destructive (it needs ``allowDestructive``, and an approval under the default
        policy): a publication dropped, even to be created again (its subscribers and
        change-data-capture consumers fail on it, or stop while it is gone, and a
        replication slot that cannot be read holds the server's WAL), and a table or
        schema that leaves a publication that stays and does not come back in the plan
        (its changes stop reaching the consumer), and options set so that an operation
        (insert, update, delete, truncate) is no longer published. Other options set in
        place, and a member dropped only to be added again with its new column list or
        row filter (the table is still published), are not.
        """
        cur, want = self.pair("publication")

        def options(p: dict[str, Any]) -> str:
            via = "true" if p["viaRoot"] else "false"
            return f"publish = {_lit(p['publish'])}, publish_via_partition_root = {via}"

        for name in sorted(cur.keys()):
            node = f"publication:{name}"
            if name not in want or self.rebuilt(node):
                self.drop(node, f"DROP PUBLICATION {name}", DESTRUCTIVE)
        for name in sorted(want.keys()):
            node = f"publication:{name}"
            p = want[name]
            if name not in cur or self.rebuilt(node):
                alltables = " FOR ALL TABLES" if p["allTables"] else ""
                self.create(node, f"CREATE PUBLICATION {name}{alltables} WITH ({options(p)})")
            elif options(cur[name]) != options(p):
                stops = set(cur[name]["publish"].split(", ")) - set(p["publish"].split(", "))
                self.create(
                    node,
                    f"ALTER PUBLICATION {name} SET ({options(p)})",
                    *((DESTRUCTIVE,) if stops - {""} else ()),
                )

        def fresh(pub: str) -> bool:
            return pub not in cur or self.rebuilt(f"publication:{pub}")

        tables_cur, tables_want = self.pair("pub_table")
        for key, m in sorted(tables_cur.items()):
            node = f"pub_table:{key}"
            if fresh(m["publication"]) or m["publication"] not in want:
                continue  # goes with its publication
            if m["table"] not in self.want.get("table", {}) or node in self.ch.recreated:
                continue  # goes with its table, or with a column of it
            if key not in tables_want or self.rebuilt(node):
                gone = () if key in tables_want else (DESTRUCTIVE,)
                self.drop(
                    node, f"ALTER PUBLICATION {m['publication']} DROP TABLE {m['table']}", *gone
                )
        for key, m in sorted(tables_want.items()):
            node = f"pub_table:{key}"
            if key in tables_cur and not self.rebuilt(node) and not fresh(m["publication"]):
                continue
            columns = f" ({', '.join(m['columns'])})" if m["columns"] else ""
            where = f" WHERE ({m['where']})" if m["where"] is not None else ""
            self.create(
                node,
                f"ALTER PUBLICATION {m['publication']} ADD TABLE {m['table']}{columns}{where}",
            )
        schemas_cur, schemas_want = self.pair("pub_schema")
        for key, m in sorted(schemas_cur.items()):
            if key in schemas_want or fresh(m["publication"]) or m["publication"] not in want:
                continue
            if m["schema"] in self.want.get("schema", {}) or m["schema"] == "public":
                self.drop(
                    f"pub_schema:{key}",
                    f"ALTER PUBLICATION {m['publication']} DROP TABLES IN SCHEMA {m['schema']}",
                    DESTRUCTIVE,
                )
        for key, m in sorted(schemas_want.items()):
            if key in schemas_cur and not fresh(m["publication"]):
                continue
            self.create(
                f"pub_schema:{key}",
                f"ALTER PUBLICATION {m['publication']} ADD TABLES IN SCHEMA {m['schema']}",
            )

    # -- comments and privileges ----------------------------------------------------------
    def _gone(self, node: str) -> bool:
        kind, name = node.split(":", 1)
        return name not in self.want.get(kind, {})

    def comments(self) -> None:
        cur, want = self.pair("comment")
        # What the extensions the plan creates comment by themselves (their control
        # file, their script): there once they are, neither set again nor left behind.
        script: dict[str, dict[str, Any]] = {
            key: {"node": f"extension:{ext}", "text": text, "member": True}
            for ext, texts in self.want.get("_scriptComments", {}).items()
            if not self._in(self.cur, f"extension:{ext}")
            for key, text in texts.items()
        }
        for key in sorted(cur.keys() | want.keys() | script.keys()):
            c = want.get(key) or cur.get(key) or script[key]
            text = want[key]["text"] if key in want else None
            was = cur[key]["text"] if key in cur else None
            node = c["node"]
            fresh = self.rebuilt(node) or not self._in(self.cur, node)
            if c.get("member"):
                # On an extension's member: new with the extension (plpgsql's, an
                # extension of every database that the plan leaves out, is not).
                fresh = self._in(self.want, node) and not self._in(self.cur, node)
            if fresh or self._column_readded(key, c) or self._domain_check_readded(key, c):
                was = script[key]["text"] if key in script else None
            if text == was:
                continue
            if text is None and (self._gone(node) or self._column_gone(key, c)):
                continue
            value = _lit(text) if text is not None else "NULL"
            cnode = f"comment:{key}"
            self.extra_deps[cnode] = {node} if self._in(self.want, node) else set()
            self.create(cnode, f"COMMENT ON {key} IS {value}")

    def _column_gone(self, key: str, c: dict[str, Any]) -> bool:
        if not key.startswith("COLUMN ") or not c["node"].startswith("table:"):
            return False
        table = _name(c["node"])
        col = key[len("COLUMN ") + len(table) + 1 :]
        return col not in self.want.get("table", {}).get(table, {}).get("columns", {})

    def _domain_check_readded(self, key: str, c: dict[str, Any]) -> bool:
        """A comment on a domain's check that changes (or uses a function dropped and
        created again): dropped and added again (domains()), its comment goes with it."""
        if not c["node"].startswith("domain:") or not key.startswith("CONSTRAINT "):
            return False
        check = key[len("CONSTRAINT ") :].split(" ON DOMAIN ", 1)[0]
        old = self.cur.get("domain", {}).get(_name(c["node"]), {}).get("checks", {})
        new = self.want.get("domain", {}).get(_name(c["node"]), {}).get("checks", {})
        if check in self.ch.rechecked.get(_name(c["node"]), set()):
            return True
        return check in old and check in new and old[check] != new[check]

    def _column_readded(self, key: str, c: dict[str, Any]) -> bool:
        """A comment on a column dropped and added again (gone with it)."""
        if not key.startswith("COLUMN ") or not c["node"].startswith("table:"):
            return False
        table = _name(c["node"])
        return (table, key[len("COLUMN ") + len(table) + 1 :]) in self.ch.readded

    def acls(self) -> None:
        cur, want = self.pair("acl")
        nodes = set(cur) | set(want)
        for kind in ("function", "domain", "enum", "ctype", "range"):
            # Created with defaults (EXECUTE or USAGE to PUBLIC) that the desired may revoke.
            nodes |= {f"{kind}:{name}" for name in self.want.get(kind, {})}
        for kind in _DEFAULT_ACL_TYPES:
            # Created (or created again) under the target's default privileges.
            nodes |= {
                node
                for name in self.want.get(kind, {})
                if (node := f"{kind}:{name}") not in nodes
                and (self.rebuilt(node) or not self._in(self.cur, node))
                and self.initial_acl(node)
            }
        for node in sorted(nodes):
            a = want.get(node) or cur.get(node) or {"on": self._acl_target(node)}
            if node not in want and self._gone(node):
                continue
            fresh = self.rebuilt(node) or not self._in(self.cur, node)
            old = set(self.initial_acl(node) if fresh else cur.get(node, {}).get("entries", []))
            if node.startswith("table:"):
                # A column's grants go with it when it is dropped (and added again).
                table = _name(node)
                gone = self.ch.readded | {
                    (table, col)
                    for col in self.cur["table"].get(table, {}).get("columns", {})
                    if col not in self.want["table"].get(table, {}).get("columns", {})
                }
                old = {e for e in old if not _column_entry_of(e, table, gone)}
            new = set(want.get(node, {}).get("entries", []))
            if old == new:
                continue
            anode = f"acl:{node}"
            self.extra_deps[anode] = {node}
            for grantee, privs, _ in _group(old - new):
                self.create(anode, f"REVOKE {privs} ON {a['on']} FROM {grantee}")
            grants = _group((new - old) | _column_regrants(old, new))
            for grantee, privs, grantable in _in_order(grants, want.get(node, {}).get("_order")):
                option = " WITH GRANT OPTION" if grantable else ""
                self.create(anode, f"GRANT {privs} ON {a['on']} TO {grantee}{option}")

    def identity_acls(self) -> None:
        """Grants and comments on identity columns' sequences (``GRANT ... ON ALL
        SEQUENCES`` reaches them): a sequence the plan creates (a new table or identity,
        one added again) starts with the target's default privileges for sequences, and
        no comment."""
        for table, t in sorted(self.want.get("table", {}).items()):
            for col, c in sorted(t["columns"].items()):
                seq = c.get("identitySequence") or {}
                if not seq or c.get("_inherited"):
                    continue
                was = self.cur.get("table", {}).get(table, {}).get("columns", {}).get(col, {})
                old_seq = was.get("identitySequence") or {}
                kept = (
                    old_seq.get("name") == seq["name"]
                    and not self.rebuilt(f"table:{table}")
                    and (table, col) not in self.ch.readded
                )
                old = (
                    set(old_seq.get("acl", []))
                    if kept
                    else self.initial_acl(f"sequence:{seq['name']}")
                )
                if (old_seq.get("type") if kept else None) != seq.get("type"):
                    self.identity_type(table, col, c)
                said = old_seq.get("comment") if kept else None
                if said != seq.get("comment"):
                    cnode = f"comment:identity:{table}.{col}"
                    self.extra_deps[cnode] = {f"table:{table}"}
                    text = seq.get("comment")
                    value = _lit(text) if text is not None else "NULL"
                    self.create(cnode, f"COMMENT ON SEQUENCE {seq['name']} IS {value}")
                new = set(seq.get("acl", []))
                if old == new:
                    continue
                anode = f"acl:identity:{table}.{col}"
                self.extra_deps[anode] = {f"table:{table}"}
                for grantee, privs, _ in _group(old - new):
                    self.create(anode, f"REVOKE {privs} ON SEQUENCE {seq['name']} FROM {grantee}")
                for grantee, privs, grantable in _in_order(_group(new - old), seq.get("_order")):
                    option = " WITH GRANT OPTION" if grantable else ""
                    self.create(
                        anode, f"GRANT {privs} ON SEQUENCE {seq['name']} TO {grantee}{option}"
                    )

    def identity_type(self, table: str, col: str, c: dict[str, Any]) -> None:
        """An identity's sequence of another type than its column's (``LIKE ... INCLUDING
        IDENTITY`` makes one ``bigint``): no identity clause says the type (the server
        takes the column's), so it is set after, with the bounds the desired has (``AS``
        alone moves a bound that was the old type's own to the new type's)."""
        seq = c["identitySequence"]
        node = f"identity:{table}.{col}"
        self.extra_deps[node] = {f"table:{table}"}
        self.create(
            node,
            f"ALTER SEQUENCE {seq['name']} AS {seq.get('type') or c['type']}"
            f" MINVALUE {seq['min']} MAXVALUE {seq['max']}",
        )

    def initial_acl(self, node: str) -> set[str]:
        """What an object the plan creates is granted (besides its owner): the target's
        default privileges for the plan's role (``ALTER DEFAULT PRIVILEGES``, which the
        plan changes after its creates: they are its last statements but the owners'),
        the built-in ones where no global entry replaces them, and its schema's added.
        An object created again (a view rebuilt under a type change) took the target's
        default grants, and the plan, which compared with the built-in ones, did not
        revoke them: the apply did not converge."""
        kind, name = node.split(":", 1)
        out = set(_default_acl(node))
        objtype = _DEFAULT_ACL_TYPES.get(kind)
        if objtype is None:
            return out
        defaults = self.cur.get("default_acl", {})
        if (glob := defaults.get(f"||{objtype}")) is not None:
            out = set(glob["entries"])
        if kind != "schema" and (here := defaults.get(f"|{name.split('.', 1)[0]}|{objtype}")):
            out |= set(here["entries"])
        return out

    def _acl_target(self, node: str) -> str:
        kind, name = node.split(":", 1)
        if kind in ("table", "view"):
            return f"TABLE {name}"
        if kind in ("sequence", "schema"):
            return f"{kind.upper()} {name}"
        if kind == "function":
            return (
                "PROCEDURE " if self.want["function"][name]["kind"] == "p" else "FUNCTION "
            ) + name
        return ("DOMAIN " if kind == "domain" else "TYPE ") + name

    def owners(self) -> None:
        """Under ``spec.policy.ownership: manage``, objects get the owners the file gives."""
        if self.want.get("_meta", {}).get("ownership") != "manage":
            return
        cur_owners: dict[str, str] = self.cur.get("_owners", {})
        applier = self.cur.get("_meta", {}).get("role", "")
        for node, owner in sorted(self.want.get("_owners", {}).items()):
            kind, name = node.split(":", 1)
            fresh = self.rebuilt(node) or not self._in(self.cur, node)
            was = applier if fresh else cur_owners.get(node, applier)
            if owner == was:
                continue
            if kind == "view":
                word = "MATERIALIZED VIEW" if self.want["view"][name]["materialized"] else "VIEW"
            elif kind == "function":
                fkind = self.want["function"][name]["kind"]
                word = {"p": "PROCEDURE", "a": "AGGREGATE"}.get(fkind, "FUNCTION")
            else:
                word = _OWNER_WORDS.get(kind, "")
            if word:
                onode = f"owner:{node}"
                self.extra_deps[onode] = {node}
                self.create(onode, f"ALTER {word} {name} OWNER TO {owner}")

    def default_acls(self) -> None:
        cur, want = self.pair("default_acl")
        for key in sorted(cur.keys() | want.keys()):
            d = want.get(key) or cur[key]
            base = _default_acl_baseline(d)
            old = set(cur[key]["entries"]) if key in cur else base
            new = set(want[key]["entries"]) if key in want else base
            if old == new:
                continue
            if key not in want and d["schema"] and not self._in(self.want, f"schema:{d['schema']}"):
                continue  # DROP SCHEMA takes the default privileges set in it
            node = f"default_acl:{key}"
            if d["schema"]:
                self.extra_deps[node] = {f"schema:{d['schema']}"}
            for sql in _default_acl_sql(d, old, new):
                self.create(node, sql)


_OWNER_WORDS = {
    "table": "TABLE",
    "sequence": "SEQUENCE",
    "enum": "TYPE",
    "ctype": "TYPE",
    "range": "TYPE",
    "domain": "DOMAIN",
    "schema": "SCHEMA",
    "collation": "COLLATION",
    "event_trigger": "EVENT TRIGGER",
    "statistics": "STATISTICS",
    "ts_dict": "TEXT SEARCH DICTIONARY",
    "ts_config": "TEXT SEARCH CONFIGURATION",
    "publication": "PUBLICATION",
}


def _written(index: dict[str, Any]) -> str:
    """An index's (or a constraint's) definition as the desired file wrote it: its
    storage parameters in that order, as a direct load keeps them."""
    return str(index.get("_def") or index["def"])


def _merge(child: dict[str, Any], pold: dict[str, Any], pnew: dict[str, Any]) -> dict[str, Any]:
    """A partition's column as it will be once its parent's column changed."""
    out = dict(child)
    for key in ("type", "collation"):
        out[key] = pnew[key]
    if pold["notNull"] != pnew["notNull"]:
        # The parent's SET or DROP NOT NULL reaches it; unchanged, the partition keeps a
        # NOT NULL of its own (else it was planned again on every plan).
        out["notNull"] = pnew["notNull"]
    if child["default"] == pold["default"]:
        out["default"] = pnew["default"]
    if pold["type"] != pnew["type"]:
        # The parent's ALTER COLUMN ... TYPE reaches the partition and resets its storage
        # and compression to the new type's; the parent's SET COMPRESSION does not reach
        # it, so they are set again on the partition as the desired has them.
        out["storage"], out["compression"] = None, None
    return out


def _refuse_partition_key_change(
    table: str, t: dict[str, Any], col: str, old: dict[str, Any], new: dict[str, Any]
) -> None:
    """A column of a partitioned table's key whose type or collation changes: the server
    refuses ``ALTER COLUMN ... TYPE`` on it (cannot alter column ... because it is part of
    the partition key), after the plan had detached the partitions; the plan says so."""
    if col not in t.get("_partitionColumns", []):
        return
    was = old["type"] + (f" COLLATE {old['collation']}" if old["collation"] else "")
    now = new["type"] + (f" COLLATE {new['collation']}" if new["collation"] else "")
    raise PlanError(
        f"table {table}: column {col} changes from {was} to {now}, and it is in the"
        f" partition key ({t['partitionBy']}); PostgreSQL cannot change a partition key"
        " column's type or collation: create a new table and move the rows in a versioned"
        " migration",
        "Unsupported",
    )


def _invalid_index_refusal(name: str, index: dict[str, Any]) -> str:
    """Why a desired index the server holds invalid is not planned. A loaded file leaves
    one only as ``CREATE INDEX ... ON ONLY`` a partitioned table with a partition whose
    index is not attached: a plain CREATE INDEX would make it valid (and index every
    partition), so the plan would never converge."""
    return (
        f"index {name} on {index['table']} is invalid in the desired schema: created ON ONLY"
        " a partitioned table without an index attached for every partition (ALTER INDEX"
        " ... ATTACH PARTITION); Ptah plans valid indexes only: attach one for each"
        " partition or create the index without ONLY"
    )


def _inherited_base(parents: list[dict[str, Any]], col: str) -> dict[str, Any] | None:
    """An inherited column as ``CREATE TABLE ... INHERITS`` gives it to the child: its
    parents' NOT NULL (any of them), default, storage and compression (the first parent
    with one; parents that disagree make the server refuse unless the child names the
    column itself). The child's own default or NOT NULL are set after it (without them the
    child had its parents' and the plan never converged). None: no parent has it."""
    found = [p["columns"][col] for p in parents if col in p.get("columns", {})]
    if not found:
        return None

    def first(key: str) -> Any:
        return next((c[key] for c in found if c.get(key) is not None), None)

    return {
        "type": found[0]["type"],
        "notNull": any(c["notNull"] for c in found),
        "default": first("default"),
        "storage": first("storage"),
        "compression": first("compression"),
        "statistics": next((c["statistics"] for c in found if "statistics" in c), -1),
    }


def _merge_inherited(
    child: dict[str, Any], pold: dict[str, Any], pnew: dict[str, Any]
) -> dict[str, Any]:
    """An inheriting child's column as it will be once its parents' column changed: the
    parent's ALTER COLUMN (default, NOT NULL, type, storage, statistics) reaches it, all but SET
    COMPRESSION; a type change resets its storage and compression to the new type's."""
    out = dict(child)
    for key in ("default", "notNull", "storage"):
        if pold.get(key) != pnew.get(key):
            out[key] = pnew.get(key)
    if pold.get("statistics", -1) != pnew.get("statistics", -1):
        out["statistics"] = pnew.get("statistics", -1)
    if pold["type"] != pnew["type"]:
        out["storage"], out["compression"] = None, None
    return out


def _commit_enum_values(statements: list[Statement]) -> list[Statement]:
    """The statement after a run of ``ALTER TYPE ... ADD VALUE`` starts a new transaction:
    the server refuses a value added in a transaction that has not committed yet (a
    default, a check, an index predicate or a view naming it: UnsafeNewEnumValueUsage)."""
    out: list[Statement] = []
    for stmt in statements:
        if out and _adds_value(out[-1]) and not _adds_value(stmt) and stmt.transaction == SHARED:
            stmt = replace(stmt, transaction=NEW)
        out.append(stmt)
    return out


def _adds_value(stmt: Statement) -> bool:
    return stmt.sql.startswith("ALTER TYPE ") and " ADD VALUE " in stmt.sql


def _assignable(
    src: str,
    dst: str,
    src_types: dict[str, list[Any]],
    dst_types: dict[str, list[Any]],
    casts: set[tuple[str, str]],
) -> bool:
    """Whether the server converts a ``src`` value to ``dst`` by assignment (PostgreSQL's
    ``find_coercion_pathway`` under ``COERCION_ASSIGNMENT``): both taken to their domains'
    base types; the same type; an implicit or assignment cast; arrays whose elements
    convert; or any type to a string type (through its text form). A type not read on
    either side is left to the server (``True``). ``src`` is read in the target's types
    first, ``dst`` in the desired's (a name may stand for another type on each side)."""
    for _ in range(64):  # a domain over a domain over ...
        base = (src_types.get(src) or [None, None])[1]
        if not base:
            break
        src = base
    for _ in range(64):
        base = (dst_types.get(dst) or [None, None])[1]
        if not base:
            break
        dst = base
    if src == dst or (src, dst) in casts:
        return True
    s, d = src_types.get(src), dst_types.get(dst)
    if s is None or d is None:
        return True
    arrays = bool(s[2] and d[2]) and dst not in ("oidvector", "int2vector")
    if arrays and _assignable(s[2], d[2], src_types, dst_types, casts):
        return True
    return bool(d[0] == "S")


def _attributes_dropped_or_altered(old: list[list[str]], new: list[list[str]]) -> bool:
    """Whether a composite type's change in place drops an attribute or changes one's
    type or collation: what moves the positions, or the types, that stored expressions
    building the type were parsed against."""
    now = {a[0]: a for a in new}
    return any(a[0] not in now or now[a[0]] != a for a in old)


def _attributes_in_place(old: list[list[str]], new: list[list[str]]) -> bool:
    """Whether a composite type's attributes reach the desired order in place: the kept
    ones in their old order, every new one after them (``ADD ATTRIBUTE`` appends)."""
    was = [a[0] for a in old]
    now = [a[0] for a in new]
    kept = [a for a in now if a in was]
    return kept == [a for a in was if a in now] and now[: len(kept)] == kept


def _stored_type(domains: dict[str, Any], typ: str) -> str:
    """The type a column of ``typ`` stores its values as: a domain's (over domains) base
    type, an array of a domain an array of that base type (``format_type`` spellings,
    as ``_narrows`` reads them)."""
    array = typ.endswith("[]")
    typ = typ.removesuffix("[]")
    seen: set[str] = set()
    while typ in domains and typ not in seen:
        seen.add(typ)
        typ = domains[typ]["type"]
        array = array or typ.endswith("[]")
        typ = typ.removesuffix("[]")
    return typ + ("[]" if array else "")


_TYPE = re.compile(
    r"\A(?P<name>[a-z ]+?)(?:\((?P<mods>[0-9, ]+)\))?(?P<zone> with(?:out)? time zone)?\Z"
)
_INTEGERS = {"smallint", "integer", "bigint"}
_TIMES = {"timestamp", "time", "interval"}


def _narrows(old: str, new: str) -> str | None:
    """What a column's values lose without an error when ``ALTER COLUMN ... TYPE`` takes
    them from the ``old`` type to the ``new`` one by the server's assignment cast
    (``format_type`` spellings, a domain read as the type it stores): digits rounded
    away (a smaller numeric scale, a float or numeric made an integer or a float, a float
    made a numeric, a numeric made money), time cut off (a date from a timestamp, a time
    of day from an interval, a smaller seconds precision) or read in the session's time
    zone, a string cut to its first byte (``"char"``). ``None`` where the server
    keeps every value or fails on one that does not fit (a shorter ``varchar``, a
    smaller integer): the apply then rolls back, nothing lost."""
    if old.endswith("[]") != new.endswith("[]"):
        return None
    if new.removesuffix("[]") == '"char"' and old.removesuffix("[]") != '"char"':
        return "all but the first byte is cut off"
    a, b = _TYPE.match(old.removesuffix("[]")), _TYPE.match(new.removesuffix("[]"))
    if a is None or b is None:
        return None
    src, dst = a["name"], b["name"]
    smods, dmods = (a["mods"] or "").split(","), (b["mods"] or "").split(",")
    if dst == "numeric" and src in ("real", "double precision"):
        # float8_numeric and float4_numeric print 15 (6) significant digits, whatever
        # the scale: 0.1 + 0.2 is 0.3 as numeric.
        return "digits past a float's printed precision are rounded away"
    if dst == "numeric" and b["mods"]:
        scale = int(dmods[1]) if len(dmods) > 1 else 0
        if src == "numeric" and (not a["mods"] or (int(smods[1]) if len(smods) > 1 else 0) > scale):
            return "digits past the new scale are rounded away"
        if src == "money" and scale < 2:
            return "cents are rounded away"
    if dst == "money" and src == "numeric":
        return "digits past the currency's fraction are rounded away"
    if dst == "time" and src.startswith("interval"):
        return "days, months and years are cut off"
    if dst in _INTEGERS and (
        src in ("real", "double precision")
        or (src == "numeric" and (not a["mods"] or (len(smods) > 1 and int(smods[1]) > 0)))
    ):
        return "fractions are rounded away"
    if dst == "real" and src in ("double precision", "numeric", "integer", "bigint"):
        return "digits past a real's precision are rounded away"
    if dst == "double precision" and src in ("numeric", "bigint"):
        return "digits past a double's precision are rounded away"
    if (src, dst) == ("json", "jsonb"):
        return "duplicate keys are dropped, keys and spaces rewritten"
    if dst == "name" and src in ("text", "character varying", "character"):
        return "what lies past 63 bytes is cut off"
    if (src, dst) == ("inet", "cidr"):
        return "host bits are cut off"
    if dst == "date" and src == "timestamp":
        return "the time of day is cut off"
    if dst == "time" and src == "timestamp":
        return "the date is cut off"
    if src.startswith("interval") and dst.startswith("interval"):
        # An interval's fields (INTERVAL DAY, HOUR TO MINUTE): the server truncates what
        # lies below the last one, seconds are kept to the precision.
        fields = ("year", "month", "day", "hour", "minute", "second")
        was_last, now_last = (src.split()[-1], dst.split()[-1])
        was_at = fields.index(was_last) if was_last in fields else len(fields) - 1
        now_at = fields.index(now_last) if now_last in fields else len(fields) - 1
        if now_at < was_at:
            return f"what lies below the {fields[now_at]}s is cut off"
        if now_at == len(fields) - 1 and was_at == now_at:
            was = int(a["mods"]) if a["mods"] else 6
            now = int(b["mods"]) if b["mods"] else 6
            if now < was:
                return "fractions of a second are rounded away"
        return None
    if src == dst and src in _TIMES:
        if a["zone"] != b["zone"] and src in ("timestamp", "time"):
            return "values are read again in the session's time zone"
        was = int(a["mods"]) if a["mods"] else 6
        now = int(b["mods"]) if b["mods"] else 6
        if now < was:
            return "fractions of a second are rounded away"
    return None


def _enum_refusal(name: str, old: list[str], new: list[str]) -> str:
    """Why an enum change is refused, naming the values; where values stand in place of
    others (same count, same places), the rename a versioned migration would run: a plan
    never takes a removal and an addition for a rename (the rows would change meaning)."""
    gone = [v for v in old if v not in new]
    what = f"removes {', '.join(_lit(v) for v in gone)}" if gone else "reorders its values"
    out = (
        f"enum {name} removes or reorders values ({what}); PostgreSQL cannot remove or"
        " reorder an enum's values in place"
    )
    renames = [(o, n) for o, n in zip(old, new, strict=False) if o != n]
    if gone and len(old) == len(new) and all(o in gone and n not in old for o, n in renames):
        pairs = ", ".join(f"RENAME VALUE {_lit(o)} TO {_lit(n)}" for o, n in renames)
        out += (
            f": if they are renamed, run ALTER TYPE {name} {pairs} in a versioned migration,"
            " then plan again"
        )
    else:
        out += ": create a new type and move the columns in a versioned migration"
    return out


def _readded(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """A column that becomes generated, or whose generation expression changes: the
    server (before PostgreSQL 17's SET EXPRESSION) changes neither in place, so the
    column is dropped and added again (at the table's end)."""
    return bool(new["generated"]) and (
        old["generated"] != new["generated"] or old["default"] != new["default"]
    )


def _replaceable(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """CREATE OR REPLACE can take ``old`` to ``new`` (same kind, result, names, defaults,
    and the same OUT argument types: the row type of a ``RETURNS record``)."""
    return bool(
        old["kind"] == new["kind"]
        and old["kind"] != "a"
        and old["result"] == new["result"]
        and old["_argnames"] == new["_argnames"]
        and old.get("_outTypes") == new.get("_outTypes")
        and new["_defaults"] >= old["_defaults"]
    )


# The kinds ALTER DEFAULT PRIVILEGES reaches, by pg_default_acl.defaclobjtype.
_DEFAULT_ACL_TYPES = {
    "table": "r",
    "view": "r",
    "sequence": "S",
    "function": "f",
    "domain": "T",
    "enum": "T",
    "ctype": "T",
    "range": "T",
    "schema": "n",
}


def _default_acl(node: str) -> list[str]:
    """What an object of this kind grants when just created (besides its owner)."""
    if node.startswith("function:"):
        return ["PUBLIC|EXECUTE|"]
    if node.split(":", 1)[0] in ("domain", "enum", "ctype", "range"):
        return ["PUBLIC|USAGE|"]
    return []


def _default_acl_sql(d: dict[str, Any], old: set[str], new: set[str]) -> list[str]:
    """``ALTER DEFAULT PRIVILEGES`` statements taking one entry of pg_default_acl (a role,
    a schema, a kind of object) from the privileges ``old`` to ``new``."""
    head = "ALTER DEFAULT PRIVILEGES"
    if d["role"]:
        head += f" FOR ROLE {d['role']}"
    if d["schema"]:
        head += f" IN SCHEMA {d['schema']}"
    what = {"r": "TABLES", "S": "SEQUENCES", "f": "FUNCTIONS", "T": "TYPES", "n": "SCHEMAS"}[
        d["objtype"]
    ]
    out = [
        f"{head} REVOKE {privs} ON {what} FROM {grantee}" for grantee, privs, _ in _group(old - new)
    ]
    for grantee, privs, grantable in _group(new - old):
        option = " WITH GRANT OPTION" if grantable else ""
        out.append(f"{head} GRANT {privs} ON {what} TO {grantee}{option}")
    return out


def _default_acl_baseline(d: dict[str, Any]) -> set[str]:
    if d["schema"]:
        return set()
    return {"f": {"PUBLIC|EXECUTE|"}, "T": {"PUBLIC|USAGE|"}}.get(d["objtype"], set())


def _column_entry_of(entry: str, table: str, columns: set[tuple[str, str]]) -> bool:
    """Whether a privilege entry (``grantee|SELECT(col)|g``) is on one of ``columns``."""
    priv = entry.split("|")[1]
    return "(" in priv and (table, priv.split("(", 1)[1].removesuffix(")")) in columns


def _column_regrants(old: set[str], new: set[str]) -> set[str]:
    """Column grants that stay, of a privilege whose table-wide grant is revoked: the
    server's ``REVOKE SELECT ON TABLE`` takes each ``SELECT (column)`` with it."""
    revoked = set()
    for entry in old - new:
        grantee, priv, _ = entry.split("|")
        if "(" not in priv:
            revoked.add((grantee, priv))
    out = set()
    for entry in old & new:
        grantee, priv, _ = entry.split("|")
        if "(" in priv and (grantee, priv.split("(", 1)[0]) in revoked:
            out.add(entry)
    return out


def _group(entries: set[str]) -> list[tuple[str, str, bool]]:
    """Entries grouped per grantee and grant option: (grantee, 'SELECT, UPDATE (c)', option)."""
    grouped: dict[tuple[str, bool], list[str]] = {}
    for entry in entries:
        grantee, priv, grantable = entry.split("|")
        grouped.setdefault((grantee, grantable == "g"), []).append(
            priv.replace("(", " (", 1) if "(" in priv else priv
        )
    return [(g, ", ".join(sorted(p)), opt) for (g, opt), p in sorted(grouped.items())]


def _in_order(
    grants: list[tuple[str, str, bool]], order: list[str] | None
) -> list[tuple[str, str, bool]]:
    """Grants in the order the desired object's ACL holds their grantees: the server
    appends a new grantee's entry at the end, and pg_dump prints the entries in that
    order, so granting by name left an object whose dump differed from the desired
    file's (``GRANT ... TO writer; GRANT ... TO reader``). Grantees it does not name
    (none in practice) come last, by name."""
    if not order:
        return grants
    rank = {grantee: i for i, grantee in enumerate(order)}
    return sorted(grants, key=lambda g: rank.get(g[0], len(rank)))


def caveats(current: Schema, desired: Schema, online: Online | None = None) -> list[str]:
    """What the plan of ``diff`` leaves different from a direct load of the desired file,
    said as warnings: the columns' order (:meth:`_Diff.column_order`)."""
    d = _Diff(current, desired, online)
    d.decide()
    d.spread()
    return d.column_order()


def diff(current: Schema, desired: Schema, online: Online | None = None) -> list[Statement]:
    """Statements that turn ``current`` into ``desired``, in executable order; changes on
    existing tables done online where ``online`` (default: all techniques) says."""
    return _Diff(current, desired, online).run()
