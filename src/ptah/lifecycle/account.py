"""Account for the outcome.

A terminal Job is not an outcome. The account is a result frame parsed out of
the Pod's own log, bound to the operation ID, read from exactly one Pod that the
persisted admission envelope accepts, and only from a container that terminated.
The frame's own report of which database it opened is compared with the claim.
Anything short of that is an uncertain outcome, with the reason named, and the
reason says what was seen: the Job's own count of the Pods it ran is compared with
the Pods still there, so a Pod deleted before it was seen to stop is called that,
never "0 Pods ran".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ptah import podintent
from ptah.api.common import ActiveOperation, PodEvidence, PodSeen
from ptah.kube import errors
from ptah.kube.kinds import POD
from ptah.lifecycle.context import Pass
from ptah.lifecycle.executor import pods_ran, seen
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
    seen: list[PodSeen] = field(default_factory=list)
    job_pods: int = 0


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


def _missing(ran: int, visible: int) -> tuple[str, str]:
    """Fewer Pods left than the Job ran: what was seen, in words."""
    gone = ran - visible
    if ran == 1:
        return "PodDeletedUnseen", (
            "the Pod was deleted before it was seen to stop (the Job counts 1 Pod; "
            "none is left to read)"
        )
    reason = "MoreThanOnePod"
    return reason, (
        f"the Job counts {ran} Pods; {visible} still there, {gone} deleted before "
        "being seen to stop"
    )


def account(p: Pass, op: ActiveOperation, job: dict[str, Any]) -> Account:
    """``job`` is the terminal Job, read in this pass."""
    assert op.admission_snapshot is not None and op.job_uid is not None
    pods = pods_of(p, op)
    ran = max(pods_ran(job), len(pods))
    evidence = PodEvidence(uids=sorted(pod["metadata"]["uid"] for pod in pods), count=ran)

    def uncertain(reason: str, detail: str) -> Account:
        return Account(None, reason, detail, pods=evidence, seen=seen(pods), job_pods=ran)

    if ran > len(pods):
        return uncertain(*_missing(ran, len(pods)))
    if not pods:
        return uncertain("NoPod", "the Job ran no Pod")
    if len(pods) > 1:
        return uncertain("MoreThanOnePod", f"{len(pods)} Pods ran for the Job")
    pod = pods[0]
    if not podintent.admits(op.admission_snapshot, pod, op.job_uid):
        return uncertain("PodNotAdmitted", "the Pod is outside the admission envelope")
    if terminated_state(pod) is None:
        return Account(None, "ContainerRunning", "", waiting=True, pods=evidence)
    try:
        log = p.cluster.read_log(p.namespace, pod["metadata"]["name"], CONTAINER)
    except errors.NotFound:
        return uncertain("LogLost", "the Pod's log is gone")
    verdict = parse_result_for(log, op.operation_id)
    if verdict.frame is None:
        assert verdict.reason is not None
        return uncertain(f"Frame{verdict.reason.value}", verdict.detail)
    frame = verdict.frame
    opened = frame.database.digest if frame.database else None
    if op.expected_database and opened != op.expected_database:
        return uncertain("WrongDatabase", "the run opened a database other than the claim's")
    return Account(frame, pods=evidence, seen=seen(pods), job_pods=ran)
