"""Persist the claim (the finalizer, then the claim naming the Job to be) and bind
the realm (the database's Lease)."""

from __future__ import annotations

from typing import Any

from ptah.api.common import ActiveOperation, LeaseClaim, RunnerMount
from ptah.api.digest import digest
from ptah.api.resources import PlanSpec
from ptah.lifecycle import writes
from ptah.lifecycle.authorize import Refusal, authorize, policy_name
from ptah.lifecycle.conditions import observation
from ptah.lifecycle.context import Pass
from ptah.lifecycle.family import Observe, Work
from ptah.lifecycle.outcome import failure_text, reading_inputs, stalled_observation, stalled_on
from ptah.lifecycle.step import AGAIN, Result, observe, seconds_since
from ptah.targetlock import expected_epoch
from ptah.workload import names


def authorize_work(
    p: Pass, what: Work | ActiveOperation
) -> tuple[PlanSpec, dict[str, Any] | None] | Refusal:
    """The same re-read at the claim and again at the dispatch boundary."""
    assert what.plan_name and what.plan_digest
    return authorize(
        p,
        plan_name=what.plan_name,
        expected_digest=what.plan_digest,
        approval_name=what.approval_name,
        policy_name=policy_name(p.spec),
    )


def claim_step(p: Pass, work: Work) -> Result:
    """Persist the claim: the finalizer, then the claim naming the Job to be."""
    s = p.status
    if work.mutating:
        if s.record is not None:
            return observe(
                p, Observe("ProofOwed", message="a mutating claim is refused while proof is owed")
            )
        assert work.expected_database
        verdict = authorize_work(p, work)
        if isinstance(verdict, Refusal) and verdict.standing:
            # The policy in force forbids this plan: reading again would compute it again.
            # It stays until the policy or the spec changes (either discards it).
            return observe(
                p,
                Observe(
                    "Blocked",
                    stalled_reason=verdict.reason,
                    message=verdict.message,
                    waiting_for="a verification policy that permits the plan",
                ),
            )
        if isinstance(verdict, Refusal):
            writes.write_observation(
                p,
                {
                    "currentPlan": None,
                    **observation(p, Observe("Replanning", message=verdict.message)),
                },
            )
            writes.emit_event(p, verdict.reason, f"plan discarded: {verdict.message}", warning=True)
            return AGAIN
    failure = s.reading_failure
    inputs = None if work.mutating else reading_inputs(p, work.input_fingerprint)
    if inputs is not None and stalled_on(failure, inputs):
        assert failure is not None
        return observe(p, stalled_observation(failure))
    if not work.mutating and s.next_reading_after:
        wait = seconds_since(p, s.next_reading_after, "")
        if wait is not None and wait < 0:
            # No failure recorded: the pause follows a fenced run (the database was busy).
            why = (
                f"the last reading failed ({failure_text(failure)})"
                if failure is not None
                else "the last run found the database's fence taken"
            )
            return observe(
                p,
                Observe(
                    "Retrying",
                    message=f"{why}; reading again at {s.next_reading_after}",
                    waiting_for="the next reading",
                    requeue_after=-wait,
                ),
            )
    if s.record is None and not p.env.admit_claim():
        # The proof of an uncertain run (a record open) never waits for a slot: it comes
        # before anything else, and the database stays held until it settles.
        p.report.queued = True
        return observe(
            p,
            Observe(
                "Queued",
                message="every operation slot is taken; the claim waits its turn",
                waiting_for="a free operation slot",
                # No timer: the slot that frees wakes it (the periodic resync is the
                # backstop); polling would re-read every waiting resource's inputs.
                requeue_after=None,
            ),
        )
    op = _new_claim(p, work, inputs)
    writes.add_finalizer(p)
    if op.input_config_map is not None:
        writes.create_inputs(p, op.input_config_map, work.inputs)
    writes.write_claim(p, op)
    return AGAIN


def _new_claim(p: Pass, work: Work, inputs: str | None) -> ActiveOperation:
    """The claim for ``work``: the operation ID and the Job's deterministic name (from the
    resource, the work, the binding epoch and the attempt), the Lease a mutation expects
    for its realm, and the input ConfigMap, addressed by this resource and the content."""
    attempt = p.status.next_attempt or 1
    op_id = names.operation_id(p.uid, work.type, work.input_fingerprint, attempt)
    epoch = p.binding_epoch
    lease: LeaseClaim | None = None
    if work.mutating:
        assert work.expected_database
        lease_name = names.lease_name(work.expected_database)
        lease = LeaseClaim(
            coordination_digest=work.expected_database,
            lease_name=lease_name,
            holder=f"{p.uid}/{op_id}",
            expected_epoch=expected_epoch(p.cluster, p.env.lock_namespace, lease_name),
        )
    input_cm = None
    if work.inputs:
        input_cm = names.input_configmap_name(p.uid, digest(work.inputs))
    return ActiveOperation(
        operation_id=op_id,
        type=work.type,
        mutating=work.mutating,
        job_name=names.job_name(
            resource_name=p.name,
            resource_uid=p.uid,
            op_type=work.type,
            operation_id=op_id,
            binding_epoch=epoch,
            input_fingerprint=work.input_fingerprint,
            attempt=attempt,
        ),
        attempt=attempt,
        input_fingerprint=work.input_fingerprint,
        binding_epoch=epoch,
        plan_name=work.plan_name,
        plan_digest=work.plan_digest,
        approval_name=work.approval_name,
        expected_database=work.expected_database,
        expected_after=work.expected_after,
        source=work.source,
        reading_inputs=inputs,
        generation=p.generation,
        claimed_at=p.now_iso(),
        lease=lease,
        args=work.args,
        input_config_map=input_cm,
        mounts=[RunnerMount(name=m.name, path=m.path, source=m.source) for m in work.mounts],
    )


def bind_realm(p: Pass, op: ActiveOperation) -> Result:
    assert op.lease is not None
    outcome = writes.acquire_lease(p, op.lease, op.job_name)
    if outcome.acquired:
        assert outcome.epoch is not None
        writes.write_lease_epoch(p, op, outcome.epoch)
        return AGAIN
    if outcome.next_epoch is not None:
        # The Lease moved under a claim that has not dispatched: nothing ran, so the
        # stale expectation is replaced and acquisition tried again.
        lease = op.lease.model_copy(update={"expected_epoch": outcome.next_epoch})
        writes.write_lease_expectation(p, op, lease)
        return AGAIN
    message = "another operation holds this database's Lease"
    if outcome.holder_running is not None:
        # Expired by our clock, but its holder's executor may still write: never taken.
        message = f"the Lease has expired, but {outcome.holder_running}"
    elif outcome.held_by is not None:
        message = f"operation {outcome.held_by.partition('/')[2]} holds this database's Lease"
    return observe(
        p,
        Observe(
            "WaitingForTarget",
            message=message,
            waiting_for=f"Lease {op.lease.lease_name}",
            requeue_after=p.env.poll_seconds,
        ),
    )
