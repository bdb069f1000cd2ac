"""The chart as users install it, on the real node: ``helm install`` with the image built
from the Dockerfile, two operator Pods from the Deployment (one holds the leader
Lease), a PtahSchema on PostgreSQL applied by runner Jobs in real containers that reach
the database over the Pod network, then ``helm upgrade`` to a changed value rolls the
operator and the next change is applied by the new Pods."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from chartflow import CHART, RELEASE, helm, install, leader, ready_pods
from e2esupport import pg_columns, ready, wait_status

from ptah.kube.kinds import JOB, SCHEMA, SECRET
from ptah.kube.real import RealCluster

if TYPE_CHECKING:
    from support.cluster import Cluster

pytestmark = pytest.mark.integration


def test_chart_install_upgrade_and_a_schema_on_postgres(
    real_cluster: Cluster, real_namespace: str, pg_database: str
) -> None:
    c, ns = real_cluster, real_namespace
    install(c, ns)
    pods = ready_pods(c, ns, 2)
    names = {p["metadata"]["name"] for p in pods}
    holder = c.wait_for("leader Lease held", lambda: leader(c, ns), timeout=60)
    assert holder in names, (holder, names)
    for p in pods:
        status = p["status"]["containerStatuses"][0]
        assert status["containerID"].startswith("containerd://")
        assert status["image"].endswith("ptah/ptah:dev")
        sc = p["spec"]["containers"][0]["securityContext"]
        assert sc["readOnlyRootFilesystem"] is True
        assert p["spec"]["securityContext"]["runAsUser"] == 10001

    with RealCluster.from_kubeconfig(c.kubeconfig) as kube:
        kube.create(
            SECRET,
            {
                "metadata": {"name": "db", "namespace": ns},
                "stringData": {"url": c.pod_url(pg_database)},
            },
        )
        kube.create(
            SCHEMA,
            {
                "metadata": {"name": "shop", "namespace": ns},
                "spec": {
                    "target": {"engine": "postgres", "secretRef": {"name": "db"}},
                    "source": {"inline": "CREATE TABLE item (id bigint PRIMARY KEY);"},
                },
            },
        )
        wait_status(kube, ns, "shop", "Ready", ready, timeout=180)
        assert pg_columns(pg_database, "item") == ["id"]
        jobs = kube.list(JOB, ns, {"app.kubernetes.io/managed-by": "ptah"}) or kube.list(JOB, ns)
        assert jobs, "no runner Job"
        runner_pods = json.loads(
            c.kubectl("get", "pods", "-l", "job-name", "-o", "json", namespace=ns).stdout
        )["items"]
        assert runner_pods
        for p in runner_pods:
            cs = p["status"]["containerStatuses"][0]
            assert cs["containerID"].startswith("containerd://")
            assert cs["state"]["terminated"]["exitCode"] == 0
            assert p["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"]

        helm(
            c,
            ns,
            "upgrade",
            RELEASE,
            str(CHART),
            "--reuse-values",
            "--set=operator.logLevel=debug",
            "--wait",
            "--timeout=180s",
        )
        new = ready_pods(c, ns, 2, args_has="--log-level=debug")
        new_names = {p["metadata"]["name"] for p in new}
        assert not new_names & names, "helm upgrade did not roll the operator Pods"
        c.wait_for(
            "the leader Lease held by an upgraded Pod",
            lambda: leader(c, ns) in new_names,
            timeout=90,
            interval=1,
        )
        sql = "CREATE TABLE item (id bigint PRIMARY KEY, sku text);"
        kube.patch(SCHEMA, ns, "shop", {"spec": {"source": {"inline": sql}}})
        wait_status(
            kube,
            ns,
            "shop",
            "Ready at generation 2",
            lambda s: ready(s) and s.get("observedGeneration") == 2,
            timeout=180,
        )
        assert pg_columns(pg_database, "item") == ["id", "sku"]
        revisions = helm(c, ns, "history", RELEASE, "-o", "json")
        assert [r["revision"] for r in json.loads(revisions)] == [1, 2]
        kube.delete(SCHEMA, ns, "shop")
        c.wait_for("schema deleted", lambda: kube.get(SCHEMA, ns, "shop") is None, timeout=60)
    helm(c, ns, "uninstall", RELEASE, "--wait", "--timeout=120s")
