"""Account for the outcome.

A terminal Job is not an outcome. The account is a result frame parsed out of
the Pod's own log, bound to the operation ID, read from exactly one Pod that the
persisted admission envelope accepts, and only from a container that terminated.
The frame's own report of which database it opened is compared with the claim.
Anything short of that is an uncertain outcome, with the reason named.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ptah import podintent
from ptah.api.common import ActiveOperation, PodEvidence
from ptah.kube import errors
from ptah.kube.kinds import POD
from ptah.lifecycle.context import Pass
from ptah.runner.frame import ResultFrame, parse_result_for
from ptah.workload.job import CONTAINER, LABEL_OPERATION


@dataclass(frozen=True)
class Account:
    """A frame, or the reason there is none (``waiting`` means: look again later)."""

    frame: ResultFrame | None
    reason: str = ""
    detail: str = ""
    waiting: bool = False
    pods: PodEvidence = field(default_factory=PodEvidence)


# How a mutating run's frame outcome is accounted (status.lastMutation.outcome). Every
# one is certain: the frame says what ran. "refused" and "fenced" both say nothing ran;
# "fenced" (the realm's fence in the database was held by another run) also says the
# database was busy, so the next reading waits a pause instead of starting at once.
MUTATION_OUTCOMES: dict[str, str] = {
    "succeeded": "Succeeded",
    "failed": "Failed",
    "refused": "Refused",
    "fenced": "Fenced",
}


def mutation_outcome(frame: ResultFrame) -> str:
    """The accounted outcome of a mutating run's frame."""
    return MUTATION_OUTCOMES[frame.outcome]


def job_terminal(job: dict[str, Any]) -> bool:
    for cond in (job.get("status") or {}).get("conditions", []):
        if cond.get("type") in {"Complete", "Failed"} and cond.get("status") == "True":
            return True
    return False


def pods_of(p: Pass, op: ActiveOperation) -> list[dict[str, Any]]:
    pods = p.cluster.list(POD, p.namespace, {LABEL_OPERATION: op.operation_id})
    return [
        pod
        for pod in pods
        if any(r.get("uid") == op.job_uid for r in pod["metadata"].get("ownerReferences", []))
    ]


def terminated_state(pod: dict[str, Any]) -> dict[str, Any] | None:
    for status in (pod.get("status") or {}).get("containerStatuses", []):
        if status.get("name") == CONTAINER:
            term = (status.get("state") or {}).get("terminated")
            return term if isinstance(term, dict) else None
    return None


def pods_started(job: dict[str, Any]) -> int:
    """How many Pods the Job controller says it ran (active, succeeded, failed). A Pod
    deleted from the API is still counted there (Job tracking keeps a finalizer on each
    Pod until it is counted), so this sees a second Pod the list no longer shows."""
    status = job.get("status") or {}
    return sum(int(status.get(k) or 0) for k in ("active", "succeeded", "failed"))


def account(p: Pass, op: ActiveOperation, job: dict[str, Any] | None = None) -> Account:
    assert op.admission_snapshot is not None and op.job_uid is not None
    pods = pods_of(p, op)
    ran = max(len(pods), pods_started(job) if job is not None else 0)
    evidence = PodEvidence(uids=sorted(pod["metadata"]["uid"] for pod in pods), count=ran)
    if len(pods) != 1 or ran != 1:
        reason = "NoPod" if not pods else "MoreThanOnePod"
        return Account(None, reason, f"{ran} Pods ran for the Job", pods=evidence)
    pod = pods[0]
    if not podintent.admits(op.admission_snapshot, pod, op.job_uid):
        return Account(
            None, "PodNotAdmitted", "the Pod is outside the admission envelope", pods=evidence
        )
    if terminated_state(pod) is None:
        return Account(None, "ContainerRunning", "", waiting=True, pods=evidence)
    try:
        log = p.cluster.read_log(p.namespace, pod["metadata"]["name"], CONTAINER)
    except errors.NotFound:
        return Account(None, "LogLost", "the Pod's log is gone", pods=evidence)
    verdict = parse_result_for(log, op.operation_id)
    if verdict.frame is None:
        assert verdict.reason is not None
        return Account(None, f"Frame{verdict.reason.value}", verdict.detail, pods=evidence)
    frame = verdict.frame
    opened = frame.database.digest if frame.database else None
    if op.expected_database and opened != op.expected_database:
        return Account(
            None, "WrongDatabase", "the run opened a database other than the claim's", pods=evidence
        )
    return Account(frame, pods=evidence)
