"""The engine-neutral shapes of the planner: an inspected schema, a statement, a plan.

An inspected schema is plain JSON-able data (kind -> name -> definition) so it
can be hashed into a fingerprint, cached on disk, and diffed with dict lookups.
Keys that start with ``_`` carry facts the differ needs (column position,
view dependencies) but that do not make two schemas different; they are
left out of the fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

Schema = dict[str, dict[str, Any]]

DESTRUCTIVE = "destructive"
DATA_DEPENDENT = "data-dependent"
LOCK_HEAVY = "lock-heavy"
HAZARDS = (DESTRUCTIVE, DATA_DEPENDENT, LOCK_HEAVY)

# What a statement does to a table others use, said as a hazard: the lock it takes (what
# the others may still do while it is held) and what it does to the rows under it, as
# ``"<lock>: <effect>"`` (for example ``"locks writes: builds index"``).
LOCKS_ALL = "locks reads and writes"
LOCKS_WRITES = "locks writes"
ALLOWS_WRITES = "allows reads and writes"
BUILDS_INDEX = "builds index"
SCANS_TABLE = "scans table"
REWRITES_TABLE = "rewrites table"
COPIES_TABLE = "copies table"
BRIEF = "brief, no scan"

# Where a statement runs (``Statement.transaction``): in the plan's current transaction,
# at the start of a new one (what ran before it commits first, so its lock is not held
# under a long statement), or outside any transaction (``CREATE INDEX CONCURRENTLY``).
SHARED = "shared"
NEW = "new"
NONE = "none"
TRANSACTIONS = (SHARED, NEW, NONE)


def lock_hazard(lock: str, effect: str) -> str:
    """The hazard that names a statement's lock and what it does to the table's rows."""
    return f"{lock}: {effect}"


class PlanError(Exception):
    """The desired schema cannot be planned (unsupported object, impossible change)."""

    def __init__(self, message: str, reason: str = "PlanError") -> None:
        super().__init__(message)
        self.reason = reason


class Unmanaged(PlanError):
    """The desired file creates objects the planner would otherwise lose silently."""

    def __init__(self, objects: Sequence[str]) -> None:
        shown = "; ".join(objects[:20])
        if len(objects) > 20:
            shown += f"; and {len(objects) - 20} more"
        super().__init__(
            f"the desired schema creates {len(objects)} object(s) Ptah does not manage: {shown}."
            " Remove them from the desired file or list their kind in spec.policy.ignore",
            "Unmanaged",
        )
        self.objects = list(objects)


def ignore_matcher(ignore: Sequence[str]) -> Callable[[str], str | None]:
    """What covers an object named ``"<kind> <name>"`` (as the census and the plan's
    warnings name it): the first entry of ``spec.policy.ignore`` that does, or None.

    An entry is a kind (``publication``), or a kind and a name (``publication
    dbz_publication``); it covers an item equal to it or that starts with it and a space
    (a kind covers every object of it). ``*`` in an entry stands for any run of
    characters (``publication dbz_*``); nothing else in it is special. The one
    matcher of the policy: the census's unmanaged objects and the managed objects a
    plan leaves alone (:func:`ptah.engines.planner.plan`) are judged by it alike."""
    compiled = [
        (entry, re.compile("(?s)" + ".*".join(map(re.escape, entry.split("*"))) + "(?: .*)?"))
        for entry in ignore
    ]

    def covers(item: str) -> str | None:
        return next((entry for entry, rx in compiled if rx.fullmatch(item)), None)

    return covers


def refuse_unmanaged(desired: Schema, ignore: Sequence[str]) -> None:
    """Raise :class:`Unmanaged` for what the census of the loaded desired source found
    (``desired["_meta"]["unmanaged"]``, items ``"<kind> <name>"``) outside the kinds
    the policy ignores: a plan never leaves out an object of the source unsaid."""
    found = desired.get("_meta", {}).get("unmanaged", [])
    covers = ignore_matcher(ignore)
    unmanaged = [item for item in found if covers(item) is None]
    if unmanaged:
        raise Unmanaged(unmanaged)


class IgnoredInDesired(PlanError):
    """The desired file creates objects of a kind Ptah manages that ``spec.policy.ignore``
    hands to someone else: the two say opposite things, and neither wins silently."""

    def __init__(self, objects: Sequence[str]) -> None:
        shown = "; ".join(objects[:20])
        if len(objects) > 20:
            shown += f"; and {len(objects) - 20} more"
        super().__init__(
            f"the desired schema creates {len(objects)} object(s) that spec.policy.ignore"
            f" says Ptah leaves alone: {shown}. Remove them from the desired file, or the"
            " entry that covers them from spec.policy.ignore",
            "IgnoredInDesired",
        )
        self.objects = list(objects)


@dataclass(frozen=True)
class Statement:
    """One statement of a plan with its hazards.

    ``transaction`` says where apply runs it (:data:`SHARED`, :data:`NEW`,
    :data:`NONE`); ``lock`` is the engine's name of the strongest lock it takes on a
    table that exists (empty when it touches none).
    """

    sql: str
    hazards: tuple[str, ...] = ()
    transaction: str = SHARED
    lock: str = ""

    @property
    def transactional(self) -> bool:
        """False for statements the engine cannot run inside a transaction block."""
        return self.transaction != NONE

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"sql": self.sql, "hazards": list(self.hazards)}
        if self.transaction != SHARED:
            data["transaction"] = self.transaction
        if self.lock:
            data["lock"] = self.lock
        return data

    @classmethod
    def from_json(cls, raw: object) -> Statement:
        """A statement as a plan file holds it, each field of its own type.

        Not coerced: a plan file is input (a forged or damaged one included), and
        ``"hazards": "destructive"`` read as the letters of a string was a statement
        without its destructive mark, applied without ``--allow-destructive``.
        Raises ``ValueError`` naming the field."""
        if not isinstance(raw, dict):
            raise ValueError("a statement is not an object")
        sql, hazards = raw.get("sql"), raw.get("hazards", [])
        transaction, lock = raw.get("transaction"), raw.get("lock", "")
        if not isinstance(sql, str) or not sql.strip():
            raise ValueError("a statement's sql is not a non-empty string")
        if not isinstance(hazards, list) or not all(isinstance(h, str) for h in hazards):
            raise ValueError("a statement's hazards are not a list of strings")
        if not isinstance(transaction, str | None) or not isinstance(lock, str):
            raise ValueError("a statement's transaction or lock is not a string")
        transaction = transaction or (NONE if _is_concurrent(sql) else SHARED)
        if transaction not in TRANSACTIONS:
            raise ValueError(f"unknown transaction {transaction!r}")
        return cls(sql=sql, hazards=tuple(hazards), transaction=transaction, lock=lock)


def _is_concurrent(sql: str) -> bool:
    head = " ".join(sql.split()[:4]).upper()
    return "CONCURRENTLY" in head


# The types of a schema's leaves (JSON's scalars): told by one set lookup of the exact
# type, cheaper than two isinstance() calls; anything else (a dict, a list, a subclass of
# either, a tuple) goes through the isinstance() tests below, as before.
_LEAVES = frozenset((str, int, bool, float, type(None)))


def _strip_private(value: Any) -> Any:
    # Leaves are taken as they are, without a call each: a schema of 1,000 tables holds
    # some 200,000 of them, and fingerprints and the differ strip it whole.
    t = type(value)
    if t is dict or (t not in _LEAVES and isinstance(value, dict)):
        return {
            k: v if type(v) in _LEAVES else _strip_private(v)
            for k, v in value.items()
            if k[:1] != "_"
        }
    if t is list or (t not in _LEAVES and isinstance(value, list)):
        return [v if type(v) in _LEAVES else _strip_private(v) for v in value]
    return value


def canonical(value: Any) -> Any:
    """``value`` without private keys: what comparisons and fingerprints see."""
    return _strip_private(value)


def same(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are equal once private keys are left out, as their
    :func:`canonical` forms compare; values equal whole (most objects of a plan) are
    told so by one comparison, without copying either."""
    return bool(a == b) or bool(canonical(a) == canonical(b))


def fingerprint(schema: Schema) -> str:
    """A stable hash of the normalised inspected schema."""
    payload = json.dumps(canonical(schema), sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(payload.encode()).hexdigest()


TECHNIQUES = ("indexes", "constraints", "not-null", "algorithm")


@dataclass(frozen=True)
class Online:
    """Which online techniques a plan uses (``spec.policy.online``); all on by default.

    ``indexes``: PostgreSQL builds and drops indexes of existing tables ``CONCURRENTLY``
    (a changed one under a temporary name, then swapped). ``constraints``: new foreign
    keys and checks on existing tables are added ``NOT VALID``, then validated in a
    statement of their own. ``not_null``: ``SET NOT NULL`` goes through a validated
    check, so it skips its scan. ``algorithm``: MariaDB/MySQL plans request
    ``ALGORITHM=INSTANT`` or ``INPLACE, LOCK=NONE`` where the server can do the change
    so. Off, each is planned the plain way (one transaction, the server's default).
    """

    indexes: bool = True
    constraints: bool = True
    not_null: bool = True
    algorithm: bool = True

    @classmethod
    def off(cls) -> Online:
        return cls(indexes=False, constraints=False, not_null=False, algorithm=False)

    @classmethod
    def from_off(cls, off: list[str] | tuple[str, ...]) -> Online:
        """The techniques left on when those named by ``--offline`` are off."""
        unknown = set(off) - {*TECHNIQUES, "all"}
        if unknown:
            raise ValueError(f"unknown online technique(s): {', '.join(sorted(unknown))}")
        if "all" in off:
            return cls.off()
        return cls(
            indexes="indexes" not in off,
            constraints="constraints" not in off,
            not_null="not-null" not in off,
            algorithm="algorithm" not in off,
        )


@dataclass(frozen=True)
class SchemaPolicy:
    """What the resource's policy says about normalising the desired source.

    ``ownership``: ``ignore`` (the default) leaves ``OWNER TO`` out of the load
    and never plans owners; ``manage`` runs it in the scratch and plans owners.
    ``ignore``: entries (a kind as the census names it, optionally a name, ``*`` any
    characters: :func:`ignore_matcher`) of objects a plan leaves alone: unmanaged ones
    are let through the desired source instead of refused; managed ones (PostgreSQL's,
    MariaDB/MySQL's tables and views) are left as they are on the target and refused in
    the desired source (:func:`ptah.engines.planner.plan`). SQLite refuses any.
    ``ownership`` is PostgreSQL's; other engines have no owners.
    """

    ownership: str = "ignore"
    ignore: tuple[str, ...] = ()
    online: Online = field(default_factory=lambda: Online())

    def key(self) -> str:
        """The normalisation cache's part of the policy (``online`` changes only the diff)."""
        return f"{self.ownership}:{','.join(sorted(self.ignore))}"


DEFAULT_POLICY = SchemaPolicy()


@dataclass
class Plan:
    """The result of planning: ordered statements and the fingerprints around them."""

    statements: list[Statement]
    fingerprint_before: str
    fingerprint_after: str
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    # With a cache: which side it gave (the normalised desired schema, the inspection).
    # Not the plan's content (to_json): a Plan runner reports it beside, in its frame.
    cache: dict[str, bool] | None = None

    @property
    def destructive(self) -> bool:
        return any(DESTRUCTIVE in s.hazards for s in self.statements)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "statements": [s.to_json() for s in self.statements],
            "changes": bool(self.statements),
            "fingerprintBefore": self.fingerprint_before,
            "fingerprintAfter": self.fingerprint_after,
            "destructive": self.destructive,
        }
        if self.warnings:
            data["warnings"] = list(self.warnings)
        return data


def difference(a: Schema, b: Schema, limit: int = 20) -> list[str]:
    """The objects (``kind name``) whose normalised definitions differ between two schemas."""
    out: list[str] = []
    ca, cb = canonical(a), canonical(b)
    for kind in sorted(ca.keys() | cb.keys()):
        ka, kb = ca.get(kind, {}), cb.get(kind, {})
        for name in sorted(ka.keys() | kb.keys()):
            if ka.get(name) != kb.get(name):
                state = "missing" if name not in ka else "extra" if name not in kb else "differs"
                out.append(f"{kind} {name} {state}")
                if len(out) >= limit:
                    return out
    return out
