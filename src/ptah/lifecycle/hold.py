"""The hold: the longest a dispatched runner can still be running, and how a controller
measures it.

A release withheld for lack of evidence (a Pod deleted before it was seen to stop, a Job
that vanished unseen, a reserved name never seen as a Job) ends only when nothing of the
run can still be alive, whatever the API shows. That bound comes from two deadlines, both
enforced without Ptah:

* the Job's ``activeDeadlineSeconds``, enforced by the Job controller through the API:
  after it no runner Pod of the Job is created or admitted, so it bounds the latest start;
* the runner Pod's own ``activeDeadlineSeconds`` (the same value, set in the Pod template,
  :func:`ptah.workload.job.pod_spec`), enforced by the node's kubelet on its own, even
  while the node is cut off from the API: a Pod admitted just before the Job's deadline
  is killed that long after its start.

A Pod orphaned from its Job escapes the first bound: a look that sees a Pod of the run
waiting to start, the look after it, and the first look that finds the Job gone start
the hold again (:func:`looked`).

So a run dispatched at ``t`` is over by ``t`` + Job deadline + Pod deadline + a margin
(:data:`MARGIN_SECONDS`: the create's latency, the Job controller's lag at its deadline
and the kill's grace period, 60 s). That length, ``holdSeconds``, is stored in
the staged release, so a later edit of ``spec.runner`` does not shorten a hold; and the
deadline it is computed from is the one the run's Job was built with (the admission
snapshot's, which the digest checked at the dispatch covers), not ``spec.runner``'s at
the time of staging: a deadline shortened after the dispatch does not bind a Job made
before it.

The hold is measured like a Lease's expiry: on this process's own clock, from its own
first sighting of the run (its own write of ``dispatchStarted``, the outcome it staged,
or the first time it saw the staged release), never from a stamp another controller
wrote with its clock, so an offset between two replicas' clocks cannot end it early. A
restarted process starts over, which only lengthens the wait. The clock assumption left
is that clocks run at about the same rate and are not stepped forward by more than the
margin while a hold runs (docs/mutation-lifecycle.md, "The clock assumption").
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ptah.api.common import ActiveOperation, LockRelease
from ptah.kube.clock import parse_rfc3339, rfc3339
from ptah.lifecycle.context import Pass
from ptah.lifecycle.request import runner_spec
from ptah.lifecycle.sighting import run_key

MARGIN_SECONDS = 60


def hold_seconds(active_deadline_seconds: int) -> int:
    """The Job's deadline + the Pod's deadline (the same value) + the margin."""
    return 2 * active_deadline_seconds + MARGIN_SECONDS


def run_deadline(p: Pass, op: ActiveOperation | None = None) -> int:
    """The deadline the Job of ``op``'s run was built with: recorded in its admission
    snapshot before the dispatch (a snapshot written by an older operator has none, nor
    has a pass without ``op``: then ``spec.runner``'s now)."""
    snapshot = op.admission_snapshot if op is not None else None
    deadline = snapshot.active_deadline_seconds if snapshot is not None else None
    return deadline if deadline is not None else runner_spec(p).active_deadline_seconds


def hold_until(dispatch_started: str, seconds: int) -> str:
    """When the hold ends on the clock that stamped ``dispatch_started`` (for people)."""
    return rfc3339(parse_rfc3339(dispatch_started) + timedelta(seconds=seconds))


def _key(p: Pass, operation_id: str) -> str:
    return run_key(p.namespace, p.name, operation_id)


def saw_dispatch(p: Pass, operation_id: str, dispatch_started: str) -> None:
    """This process stamped ``dispatchStarted`` itself: its hold counts from that stamp."""
    p.env.sightings.since.setdefault(_key(p, operation_id), parse_rfc3339(dispatch_started))


def saw_run(p: Pass, operation_id: str) -> datetime:
    """This process sees the dispatched run ``operation_id`` now (its claim, as it stages
    the release, or the staged release): any sighting comes after the dispatch, so the
    first one is a safe start for the hold on this process's clock."""
    return p.env.sightings.since.setdefault(_key(p, operation_id), p.cluster.now())


def looked(
    p: Pass, operation_id: str, *, waiting: bool, job_gone: bool, unread: bool = False
) -> None:
    """This process has just looked at the run's Job and Pods: a Pod of the run is
    (``waiting``) or is not waiting to start, and the Job stands or is gone.

    The hold's first deadline, the Job's, bounds when a Pod may start only while the Job
    stands: a Pod orphaned from it (the Job deleted with ``propagationPolicy: Orphan``)
    may wait unscheduled for as long as it likes and then run for its own deadline from
    its start. Such a Pod started, if at all, before the look that finds it started or
    gone, and after any look that saw it waiting, so the hold starts again:

    * at each look that sees a Pod waiting (its start is still ahead), and at the first
      look after one (it started, or went, in between);
    * at the first look that finds the Job gone before anyone saw it end: a Pod
      orphaned since the last look that saw the Job (or before this process's first
      look) may have started unseen, and have been deleted too. After that look no Pod
      of the run is created any more (only the Job made them), so later looks see any
      Pod that is left. A Job seen to end deleted the Pods still waiting as it ended
      (a Pod deleted before a node took it never starts), so its later deletion (its
      TTL, say) starts nothing again.

    By then any start such a Pod made is behind, and the hold's length covers its own
    deadline from there. A look that could not read the API (``unread``) changes
    nothing: it saw no Pod, so it must not clear a waiting one's mark (and the hold
    cannot end while that mark is set: :func:`seconds_left`)."""
    if unread:
        return
    key = _key(p, operation_id)
    seen = p.env.sightings
    seen.read.add(key)
    restart = waiting or key in seen.waiting or (job_gone and key not in seen.jobless)
    if waiting:
        seen.waiting.add(key)
    else:
        seen.waiting.discard(key)
    if job_gone:
        seen.jobless.add(key)
    if restart:
        seen.since[key] = p.cluster.now()


def seconds_left(p: Pass, staged: LockRelease) -> float:
    """Seconds until the hold of ``staged`` has passed by this process's own clock
    (negative once it has).

    The hold cannot pass while a look that can read the API is owed: before this
    process's first one (a Job deleted with its Pods orphaned before it is found gone
    only by such a look, :func:`looked`), and after one that saw a Pod waiting, until
    the next one (that Pod may start at any time meanwhile, and only the look after it
    starts the hold again). While the API cannot be read, say the operator's permission
    to list Pods was taken away, the hold waits, its whole length left."""
    now = p.cluster.now()
    first = saw_run(p, staged.operation_id)
    length = staged.hold_seconds
    if length is None:  # staged by an older operator: the longest this runner may take
        length = hold_seconds(run_deadline(p))
    key = _key(p, staged.operation_id)
    if key not in p.env.sightings.read or key in p.env.sightings.waiting:
        return float(length)
    return length - (now - first).total_seconds()


def forget(p: Pass, staged: LockRelease) -> None:
    """The staged release is gone (released or left to expire): nothing left to measure."""
    p.env.sightings.forget(_key(p, staged.operation_id))
