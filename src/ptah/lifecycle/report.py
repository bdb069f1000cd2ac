"""What one pass did, as the operator's metrics, Events and logs read it.

The pass fills its report as it goes (the operation it works on, each Job it created,
how an operation ended, the resource as each write left it) and returns it with its
result; nothing in a report is ever read by a decision. The report is the only
channel from a pass to telemetry, so the operator needs to know nothing about a
family to count, log and announce what a pass did.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ptah.api.common import LifecycleStatus, OperationType

Obj = dict[str, Any]


@dataclass(frozen=True)
class OperationRef:
    """An operation a pass worked on: the claim it found or made, or the operation whose
    staged release it retried."""

    operation_id: str
    type: OperationType | None


@dataclass(frozen=True)
class Ended:
    """An operation the pass ended (its claim cleared by the outcome patch), and how:
    a mutation's lastMutation outcome (Succeeded, Failed, Refused, Fenced, Uncertain),
    ``Dropped`` for a claim given up before it ran, a reading's Succeeded or Failed."""

    operation: OperationRef
    outcome: str


@dataclass(frozen=True)
class JobCreation:
    """One create of a claim's Job: its uid, or the API's reason when the create failed
    (an uncertain create: the next pass adopts what it finds)."""

    name: str
    namespace: str
    operation_id: str
    type: str
    uid: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class PhaseChange:
    """The published phase moved: from ``previous`` to ``phase``, with the next step a
    person can take (``message``); ``warning`` while the resource is Stalled."""

    previous: str | None
    phase: str | None
    message: str
    warning: bool
    operation: str | None
    plan: str | None
    waiting_for: str | None


@dataclass
class PassReport:
    first: Obj | None = None
    last: Obj | None = None
    operation: OperationRef | None = None
    ended: Ended | None = None
    record_open: bool = False
    jobs: list[JobCreation] = field(default_factory=list)
    # The pass would have claimed but found no free operation slot (``Env.admit_claim``).
    queued: bool = False

    def saw(self, obj: Obj, status: LifecycleStatus | None = None) -> None:
        """The resource as the pass read it first, or as a write left it."""
        if self.first is None:
            self.first = obj
        self.last = obj
        if status is None:
            return
        self.record_open = status.record is not None
        if status.active_operation is not None:
            op = status.active_operation
            self.operation = OperationRef(op.operation_id, op.type)
        elif status.pending_lock_release is not None:
            staged = status.pending_lock_release
            self.operation = OperationRef(staged.operation_id, staged.type)

    @property
    def operation_id(self) -> str | None:
        return self.operation.operation_id if self.operation else None

    @property
    def operation_type(self) -> str | None:
        return self.operation.type if self.operation else None

    @property
    def phase(self) -> str | None:
        """The phase the pass left the resource in."""
        return _status(self.last).get("phase")

    def phase_change(self) -> PhaseChange | None:
        """The phase change the pass published, if it wrote one."""
        if self.first is None or self.last is None or self.last is self.first:
            return None
        status = _status(self.last)
        previous, phase = _status(self.first).get("phase"), status.get("phase")
        if phase == previous:
            return None
        stalled = any(
            c.get("type") == "Stalled" and c.get("status") == "True"
            for c in status.get("conditions") or []
        )
        return PhaseChange(
            previous=previous,
            phase=phase,
            message=next_step(status),
            warning=stalled,
            operation=(status.get("activeOperation") or {}).get("operationId"),
            plan=(status.get("currentPlan") or {}).get("name"),
            waiting_for=status.get("waitingFor"),
        )


def _status(obj: Obj | None) -> dict[str, Any]:
    status = (obj or {}).get("status") or {}
    assert isinstance(status, dict)
    return status


def next_step(status: dict[str, Any]) -> str:
    """The phase and what a person can do next, from the published conditions."""
    phase = status.get("phase")
    conds = {c.get("type"): c for c in status.get("conditions") or []}
    ready = conds.get("Ready") or {}
    detail = ""
    for name in ("Stalled", "Reconciling"):
        c = conds.get(name) or {}
        if c.get("status") == "True" and c.get("message"):
            detail = str(c["message"])
            break
    if not detail and ready.get("status") == "True":
        detail = "up to date"
    waiting = status.get("waitingFor")
    text = f"{phase}: {detail}" if detail else str(phase)
    return f"{text} (waiting for {waiting})" if waiting else text
