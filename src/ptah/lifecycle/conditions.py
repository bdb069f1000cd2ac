"""kstatus conditions (Ready, Reconciling, Stalled) from one observation.

Conditions are derived, never authoritative: the safety state lives in its own
fields, because a later refusal rewrites a reason and a record must outlive that.
"""

from __future__ import annotations

from typing import Any

from ptah.api.common import ActiveOperation
from ptah.lifecycle.context import Pass
from ptah.lifecycle.family import Observe


def _condition(p: Pass, type_: str, true: bool, reason: str, message: str) -> dict[str, Any]:
    status = "True" if true else "False"
    previous = next((c for c in p.status.conditions if c.type == type_), None)
    since = (
        previous.last_transition_time
        if previous is not None and previous.status == status
        else p.now_iso()
    )
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": p.generation,
        "lastTransitionTime": since,
    }


def observation(p: Pass, obs: Observe) -> dict[str, Any]:
    """Status fields for ``obs`` (wire names).

    ``appliedSource`` (the GitOps gate) is written only by a ready observation that
    names the source reached; any other observation keeps the last one, and the
    ``SourceApplied`` condition says whether it is the source desired now."""
    stalled = obs.stalled_reason is not None
    reason = obs.stalled_reason or obs.phase
    applied = obs.applied_source if obs.ready else None
    last = applied or p.status.applied_source
    conditions = [
        _condition(p, "Ready", obs.ready, reason, obs.message if not obs.ready else "up to date"),
        _condition(p, "Reconciling", not obs.ready and not stalled, obs.phase, obs.message),
        _condition(p, "Stalled", stalled, reason, obs.message if stalled else ""),
        _condition(
            p,
            "SourceApplied",
            applied is not None,
            "SourceApplied" if applied is not None else obs.phase,
            f"source {last}" if applied is not None or last is None else f"last applied {last}",
        ),
    ]
    fields: dict[str, Any] = {
        "phase": obs.phase,
        "waitingFor": obs.waiting_for,
        "observedGeneration": p.generation,
        "conditions": conditions,
    }
    if applied is not None:
        fields["appliedSource"] = applied
    return fields


def in_flight(op: ActiveOperation, requeue_after: float | None = None) -> Observe:
    """Where a resource stands from its claim to the outcome of the operation claimed:
    ``Applying`` or ``Reading``. The claim's own status patch publishes it (the phase is
    not safety state), and every supervising pass while the Job runs says the same, so
    it is written once: a reading whose outcome leads to an Apply claim says
    ``Applying`` from that claim, not ``Reading`` until a pass happens to see the Apply's
    Job running (or never, when the Job ends before such a pass)."""
    phase = "Applying" if op.mutating else "Reading"
    return Observe(
        phase,
        message=f"{op.type} {op.operation_id}: Job {op.job_name}",
        requeue_after=requeue_after,
    )


def differs(p: Pass, fields: dict[str, Any]) -> bool:
    """Whether writing ``fields`` would change anything the status already says."""
    current = p.obj.get("status") or {}
    for key, value in fields.items():
        if key == "conditions":

            def strip(cs: list[dict[str, Any]]) -> list[dict[str, Any]]:
                return [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in cs]

            if strip(current.get("conditions") or []) != strip(value):
                return True
        elif current.get(key) != value:
            return True
    return False
