"""A PtahRollout over N SQLite targets on the real local control plane, beside a
reference run of the same N PtahSchemas created by hand.

Starts (or reuses) a dev cluster, runs ``ptah operator run`` as its own process, and
for each run prints: time from create to all Ready, the operator's CPU seconds and peak
RSS (from /proc), API requests per target made by passes (``ptah_api_requests_total``),
and writes during an idle period after convergence (target: 0; the operator is started
with a short resync so idle passes happen). The rollout approves nothing by hand: the
template's policy needs no approval, so the figures are the fan-out's own cost.

    python bench/rollout.py [--targets 200] [--max-parallel 50] [--no-reference]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from ptah.kube.kinds import APPROVAL, PLAN, ROLLOUT, SCHEMA, SECRET
from ptah.kube.real import RealCluster
from ptah.testing.devcluster import cluster as devcluster

ROOT = Path(__file__).resolve().parents[1]
SQL = "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL);"
TICK = os.sysconf("SC_CLK_TCK")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _metric(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _cpu_rss(pid: int) -> tuple[float, float]:
    """(user+system CPU seconds, peak RSS in MiB) of a live process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICK
    peak = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            peak = int(line.split()[1]) / 1024
    return cpu, peak


@dataclass
class Figures:
    seconds: float
    cpu: float
    rss: float
    requests: float
    passes: float
    idle_passes: float
    idle_writes: int


def _versions(kube: RealCluster, ns: str) -> dict[str, str]:
    return {
        f"{o['kind']}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
        for kind in (ROLLOUT, SCHEMA, PLAN, APPROVAL)
        for o in kube.list(kind, ns)
    }


def run(kc: str, kubectl: str, n: int, rollout: bool, args: argparse.Namespace) -> Figures:
    tmp = Path(tempfile.mkdtemp(prefix="ptah-bench-rollout-"))
    ns = f"bench-{'r' if rollout else 'ref'}-{uuid.uuid4().hex[:6]}"
    subprocess.run([kubectl, f"--kubeconfig={kc}", "create", "ns", ns], check=True,
                   capture_output=True)  # fmt: skip
    metrics_port, health_port = _port(), _port()
    ptah = Path(sys.executable).parent / "ptah"
    log = (tmp / "operator.log").open("wb")
    proc = subprocess.Popen(
        [
            str(ptah), "operator", "run", f"--kubeconfig={kc}", f"--namespace-scope={ns}",
            f"--lock-namespace={ns}", f"--metrics-port={metrics_port}",
            f"--health-port={health_port}", "--bind-address=127.0.0.1", "--poll-seconds=1",
            f"--workers={args.workers}", f"--resync-seconds={args.resync}",
        ],
        stdout=log, stderr=log,
    )  # fmt: skip
    try:
        with RealCluster.from_kubeconfig(kc) as kube:
            for i in range(n):
                kube.create(
                    SECRET,
                    {
                        "metadata": {"name": f"db{i:04d}", "namespace": ns,
                                     "labels": {"fleet": "bench"}},
                        "stringData": {"url": f"sqlite:///{tmp}/db{i}.db"},
                    },
                )  # fmt: skip
            _wait_ready(health_port)
            t0 = time.monotonic()
            if rollout:
                kube.create(
                    ROLLOUT,
                    {
                        "metadata": {"name": "fleet", "namespace": ns},
                        "spec": {
                            "template": {"engine": "sqlite", "schema": {"source": {"inline": SQL}}},
                            "targets": {"selector": {"matchLabels": {"fleet": "bench"}}},
                            "strategy": {"canary": 1, "maxParallel": args.max_parallel},
                        },
                    },
                )
            else:
                for i in range(n):
                    kube.create(
                        SCHEMA,
                        {
                            "metadata": {"name": f"s{i:04d}", "namespace": ns},
                            "spec": {
                                "target": {"engine": "sqlite", "secretRef": {"name": f"db{i:04d}"}},
                                "source": {"inline": SQL},
                            },
                        },
                    )
            while not _all_ready(kube, ns, n, rollout):
                if time.monotonic() - t0 > args.timeout:
                    raise SystemExit(f"not all Ready after {args.timeout} s ({tmp}/operator.log)")
                time.sleep(0.5)
            elapsed = time.monotonic() - t0
            time.sleep(2)  # let the last echoes settle before the idle window
            text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics").text
            requests = _metric(text, "ptah_api_requests_total")
            passes = _metric(text, "ptah_reconcile_total")
            before = _versions(kube, ns)
            time.sleep(args.idle_seconds)
            after = _versions(kube, ns)
            text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics").text
            idle_passes = _metric(text, "ptah_reconcile_total") - passes
            cpu, rss = _cpu_rss(proc.pid)
        return Figures(
            seconds=elapsed,
            cpu=cpu,
            rss=rss,
            requests=requests,
            passes=passes,
            idle_passes=idle_passes,
            idle_writes=sum(before.get(k) != v for k, v in after.items())
            + len(before.keys() - after.keys()),
        )
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()
        subprocess.run([kubectl, f"--kubeconfig={kc}", "delete", "ns", ns, "--wait=false"],
                       capture_output=True, check=False)  # fmt: skip
        _release(kc, ns)
        shutil.rmtree(tmp, ignore_errors=True)


def _wait_ready(port: int) -> None:
    for _ in range(120):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit("the operator never became ready")


def _all_ready(kube: RealCluster, ns: str, n: int, rollout: bool) -> bool:
    if rollout:
        obj: Any = kube.get(ROLLOUT, ns, "fleet") or {}
        status = obj.get("status") or {}
        return bool(
            status.get("phase") == "Ready" and (status.get("counts") or {}).get("ready") == n
        )
    done = [o for o in kube.list(SCHEMA, ns) if (o.get("status") or {}).get("phase") == "Ready"]
    return len(done) == n


def _release(kc: str, ns: str) -> None:
    """Nothing removes the finalizers once the operator is gone: release them so the
    namespace can be deleted."""
    with RealCluster.from_kubeconfig(kc) as kube:
        for o in kube.list(SCHEMA, ns):
            if o["metadata"].get("finalizers"):
                kube.patch(SCHEMA, ns, o["metadata"]["name"], {"metadata": {"finalizers": None}})


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--targets", type=int, default=200)
    ap.add_argument("--max-parallel", type=int, default=50)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--resync", type=float, default=10.0, help="operator resync seconds")
    ap.add_argument("--idle-seconds", type=float, default=30.0)
    ap.add_argument("--timeout", type=float, default=1800.0)
    ap.add_argument("--no-reference", action="store_true", help="skip the hand-made run")
    ap.add_argument("--state-dir", default=None, help="reuse this dev cluster")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="ptah-bench-cluster-"))
    state = Path(args.state_dir) if args.state_dir else tmp / "cluster"
    info = devcluster.up(state, timeout=180.0)
    kubectl, kc = str(info.binaries.kubectl), str(info.kubeconfig)
    subprocess.run([kubectl, f"--kubeconfig={kc}", "apply", "-f", str(ROOT / "deploy/crds")],
                   check=True, capture_output=True)  # fmt: skip
    try:
        n = args.targets
        rows = [("rollout", run(kc, kubectl, n, True, args))]
        if not args.no_reference:
            rows.append(("reference (N PtahSchemas by hand)", run(kc, kubectl, n, False, args)))
    finally:
        if not args.state_dir:
            devcluster.down(state)
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"targets: {n} SQLite; rollout canary 1, maxParallel {args.max_parallel}; workers "
        f"{args.workers}; idle window {args.idle_seconds:.0f} s (resync {args.resync:g} s)"
    )
    for label, f in rows:
        print(f"{label}:")
        print(f"  create -> all Ready:   {f.seconds:8.1f} s")
        print(f"  operator CPU:          {f.cpu:8.1f} s   peak RSS {f.rss:.0f} MiB")
        print(f"  API requests/target:   {f.requests / n:8.1f}   passes/target {f.passes / n:.1f}")
        print(f"  idle after convergence: {f.idle_passes:.0f} passes, {f.idle_writes} writes")
    if len(rows) == 2:
        r, ref = rows[0][1], rows[1][1]
        print("rollout / reference:")
        ratios = (
            f"  time x{r.seconds / ref.seconds:.2f}  CPU x{r.cpu / max(ref.cpu, 0.01):.2f}  "
            f"RSS x{r.rss / max(ref.rss, 1):.2f}  "
            f"requests x{r.requests / max(ref.requests, 1):.2f}"
        )
        print(ratios)
    return 0


if __name__ == "__main__":
    sys.exit(main())
