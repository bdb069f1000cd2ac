"""Managed tables and views ``spec.policy.ignore`` hands to someone else (a migration
tool's history table, an online schema change tool's copies), split out of a schema for
the planner (:func:`ptah.engines.planner.plan`), as PostgreSQL's are
(:mod:`ptah.engines.postgres.ignore`).

An object is named as the census names unmanaged ones, its kind then its name (``table
flyway_schema_history``). A table an ignored table's foreign key references, and a table or
view an ignored view reads, stay managed, but the plan never drops them: InnoDB refuses
the first part way through the apply (MariaDB commits each statement), and the server
lets the second through and leaves the ignored view failing every query
(:func:`check_held`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ptah.engines.model import PlanError, Schema
from ptah.engines.mysql.diff import q, references

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
                held.setdefault(f"table {referenced}", []).append(f"table {name} (ignored)")
    for name, view in sorted(left.get("view", {}).items()):
        for kind in KINDS:
            for read in sorted(reads(view, kept.get(kind, {}))):
                held.setdefault(f"{kind} {read}", []).append(f"view {name} (ignored)")
    kept["_meta"] = {**schema.get("_meta", {}), "heldBy": held}
    return kept, left, named


def reads(view: dict[str, Any], names: Iterable[str]) -> set[str]:
    """Which of ``names`` the view's definition names, quoted as the server writes every
    table and view a definition reads (as :func:`ptah.engines.mysql.diff.diff` orders
    views). A column spelled like one of them counts too: holding a table too many
    refuses a drop; holding too few would break a view."""
    return {n for n in names if q(n) in view["def"]}


def check_held(current: Schema, desired: Schema) -> None:
    """Refuse a plan that drops a table an ignored table's foreign key references, or a
    table or view an ignored view reads."""
    held: dict[str, list[str]] = current.get("_meta", {}).get("heldBy", {})
    gone = sorted(
        node for node in held if node.split(" ", 1)[1] not in desired.get(node.split(" ", 1)[0], {})
    )
    if gone:
        fix = "its foreign key" if held[gone[0]][0].startswith("table") else "the view"
        raise PlanError(
            f"{gone[0]} would be dropped, but objects spec.policy.ignore leaves alone"
            f" depend on it on the target ({'; '.join(held[gone[0]])}); Ptah never changes"
            f" those: drop {fix} by hand first, or keep the {gone[0].split(' ', 1)[0]}",
            "Unmanaged",
        )
