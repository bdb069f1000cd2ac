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
from dataclasses import dataclass, field
from typing import Any

Schema = dict[str, dict[str, Any]]

DESTRUCTIVE = "destructive"
DATA_DEPENDENT = "data-dependent"
LOCK_HEAVY = "lock-heavy"
HAZARDS = (DESTRUCTIVE, DATA_DEPENDENT, LOCK_HEAVY)


class PlanError(Exception):
    """The desired schema cannot be planned (unsupported object, impossible change)."""

    def __init__(self, message: str, reason: str = "PlanError") -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Statement:
    """One statement of a plan with its hazards.

    ``transactional`` is False for statements the engine cannot run inside a
    transaction block (``CREATE INDEX CONCURRENTLY``); apply runs those alone.
    """

    sql: str
    hazards: tuple[str, ...] = ()
    transactional: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"sql": self.sql, "hazards": list(self.hazards)}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Statement:
        sql = str(raw["sql"])
        hazards = tuple(str(h) for h in raw.get("hazards", ()))
        return cls(sql=sql, hazards=hazards, transactional=not _is_concurrent(sql))


def _is_concurrent(sql: str) -> bool:
    head = " ".join(sql.split()[:4]).upper()
    return "CONCURRENTLY" in head


def _strip_private(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_private(v) for k, v in value.items() if not k.startswith("_")}
    if isinstance(value, list):
        return [_strip_private(v) for v in value]
    return value


def canonical(value: Any) -> Any:
    """``value`` without private keys: what comparisons and fingerprints see."""
    return _strip_private(value)


def fingerprint(schema: Schema) -> str:
    """A stable hash of the normalised inspected schema."""
    payload = json.dumps(canonical(schema), sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(payload.encode()).hexdigest()


@dataclass(frozen=True)
class SchemaPolicy:
    """What the resource's policy says about normalising the desired source.

    ``ownership``: ``ignore`` (the default) leaves ``OWNER TO`` out of the load
    and never plans owners; ``manage`` runs it in the scratch and plans owners.
    ``ignore``: kinds of objects (as the census names them) a plan leaves alone
    instead of refusing them as unmanaged. Both are PostgreSQL's; other engines
    have no owners or census to apply them to.
    """

    ownership: str = "ignore"
    ignore: tuple[str, ...] = ()

    def key(self) -> str:
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
