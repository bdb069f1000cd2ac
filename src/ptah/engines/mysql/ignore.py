"""Managed tables and views ``spec.policy.ignore`` hands to someone else (a migration
tool's history table, an online schema change tool's copies), split out of a schema for
the planner (:func:`ptah.engines.planner.plan`), as PostgreSQL's are
(:mod:`ptah.engines.postgres.ignore`).

An object is named as the census names unmanaged ones, its kind then its name (``table
flyway_schema_history``). A table an ignored table's foreign key references stays managed,
but the plan never drops it (InnoDB refuses that part way through the apply; MariaDB
commits each statement): :func:`check_held`.
"""

from __future__ import annotations

from collections.abc import Callable

from ptah.engines.model import PlanError, Schema
from ptah.engines.mysql.diff import references

KINDS = ("table", "view")


def split(schema: Schema, covers: Callable[[str], str | None]) -> tuple[Schema, Schema, list[str]]:
    """``schema`` without the tables and views ``covers`` covers; those, in the same shape;
    and each named with the entry that covers it. ``schema`` is not changed."""
    kept: Schema = dict(schema)
    left: Schema = {}
    named: list[str] = []
    for kind in KINDS:
        for name in sorted(schema.get(kind, {})):
            entry = covers(f"{kind} {name}")
            if entry is None:
                continue
            if kind not in left:
                kept[kind] = dict(schema[kind])
                left[kind] = {}
            left[kind][name] = kept[kind].pop(name)
            named.append(f"{kind} {name} ({entry})")
    if not left:
        return schema, {}, []
    held: dict[str, list[str]] = {}
    for name, entry in sorted(left.get("table", {}).items()):
        for referenced in sorted(references(entry)):
            if referenced in kept.get("table", {}):
                held.setdefault(referenced, []).append(f"table {name} (ignored)")
    kept["_meta"] = {**schema.get("_meta", {}), "heldBy": held}
    return kept, left, named


def check_held(current: Schema, desired: Schema) -> None:
    """Refuse a plan that drops a table an ignored table's foreign key references."""
    held: dict[str, list[str]] = current.get("_meta", {}).get("heldBy", {})
    gone = sorted(t for t in held if t not in desired.get("table", {}))
    if gone:
        raise PlanError(
            f"table {gone[0]} would be dropped, but objects spec.policy.ignore leaves alone"
            f" reference it on the target ({'; '.join(held[gone[0]])}); Ptah never changes"
            " those: drop their foreign key by hand first, or keep the table",
            "Unmanaged",
        )
