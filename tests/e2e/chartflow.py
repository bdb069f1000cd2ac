"""Helpers for the tests that install the chart on the real node: ``helm`` against a
cluster, the operator Pods of the chart's Deployment, and the leader Lease's holder.

Named ``chartflow`` (like ``migflow``) so that no other test directory's module on
``sys.path`` can shadow it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from e2esupport import ROOT, missing

if TYPE_CHECKING:
    from support.cluster import Cluster

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


def install(c: Cluster, ns: str, *values: str) -> None:
    """``helm install`` of the chart with the local image, watching ``ns`` only, and
    ``values`` (``--set=...``) on top; returns once the release is rolled out."""
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
        *values,
        "--wait",
        "--timeout=180s",
    )


def operator_pods(c: Cluster, ns: str) -> list[dict[str, Any]]:
    out = c.kubectl(
        "get", "pods", "-l", "app.kubernetes.io/component=operator", "-o", "json", namespace=ns
    )
    pods = json.loads(out.stdout)["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def pod_ready(pod: dict[str, Any]) -> bool:
    return any(
        x["type"] == "Ready" and x["status"] == "True"
        for x in (pod.get("status") or {}).get("conditions") or []
    )


def ready_pods(c: Cluster, ns: str, want: int, args_has: str = "") -> list[dict[str, Any]]:
    def probe() -> list[dict[str, Any]] | None:
        pods = operator_pods(c, ns)
        ok = [
            p
            for p in pods
            if pod_ready(p) and (not args_has or args_has in p["spec"]["containers"][0]["args"])
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
