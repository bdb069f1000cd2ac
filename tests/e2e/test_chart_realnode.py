"""The chart as users install it, on the real node: ``helm install`` with the image built
from the Dockerfile, two operator Pods from the Deployment (one holds the leader
Lease), a PtahSchema on PostgreSQL applied by runner Jobs in real containers that reach
the database over the Pod network, then ``helm upgrade`` to a changed value rolls the
operator and the next change is applied by the new Pods."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from e2esupport import ROOT, missing, pg_columns, ready, wait_status

from ptah.kube.kinds import JOB, SCHEMA, SECRET
from ptah.kube.real import RealCluster

if TYPE_CHECKING:
    from support.cluster import Cluster

pytestmark = pytest.mark.integration

CHART = ROOT / "deploy" / "helm" / "ptah"
RELEASE = "ptah"


def _helm() -> Path:
    cache = Path(os.environ.get("PTAH_CACHE") or Path.home() / ".cache" / "ptah")
    path = cache / "tools" / "bin" / "helm"
    if not path.exists():
        found = shutil.which("helm")
        if found is None:
            missing("helm is not installed: run `bash hack/tools.sh`")
        path = Path(str(found))
    return path


def helm(c: Cluster, ns: str, *args: str) -> str:
    argv = [str(_helm()), f"--kubeconfig={c.kubeconfig}", f"--namespace={ns}", *args]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, f"helm {' '.join(args)}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def operator_pods(c: Cluster, ns: str) -> list[dict[str, Any]]:
    out = c.kubectl(
        "get", "pods", "-l", "app.kubernetes.io/component=operator", "-o", "json", namespace=ns
    )
    pods = json.loads(out.stdout)["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def ready_pods(c: Cluster, ns: str, want: int, args_has: str = "") -> list[dict[str, Any]]:
    def probe() -> list[dict[str, Any]] | None:
        pods = operator_pods(c, ns)
        ok = [
            p
            for p in pods
            if any(
                x["type"] == "Ready" and x["status"] == "True"
                for x in p["status"].get("conditions") or []
            )
            and (not args_has or args_has in p["spec"]["containers"][0]["args"])
        ]
        return ok if len(ok) == want and len(pods) == want else None

    result: list[dict[str, Any]] = c.wait_for(
        f"{want} Ready operator Pods {args_has}", probe, timeout=180, interval=1
    )
    return result


def leader(c: Cluster, ns: str) -> str | None:
    out = c.kubectl("get", "lease", "ptah-operator-leader", "-o", "json", namespace=ns, check=False)
    if out.returncode != 0:
        return None
    return json.loads(out.stdout)["spec"].get("holderIdentity")


def test_chart_install_upgrade_and_a_schema_on_postgres(
    real_cluster: Cluster, real_namespace: str, pg_database: str
) -> None:
    c, ns = real_cluster, real_namespace
    helm(
        c,
        ns,
        "install",
        RELEASE,
        str(CHART),
        "--set=image.tag=dev",
        f"--set=watch.namespaces={{{ns}}}",
        "--set=operator.pollSeconds=1",
        # The e2e tier may have applied deploy/crds already (kubectl apply), as a user
        # moving to the chart has: the chart adopts them.
        "--take-ownership",
        "--wait",
        "--timeout=180s",
    )
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
