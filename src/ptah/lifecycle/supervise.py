"""Resolve the admission envelope, cross the dispatch boundary, adopt the Job and
supervise it until it can be accounted for."""

from __future__ import annotations

from typing import Any

from ptah import podintent
from ptah.api.common import ActiveOperation
from ptah.kube import errors
from ptah.kube.kinds import JOB
from ptah.lifecycle import executor, writes
from ptah.lifecycle.account import account
from ptah.lifecycle.authorize import Refusal
from ptah.lifecycle.claim import authorize_work, bind_realm
from ptah.lifecycle.conditions import in_flight, observation
from ptah.lifecycle.context import Pass
from ptah.lifecycle.outcome import (
    drop_claim,
    finish_run,
    lost_run,
    reading_inputs,
    stalled_observation,
    stalled_on,
)
from ptah.lifecycle.release import Seen
from ptah.lifecycle.request import job_request, runner_spec
from ptah.lifecycle.step import AGAIN, Result, next_attempt_number, observe
from ptah.targetlock import expected_epoch
from ptah.workload.job import build_job, intent_drift


def supervise_step(p: Pass) -> Result | None:
    op = p.status.active_operation
    if op is None:
        return None
    if op.mutating and op.lease is not None and op.lease.epoch is None:
        return bind_realm(p, op)
    if op.admission_snapshot is None:
        return _resolve_envelope(p, op)
    if op.dispatch_started is None:
        return _dispatch(p, op)
    if op.job_uid is None:
        return _adopt(p, op)
    return _watch(p, op)


def _resolve_envelope(p: Pass, op: ActiveOperation) -> Result:
    """The snapshot is its own boundary: this pass writes it and returns."""
    snapshot = podintent.resolve(job_request(p, op))
    writes.write_admission_snapshot(p, op, snapshot)
    return AGAIN


def _dispatch(p: Pass, op: ActiveOperation) -> Result:
    assert op.admission_snapshot is not None
    req = job_request(p, op)
    if not podintent.template_matches(op.admission_snapshot, req):
        return drop_claim(p, op, "AdmissionEnvelopeChanged", "the runner Pod template changed")
    approval: dict[str, Any] | None = None
    if op.mutating:
        assert op.plan_name and op.plan_digest and op.lease and op.lease.epoch is not None
        if not writes.renew_lease(p, op.lease.lease_name, op.lease.holder, op.lease.epoch):
            # Lost before dispatch: nothing ran, so take the realm again.
            lease = op.lease.model_copy(
                update={
                    "epoch": None,
                    "expected_epoch": expected_epoch(
                        p.cluster, p.env.lock_namespace, op.lease.lease_name
                    ),
                }
            )
            writes.write_lease_expectation(p, op, lease)
            return AGAIN
        verdict = authorize_work(p, op)
        if isinstance(verdict, Refusal):
            return drop_claim(p, op, verdict.reason, verdict.message, discard_plan=True)
        approval = verdict[1]
    else:
        failure = p.status.reading_failure
        if stalled_on(failure, reading_inputs(p, op.input_fingerprint)):
            # The same re-check at the claim and at the dispatch boundary: the inputs
            # moved back to those a deterministic failure holds on since the claim.
            assert failure is not None
            extra = {
                "nextAttempt": next_attempt_number(p),
                **observation(p, stalled_observation(failure)),
            }
            writes.write_outcome(p, op, writes.OutcomePatch("Dropped", fields=extra))
            return Result()
    if approval is not None:
        writes.consume_approval(p, approval, op.operation_id)
    op = writes.write_dispatch_started(p, op)
    try:
        writes.create_job(p, build_job(req))
    except errors.ApiError as exc:
        # Any create error, AlreadyExists included, is uncertain: the next pass adopts
        # the Job it finds under the reserved name, or declares the outcome unknown.
        writes.emit_event(p, "DispatchUncertain", f"creating Job {op.job_name}: {exc.reason}", True)
        return AGAIN
    return _adopt(p, op)


def _adopt(p: Pass, op: ActiveOperation) -> Result:
    """Read the Job back under the reserved name; adopt it only if it is exactly ours."""
    live = p.cluster.get(JOB, p.namespace, op.job_name)
    if live is None:
        return lost_run(p, op, "JobMissing", "no Job under the reserved name after dispatch")
    drift = intent_drift(live, job_request(p, op))
    if drift is not None:
        return lost_run(p, op, "JobIntentDrift", drift)
    writes.write_job_uid(p, op, live["metadata"]["uid"])
    writes.emit_event(p, "Dispatched", f"{op.type} Job {op.job_name} is running")
    return Result(p.env.poll_seconds)


def _watch(p: Pass, op: ActiveOperation) -> Result:
    live = p.cluster.get(JOB, p.namespace, op.job_name)
    if live is None or live["metadata"]["uid"] != op.job_uid:
        return lost_run(p, op, "JobGone", "the claimed Job is gone")
    drift = intent_drift(live, job_request(p, op))
    if drift is not None:
        return lost_run(p, op, "JobIntentDrift", drift)
    if op.mutating:
        assert op.lease is not None and op.lease.epoch is not None
        if not writes.renew_lease(p, op.lease.lease_name, op.lease.holder, op.lease.epoch):
            return lost_run(
                p, op, "ContinuityLost", "the Lease epoch changed under a dispatched claim"
            )
    if not executor.job_terminal(live):
        return observe(p, in_flight(op, requeue_after=p.env.supervise_seconds))
    acc = account(p, op, live)
    if acc.waiting:
        return Result(p.env.poll_seconds)
    runner = runner_spec(p)
    writes.write_job_ttl(p, live, runner.ttl_seconds_after_finished)
    seen = Seen(acc.seen, acc.job_pods)
    if acc.frame is None:
        return lost_run(p, op, acc.reason, acc.detail, acc.pods, seen)
    return finish_run(p, op, acc.frame, seen)
