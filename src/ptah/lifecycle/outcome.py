"""The outcome of a claim: its account turned into the one outcome patch
(:class:`ptah.lifecycle.writes.OutcomePatch`), or an uncertainty record when there
is no account, and what a failed reading holds."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from ptah.api.common import (
    ActiveOperation,
    LastMutation,
    PlanSummary,
    PodEvidence,
    ReadingFailure,
    TargetIdentityStatus,
    UncertainRecord,
)
from ptah.api.digest import digest
from ptah.kube.clock import rfc3339
from ptah.lifecycle import writes
from ptah.lifecycle.account import mutation_outcome
from ptah.lifecycle.authorize import Refusal, current_binding, policy_name, verification_policy
from ptah.lifecycle.conditions import observation
from ptah.lifecycle.context import Pass
from ptah.lifecycle.family import Observe
from ptah.lifecycle.plans import publish_plan
from ptah.lifecycle.release import Seen, staged_release, uncertain_run_may_write
from ptah.lifecycle.step import AGAIN, Result, next_attempt_number
from ptah.runner.frame import ResultFrame
from ptah.runner.wire import DETERMINISTIC_REASONS, one_line


def lost_run(
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
        return drop_claim(p, op, reason, detail, retry=True, failure=failure)
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
        "nextAttempt": next_attempt_number(p),
        **observation(
            p,
            Observe(
                "ProofOwed",
                message=f"{op.type} outcome unknown ({reason}); a fresh reading must prove it",
                waiting_for="a read-only reading of the target",
            ),
        ),
    }
    release = staged_release(p, op, seen)
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


def drop_claim(
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
    reproduce is Stalled and dispatches nothing until they change (see ``claim_step``).
    """
    extra: dict[str, Any] = {"nextAttempt": next_attempt_number(p)}
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
            text = f"{failure_text(failure)}; reading again at {at}"
            obs = Observe("Retrying", message=text, waiting_for="the next reading")
        else:
            obs = stalled_observation(failure)
            text = obs.message
    if discard_plan:
        extra["currentPlan"] = None
    extra.update(observation(p, obs))
    ended = "Failed" if failure is not None else "Dropped"
    release = staged_release(p, op)
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
        inputs="" if retry else (op.reading_inputs or reading_inputs(p, op.input_fingerprint)),
        at=p.now_iso(),
    )


def reading_inputs(p: Pass, input_fingerprint: str) -> str:
    """What a reading depends on: its own inputs (source, generation, Secret binding),
    the Secret as it is now (a proof reading is claimed before the binding step, so its
    binding can be behind) and the verification policy. A deterministic failure holds
    until this changes."""
    binding = current_binding(p)
    secret = binding.reason if isinstance(binding, Refusal) else binding.secret_resource_version
    policy = verification_policy(p, policy_name(p.spec)).fingerprint
    return digest([input_fingerprint, secret, policy])


def stalled_on(failure: ReadingFailure | None, inputs: str) -> bool:
    """A deterministic failure that the same inputs would reproduce."""
    return failure is not None and not failure.retry and inputs == failure.inputs


def failure_text(failure: ReadingFailure) -> str:
    return f"{failure.reason}: {failure.message}" if failure.message else failure.reason


def stalled_observation(failure: ReadingFailure) -> Observe:
    return Observe(
        "Blocked",
        stalled_reason=failure.reason,
        message=f"the reading failed: {failure_text(failure)}; nothing runs until the "
        "source, spec, verification policy or Secret changes",
        waiting_for="a change of the source, spec, verification policy or Secret",
    )


def finish_run(p: Pass, op: ActiveOperation, frame: ResultFrame, seen: Seen) -> Result:
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
    extra: dict[str, Any] = {"nextAttempt": next_attempt_number(p)}
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
    release = staged_release(p, op, seen)
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
        return drop_claim(
            p, op, "ReadingFailed", failure_text(failure), retry=retry, failure=failure
        )
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
        "nextAttempt": next_attempt_number(p),
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
    # A reading that does not settle the record says so on the record itself, so the
    # prove step knows a reading ran after it without comparing stamps written by two
    # controllers' clocks (one running behind would make an older reading look newer).
    read = None
    if record is not None and not settle:
        read = record.model_copy(update={"proof_read_at": p.now_iso()})
    outcome = writes.OutcomePatch(
        "Succeeded", record=read, clears_record=settle, last_mutation=converged, fields=extra
    )
    writes.write_outcome(p, op, outcome)
    if draft.warnings:
        writes.emit_event(p, "PlanWarnings", _warnings_text(summary, draft.warnings), warning=True)
    if settle:
        assert record is not None
        writes.emit_event(
            p,
            "ProofSettled",
            f"a fresh reading settled {record.operation_id}: converged, no Apply attributed",
        )
    return AGAIN


def _warnings_text(summary: PlanSummary, said: tuple[str, ...]) -> str:
    """The Event naming a new plan's warnings: how many, and the first of them (the
    PtahPlan's spec.warnings keeps them all)."""
    return one_line(f"plan {summary.name} has {len(said)} warning(s); the first: {said[0]}")


def _identity_summary(frame: ResultFrame) -> str:
    assert frame.database is not None
    d = frame.database.details
    keys = ("database", "schema", "path", "host", "port")
    return " ".join(f"{k}={d[k]}" for k in keys if k in d)[:200]
