"""Release coordination: a staged Lease release is retried before anything else,
and withheld while the executor may still write (it is stopped only on evidence,
:mod:`ptah.lifecycle.executor`), and the same evidence holding back the proof of
an uncertain run; the release an outcome stages."""

from __future__ import annotations

from dataclasses import dataclass

from ptah.api.common import ActiveOperation, LockRelease, PodSeen
from ptah.kube.kinds import POD
from ptah.lifecycle import executor, hold, writes
from ptah.lifecycle.context import Pass
from ptah.lifecycle.family import Observe
from ptah.lifecycle.step import AGAIN, Result, observe
from ptah.workload.job import LABEL_OPERATION


def may_still_write(p: Pass, staged: LockRelease) -> executor.Verdict:
    """Whether the executor may still write, and why: stopped only on evidence
    (:mod:`ptah.lifecycle.executor`). A Job that is not terminal, a Pod of the operation
    that has not stopped (whichever Job made it: one put back under the reserved name has
    another UID than the adopted one), a Pod deleted before it was seen to stop, a Job
    that vanished before anyone saw it end, a reserved name never seen as a Job (absence
    is not evidence), and a read that could not say are all "may still be writing"."""
    return executor.judge(p, staged)


def uncertain_run_may_write(p: Pass, operation_id: str) -> str | None:
    """Why the uncertain run ``operation_id`` may still be writing, or None once nothing
    of it can: a reading taken before then proves nothing, so the proof neither reads
    nor settles meanwhile.

    While the run's release is staged, the release's own verdict decides (stopped only
    on evidence, :func:`may_still_write`): a Pod deleted before it was seen to stop keeps
    the proof waiting, however complete the database looks (another Pod of the same Job
    may have finished the work while the deleted one still runs), until the hold passes
    and the release step gives the Lease up to expiry. A Job never seen under its
    reserved name is no exception: it may have run and been deleted unseen. Without a
    staged release, any Pod of the run that the API shows not stopped keeps
    the proof waiting.

    A read that fails raises (the pass is retried, nothing decided) rather than answer
    "may still write": the reading this is asked about stays unspent, and the next pass
    asks again, instead of a transient error costing the proof a whole reading."""
    staged = p.status.pending_lock_release
    if staged is not None and staged.operation_id == operation_id:
        verdict = may_still_write(p, staged)
        if verdict.unread is not None:
            raise verdict.unread
        if verdict.writing:
            return verdict.why
    if operation_running(p, operation_id):
        return "its Pod is still running"
    return None


def operation_running(p: Pass, operation_id: str) -> bool:
    """Whether a Pod of ``operation_id`` has not stopped, by the evidence rule
    (:func:`executor.pod_stopped`); a read that fails raises. A Pod never bound to a
    node and being deleted provably never ran, however long a finalizer keeps it."""
    pods = p.cluster.list(POD, p.namespace, {LABEL_OPERATION: operation_id})
    return executor.pod_running(pods) is not None


def release_step(p: Pass) -> Result | None:
    staged = p.status.pending_lock_release
    if staged is None:
        return None
    verdict = may_still_write(p, staged)
    if not verdict.writing:
        writes.release_lease(p, staged)
        writes.clear_lock_release(p)
        hold.forget(p, staged)
        if staged.withheld:
            writes.emit_event(p, "LeaseReleased", f"{staged.lease_name} released: {verdict.why}")
        return AGAIN
    hold.looked(
        p,
        staged.operation_id,
        waiting=verdict.waiting,
        job_gone=verdict.job_gone,
        unread=verdict.unread is not None,
    )
    if verdict.evidence != staged:
        # What this pass saw is kept, so a Pod seen to stop and then collected still
        # counts, and the record names why the release is withheld.
        writes.write_release_evidence(p, verdict.evidence)
        staged = verdict.evidence
    if hold.seconds_left(p, staged) > 0:
        # Keep the tenure while the executor may write; nobody else may take it.
        if staged.epoch is not None:
            writes.renew_lease(p, staged.lease_name, staged.holder, staged.epoch)
        if p.status.record is not None:
            # A record is owed: the prove step says what the proof waits for (this
            # run to stop, see uncertain_run_may_write), and the Lease stays ours
            # meanwhile. Only the supervise and prove steps can run while it is owed.
            return None
        return observe(
            p,
            Observe(
                "ReleasePending",
                message=f"{verdict.why}; the Lease is held",
                waiting_for="evidence that the runner stopped",
                requeue_after=p.env.poll_seconds,
            ),
        )
    # Past the hold and still no evidence: never hand the database back by a release;
    # stop renewing and let the Lease expire.
    writes.clear_lock_release(p)
    hold.forget(p, staged)
    writes.emit_event(
        p,
        "LeaseLeftToExpire",
        f"{staged.lease_name} will expire, not be released: {verdict.why}, and the "
        "hold (the Job's deadline + the Pod's deadline + 60 s, by this controller's "
        "clock) has passed",
        True,
    )
    return AGAIN


@dataclass(frozen=True)
class Seen:
    """The Pods the account saw for a terminal Job, and the Job's own count of them."""

    pods: list[PodSeen]
    job_pods: int


def staged_release(p: Pass, op: ActiveOperation, seen: Seen | None = None) -> LockRelease | None:
    if op.lease is None:
        return None
    hold_until = hold_for = None
    if op.dispatch_started:
        hold_for = hold.hold_seconds(hold.run_deadline(p, op))
        hold_until = hold.hold_until(op.dispatch_started, hold_for)
        hold.saw_run(p, op.operation_id)
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
        hold_seconds=hold_for,
        staged_at=p.now_iso(),
        pods=pods,
        job_pods=job_pods,
        withheld=why,
    )
