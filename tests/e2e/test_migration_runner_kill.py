"""The runner Pod deleted in the middle of a multi-statement MariaDB file.

MariaDB commits every DDL statement on its own, so a file cannot run in one
transaction there: the runner records progress in the history row before and after
each statement. The second statement of ``0002`` sleeps; the test waits until the
history row says statement 2 is running and kills the runner: on the real node the Pod
is force-deleted with no grace period (the kubelet SIGKILLs the container; a graceful
delete would let the runner finish its file), on the process agent it is deleted (the
agent kills the process). The operator must then hold the run as ``unresolvedRun`` (no frame), the
proving History reading must report the file dirty at statement 2 of 3, the resource
must be Stalled saying so, and nothing may run that file again by itself.
"""

from __future__ import annotations

import time
from typing import Any

import migflow
import pytest
from e2esupport import Operator, events, resource_passes, secret
from migflow import (
    condition,
    configmap,
    history,
    migrate_jobs,
    migration,
    query,
    uid_of,
    wait_history,
    wait_mstatus,
    with_sum,
)

from ptah.kube.kinds import POD
from ptah.kube.real import RealCluster

pytestmark = pytest.mark.integration

mysql_database = migflow.mysql_database

FILES = {
    "0001_users.sql": "CREATE TABLE users (id INT PRIMARY KEY, name VARCHAR(100) NOT NULL);\n",
    "0002_slow.sql": (
        "CREATE TABLE a (id INT PRIMARY KEY);\n"
        "DO SLEEP(10);\n"
        "CREATE TABLE b (id INT PRIMARY KEY);\n"
    ),
}


def test_runner_killed_mid_file_is_uncertain_then_partial_and_never_rerun(
    cluster: Any, kube: RealCluster, namespace: str, operator: Operator, mysql_database: str
) -> None:
    url = mysql_database
    secret(kube, namespace, "db", url)
    configmap(kube, namespace, "mig", with_sum(FILES))
    operator.start()
    migration(kube, namespace, "app", "db", "mysql", configmaps=["mig"])

    wait_history(
        url,
        "statement 2 of 0002 running",
        lambda h: (h.get("2") or {}).get("statement_running") == 2,
        timeout=90,
    )
    uid = uid_of(kube, namespace, "app")
    (job,) = migrate_jobs(kube, namespace, uid)
    pods = kube.list(POD, namespace, {"job-name": job["metadata"]["name"]})
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    if cluster.info.config.real:
        cluster.kubectl(
            "delete",
            "pod",
            pods[0]["metadata"]["name"],
            "--grace-period=0",
            "--force",
            namespace=namespace,
        )
    else:
        kube.delete(POD, namespace, pods[0]["metadata"]["name"])

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
        timeout=120,
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
    # Barrier: one more pass over the resource (poked by an annotation), then assert.
    seen = resource_passes(operator, "PtahMigration", namespace, "app")
    cluster.kubectl(
        "annotate", "--overwrite", "ptahmigration/app", "ptah.test/poke=1", namespace=namespace
    )
    deadline = time.monotonic() + 120
    while resource_passes(operator, "PtahMigration", namespace, "app") < seen + 1:
        assert time.monotonic() < deadline, "the operator made no pass over the resource"
        time.sleep(0.2)
    assert len(migrate_jobs(kube, namespace, uid)) == 1
    row = history(url)["2"]
    assert (row["statements_applied"], row["finished_at"]) == (1, None)
    tables = {r[0] for r in query(url, "SHOW TABLES")}
    assert "a" in tables and "b" not in tables, tables
    reasons = [e["reason"] for e in events(kube, namespace, "app")]
    assert "OutcomeUncertain" in reasons, reasons
