"""The runner stopped in the middle of a multi-statement MariaDB file, three ways.

MariaDB commits every DDL statement on its own, so a file cannot run in one
transaction there: the runner records progress in the history row before and after
each statement. The second statement of ``0002`` sleeps; the test waits until the
history row says statement 2 is running and then:

* ``pod-deleted``: the Pod is force-deleted with no grace period (the kubelet SIGKILLs
  the container; a graceful delete would let the runner finish its file);
* ``container-killed``: the runner's container is SIGKILLed through containerd (a crash
  or an OOM kill); the Pod object stays, Failed with exit status 137;
* ``network-cut``: every packet between the runner Pod and the database port is
  dropped; the runner hangs on its connection until the Job's deadline ends it, and
  only then is the network restored.

Each way the database Lease stays held while the runner lives, the operator must then
hold the run as ``unresolvedRun`` (no frame), the proving History reading must report
the file dirty at statement 2 of 3, the resource must be Stalled saying so, and
nothing may run that file again by itself.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import migflow
import pytest
from e2esupport import Operator, events, wait_for, wait_passes
from migflow import (
    condition,
    history,
    job_finished,
    migrate_jobs,
    query,
    realm_leases,
    runner_in_second_statement,
    slow_second_file,
    wait_mstatus,
)

from ptah.kube.kinds import JOB, MIGRATION, POD
from ptah.kube.real import RealCluster

pytestmark = pytest.mark.integration

mysql_database = migflow.mysql_database

FILES = slow_second_file("id INT PRIMARY KEY, name VARCHAR(100) NOT NULL", 10)


WAYS = ["pod-deleted", "container-killed", "network-cut"]


@pytest.mark.parametrize("way", WAYS)
def test_runner_stopped_mid_file_is_uncertain_then_partial_and_never_rerun(
    cluster: Any,
    kube: RealCluster,
    namespace: str,
    operator: Operator,
    mysql_database: str,
    way: str,
) -> None:
    url = mysql_database
    # The network cut ends only through the deadline (the runner sets no socket timeout);
    # long enough to reach the second statement on a loaded machine. A Pod force-deleted
    # is never seen to stop, so its proof waits for the hold (the Job's deadline + the
    # Pod's + 60 s), and so may the network-cut one's (its Pod deleted at the deadline):
    # shorter deadlines keep those waits near what they were (100 s).
    deadlines = {"network-cut": 30, "pod-deleted": 20}
    runner = {"activeDeadlineSeconds": deadlines[way]} if way in deadlines else {}
    uid, pod = runner_in_second_statement(
        kube, namespace, operator, url, FILES, timeout=90, runner=runner
    )
    (job,) = migrate_jobs(kube, namespace, uid)
    (lease,) = realm_leases(kube, namespace)
    holder = lease["spec"]["holderIdentity"]
    assert holder, lease

    def runner_done() -> bool:
        """The Job ended; until then the database Lease stays with its claim."""
        done = job_finished(kube.get(JOB, namespace, job["metadata"]["name"]))
        if not done:
            spec = realm_leases(kube, namespace)[0]["spec"]
            assert spec.get("holderIdentity") == holder, spec
        return done

    if way == "network-cut":
        port = urlsplit(url).port
        assert port is not None
        with cluster.network_cut(pod["status"]["podIP"], port):
            wait_for("the Job's deadline", runner_done, timeout=120, interval=0.5)
        failed = kube.get(JOB, namespace, job["metadata"]["name"])["status"]["conditions"]  # type: ignore[index]
        assert any(c.get("reason") == "DeadlineExceeded" for c in failed), failed
    elif way == "container-killed":
        cluster.kill_container(pod)
        wait_for("the runner Job failed", runner_done, timeout=120)
        # The Pod was not replaced: its one container ended by the signal.
        after = kube.get(POD, namespace, pod["metadata"]["name"])
        assert after is not None and after["metadata"]["uid"] == pod["metadata"]["uid"]
        (cs,) = after["status"]["containerStatuses"]
        assert cs["state"]["terminated"]["exitCode"] == 137, cs
    else:
        cluster.kubectl(
            "delete",
            "pod",
            pod["metadata"]["name"],
            "--grace-period=0",
            "--force",
            namespace=namespace,
        )

    s = wait_mstatus(
        kube,
        namespace,
        "app",
        "Stalled on the partial file",
        lambda s: (
            condition(s, "Stalled").get("status") == "True"
            and bool(s.get("unresolvedRun"))
            and bool((s.get("history") or {}).get("dirty"))
        ),
        timeout=240,
        log=operator.log_path,
    )
    record = s["unresolvedRun"]
    assert record["type"] == "Migrate"
    assert s["lastMutation"]["outcome"] == "Uncertain"
    dirty = s["history"]["dirty"]
    assert [(d["version"], d["statement"], d["total"]) for d in dirty] == [("2", 2, 3)], dirty
    assert s["history"]["applied"] == ["1"]
    stalled = condition(s, "Stalled")
    assert "statement 2 of 3" in stalled["message"], stalled
    assert s["phase"] == "ProofNotSettled"

    # Nothing re-runs the file by itself: no second Migrate Job, the row unchanged,
    # and the third statement never ran.
    wait_passes(kube, operator, MIGRATION, namespace, "app")
    assert len(migrate_jobs(kube, namespace, uid)) == 1
    row = history(url)["2"]
    assert (row["statements_applied"], row["finished_at"]) == (1, None)
    tables = {r[0] for r in query(url, "SHOW TABLES")}
    assert "a" in tables and "b" not in tables, tables
    reasons = [e["reason"] for e in events(kube, namespace, "app")]
    assert "OutcomeUncertain" in reasons, reasons
