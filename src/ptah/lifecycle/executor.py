"""Whether a dispatched executor has stopped: on evidence only.

The Lease is handed back only once nothing can still write under it, and that is a
statement about processes on a node, which the API knows only from what the node
reported. So "stopped" needs evidence, and absence is not evidence:

* a Pod **stopped** when it was observed in a terminal phase with every container
  terminated (the node reported the exit), or it **provably never started**: no node
  was ever bound to it and it was being deleted or terminal, or the node reported it
  terminal with no container ever having run;
* a Pod deleted (or gone) without such an observation **may still be writing**: a
  force delete removes an object, not the process on a node that cannot report;
* every Pod labelled with the run's operation counts, whichever Job made it: a Job put
  back under the reserved name (a GitOps sync, a backup restore: a new UID) runs the same
  operation, and a Pod of it that has not stopped may write (:func:`pod_running`, asked
  by the release step, the takeover check and the proof alike), even once the run's own
  Pods were all seen to stop;
* a Job's own count of the Pods it ran (``active + succeeded + failed``, read once it
  is terminal) says how many Pods must have been seen to stop; a Job that was never
  seen terminal may have run Pods nobody saw;
* a Job never seen at all under the reserved name is a Job that may have vanished
  unseen: "the controller died before the create" and "the create landed, and the Job and
  its Pods were deleted before anyone saw them while a process lives on" leave the same
  empty name, so absence is not evidence. It is treated like a Job deleted before it was
  seen to end: the release (and the proof, :func:`ptah.lifecycle.release.uncertain_run_may_write`)
  waits for the hold (:mod:`ptah.lifecycle.hold`).

What was seen is kept in the staged release (:class:`ptah.api.common.LockRelease`), so
a Pod seen to stop and then collected still counts, and the record says why a release
is withheld. One rule, one home: the account (:mod:`ptah.lifecycle.account`) and the
release step both ask here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ptah.api.common import LockRelease, PodSeen
from ptah.kube import errors
from ptah.kube.kinds import JOB, POD
from ptah.kube.port import Cluster
from ptah.lifecycle.context import Pass
from ptah.workload.job import LABEL_OPERATION

TERMINAL = frozenset({"Succeeded", "Failed"})


def job_terminal(job: dict[str, Any]) -> bool:
    for cond in (job.get("status") or {}).get("conditions", []):
        if cond.get("type") in {"Complete", "Failed"} and cond.get("status") == "True":
            return True
    return False


def pods_ran(job: dict[str, Any]) -> int:
    """How many Pods the Job itself says it ran: active, succeeded, failed, and those
    terminated but not yet counted."""
    status = job.get("status") or {}
    uncounted = status.get("uncountedTerminatedPods") or {}
    return (
        int(status.get("active") or 0)
        + int(status.get("succeeded") or 0)
        + int(status.get("failed") or 0)
        + len(uncounted.get("succeeded") or [])
        + len(uncounted.get("failed") or [])
    )


def _never_ran(status: dict[str, Any]) -> bool:
    """A container the node reports waiting, having never run."""
    state = status.get("state") or {}
    last = status.get("lastState") or {}
    return "waiting" in state and not last and not status.get("started")


def pod_stopped(pod: dict[str, Any]) -> bool:
    """Evidence that nothing of ``pod`` runs: see the module docstring."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    phase = status.get("phase")
    if not spec.get("nodeName"):
        # No node was ever bound to it; deleted or terminal, none ever will be.
        return bool(meta.get("deletionTimestamp")) or phase in TERMINAL
    if phase not in TERMINAL:
        return False
    containers = [
        *(status.get("initContainerStatuses") or []),
        *(status.get("containerStatuses") or []),
    ]
    if not status.get("containerStatuses"):
        return False  # the node never reported its containers
    return all("terminated" in (cs.get("state") or {}) or _never_ran(cs) for cs in containers)


def pod_running(pods: list[dict[str, Any]]) -> str | None:
    """Why a run may still write, from ``pods`` (every Pod labelled with its operation, as
    just listed) alone: one has not stopped by the evidence rule (:func:`pod_stopped`),
    whichever Job made it (the run's own, a Job put back under the reserved name with
    another UID, none for an orphan); each of them runs the operation. None when every one
    stopped. The release step (:func:`judge_in`), the takeover check and the proof ask
    here."""
    running = [pod for pod in pods if not pod_stopped(pod)]
    if running:
        return f"its Pod {running[0]['metadata']['name']} has not stopped"
    return None


def _started(pod: dict[str, Any]) -> bool:
    """The node has taken the Pod up (so its own deadline counts): bound and past
    Pending."""
    phase = (pod.get("status") or {}).get("phase")
    return bool((pod.get("spec") or {}).get("nodeName")) and phase not in (None, "Pending")


def seen(pods: list[dict[str, Any]]) -> list[PodSeen]:
    return [
        PodSeen(name=pod["metadata"]["name"], uid=pod["metadata"]["uid"], stopped=pod_stopped(pod))
        for pod in pods
    ]


def merge(known: list[PodSeen], now: list[PodSeen]) -> list[PodSeen]:
    """What was seen before, updated by what is seen now: a Pod once seen to stop stays
    stopped, a Pod once seen stays known."""
    by_uid = {p.uid: p for p in known}
    for pod in now:
        old = by_uid.get(pod.uid)
        by_uid[pod.uid] = pod if old is None or not old.stopped else old
    return sorted(by_uid.values(), key=lambda p: (p.name, p.uid))


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def still_writing(known: list[PodSeen], listed: set[str], job_pods: int | None) -> str | None:
    """Why the executor may still write, from Pod evidence alone; None when every Pod the
    Job ran was seen to stop. ``listed`` are the UIDs visible in the API right now."""
    running = [p.name for p in known if not p.stopped and p.uid in listed]
    if running:
        return f"the Pod {running[0]} has not stopped"
    unseen = [p.name for p in known if not p.stopped]
    if unseen:
        return f"the Pod {unseen[0]} was deleted before it was seen to stop"
    if job_pods is not None and job_pods > len(known):
        missing = job_pods - len(known)
        if missing == 1 and not known:
            return "the Pod was deleted before it was seen to stop"
        return (
            f"the Job ran {_plural(job_pods, 'Pod')}; {_plural(missing, 'Pod')} "
            "deleted before being seen to stop"
        )
    return None


@dataclass(frozen=True)
class Verdict:
    """``writing`` False means stopped on evidence (``why`` says which); otherwise ``why``
    says what keeps the release withheld. ``evidence`` is the staged release updated with
    what this pass saw (written back when it changed)."""

    writing: bool
    why: str
    evidence: LockRelease
    # A Pod of the operation (its Job's, or one orphaned from it) is waiting to start:
    # its own deadline has not begun (:func:`ptah.lifecycle.hold.looked`).
    waiting: bool = False
    # The look found the run's Job gone (deleted, or never seen under its name) and
    # nobody saw it end: nothing bounds when a Pod orphaned from it while it ran starts
    # (:func:`ptah.lifecycle.hold.looked`). A Job seen to end had its waiting Pods
    # deleted as it ended; a Pod deleted before any node took it never starts.
    job_gone: bool = False
    # The read that failed, when the API could not say (``writing`` is True then).
    unread: errors.ApiError | None = None


def judge(p: Pass, staged: LockRelease) -> Verdict:
    """The verdict on this resource's own staged release."""
    return judge_in(p.cluster, p.namespace, staged)


def judge_in(
    cluster: Cluster,
    namespace: str,
    staged: LockRelease,
    listed: list[dict[str, Any]] | None = None,
) -> Verdict:
    """The verdict on the run ``staged`` describes, in ``namespace``: the release step
    asks it of its own run, the takeover check of another resource's
    (:mod:`ptah.lifecycle.takeover`), so both hand a database back on the same evidence.
    ``listed``: the run's Pods (every Pod labelled with its operation) as the caller has
    just listed them, so they are not listed twice; by default they are listed here."""
    if staged.job_name is None:
        return Verdict(False, "nothing was dispatched", staged)
    try:
        pods = (
            listed
            if listed is not None
            else cluster.list(POD, namespace, {LABEL_OPERATION: staged.operation_id})
        )
        job = None if staged.executor_stopped else cluster.get(JOB, namespace, staged.job_name)
    except errors.ApiError as exc:
        return Verdict(True, f"the API could not say ({exc.reason})", staged, unread=exc)
    waiting = any(not pod_stopped(pod) and not _started(pod) for pod in pods)
    # Every Pod of the operation counts, not only those of the run's Job: a Job put back
    # under the reserved name (a new UID) runs the same operation, and its Pod writes.
    running = pod_running(pods)
    if staged.executor_stopped:
        # Every Pod of the run's Job was seen to stop; a Pod of the operation seen since
        # (a Job put back under the name) is remembered, so one deleted before it was
        # seen to stop keeps the release withheld too.
        known = merge(staged.pods, seen(pods))
        held = still_writing(known, {pod["metadata"]["uid"] for pod in pods}, None) or running
        evidence = staged.model_copy(update={"pods": known, "withheld": held or staged.withheld})
        if held is None:
            return Verdict(False, "the runner was seen to stop", evidence, waiting)
        return Verdict(True, held, evidence, waiting)
    job_uid = staged.job_uid or (job["metadata"]["uid"] if job is not None else None)
    if job is not None and job["metadata"]["uid"] != job_uid:
        job = None  # another Job under the name says nothing about ours
    if job_uid is not None:
        pods = [
            pod
            for pod in pods
            if any(r.get("uid") == job_uid for r in pod["metadata"].get("ownerReferences", []))
        ]
    known = merge(staged.pods, seen(pods))
    job_pods = staged.job_pods
    why: str | None = None
    if job is not None and job_terminal(job):
        job_pods = max(job_pods or 0, pods_ran(job))
    elif job is not None:
        why = f"the Job {staged.job_name} has not finished"
    elif job_pods is None and job_uid is None and not known:
        # Absence is not evidence: an empty reserved name is also what a Job created and
        # deleted (with its Pods) before anyone saw it leaves behind.
        why = (
            f"no Job and no Pod was ever seen under the reserved name {staged.job_name}; "
            "that is not evidence that none ran (a Job deleted with its Pods before anyone "
            "saw it leaves the same empty name)"
        )
    elif job_pods is None:
        why = f"the Job {staged.job_name} was deleted before it was seen to end"
    why = still_writing(known, {pod["metadata"]["uid"] for pod in pods}, job_pods) or why
    why = why or running
    if why is not None and waiting and job is None:
        why += (
            "; a Pod of the run waits to start, so the hold starts again (without its Job, "
            "nothing bounds when it starts: delete it to end the wait)"
        )
    evidence = staged.model_copy(
        update={
            "job_uid": job_uid,
            "pods": known,
            "job_pods": job_pods,
            "withheld": why or staged.withheld,
        }
    )
    gone = job is None and job_pods is None
    if why is None:
        if not known:
            return Verdict(False, f"the Job {staged.job_name} ran no Pod", evidence, waiting, gone)
        return Verdict(False, "every Pod of the Job was seen to stop", evidence, waiting, gone)
    return Verdict(True, why, evidence, waiting, gone)
