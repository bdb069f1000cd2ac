"""Faults only a real node makes.

* The kubelet killed while a runner Job runs, and started again: the runner container
  lives on under containerd's shim meanwhile (no kubelet, no status updates); the
  operator must wait it out, account the run from the Pod's log once the kubelet
  reports again, and never start a second Job for the claim.
* The runner Pod evicted mid-statement (the Eviction API, SIGTERM from the kubelet).
"""

from __future__ import annotations

import os
import signal
from typing import Any

import migflow
import pytest
from e2esupport import Operator
from migflow import (
    condition,
    history,
    migrate_jobs,
    query,
    ready_at,
    runner_in_second_statement,
    slow_second_file,
    wait_history,
    wait_mstatus,
)

from ptah.kube.real import RealCluster
from ptah.testing.devcluster import cluster as devcluster

# node_exclusive: it kills and restarts the real node's kubelet, so nothing else may run on the
# machine meanwhile (hack/test.sh runs these first, one at a time).
pytestmark = [pytest.mark.integration, pytest.mark.node_exclusive]

mysql_database = migflow.mysql_database

FILES = slow_second_file("id INT PRIMARY KEY", 12)


def test_kubelet_killed_and_restarted_while_a_runner_job_runs(
    cluster: Any, kube: RealCluster, namespace: str, operator: Operator, mysql_database: str
) -> None:
    url = mysql_database
    uid, _ = runner_in_second_statement(kube, namespace, operator, url, FILES)
    kubelet = cluster.node_pid()
    os.kill(kubelet, signal.SIGKILL)
    # With the kubelet gone the statement still runs to its end in the container.
    wait_history(
        url,
        "0002 finished while the kubelet was down",
        lambda h: bool((h.get("2") or {}).get("finished_at")),
        timeout=60,
    )
    assert devcluster.procs(cluster.state_dir)["kubelet"].pid() is None
    info = devcluster.up(cluster.state_dir, real=True, binaries=cluster.info.binaries)
    assert "kubelet" in info.started
    s = wait_mstatus(
        kube,
        namespace,
        "app",
        "Ready at 2",
        ready_at(["1", "2"]),
        timeout=180,
        log=operator.log_path,
    )
    assert s["lastMutation"]["outcome"] == "Succeeded", s["lastMutation"]
    assert len(migrate_jobs(kube, namespace, uid)) == 1
    assert sorted(history(url)) == ["1", "2"]


def test_runner_pod_evicted_mid_statement_is_accounted_and_never_rerun(
    cluster: Any, kube: RealCluster, namespace: str, operator: Operator, mysql_database: str
) -> None:
    """The Eviction API (graceful: SIGTERM to the runner in its second statement): the
    run ends partial, the resource stops on the dirty file, and nothing reruns it."""
    url = mysql_database
    # The evicted Pod may be gone before anyone sees it stop; then the proof waits for the
    # hold (the Job's deadline + the Pod's + 60 s), which this short deadline keeps short.
    uid, pod = runner_in_second_statement(
        kube, namespace, operator, url, FILES, runner={"activeDeadlineSeconds": 20}
    )
    name = pod["metadata"]["name"]
    cluster.api().post(
        f"/api/v1/namespaces/{namespace}/pods/{name}/eviction",
        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}},
    )
    # Graceful: the runner may finish its statement and its file in the grace period
    # (the outcome is then read from its log), or stop between statements (the file is
    # then dirty and the resource stops on it). Either way: accounted, one Job, the
    # database consistent with the record, nothing run twice.
    s = wait_mstatus(
        kube,
        namespace,
        "app",
        "accounted after the eviction",
        lambda s: (
            ready_at(["1", "2"])(s)
            or (
                condition(s, "Stalled").get("status") == "True"
                and bool((s.get("history") or {}).get("dirty"))
            )
        ),
        timeout=300,
        log=operator.log_path,
    )
    assert len(migrate_jobs(kube, namespace, uid)) == 1
    tables = {r[0] for r in query(url, "SHOW TABLES")}
    row = history(url)["2"]
    if s["phase"] == "Ready":
        assert s["lastMutation"]["outcome"] in ("Succeeded", "Converged"), s["lastMutation"]
        assert row["finished_at"] and {"a", "b"} <= tables, (row, tables)
    else:
        dirty = s["history"]["dirty"]
        assert [(d["version"], d["statement"]) for d in dirty] == [("2", 2)], dirty
        assert row["finished_at"] is None and "b" not in tables, (row, tables)
