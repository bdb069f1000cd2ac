"""Managed objects ``spec.policy.ignore`` hands to someone else: split out of a schema.

A change-data-capture tool (Debezium's ``dbz_publication``), a logical replication
set-up or an extension's installer makes and edits objects of kinds Ptah manages. Listed
in ``spec.policy.ignore`` (a kind, or a kind and a name, ``publication dbz_*``), they
are taken out of the inspected schema before the diff, so the plan never drops, alters
or counts them as drift; the planner (:func:`ptah.engines.planner.plan`) reports them,
refuses a desired source that creates one, and expects them unchanged after apply.

What goes with an object goes with it: everything that depends on it automatically
(the server drops it with the object: a publication's tables, a table's indexes,
constraints, triggers and serial sequences) and everything in an ignored schema, and their comments,
privileges and owners. What an ignored object uses stays managed, but the plan never
drops it, rebuilds it, or drops or retypes a column of it from under the ignored object
(``_meta.heldBy``, ``_meta.ignored``; :meth:`ptah.engines.postgres.diff._Diff.check_held`),
as for an object Ptah does not manage at all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ptah.engines.model import Schema

# Each managed kind as the census (``pg_identify_object``) names its objects, so one
# entry of spec.policy.ignore says the same of a managed kind and an unmanaged one.
_WORDS = {
    "extension": "extension",
    "schema": "schema",
    "collation": "collation",
    "ts_dict": "text search dictionary",
    "ts_config": "text search configuration",
    "enum": "type",
    "domain": "domain",
    "ctype": "type",
    "range": "type",
    "function": "function",
    "sequence": "sequence",
    "table": "table",
    "constraint": "table constraint",
    "index": "index",
    "view": "view",
    "statistics": "statistics object",
    "trigger": "trigger",
    "rule": "rule",
    "policy": "policy",
    "event_trigger": "event trigger",
    "publication": "publication",
    "pub_table": "publication relation",
    "pub_schema": "publication namespace",
}


def item(kind: str, name: str, entry: dict[str, Any]) -> str:
    """The object ``kind:name`` named as spec.policy.ignore matches it and the plan's
    warnings print it: its census kind, then its name."""
    word = _WORDS[kind]
    if kind == "view" and entry.get("materialized"):
        word = "materialized view"
    elif kind == "function" and entry.get("kind") == "PROCEDURE":
        word = "procedure"
    elif kind in ("pub_table", "pub_schema"):  # as pg_identify_object names a member
        member = entry["table"] if kind == "pub_table" else entry["schema"]
        return f"{word} {member} in publication {entry['publication']}"
    elif kind in ("constraint", "trigger", "rule", "policy"):  # so does it one of a table
        return f"{word} {entry['name']} on {entry['table']}"
    return f"{word} {name}"


def split(schema: Schema, covers: Callable[[str], str | None]) -> tuple[Schema, Schema, list[str]]:
    """``schema`` without what ``covers`` (:func:`ptah.engines.model.ignore_matcher`)
    covers and what goes with it; what was taken out, in the same shape; and each
    object an entry covered itself (not one that goes with another such), named, with the
    entry (``"publication dbz (publication dbz_*)"``). ``schema`` is not changed; a
    schema nothing covers is returned as it is."""
    direct: dict[str, str] = {}
    names: dict[str, str] = {}
    for kind in _WORDS:
        for name, entry in schema.get(kind, {}).items():
            node = f"{kind}:{name}"
            names[node] = item(kind, name, entry)
            entry_ = covers(names[node])
            if entry_ is not None:
                direct[node] = f"{names[node]} ({entry_})"
    if not direct:
        return schema, {}, []
    deps: dict[str, dict[str, str]] = schema.get("_deps", {})
    goes_with: dict[str, list[str]] = {}
    for child, edges in deps.items():
        for parent, deptype in edges.items():
            if deptype == "a" or parent.startswith("schema:"):
                goes_with.setdefault(parent, []).append(child)
    tables = schema.get("table", {})
    for name, seq in schema.get("sequence", {}).items():
        # OWNED BY a column (a serial's): automatic, but not among the edges (inspection
        # plans it as a statement of its own), so named here.
        owner = _owning_table(seq.get("ownedBy") or "", tables)
        if owner is not None:
            goes_with.setdefault(f"table:{owner}", []).append(f"sequence:{name}")
    ignored: set[str] = set()
    work = sorted(direct)
    while work:
        node = work.pop()
        if node in ignored or node not in names:
            continue
        ignored.add(node)
        work += goes_with.get(node, [])
    kept: Schema = dict(schema)
    left: Schema = {}
    for node in ignored:
        kind, name = node.split(":", 1)
        if kind not in left:
            kept[kind] = dict(kept[kind])
            left[kind] = {}
        left[kind][name] = kept[kind].pop(name)
    for kind in ("comment", "acl"):
        moved = {
            key: entry
            for key, entry in schema.get(kind, {}).items()
            if (entry.get("node") if kind == "comment" else key) in ignored
        }
        if moved:
            kept[kind] = {k: v for k, v in schema[kind].items() if k not in moved}
            left[kind] = moved
    if "_owners" in schema:
        kept["_owners"] = {k: v for k, v in schema["_owners"].items() if k not in ignored}
    # What an ignored object uses is held under it, as under an unmanaged one.
    meta = dict(schema.get("_meta", {}))
    held = {node: list(by) for node, by in meta.get("heldBy", {}).items()}
    for node in sorted(ignored):
        for parent in deps.get(node, {}):
            if parent not in ignored:
                held.setdefault(parent, []).append(f"{names[node]} (ignored)")
    meta["heldBy"] = held
    meta["ignored"] = {node: names[node] for node in sorted(ignored)}
    kept["_meta"] = meta
    # Named: what an entry covered that does not go with another object named.
    children = {child for node in ignored for child in goes_with.get(node, []) if child != node}
    roots = sorted(set(direct) - children) or sorted(direct)
    return kept, left, [direct[node] for node in roots]


def _owning_table(owned_by: str, tables: dict[str, Any]) -> str | None:
    """The table of ``<table>.<column>`` (a sequence's OWNED BY), if it is one of
    ``tables``; the column's name may hold a dot, quoted."""
    cut = len(owned_by)
    while (cut := owned_by.rfind(".", 0, cut)) > 0:
        if owned_by[:cut] in tables:
            return owned_by[:cut]
    return None
