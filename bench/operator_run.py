"""The operator on the real local control plane: N PtahSchemas on SQLite from creation
to Ready, then idle.

Starts (or reuses) a dev cluster, runs ``ptah operator run`` as its own process, creates
N schemas at once, and prints: time until all are Ready, passes and Jobs per schema
(from the operator's /metrics), and whether an idle minute writes anything (the
resourceVersions must not move).

    python bench/operator_run.py [--schemas 10] [--state-dir DIR]

(Not bench/operator.py: a script there would shadow the standard library's operator.)
"""

from __future__ import annotations

import argparse
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

from ptah.devcluster import cluster as devcluster
from ptah.kube.kinds import SCHEMA, SECRET
from ptah.kube.real import RealCluster

ROOT = Path(__file__).resolve().parents[1]
SQL = "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL);"


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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--schemas", type=int, default=10)
    ap.add_argument("--state-dir", default=None, help="reuse this dev cluster")
    ap.add_argument("--idle-seconds", type=float, default=30.0)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="ptah-bench-op-"))
    state = Path(args.state_dir) if args.state_dir else tmp / "cluster"
    info = devcluster.up(state, timeout=180.0)
    kubectl = str(info.binaries.kubectl)
    kc = str(info.kubeconfig)
    ns = f"bench-{uuid.uuid4().hex[:6]}"
    subprocess.run(
        [kubectl, f"--kubeconfig={kc}", "apply", "-f", str(ROOT / "deploy/crds")],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [kubectl, f"--kubeconfig={kc}", "create", "ns", ns], check=True, capture_output=True
    )
    metrics_port, health_port = _port(), _port()
    ptah = Path(sys.executable).parent / "ptah"
    log = (tmp / "operator.log").open("wb")
    proc = subprocess.Popen(
        [
            str(ptah),
            "operator",
            "run",
            f"--kubeconfig={kc}",
            f"--namespace-scope={ns}",
            f"--lock-namespace={ns}",
            f"--metrics-port={metrics_port}",
            f"--health-port={health_port}",
            "--bind-address=127.0.0.1",
            "--poll-seconds=1",
            "--workers=4",
        ],
        stdout=log,
        stderr=log,
    )
    try:
        with RealCluster.from_kubeconfig(kc) as kube:
            for i in range(args.schemas):
                kube.create(
                    SECRET,
                    {
                        "metadata": {"name": f"db{i}", "namespace": ns},
                        "stringData": {"url": f"sqlite:///{tmp}/db{i}.db"},
                    },
                )
            t0 = time.monotonic()
            for i in range(args.schemas):
                kube.create(
                    SCHEMA,
                    {
                        "metadata": {"name": f"s{i}", "namespace": ns},
                        "spec": {
                            "target": {"engine": "sqlite", "secretRef": {"name": f"db{i}"}},
                            "source": {"inline": SQL},
                        },
                    },
                )
            while True:
                objs = kube.list(SCHEMA, ns)
                done = [o for o in objs if (o.get("status") or {}).get("phase") == "Ready"]
                if len(done) == args.schemas:
                    break
                if time.monotonic() - t0 > 600:
                    raise SystemExit("not all Ready after 600 s")
                time.sleep(0.2)
            elapsed = time.monotonic() - t0
            m = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics").text
            events = [line for line in m.splitlines() if line.startswith("ptah_watch_events_total")]
            passes = _metric(m, "ptah_reconcile_total")
            jobs = len(re.findall(r'"event": "job_created"', (tmp / "operator.log").read_text()))
            rvs = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in objs}
            time.sleep(args.idle_seconds)
            after = {
                o["metadata"]["name"]: o["metadata"]["resourceVersion"]
                for o in kube.list(SCHEMA, ns)
            }
            idle_passes = (
                _metric(
                    httpx.get(f"http://127.0.0.1:{metrics_port}/metrics").text,
                    "ptah_reconcile_total",
                )
                - passes
            )
        print(f"schemas: {args.schemas}")
        print(f"create -> all Ready: {elapsed:.1f} s ({elapsed / args.schemas:.2f} s per schema)")
        print(
            f"passes per schema: {passes / args.schemas:.1f}; Jobs per schema: "
            f"{jobs / args.schemas:.1f} (plan, apply, verifying plan)"
        )
        print("watch events:", *sorted(events), sep="\n  ")
        print(
            f"idle {args.idle_seconds:.0f} s: {idle_passes:.0f} passes, "
            f"writes: {sum(rvs[k] != after[k] for k in rvs)}"
        )
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()
        if not args.state_dir:
            devcluster.down(state)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
