"""Small helpers both families use to phrase their decisions."""

from __future__ import annotations

from pydantic import ValidationError

from ptah.api.common import LifecycleStatus, PlanSummary
from ptah.lifecycle.authorize import find_approval
from ptah.lifecycle.context import Pass
from ptah.lifecycle.family import Observe


def invalid_spec(exc: ValidationError) -> Observe:
    first = exc.errors()[0]
    where = ".".join(str(x) for x in first.get("loc", ()))
    return Observe(
        "Blocked",
        stalled_reason="InvalidSpec",
        message=f"spec.{where}: {first.get('msg', 'invalid')}",
        waiting_for="a corrected spec",
    )


def plan_is_stale(p: Pass, status: LifecycleStatus, source: str | None) -> bool:
    """A plan computed under another generation, binding epoch or desired source (a
    ConfigMap edited in place changes no generation) is read again."""
    plan = status.current_plan
    epoch = status.execution_binding.epoch if status.execution_binding else 0
    return (
        plan is None
        or plan.generation != p.generation
        or plan.binding_epoch != epoch
        or (source is not None and plan.source != source)
    )


def replay_stall(status: LifecycleStatus, plan: PlanSummary) -> Observe | None:
    """A plan whose run failed, was refused for a reason it would meet again, or was
    uncertain and its proof abandoned, is not dispatched again until something changes."""
    last = status.last_mutation
    if last is None or not last.blocks(plan.digest):
        return None
    ended = last.outcome.lower() + (f" ({last.reason})" if last.reason else "")
    if last.outcome == "Uncertain":
        ended = "ran with an unknown outcome and its proof was abandoned"
    return Observe(
        "Failed",
        stalled_reason=f"{last.outcome}Plan",
        message=f"plan {plan.digest[:12]} {ended}; it is never dispatched again; "
        "change the spec to plan again",
        waiting_for="a spec change",
    )


def approval_gate(p: Pass, plan: PlanSummary, required: bool) -> str | Observe | None:
    """The approval to consume, None when none is required, or what to wait for."""
    if not required:
        return None
    approval = find_approval(p, plan.digest)
    if approval is None:
        kind = p.family.kind.kind
        return Observe(
            "WaitingForApproval",
            message=f"plan {plan.name} needs a PtahApproval: "
            f"ptah approve {kind.lower()}/{p.name} -n {p.namespace}",
            waiting_for=f"approval of plan {plan.digest[:12]}",
        )
    return str(approval["metadata"]["name"])
