"""Whether the holder of an expired foreign Lease may still be writing its database.

A Lease expires when its holder's controller stops renewing it, and that says
nothing about the holder's executor: a Job dispatched before the controller went
quiet keeps running SQL. So before an expired Lease is taken, the Lease's own
description of its holder (its resource, its operation, the Job that operation
runs as: ``ptah.targetlock.HOLDER_ANNOTATIONS``) is followed to the executor, and
the Lease is taken only when that executor is known stopped or never started:

- stopped: the Job is terminal and every Pod it ran was seen to stop (the evidence
  rule of :mod:`ptah.lifecycle.executor`, with what the holder's staged release kept:
  a terminal Job whose Pod was deleted before it was seen to stop may still have a
  process writing on a node cut off from the API), or the holder's resource no longer
  holds the Lease;
- stopped: the Job is gone and the Pods that remain have all stopped, or the
  holder's resource no longer holds the Lease (its claim and staged release for
  that operation are gone: accounted, or left to expire past the Job's deadline);
- never started: no Job, no Pod, and the holder's claim has no dispatch marker.

Anything else (a Job running, a Pod not stopped, a dispatched claim whose Job
vanished unseen, a read that failed, a Lease that does not say who holds it) is
"may still be running", and the taker waits, saying who holds the database and why.
"""

from __future__ import annotations

from typing import Any

from ptah.api.common import PodSeen
from ptah.kube import errors
from ptah.kube.kinds import JOB, MIGRATION, POD, SCHEMA
from ptah.lifecycle.context import Pass
from ptah.lifecycle.executor import (
    job_terminal,
    merge,
    pod_stopped,
    pods_ran,
    seen,
    still_writing,
)
from ptah.targetlock import (
    HOLDER_JOB,
    HOLDER_KIND,
    HOLDER_NAME,
    HOLDER_NAMESPACE,
    HolderCheck,
    LeaseView,
)
from ptah.workload.job import LABEL_OPERATION

_KINDS = {k.kind: k for k in (SCHEMA, MIGRATION)}


def describe(p: Pass, job_name: str) -> dict[str, str]:
    """What a Lease says about its holder: written with every acquisition."""
    return {
        HOLDER_NAMESPACE: p.namespace,
        HOLDER_KIND: p.family.kind.kind,
        HOLDER_NAME: p.name,
        HOLDER_JOB: job_name,
    }


def holder_check(p: Pass) -> HolderCheck:
    return lambda view: holder_running(p, view)


def holder_running(p: Pass, view: LeaseView) -> str | None:
    """None when the holder's executor is known stopped or never started, else why not."""
    described = view.described
    holder = view.holder or ""
    operation = holder.partition("/")[2]
    kind = _KINDS.get(described.get(HOLDER_KIND, ""))
    namespace, name = described.get(HOLDER_NAMESPACE), described.get(HOLDER_NAME)
    job_name = described.get(HOLDER_JOB)
    if not (kind and namespace and name and job_name and operation):
        return f"the Lease does not say whose executor holds it ({holder})"
    who = f"{kind.kind} {namespace}/{name} (operation {operation})"
    try:
        job = p.cluster.get(JOB, namespace, job_name)
        pods = p.cluster.list(POD, namespace, {LABEL_OPERATION: operation})
        owner = p.cluster.get(kind, namespace, name)
    except errors.ApiError as exc:
        return f"{who}: its executor could not be checked ({exc.reason})"
    # The release's evidence rule: a terminal phase is not enough (the Pod garbage
    # collector marks a Pod of a cut-off node Failed while its container still runs).
    running = [pod for pod in pods if not pod_stopped(pod)]
    if running:
        return f"{who}: its Pod {running[0]['metadata']['name']} has not stopped"
    if job is not None:
        if not job_terminal(job):
            return f"{who}: its Job {job_name} has not finished"
        if owner is None or not _holds(owner, operation):
            return None
        why = _not_seen_stopped(owner, operation, job, pods)
        return f"{who}: {why}" if why else None
    if pods or owner is None or not _holds(owner, operation):
        return None
    claim = (owner.get("status") or {}).get("activeOperation") or {}
    if claim.get("operationId") == operation and not claim.get("dispatchStarted"):
        return None
    return f"{who}: its Job {job_name} is gone and nothing shows its executor stopped"


def _not_seen_stopped(
    owner: dict[str, Any], operation: str, job: dict[str, Any], pods: list[dict[str, Any]]
) -> str | None:
    """Why a terminal Job's executor may still write: a Pod it ran that nobody saw stop
    (the holder's staged release keeps what its controller saw before going quiet)."""
    staged = (owner.get("status") or {}).get("pendingLockRelease") or {}
    known: list[PodSeen] = []
    if staged.get("operationId") == operation:
        if staged.get("executorStopped"):
            return None
        known = [PodSeen.model_validate(pod) for pod in staged.get("pods") or []]
    uid = job["metadata"]["uid"]
    own = [
        pod
        for pod in pods
        if any(r.get("uid") == uid for r in pod["metadata"].get("ownerReferences", []))
    ]
    listed = {pod["metadata"]["uid"] for pod in own}
    return still_writing(merge(known, seen(own)), listed, pods_ran(job))


def _holds(owner: dict[str, Any], operation: str) -> bool:
    status = owner.get("status") or {}
    claim = status.get("activeOperation") or {}
    staged = status.get("pendingLockRelease") or {}
    return operation in (claim.get("operationId"), staged.get("operationId"))
