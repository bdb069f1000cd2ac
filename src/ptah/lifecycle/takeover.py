"""Whether the holder of an expired foreign Lease may still be writing its database.

A Lease expires when its holder's controller stops renewing it, and that says
nothing about the holder's executor: a Job dispatched before the controller went
quiet keeps running SQL. So before an expired Lease is taken, the Lease's own
description of its holder (its resource, its operation, the Job that operation
runs as: ``ptah.targetlock.HOLDER_ANNOTATIONS``) is followed to the executor, and
the Lease is taken only when that executor is known stopped or never started:

- stopped: the holder's resource no longer holds the operation (its claim and staged
  release for it are gone: accounted, or left to expire past the hold by its own
  controller);
- stopped: the evidence rule of :mod:`ptah.lifecycle.executor`, asked of the holder's
  run exactly as its own release step asks it (one judge, :func:`executor.judge_in`),
  from what the holder's staged release kept (the Pods its controller saw, the Job's
  count of them) or, before it staged one, from its claim: a terminal Job every Pod of
  which was seen to stop. A Job that is gone is not evidence: the Pods still listed say
  nothing of a Pod deleted unseen, whose process may still write on a node cut off
  from the API, and without the Job (or the count the holder kept) nobody knows how
  many Pods ran;
- never started: the holder's claim has no dispatch marker and no Pod of it exists.

A Pod of the operation that has not stopped keeps the taker waiting in every case,
whichever Job made it (:func:`executor.pod_running`, the rule the release step asks too).
The holder's resource, its Job and its Pods are read in the holder's namespace, which
the Lease names: the realm is shared across namespaces, the taker's own says nothing.

Anything else (a Job running, a Pod not stopped, a dispatched claim whose Job
vanished unseen, a Job gone with its Pods uncounted, a read that failed, a Lease or a
status that does not say) is "may still be running", and the taker waits, saying who
holds the database and why. The wait ends when the holder's controller accounts the
run or, past the hold, leaves its release to expire.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ptah.api.common import LockRelease
from ptah.kube import errors
from ptah.kube.kinds import MIGRATION, POD, SCHEMA, Kind
from ptah.lifecycle import executor
from ptah.lifecycle.context import Pass
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
        why = _still_running(p, kind, namespace, name, operation, job_name)
    except errors.ApiError as exc:
        return f"{who}: its executor could not be checked ({exc.reason})"
    except ValidationError:
        return f"{who}: its status does not say what its executor did"
    return f"{who}: {why}" if why else None


def _still_running(
    p: Pass, kind: Kind, namespace: str, name: str, operation: str, job_name: str
) -> str | None:
    """Why the holder's executor may still run, None when it is known stopped; a read
    that could not say raises (one answer for every read: "could not be checked")."""
    pods = p.cluster.list(POD, namespace, {LABEL_OPERATION: operation})
    owner = p.cluster.get(kind, namespace, name)
    # The release's evidence rule: a terminal phase is not enough (the Pod garbage
    # collector marks a Pod of a cut-off node Failed while its container still runs).
    # Any Pod of the operation counts here, whoever owns it now (an orphaned one too),
    # also once the holder no longer holds the operation.
    running = executor.pod_running(pods)
    if running:
        return running
    run = None if owner is None else _holders_run(owner, operation, job_name, bool(pods))
    if run is None:
        return None
    verdict = executor.judge_in(p.cluster, namespace, run, pods)
    if verdict.unread is not None:
        raise verdict.unread
    return verdict.why if verdict.writing else None


def _holders_run(
    owner: dict[str, Any], operation: str, job_name: str, has_pods: bool
) -> LockRelease | None:
    """What the holder's own status says of its run of ``operation``: its staged release
    (with the Pods its controller saw before going quiet, and the Job's count of them), or
    its claim; None when it no longer holds the operation (accounted, or its release left
    to expire past the hold by its own controller)."""
    status = owner.get("status") or {}
    staged = status.get("pendingLockRelease") or {}
    if staged.get("operationId") == operation:
        return LockRelease.model_validate(staged)
    claim = status.get("activeOperation") or {}
    if claim.get("operationId") != operation:
        return None
    # Claimed and not staged: what the claim knows, and no Pod seen yet. Without a
    # dispatch marker (written before the create) and without a Pod, no Job was made.
    dispatched = bool(claim.get("dispatchStarted")) or has_pods
    lease = claim.get("lease") or {}
    return LockRelease(
        operation_id=operation,
        lease_name=lease.get("leaseName") or "",
        holder=lease.get("holder") or "",
        job_name=job_name if dispatched else None,
        job_uid=claim.get("jobUid"),
        staged_at=claim.get("claimedAt") or "",
    )
