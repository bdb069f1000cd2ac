"""The Pod admission envelope: the snapshot persisted before any Job carries its digest,
and the test a Pod must pass before its log counts as evidence."""

from __future__ import annotations

from typing import Any

from ptah.api.common import AdmissionSnapshot
from ptah.workload.job import ANNOTATION_ADMISSION, CONTAINER, JobRequest, admission_digest


def resolve(req: JobRequest) -> AdmissionSnapshot:
    """The snapshot to persist for ``req``."""
    return AdmissionSnapshot(
        digest=admission_digest(req),
        image=req.runner.image,
        service_account_name=req.runner.service_account_name,
        active_deadline_seconds=req.runner.active_deadline_seconds,
    )


def template_matches(snapshot: AdmissionSnapshot, req: JobRequest) -> bool:
    """A rebuilt template must have the digest the snapshot persisted."""
    return snapshot.digest == admission_digest(req)


def admits(snapshot: AdmissionSnapshot, pod: dict[str, Any], job_uid: str) -> bool:
    """Whether ``pod`` is one the envelope accepts: owned by the claimed Job, stamped
    with the snapshot's digest, running the snapshot's image."""
    meta = pod.get("metadata", {})
    if meta.get("annotations", {}).get(ANNOTATION_ADMISSION) != snapshot.digest:
        return False
    owners = [r for r in meta.get("ownerReferences", []) if r.get("controller")]
    if len(owners) != 1 or owners[0].get("uid") != job_uid:
        return False
    containers = pod.get("spec", {}).get("containers", [])
    return (
        len(containers) == 1
        and containers[0].get("image") == snapshot.image
        and (containers[0].get("name") == CONTAINER)
    )
