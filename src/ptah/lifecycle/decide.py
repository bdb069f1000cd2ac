"""The decision for a resource that owes nothing and holds no claim, in one place.

Both families run this skeleton; each supplies only what differs (``Family``):

1. a malformed spec blocks (``InvalidSpec``);
2. a plan computed under another generation, binding epoch or desired source, or no
   reading at all, is read again (``reading_work``);
3. what the family says blocks the plan (a dirty or edited migration, a destructive
   change the spec does not allow);
4. a plan with no changes is Ready (or due for a drift reading);
5. the replay guard: a plan whose run failed, or was refused for a reason it would
   meet again, is not dispatched again (``replay_stall``: the one verdict);
6. the approval gate (``approval_gate``);
7. the mutation of the plan, with the family's runner inputs.
"""

from __future__ import annotations

from pydantic import ValidationError

from ptah.api.common import LifecycleStatus, PlanSummary
from ptah.api.digest import digest
from ptah.lifecycle.authorize import find_approval
from ptah.lifecycle.context import Pass
from ptah.lifecycle.family import MutationInputs, Observe, Work


def decide(p: Pass) -> Work | Observe:
    """The next step: a reading, a mutation to claim, or what the resource waits for."""
    family = p.family
    try:
        spec = family.spec_of(p)
    except ValidationError as exc:
        return invalid_spec(exc)
    status = p.status  # the family's status model, parsed once for this object
    plan = status.current_plan
    if (
        plan is None
        or plan_is_stale(p, plan, family.source_fingerprint(p))
        or not family.has_reading(status)
    ):
        return reading_work(p, None)
    blocked = family.blocked(p, spec, status, plan)
    if blocked is not None:
        return blocked if isinstance(blocked, Observe) else reading_work(p, None)
    if not plan.changes:
        ready = family.ready(p, spec, status, plan)
        return ready if isinstance(ready, Observe) else reading_work(p, None)
    stall = replay_stall(status, plan)
    if stall is not None:
        return stall
    gate = approval_gate(p, plan, family.approval_required(spec, plan))
    if isinstance(gate, Observe):
        return gate
    inputs = family.mutation_inputs(p, spec, plan)
    if isinstance(inputs, Observe):
        return inputs
    if not isinstance(inputs, MutationInputs):
        return reading_work(p, None)
    return Work(
        type=family.mutation_type,
        mutating=True,
        input_fingerprint=plan.digest,
        args=inputs.args,
        inputs=inputs.inputs,
        mounts=inputs.mounts,
        plan_name=plan.name,
        plan_digest=plan.digest,
        approval_name=gate,
        expected_database=plan.database,
        expected_after=inputs.expected_after,
        source=inputs.source,
    )


def reading_fingerprint(p: Pass, source: str) -> str:
    """What a reading is computed under: the source, the generation, the binding epoch."""
    return digest([source, p.generation, p.binding_epoch])


def reading_work(p: Pass, expected_database: str | None) -> Work | Observe:
    """A read-only reading of the target (also the proof of an uncertain run, which
    names the database it must be taken of)."""
    inputs = p.family.reading_inputs(p)
    if isinstance(inputs, Observe):
        return inputs
    return Work(
        type=p.family.reading_type,
        mutating=False,
        input_fingerprint=reading_fingerprint(p, inputs.source),
        args=inputs.args,
        inputs=inputs.inputs,
        mounts=inputs.mounts,
        expected_database=expected_database,
        source=inputs.source,
    )


def invalid_spec(exc: ValidationError) -> Observe:
    first = exc.errors()[0]
    where = ".".join(str(x) for x in first.get("loc", ()))
    return Observe(
        "Blocked",
        stalled_reason="InvalidSpec",
        message=f"spec.{where}: {first.get('msg', 'invalid')}",
        waiting_for="a corrected spec",
    )


def plan_is_stale(p: Pass, plan: PlanSummary, source: str | None) -> bool:
    """A plan computed under another generation, binding epoch or desired source (a
    ConfigMap edited in place changes no generation) is read again."""
    return (
        plan.generation != p.generation
        or plan.binding_epoch != p.binding_epoch
        or (source is not None and plan.source != source)
    )


def replay_stall(status: LifecycleStatus, plan: PlanSummary) -> Observe | None:
    """A plan whose run failed, was refused for a reason it would meet again, or was
    uncertain and its proof abandoned, is not dispatched again until something changes
    (``LastMutation.blocks``). The verdict is the plan's own: Failed, with
    ``FailedPlan``, ``RefusedPlan`` or ``UncertainPlan`` and how it ended, so a person
    reads what happened and what to change."""
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
