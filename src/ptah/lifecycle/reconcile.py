"""The reconcile pass: read fresh state, take one step, write it, return.

The steps run in a fixed priority, and the order is itself part of the contract:

1. a staged Lease release is retried before anything else (withheld while the
   executor may still write);
2. a finalizer with nothing owed is removed;
3. a live claim is supervised (suspension never discards a dispatched claim);
4. an uncertainty record is proved by a fresh read-only reading, before
   suspension, deletion, generation gates and anything else;
5. deletion, the execution binding, suspension, and finally the family's own
   decision, which may lead to a new claim.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from ptah import podintent
from ptah.api.common import (
    ActiveOperation,
    LastMutation,
    LeaseClaim,
    LockRelease,
    PlanSummary,
    PodEvidence,
    PodSeen,
    ReadingFailure,
    RunnerMount,
    RunnerSpec,
    SecretKeyRef,
    TargetIdentityStatus,
    UncertainRecord,
)
from ptah.api.digest import digest
from ptah.api.resources import PlanFingerprints, PlanSpec, PtahPlan
from ptah.kube import errors
from ptah.kube.clock import parse_rfc3339, rfc3339
from ptah.kube.kinds import JOB, POD
from ptah.lifecycle import executor, writes
from ptah.lifecycle.account import account, mutation_outcome
from ptah.lifecycle.authorize import (
    Refusal,
    authorize,
    current_binding,
    plan_digest,
    policy_name,
    verification_policy,
)
from ptah.lifecycle.conditions import differs, observation
from ptah.lifecycle.context import ABANDON_ANNOTATION, FINALIZER, Env, Pass
from ptah.lifecycle.decide import decide, reading_work
from ptah.lifecycle.family import AnyFamily, Observe, PlanDraft, Work
from ptah.lifecycle.report import PassReport
from ptah.runner.frame import ResultFrame
from ptah.runner.wire import DETERMINISTIC_REASONS, one_line
from ptah.targetlock import expected_epoch
from ptah.workload import names
from ptah.workload.job import (
    LABEL_MANAGED_BY,
    LABEL_OPERATION,
    LABEL_OWNER_UID,
    JobRequest,
    Mount,
    Owner,
    build_job,
    intent_drift,
)


@dataclass(frozen=True)
class Result:
    """When to run the next pass: now (0), after a delay, or on the next event (None);
    and what the pass did (``report``, for telemetry only)."""

    requeue_after: float | None = None
    report: PassReport = field(default_factory=PassReport, compare=False)


AGAIN = Result(0.0)


def reconcile(
    env: Env, family: AnyFamily, namespace: str, name: str, report: PassReport | None = None
) -> Result:
    """One pass over the resource; ``report`` (filled as the pass goes, so a caller
    still has it when the pass raises) comes back with the result."""
    report = PassReport() if report is None else report
    obj = env.cluster.get(family.kind, namespace, name)
    if obj is None:
        return Result(report=report)
    p = Pass(env, family, obj, report)
    steps: tuple[Callable[[Pass], Result | None], ...] = (
        _release_step,
        _orphan_finalizer_step,
        _supervise_step,
        _prove_step,
        _deletion_step,
        _binding_step,
        _suspend_step,
        _decide_step,
    )
    for step in steps:
        result = step(p)
        if result is not None:
            return replace(result, report=report)
    return Result(report=report)


# ------------------------------------------------------------------ release


def may_still_write(p: Pass, staged: LockRelease) -> executor.Verdict:
    """Whether the executor may still write, and why: stopped only on evidence
    (:mod:`ptah.lifecycle.executor`). A Job that is not terminal, a Pod that has not
    stopped, a Pod deleted before it was seen to stop, a Job that vanished before anyone
    saw it end, a reserved name not yet shown empty across a full resync, and a read that
    could not say are all "may still be writing"."""
    return executor.judge(p, staged)


def uncertain_run_may_write(p: Pass, operation_id: str) -> str | None:
    """Why the uncertain run ``operation_id`` may still be writing, or None once nothing
    of it can: a reading taken before then proves nothing, so the proof neither reads
    nor settles meanwhile.

    While the run's release is staged, the release's own verdict decides (stopped only
    on evidence, :func:`may_still_write`): a Pod deleted before it was seen to stop keeps
    the proof waiting, however complete the database looks (another Pod of the same Job
    may have finished the work while the deleted one still runs), until the hold passes
    and the release step gives the Lease up to expiry. A Job never seen to exist is the
    exception: its release waits for the proof, so the proof does not wait for it.
    Without a staged release, any Pod of the run that the API shows not stopped keeps
    the proof waiting."""
    staged = p.status.pending_lock_release
    if staged is not None and staged.operation_id == operation_id:
        verdict = may_still_write(p, staged)
        if verdict.writing and not verdict.awaits_proof:
            return verdict.why
    if operation_running(p, operation_id):
        return "its Pod is still running"
    return None


def operation_running(p: Pass, operation_id: str) -> bool:
    """Whether a Pod of ``operation_id`` has not stopped (or the read could not say)."""
    try:
        pods = p.cluster.list(POD, p.namespace, {LABEL_OPERATION: operation_id})
    except errors.ApiError:
        return True
    return any(
        (pod.get("status") or {}).get("phase") not in {"Succeeded", "Failed"} for pod in pods
    )


def _release_step(p: Pass) -> Result | None:
    staged = p.status.pending_lock_release
    if staged is None:
        return None
    verdict = may_still_write(p, staged)
    if not verdict.writing:
        writes.release_lease(p, staged)
        writes.clear_lock_release(p)
        if staged.withheld:
            writes.emit_event(p, "LeaseReleased", f"{staged.lease_name} released: {verdict.why}")
        return AGAIN
    if verdict.evidence != staged:
        # What this pass saw is kept, so a Pod seen to stop and then collected still
        # counts, and the record names why the release is withheld.
        writes.write_release_evidence(p, verdict.evidence)
        staged = verdict.evidence
    left = _since(p, staged.hold_until, "")
    if left is None or left < 0:
        # Keep the tenure while the executor may write; nobody else may take it.
        if staged.epoch is not None:
            writes.renew_lease(p, staged.lease_name, staged.holder, staged.epoch)
        if p.status.record is not None:
            # A record is owed: the prove step says what the proof waits for (this
            # run to stop, see uncertain_run_may_write), and the Lease stays ours
            # meanwhile. Only the supervise and prove steps can run while it is owed.
            return None
        return _observe(
            p,
            Observe(
                "ReleasePending",
                message=f"{verdict.why}; the Lease is held",
                waiting_for="evidence that the runner stopped",
                requeue_after=p.env.poll_seconds,
            ),
        )
    # Past the Job's deadline and still no evidence: never hand the database back by a
    # release; stop renewing and let the Lease expire.
    writes.clear_lock_release(p)
    writes.emit_event(
        p,
        "LeaseLeftToExpire",
        f"{staged.lease_name} will expire, not be released: {verdict.why}, and the "
        "hold (the Job's deadline + 60 s) has passed",
        True,
    )
    return AGAIN


# ---------------------------------------------------------------- finalizer


def _owes_nothing(p: Pass) -> bool:
    s = p.status
    record = s.record
    return s.active_operation is None and record is None and s.pending_lock_release is None


def _orphan_finalizer_step(p: Pass) -> Result | None:
    if FINALIZER in p.finalizers and _owes_nothing(p):
        writes.remove_finalizer(p)
        return Result() if p.deleting else AGAIN
    return None


# ---------------------------------------------------------------- supervise


def _supervise_step(p: Pass) -> Result | None:
    op = p.status.active_operation
    if op is None:
        return None
    if op.mutating and op.lease is not None and op.lease.epoch is None:
        return _bind_realm(p, op)
    if op.admission_snapshot is None:
        return _resolve_envelope(p, op)
    if op.dispatch_started is None:
        return _dispatch(p, op)
    if op.job_uid is None:
        return _adopt(p, op)
    return _watch(p, op)


def _bind_realm(p: Pass, op: ActiveOperation) -> Result:
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
    return _observe(
        p,
        Observe(
            "WaitingForTarget",
            message=message,
            waiting_for=f"Lease {op.lease.lease_name}",
            requeue_after=p.env.poll_seconds,
        ),
    )


def runner_spec(p: Pass) -> RunnerSpec:
    """The runner settings: the installation's defaults, overridden field by field by the
    resource's own spec.runner."""
    return RunnerSpec.model_validate({**p.env.runner_defaults, **(p.spec.get("runner") or {})})


def job_request(p: Pass, op: ActiveOperation) -> JobRequest:
    target = p.spec["target"]
    dev = target.get("devSecretRef")
    return JobRequest(
        namespace=p.namespace,
        name=op.job_name,
        owner=Owner(p.family.kind.api_version, p.family.kind.kind, p.name, p.uid),
        operation_id=op.operation_id,
        operation_type=op.type,
        input_fingerprint=op.input_fingerprint,
        runner=runner_spec(p),
        args=list(op.args),
        secret_ref=SecretKeyRef.model_validate(target["secretRef"]),
        dev_secret_ref=SecretKeyRef.model_validate(dev) if dev else None,
        input_configmap=op.input_config_map,
        mounts=[Mount(m.name, m.path, m.source) for m in op.mounts],
        realm=op.expected_database if op.mutating else None,
    )


def _resolve_envelope(p: Pass, op: ActiveOperation) -> Result:
    """The snapshot is its own boundary: this pass writes it and returns."""
    snapshot = podintent.resolve(job_request(p, op))
    writes.write_admission_snapshot(p, op, snapshot)
    return AGAIN


def _dispatch(p: Pass, op: ActiveOperation) -> Result:
    assert op.admission_snapshot is not None
    req = job_request(p, op)
    if not podintent.template_matches(op.admission_snapshot, req):
        return _drop(p, op, "AdmissionEnvelopeChanged", "the runner Pod template changed")
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
        verdict = _authorize(p, op)
        if isinstance(verdict, Refusal):
            return _drop(p, op, verdict.reason, verdict.message, discard_plan=True)
        approval = verdict[1]
    else:
        failure = p.status.reading_failure
        if _stalled_on(failure, _reading_inputs(p, op.input_fingerprint)):
            # The same re-check at the claim and at the dispatch boundary: the inputs
            # moved back to those a deterministic failure holds on since the claim.
            assert failure is not None
            extra = {"nextAttempt": _next_attempt(p), **observation(p, _stalled(failure))}
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
        return _lost(p, op, "JobMissing", "no Job under the reserved name after dispatch")
    drift = intent_drift(live, job_request(p, op))
    if drift is not None:
        return _lost(p, op, "JobIntentDrift", drift)
    writes.write_job_uid(p, op, live["metadata"]["uid"])
    writes.emit_event(p, "Dispatched", f"{op.type} Job {op.job_name} is running")
    return Result(p.env.poll_seconds)


def _watch(p: Pass, op: ActiveOperation) -> Result:
    live = p.cluster.get(JOB, p.namespace, op.job_name)
    if live is None or live["metadata"]["uid"] != op.job_uid:
        return _lost(p, op, "JobGone", "the claimed Job is gone")
    drift = intent_drift(live, job_request(p, op))
    if drift is not None:
        return _lost(p, op, "JobIntentDrift", drift)
    if op.mutating:
        assert op.lease is not None and op.lease.epoch is not None
        if not writes.renew_lease(p, op.lease.lease_name, op.lease.holder, op.lease.epoch):
            return _lost(
                p, op, "ContinuityLost", "the Lease epoch changed under a dispatched claim"
            )
    if not executor.job_terminal(live):
        phase = "Applying" if op.mutating else "Reading"
        return _observe(
            p,
            Observe(
                phase, message=f"Job {op.job_name} is running", requeue_after=p.env.poll_seconds
            ),
        )
    acc = account(p, op, live)
    if acc.waiting:
        return Result(p.env.poll_seconds)
    runner = runner_spec(p)
    writes.write_job_ttl(p, live, runner.ttl_seconds_after_finished)
    seen = Seen(acc.seen, acc.job_pods)
    if acc.frame is None:
        return _lost(p, op, acc.reason, acc.detail, acc.pods, seen)
    return _finish(p, op, acc.frame, seen)


# --------------------------------------------------------------- outcomes


def _next_attempt(p: Pass) -> int:
    return (p.status.next_attempt or 1) + 1


@dataclass(frozen=True)
class Seen:
    """The Pods the account saw for a terminal Job, and the Job's own count of them."""

    pods: list[PodSeen]
    job_pods: int


def _staged_release(p: Pass, op: ActiveOperation, seen: Seen | None = None) -> LockRelease | None:
    if op.lease is None:
        return None
    hold_until = None
    if op.dispatch_started:
        runner = runner_spec(p)
        started = parse_rfc3339(op.dispatch_started)
        hold_until = rfc3339(started + timedelta(seconds=runner.active_deadline_seconds + 60))
    pods = seen.pods if seen else []
    job_pods = seen.job_pods if seen else None
    why = executor.still_writing(pods, {pod.uid for pod in pods}, job_pods) if seen else None
    return LockRelease(
        operation_id=op.operation_id,
        type=op.type,
        lease_name=op.lease.lease_name,
        holder=op.lease.holder,
        epoch=op.lease.epoch,
        job_name=op.job_name if op.dispatch_started else None,
        job_uid=op.job_uid,
        # Stopped on evidence: every Pod the terminal Job ran was seen to stop.
        executor_stopped=seen is not None and why is None,
        hold_until=hold_until,
        staged_at=p.now_iso(),
        pods=pods,
        job_pods=job_pods,
        withheld=why,
    )


def _lost(
    p: Pass,
    op: ActiveOperation,
    reason: str,
    detail: str,
    pods: PodEvidence | None = None,
    seen: Seen | None = None,
) -> Result:
    """No account: uncertain for a mutating claim, a retry for a reading."""
    if not op.mutating:
        failure = _failure(p, op, reason, detail, retry=True)
        return _drop(p, op, reason, detail, retry=True, failure=failure)
    record = UncertainRecord(
        operation_id=op.operation_id,
        type=op.type,
        job_name=op.job_name,
        job_uid=op.job_uid,
        plan_name=op.plan_name,
        plan_digest=op.plan_digest,
        database=op.expected_database,
        expected_after=op.expected_after,
        reason=reason,
        detail=detail,
        pods=pods or PodEvidence(),
        recorded_at=p.now_iso(),
    )
    last = LastMutation(
        operation_id=op.operation_id,
        plan_digest=op.plan_digest,
        outcome="Uncertain",
        at=p.now_iso(),
    )
    extra = {
        "currentPlan": None,
        "nextAttempt": _next_attempt(p),
        **observation(
            p,
            Observe(
                "ProofOwed",
                message=f"{op.type} outcome unknown ({reason}); a fresh reading must prove it",
                waiting_for="a read-only reading of the target",
            ),
        ),
    }
    release = _staged_release(p, op, seen)
    writes.write_outcome(
        p,
        op,
        writes.OutcomePatch(
            "Uncertain", record=record, release=release, last_mutation=last, fields=extra
        ),
    )
    writes.emit_event(
        p, "OutcomeUncertain", f"{op.type} {op.operation_id}: {reason}. {detail}", True
    )
    return AGAIN


def _reading_pause(p: Pass) -> dict[str, Any]:
    """Status fields that hold the next reading back for a pause growing per failure."""
    failures = (p.status.reading_failures or 0) + 1
    pause = min(p.env.retry_ceiling_seconds, p.env.poll_seconds * 2**failures)
    return {
        "readingFailures": failures,
        "nextReadingAfter": rfc3339(p.cluster.now() + timedelta(seconds=pause)),
    }


def _drop(
    p: Pass,
    op: ActiveOperation,
    reason: str,
    message: str,
    *,
    discard_plan: bool = False,
    retry: bool = False,
    failure: ReadingFailure | None = None,
) -> Result:
    """Give up a claim that has not dispatched (or a reading): nothing is owed.

    A failed reading (``failure``) says why in its condition and Event. A transient one
    is tried again after a growing pause (``poll_seconds * 2**n``, at most
    ``retry_ceiling_seconds``), never in a tight loop; one the same inputs would
    reproduce is Stalled and dispatches nothing until they change (see ``_claim``).
    """
    extra: dict[str, Any] = {"nextAttempt": _next_attempt(p)}
    text = f"{reason}: {message}" if message else reason
    obs = Observe("Retrying" if retry else "Replanning", message=text)
    if failure is not None:
        failures = (p.status.reading_failures or 0) + 1
        extra["readingFailures"] = failures
        extra["readingFailure"] = failure.replacing()
        extra["nextReadingAfter"] = None
        if failure.retry:
            pause = min(p.env.retry_ceiling_seconds, p.env.poll_seconds * 2**failures)
            at = rfc3339(p.cluster.now() + timedelta(seconds=pause))
            extra["nextReadingAfter"] = at
            text = f"{_failure_text(failure)}; reading again at {at}"
            obs = Observe("Retrying", message=text, waiting_for="the next reading")
        else:
            obs = _stalled(failure)
            text = obs.message
    if discard_plan:
        extra["currentPlan"] = None
    extra.update(observation(p, obs))
    ended = "Failed" if failure is not None else "Dropped"
    release = _staged_release(p, op)
    writes.write_outcome(p, op, writes.OutcomePatch(ended, release=release, fields=extra))
    writes.emit_event(p, reason if failure is None else "ReadingFailed", text, warning=True)
    if failure is not None and not failure.retry:
        return Result()
    return Result(p.env.poll_seconds if retry else 0.0)


def _failure(
    p: Pass, op: ActiveOperation, reason: str, message: str, *, retry: bool
) -> ReadingFailure:
    return ReadingFailure(
        operation_id=op.operation_id,
        reason=reason,
        message=one_line(message),
        retry=retry,
        # The inputs the reading was claimed under, not those at the failure: a policy
        # edited while it ran and edited back must not let the same inputs run again.
        inputs="" if retry else (op.reading_inputs or _reading_inputs(p, op.input_fingerprint)),
        at=p.now_iso(),
    )


def _reading_inputs(p: Pass, input_fingerprint: str) -> str:
    """What a reading depends on: its own inputs (source, generation, Secret binding),
    the Secret as it is now (a proof reading is claimed before the binding step, so its
    binding can be behind) and the verification policy. A deterministic failure holds
    until this changes."""
    binding = current_binding(p)
    secret = binding.reason if isinstance(binding, Refusal) else binding.secret_resource_version
    policy = verification_policy(p, policy_name(p.spec)).fingerprint
    return digest([input_fingerprint, secret, policy])


def _stalled_on(failure: ReadingFailure | None, inputs: str) -> bool:
    """A deterministic failure that the same inputs would reproduce."""
    return failure is not None and not failure.retry and inputs == failure.inputs


def _failure_text(failure: ReadingFailure) -> str:
    return f"{failure.reason}: {failure.message}" if failure.message else failure.reason


def _stalled(failure: ReadingFailure) -> Observe:
    return Observe(
        "Blocked",
        stalled_reason=failure.reason,
        message=f"the reading failed: {_failure_text(failure)}; nothing runs until the "
        "source, spec, verification policy or Secret changes",
        waiting_for="a change of the source, spec, verification policy or Secret",
    )


def _finish(p: Pass, op: ActiveOperation, frame: ResultFrame, seen: Seen) -> Result:
    if op.mutating:
        return _finish_mutation(p, op, frame, seen)
    return _finish_reading(p, op, frame)


def _finish_mutation(p: Pass, op: ActiveOperation, frame: ResultFrame, seen: Seen) -> Result:
    outcome = mutation_outcome(frame)
    last = LastMutation(
        operation_id=op.operation_id,
        plan_digest=op.plan_digest,
        outcome=outcome,
        reason=frame.reason or None,
        at=p.now_iso(),
    )
    extra: dict[str, Any] = {"nextAttempt": _next_attempt(p)}
    if frame.outcome == "succeeded":
        extra["appliedPlanDigest"] = op.plan_digest
        extra["currentPlan"] = None
        extra.update(observation(p, Observe("Verifying", message="applied; reading to verify")))
    why = frame.reason
    detail = one_line(str(frame.data.get("message") or ""))
    if detail:
        why = f"{frame.reason}: {detail}"
    if frame.outcome in ("refused", "fenced"):
        # Nothing ran. A fenced run found another writer on the database: the plan is
        # read again, after a pause, once that writer may have finished.
        extra["currentPlan"] = None
        if frame.outcome == "fenced":
            extra.update(_reading_pause(p))
        extra.update(observation(p, Observe("Replanning", message=f"{frame.outcome}: {why}")))
    elif frame.outcome == "failed":
        extra.update(
            observation(
                p,
                Observe(
                    "Failed",
                    stalled_reason=f"{op.type}Failed",
                    message=f"{why}; change the spec to plan again",
                ),
            )
        )
    said = f"{op.type} {op.operation_id} {outcome.lower()}"
    if frame.outcome != "succeeded":
        said = f"{said}: {why}"
    release = _staged_release(p, op, seen)
    ended = writes.OutcomePatch(outcome, release=release, last_mutation=last, fields=extra)
    writes.write_outcome(p, op, ended)
    # A fenced run met a second writer: the Lease alone did not keep the database to one.
    writes.emit_event(p, f"{op.type}{outcome}", said, warning=frame.outcome == "fenced")
    return AGAIN


def _finish_reading(p: Pass, op: ActiveOperation, frame: ResultFrame) -> Result:
    record = p.status.record
    if frame.outcome != "succeeded" or frame.database is None:
        reason = frame.reason or frame.outcome
        detail = str(frame.data.get("message") or "")
        retry = reason not in DETERMINISTIC_REASONS
        failure = _failure(p, op, reason, detail, retry=retry)
        return _drop(p, op, "ReadingFailed", _failure_text(failure), retry=retry, failure=failure)
    settle = (
        record is not None
        and record.database == frame.database.digest
        and p.family.settles(record, frame)
        # A reading taken while the uncertain run may still write proves nothing yet.
        and uncertain_run_may_write(p, record.operation_id) is None
    )
    draft = p.family.plan_from_reading(p, frame)
    summary = publish_plan(p, op, frame, draft)
    extra: dict[str, Any] = {
        "currentPlan": summary.replacing(),
        "targetIdentity": TargetIdentityStatus(
            digest=frame.database.digest,
            engine=frame.database.engine,
            summary=_identity_summary(frame),
        ).replacing(),
        "lastReadingAt": p.now_iso(),
        "nextAttempt": _next_attempt(p),
        "readingFailures": None,
        "nextReadingAfter": None,
        "readingFailure": None,
        **p.family.reading_status(p, frame),
    }
    converged = None
    if settle:
        # Convergence is not attribution: the reading proves the database matches,
        # not what changed it, so no Apply is credited.
        assert record is not None
        converged = LastMutation(
            operation_id=record.operation_id,
            plan_digest=record.plan_digest,
            outcome="Converged",
            at=p.now_iso(),
        )
    outcome = writes.OutcomePatch(
        "Succeeded", clears_record=settle, last_mutation=converged, fields=extra
    )
    writes.write_outcome(p, op, outcome)
    if settle:
        assert record is not None
        writes.emit_event(
            p,
            "ProofSettled",
            f"a fresh reading settled {record.operation_id}: converged, no Apply attributed",
        )
    return AGAIN


def _identity_summary(frame: ResultFrame) -> str:
    assert frame.database is not None
    d = frame.database.details
    keys = ("database", "schema", "path", "host", "port")
    return " ".join(f"{k}={d[k]}" for k in keys if k in d)[:200]


# ------------------------------------------------------------------- plans

PLAN_DIGEST_ANNOTATION = "ptah.io/plan-digest"
COMPUTED_BY_ANNOTATION = "ptah.io/computed-by"


def publish_plan(p: Pass, op: ActiveOperation, frame: ResultFrame, draft: PlanDraft) -> PlanSummary:
    """Create the PtahPlan of ``draft`` under everything the reading ``op`` was computed
    under (an abandoned proof it follows included, so its digest is its own), and return
    the summary the resource's status carries."""
    assert frame.database is not None
    policy = verification_policy(p, policy_name(p.spec))
    spec = PlanSpec(
        owner_kind=p.family.kind.kind,
        owner_name=p.name,
        owner_uid=p.uid,
        engine=frame.database.engine,
        statements=draft.statements,
        destructive=draft.destructive,
        changes=draft.changes,
        computed_under=PlanFingerprints(
            source=op.source or "",
            target_schema=draft.target_schema,
            expected_after=draft.expected_after,
            policy=policy.fingerprint,
            binding_epoch=op.binding_epoch,
            database=frame.database.digest,
            generation=op.generation,
            after_abandoned=p.status.abandoned_proofs[-1] if p.status.abandoned_proofs else None,
        ),
    )
    digest_ = plan_digest(spec)
    plan_name = names.plan_name(p.name, digest_)
    metadata = {
        "name": plan_name,
        "namespace": p.namespace,
        "labels": {LABEL_OWNER_UID: p.uid, LABEL_MANAGED_BY: "ptah"},
        "annotations": {PLAN_DIGEST_ANNOTATION: digest_, COMPUTED_BY_ANNOTATION: op.operation_id},
        "ownerReferences": [writes.owner_ref(p)],
    }
    writes.create_plan(p, PtahPlan(metadata=metadata, spec=spec).wire())
    return PlanSummary(
        name=plan_name,
        digest=digest_,
        changes=draft.changes,
        destructive=draft.destructive,
        statements=len(draft.statements),
        generation=op.generation,
        binding_epoch=spec.computed_under.binding_epoch,
        database=frame.database.digest,
        expected_after=draft.expected_after,
        source=op.source or "",
    )


# ------------------------------------------------------------------- proof


def _prove_step(p: Pass) -> Result | None:
    record = p.status.record
    if record is None:
        return None
    if p.annotations.get(ABANDON_ANNOTATION) == record.operation_id:
        # The plan read while proving is discarded with the record: the next step is a
        # fresh reading (at once, not on some unrelated event), and the plan it computes
        # folds in this abandonment, so it has its own digest and needs its own
        # authorization; the abandoned plan's digest is never dispatched again.
        writes.abandon_proof(p, record)
        writes.emit_event(
            p,
            "ProofAbandoned",
            f"proof of {record.operation_id} abandoned by annotation; what it did is unknown; "
            "reading the database afresh",
            warning=True,
        )
        return AGAIN
    writing = uncertain_run_may_write(p, record.operation_id)
    if writing is not None:
        # The run may still be writing: a reading now could catch it half way, and no
        # reading proves anything until nothing of it can write.
        return _observe(
            p,
            Observe(
                "ProofOwed",
                message=f"{record.operation_id} ({record.reason}) may still be writing: "
                f"{writing}; the proof reads once it has stopped",
                waiting_for="the uncertain run to stop",
                requeue_after=p.env.poll_seconds,
            ),
        )
    waited = _since(p, p.status.last_reading_at, record.recorded_at)
    if waited is not None and waited < p.env.proof_retry_seconds:
        # A reading already ran after the record and did not settle it. Another one
        # runs after a pause; meanwhile the resource says exactly what it waits for.
        return _observe(
            p,
            Observe(
                "ProofNotSettled",
                stalled_reason="ProofNotSettled",
                message=(
                    f"the last reading did not settle {record.operation_id} ({record.reason}): "
                    f"{p.family.unsettled(p)}; inspect the database, or annotate "
                    f"{ABANDON_ANNOTATION}={record.operation_id} to abandon the proof"
                ),
                waiting_for="a reading that settles the uncertain run",
                requeue_after=p.env.proof_retry_seconds - waited,
            ),
        )
    work = reading_work(p, record.database)
    if isinstance(work, Observe):
        return _observe(p, work)
    return _claim(p, work)


# --------------------------------------------------------------- the rest


def _since(p: Pass, stamp: str | None, not_before: str) -> float | None:
    """Seconds since ``stamp`` (negative when it lies ahead), or None when there is no
    stamp or it is older than ``not_before``."""
    if not stamp or stamp < not_before:
        return None
    return p.seconds_since(stamp)


def _deletion_step(p: Pass) -> Result | None:
    return Result() if p.deleting else None


def _binding_step(p: Pass) -> Result | None:
    binding = current_binding(p)
    if isinstance(binding, Refusal):
        return _observe(
            p,
            Observe(
                "Blocked",
                stalled_reason=binding.reason,
                message=binding.message,
                waiting_for="the connection Secret",
            ),
        )
    if binding != p.status.execution_binding:
        writes.write_execution_binding(p, binding)
        return AGAIN
    return None


def _suspend_step(p: Pass) -> Result | None:
    if p.spec.get("suspend"):
        return _observe(p, Observe("Suspended", message="spec.suspend is true"))
    return None


def _decide_step(p: Pass) -> Result | None:
    decision = decide(p)
    if isinstance(decision, Observe):
        return _observe(p, decision)
    return _claim(p, decision)


def _authorize(
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


def _claim(p: Pass, work: Work) -> Result:
    """Persist the claim: the finalizer, then the claim naming the Job to be."""
    s = p.status
    if work.mutating:
        if s.record is not None:
            return _observe(
                p, Observe("ProofOwed", message="a mutating claim is refused while proof is owed")
            )
        assert work.expected_database
        verdict = _authorize(p, work)
        if isinstance(verdict, Refusal) and verdict.standing:
            # The policy in force forbids this plan: reading again would compute it again.
            # It stays until the policy or the spec changes (either discards it).
            return _observe(
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
    inputs = None if work.mutating else _reading_inputs(p, work.input_fingerprint)
    if inputs is not None and _stalled_on(failure, inputs):
        assert failure is not None
        return _observe(p, _stalled(failure))
    if not work.mutating and s.next_reading_after:
        wait = _since(p, s.next_reading_after, "")
        if wait is not None and wait < 0:
            # No failure recorded: the pause follows a fenced run (the database was busy).
            why = (
                f"the last reading failed ({_failure_text(failure)})"
                if failure is not None
                else "the last run found the database's fence taken"
            )
            return _observe(
                p,
                Observe(
                    "Retrying",
                    message=f"{why}; reading again at {s.next_reading_after}",
                    waiting_for="the next reading",
                    requeue_after=-wait,
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
    for its realm, and the content-addressed input ConfigMap."""
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
        input_cm = names.input_configmap_name(digest(work.inputs))
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


def _observe(p: Pass, obs: Observe) -> Result:
    """Publish ``obs``; a pass that changes nothing writes nothing."""
    fields = observation(p, obs)
    if differs(p, fields):
        writes.write_observation(p, fields)
    return Result(obs.requeue_after)
