"""What a run's Pods, as the API shows them, are evidence of (ptah.lifecycle.executor):
a Pod stopped only when its node reported its containers terminated, and a Pod waits to
start until its node reported it past Pending."""

from __future__ import annotations

from typing import Any

import pytest

from ptah.kube.kinds import JOB, POD
from ptah.lifecycle import executor
from ptah.testing.memory import MemoryCluster
from ptah.workload.job import LABEL_OPERATION
from support.releases import staged_release

NS = "apps"
OP = "apply-1"
STAGED = staged_release(OP)
RUNNING = {"name": "runner", "state": {"running": {}}}
TERMINATED = {"name": "runner", "state": {"terminated": {"exitCode": 0}}}


def _verdict(node: str | None, status: dict[str, Any]) -> executor.Verdict:
    """The verdict on the run whose one Pod the API shows so, its Job seen to have ended
    having run that one Pod (when the Pod is terminal) or still running."""
    cluster = MemoryCluster()
    terminal = status.get("phase") in executor.TERMINAL
    job_status: dict[str, Any] = (
        {"failed": 1, "conditions": [{"type": "Failed", "status": "True"}]}
        if terminal
        else {"active": 1}
    )
    job = cluster.system.create(
        JOB,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "j", "namespace": NS},
            "spec": {},
        },
    )
    cluster.system.patch(JOB, NS, "j", {"status": job_status}, "status")
    uid = job["metadata"]["uid"]
    cluster.system.create(
        POD,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "j-a",
                "namespace": NS,
                "labels": {LABEL_OPERATION: OP},
                "ownerReferences": [
                    {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": uid}
                ],
            },
            "spec": {"nodeName": node} if node else {},
        },
    )
    cluster.system.patch(POD, NS, "j-a", {"status": status}, "status")
    return executor.judge_in(cluster, NS, STAGED.model_copy(update={"job_uid": uid}))


@pytest.mark.parametrize(
    ("status", "stopped"),
    [
        ({"phase": "Failed", "containerStatuses": [TERMINATED]}, True),
        ({"phase": "Succeeded", "containerStatuses": [TERMINATED]}, True),
        # The Pod garbage collector marks a Pod on a lost node Failed: the node's last
        # report (running), or no report at all (it lost the API as the container
        # started), says nothing of the process's end.
        ({"phase": "Failed", "reason": "NodeLost", "containerStatuses": [RUNNING]}, False),
        ({"phase": "Failed", "reason": "NodeLost"}, False),
        ({"phase": "Running", "containerStatuses": [RUNNING]}, False),
    ],
    ids=["failed", "succeeded", "failed-last-running", "failed-never-reported", "running"],
)
def test_a_bound_pod_stopped_only_on_its_nodes_report(
    status: dict[str, Any], stopped: bool
) -> None:
    verdict = _verdict("node-1", status)
    assert verdict.writing is not stopped, verdict.why


@pytest.mark.parametrize(
    ("node", "status", "waiting"),
    [
        (None, {"phase": "Pending"}, True),
        # Bound, but its node has not taken it up: it may start at any time from now.
        ("node-1", {"phase": "Pending"}, True),
        ("node-1", {"phase": "Running", "containerStatuses": [RUNNING]}, False),
    ],
    ids=["unbound", "bound-pending", "running"],
)
def test_a_pod_waits_to_start_until_its_node_took_it_up(
    node: str | None, status: dict[str, Any], waiting: bool
) -> None:
    assert _verdict(node, status).waiting is waiting
