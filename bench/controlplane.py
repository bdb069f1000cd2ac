"""Bench the local control plane: the process node agent beside the real node.

Prints, for each node kind (``agent``, ``real``), as JSON:

* ``up_cold_s``: ``ptah dev up`` (subprocess, warm binary cache) on a fresh state dir
  until ready: etcd, apiserver, controller-manager, the node (agent; or containerd with
  the pause image, kube-scheduler, kubelet), Node Ready, service-account tokens;
* ``up_restart_s``: ``up`` on the same state dir after ``down`` (data, PKI, and on the
  real node the images in containerd, kept);
* ``up_reuse_s``: ``up`` on the running cluster;
* ``pod_start_s``: Job create -> its Pod Running, for N Jobs (median, min, max), the
  runner image (``ptah/ptah:dev``) running ``sleep``;
* ``job_complete_s``: Job create -> Complete, the runner image's entrypoint
  (``ptah-runner --help``, as runner Jobs start it);
* real node only: ``image_build_cold_s`` (``--cold-images``: the image store emptied
  first, so the base from mmdebstrap and every layer are built), ``image_build_warm_s``
  (nothing changed), ``image_build_source_change_s`` (one source file touched: the
  layers from its ``COPY`` on), ``image_load_s`` (base and project into a fresh node).

Ratios ``real/agent`` are printed for the latencies and ``up`` times.

Usage: python bench/controlplane.py [--jobs N] [--only agent|real] [--cold-images]
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

from ptah.testing.devcluster import cluster, imagebuild, paths
from ptah.testing.devcluster.apiclient import ApiClient, Credentials
from ptah.testing.devcluster.config import ClusterConfig

JSON = dict[str, Any]
ROOT = Path(__file__).resolve().parents[1]
IMAGE = "ptah/ptah:dev"


def job(name: str, command: list[str] | None, args: list[str]) -> JSON:
    container: JSON = {"name": "main", "image": IMAGE, "args": args}
    if command is not None:
        container["command"] = command
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
        },
    }


def wait(probe: Any, timeout: float = 120.0) -> float:
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
    conds = j.get("status", {}).get("conditions") or []
    if any(c["type"] == "Failed" and c["status"] == "True" for c in conds):
        raise RuntimeError(f"job {name} failed")
    return any(c["type"] == "Complete" and c["status"] == "True" for c in conds)


def stats(xs: list[float]) -> JSON:
    return {
        "median": round(statistics.median(xs), 3),
        "min": round(min(xs), 3),
        "max": round(max(xs), 3),
        "n": len(xs),
    }


def timed(argv: list[str]) -> float:
    t0 = time.monotonic()
    subprocess.run(argv, check=True, capture_output=True)
    return time.monotonic() - t0


def bench_node(kind: str, jobs: int) -> JSON:
    state = Path(tempfile.mkdtemp(prefix=f"ptah-bench-{kind}-"))
    up = [sys.executable, "-m", "ptah.cli.main", "dev", "up", "--state-dir", str(state)]
    up += ["--node", kind]
    down = [sys.executable, "-m", "ptah.cli.main", "dev", "down", "--state-dir", str(state)]
    out: JSON = {}
    try:
        out["up_cold_s"] = round(timed(up), 2)
        if kind == "real":
            t0 = time.monotonic()
            cfg = ClusterConfig.load(state)
            for name in (imagebuild.BASE_IMAGE, imagebuild.PROJECT_IMAGE):
                imagebuild.load(cluster.layout(cfg), name)
            out["image_load_s"] = round(time.monotonic() - t0, 2)
        subprocess.run(down, check=True, capture_output=True)
        out["up_restart_s"] = round(timed(up), 2)
        out["up_reuse_s"] = round(timed(up), 2)
        cfg = ClusterConfig.load(state)
        p = cfg.pki
        api = ApiClient(Credentials(cfg.server, p.ca_crt, p.crt("admin"), p.key("admin")))
        ns = "bench"
        api.post("/api/v1/namespaces", {"metadata": {"name": ns}})
        wait(lambda: api.get_or_none(f"/api/v1/namespaces/{ns}/serviceaccounts/default"))
        running: list[float] = []
        for i in range(jobs):
            name = f"sleep-{i}"
            t0 = time.monotonic()
            api.post(f"/apis/batch/v1/namespaces/{ns}/jobs", job(name, ["sleep"], ["30"]))
            running.append(wait(lambda name=name: pod_phase(api, ns, name) == "Running") - t0)
        done: list[float] = []
        for i in range(jobs):
            name = f"runner-{i}"
            t0 = time.monotonic()
            api.post(f"/apis/batch/v1/namespaces/{ns}/jobs", job(name, None, ["--help"]))
            done.append(wait(lambda name=name: complete(api, ns, name)) - t0)
        out["pod_start_s"] = stats(running)
        out["job_complete_s"] = stats(done)
    finally:
        cluster.down(state, purge=True)
    return out


def bench_images(cold: bool) -> JSON:
    out: JSON = {}
    if cold:
        imagebuild.clear_store()
    imagebuild.store().mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    imagebuild.build_pause()
    imagebuild.build_project(ROOT)
    out["image_build_cold_s" if cold else "image_build_first_s"] = round(time.monotonic() - t0, 2)
    out["image_build_warm_s"] = round(imagebuild.build_project(ROOT).seconds, 2)
    # A source change: a copy of the build context with one module touched, so the
    # checkout itself is never modified.
    with tempfile.TemporaryDirectory(prefix="ptah-bench-ctx-") as tmp:
        ctx = Path(tmp)
        for name in ("Dockerfile", ".dockerignore", "pyproject.toml", "README.md"):
            if (ROOT / name).exists():
                (ctx / name).write_bytes((ROOT / name).read_bytes())
        subprocess.run(["cp", "-a", str(ROOT / "src"), str(ctx / "src")], check=True)
        for cache in (ctx / "src").rglob("__pycache__"):
            subprocess.run(["rm", "-rf", str(cache)], check=True)
        marker = ctx / "src" / "ptah" / "__init__.py"
        marker.write_text(marker.read_text() + f"\n# bench {time.time()}\n")
        tag = "docker.io/ptah/ptah:bench"
        imagebuild.build_project(ctx, tag=tag)  # same context once: its layers cached
        marker.write_text(marker.read_text() + f"# bench {time.time()}\n")
        changed = imagebuild.build_project(ctx, tag=tag)
        out["image_build_source_change_s"] = round(changed.seconds, 2)
        imagebuild.buildah("rmi", tag)
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=5)
    parser.add_argument("--only", choices=("agent", "real"), default=None)
    parser.add_argument(
        "--cold-images", action="store_true", help="empty the image store first (slow)"
    )
    args = parser.parse_args()
    kinds = [args.only] if args.only else ["agent", "real"]
    paths.Binaries.locate(real="real" in kinds)  # fail early, naming what is missing
    result: JSON = {"kubernetes": paths.KUBERNETES_VERSION}
    if "real" in kinds:
        result["images"] = bench_images(args.cold_images)
    for kind in kinds:
        result[kind] = bench_node(kind, args.jobs)
    if len(kinds) == 2:
        a, r = result["agent"], result["real"]
        result["ratio_real_to_agent"] = {
            key: round(r[key] / a[key], 2) if a[key] else None
            for key in ("up_cold_s", "up_restart_s", "up_reuse_s")
        } | {
            key: round(r[key]["median"] / a[key]["median"], 2)
            for key in ("pod_start_s", "job_complete_s")
        }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
