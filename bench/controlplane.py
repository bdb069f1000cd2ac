"""Bench the local control plane.

Prints:
* ``up_to_ready_s``: ``ptah dev up`` (subprocess, warm binary cache, fresh state dir)
  until it returns ready: etcd, apiserver, controller-manager, node agent, Node Ready,
  service-account token controller working;
* ``up_reuse_s``: a second ``ptah dev up`` on the running cluster;
* ``job_create_to_pod_running_s``: Job create -> its Pod reported Running, for N Jobs
  (median, min, max), Pods running ``sleep``;
* ``job_create_to_complete_s``: Job create -> Complete, Pod running ``echo``.

Usage: python bench/controlplane.py [--jobs N] [--keep]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ptah.devcluster import cluster, paths
from ptah.devcluster.apiclient import ApiClient, Credentials
from ptah.devcluster.config import ClusterConfig

JSON = dict[str, Any]


def job(name: str, command: list[str]) -> JSON:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox", "command": command}],
                }
            },
        },
    }


def wait(probe: Any, timeout: float = 60.0) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if probe():
            return time.monotonic()
        time.sleep(0.02)
    raise TimeoutError("timed out")


def pod_phase(api: ApiClient, ns: str, job_name: str) -> str | None:
    items = api.get(
        f"/api/v1/namespaces/{ns}/pods", params={"labelSelector": f"job-name={job_name}"}
    )["items"]
    return str(items[0]["status"].get("phase")) if items else None


def complete(api: ApiClient, ns: str, name: str) -> bool:
    j = api.get(f"/apis/batch/v1/namespaces/{ns}/jobs/{name}")
    return any(
        c["type"] == "Complete" and c["status"] == "True"
        for c in j.get("status", {}).get("conditions") or []
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="leave the cluster running")
    args = parser.parse_args()
    paths.Binaries.locate()  # fail early, naming what is missing
    state = Path(tempfile.mkdtemp(prefix="ptah-bench-"))
    ptah = [sys.executable, "-m", "ptah.cli.main", "dev"]
    t0 = time.monotonic()
    subprocess.run([*ptah, "up", "--state-dir", str(state)], check=True, capture_output=True)
    up_s = time.monotonic() - t0
    t0 = time.monotonic()
    subprocess.run([*ptah, "up", "--state-dir", str(state)], check=True, capture_output=True)
    reuse_s = time.monotonic() - t0
    try:
        cfg = ClusterConfig.load(state)
        p = cfg.pki
        api = ApiClient(Credentials(cfg.server, p.ca_crt, p.crt("admin"), p.key("admin")))
        ns = "bench"
        api.post("/api/v1/namespaces", {"metadata": {"name": ns}})
        wait(lambda: api.get_or_none(f"/api/v1/namespaces/{ns}/serviceaccounts/default"))
        running: list[float] = []
        for i in range(args.jobs):
            name = f"sleep-{i}"
            t0 = time.monotonic()
            api.post(f"/apis/batch/v1/namespaces/{ns}/jobs", job(name, ["sleep", "30"]))
            t1 = wait(lambda name=name: pod_phase(api, ns, name) == "Running")
            running.append(t1 - t0)
        done: list[float] = []
        for i in range(args.jobs):
            name = f"echo-{i}"
            t0 = time.monotonic()
            api.post(f"/apis/batch/v1/namespaces/{ns}/jobs", job(name, ["echo", "hi"]))
            t1 = wait(lambda name=name: complete(api, ns, name))
            done.append(t1 - t0)
        result = {
            "kubernetes": paths.KUBERNETES_VERSION,
            "up_to_ready_s": round(up_s, 2),
            "up_reuse_s": round(reuse_s, 2),
            "job_create_to_pod_running_s": {
                "median": round(statistics.median(running), 3),
                "min": round(min(running), 3),
                "max": round(max(running), 3),
                "n": len(running),
            },
            "job_create_to_complete_s": {
                "median": round(statistics.median(done), 3),
                "min": round(min(done), 3),
                "max": round(max(done), 3),
                "n": len(done),
            },
        }
        print(json.dumps(result, indent=2))
    finally:
        if not args.keep:
            cluster.down(state, purge=True)
        else:
            print(f"left running; state: {state}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
