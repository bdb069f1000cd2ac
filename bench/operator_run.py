"""The operator on the real local control plane: PtahSchemas on SQLite from creation to
Ready at several scales, then a converged fleet left idle.

For one schema first (the reference), then each N of ``--schemas`` (default 10,50,200),
in a namespace of its own with a fresh ``ptah operator run`` (the chart's defaults unless
``--workers``/``--poll-seconds`` say otherwise): N Secrets, then N PtahSchemas at once,
and the bench watches (it never polls) until all are Ready. Per N it prints:

* time to all Ready, per schema, and against N times the single schema's time in the
  same run (``overlap``: 1.0 would mean nothing overlaps; lower is better);
* passes, Jobs and completed operations per schema; API requests per completed
  operation (the operator's ``ptah_kube_requests_total``: every request it sent);
* CPU seconds: the operator's per operation, and per schema by component (operator,
  kube-apiserver, etcd, kube-controller-manager, node agent, runner processes);
* latency from a Job's completion (its Complete/Failed condition, seen by this bench's
  watch) to its resource's next status write and to its next phase: p50 and p95.

Then ``--converged M`` (default 1000; 0 skips) PtahSchemas converge under one operator,
which is then left alone for ``--idle-seconds`` (default 60): its RSS (and peak), the
requests of the idle minute by verb and resource, passes, and the writes to the
resources (their resourceVersions must not move). Drift checks are set to one hour so
that none falls due in the idle window, and that operator resyncs every
``--resync-seconds`` (default 20, so the idle minute holds periodic resyncs): reads are
then only watch renewals, the leader Lease, and what a periodic resync reads again
(nothing, for a fleet at rest: reads are bounded by the drift interval).

    .venv/bin/python bench/operator_run.py [--schemas 10,50,200] [--converged 1000]
        [--resync-seconds 20] [--state-dir DIR]

(Not bench/operator.py: a script there would shadow the standard library's operator.)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from ptah.kube.kinds import JOB, SCHEMA, SECRET
from ptah.kube.real import RealCluster
from ptah.kube.watch import Watcher, WatchEvent
from ptah.testing.devcluster import cluster as devcluster

ROOT = Path(__file__).resolve().parents[1]
SQL = "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL);"
CLK = os.sysconf("SC_CLK_TCK")
COMPONENTS = ("kube-apiserver", "etcd", "kube-controller-manager", "node-agent")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_of(pid: int) -> tuple[float, float]:
    """(own, reaped children's) CPU seconds of ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    own = (int(fields[11]) + int(fields[12])) / CLK
    children = (int(fields[13]) + int(fields[14])) / CLK
    return own, children


def rss_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) in MB."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) / 1024
    return values["VmRSS"], values["VmHWM"]


# One client for the operator's local endpoints: a client per request loads the CA
# bundle each time (a run was lost to one such load failing under heavy load).
LOCAL = httpx.Client(trust_env=False)


def metrics(port: int) -> dict[str, float]:
    """The operator's counters, summed by metric name and by (name, labels)."""
    out: dict[str, float] = defaultdict(float)
    for line in LOCAL.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        out[name] += float(value)
        if "{" in name:
            out[name.split("{", 1)[0]] += float(value)
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@dataclass
class Timeline:
    """What this bench's own watches saw, with its own clock."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    schemas: dict[str, list[tuple[float, str | None, str]]] = field(
        default_factory=lambda: defaultdict(list)
    )  # name -> [(t, phase, resourceVersion)]
    job_done: dict[str, tuple[float, str]] = field(default_factory=dict)  # job -> (t, owner)
    ready: set[str] = field(default_factory=set)
    all_ready: threading.Event = field(default_factory=threading.Event)
    expected: int = 0

    def on_schema(self, event: WatchEvent) -> None:
        t = time.monotonic()
        meta, status = event.obj["metadata"], event.obj.get("status") or {}
        with self.lock:
            self.schemas[meta["name"]].append((t, status.get("phase"), meta["resourceVersion"]))
            if status.get("phase") == "Ready":
                self.ready.add(meta["name"])
            else:
                self.ready.discard(meta["name"])
            if self.expected and len(self.ready) >= self.expected:
                self.all_ready.set()

    def on_job(self, event: WatchEvent) -> None:
        t = time.monotonic()
        job = event.obj
        done = any(
            c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
            for c in (job.get("status") or {}).get("conditions") or []
        )
        owners = [
            r["name"]
            for r in job["metadata"].get("ownerReferences") or []
            if r.get("kind") == SCHEMA.kind
        ]
        with self.lock:
            if done and owners and job["metadata"]["name"] not in self.job_done:
                self.job_done[job["metadata"]["name"]] = (t, owners[0])

    def latencies(self) -> tuple[list[float], list[float]]:
        """Per completed Job: seconds to its owner's next status write, to its next phase."""
        to_write: list[float] = []
        to_phase: list[float] = []
        with self.lock:
            for t_done, owner in self.job_done.values():
                seen = self.schemas.get(owner, [])
                before = [e for e in seen if e[0] <= t_done]
                after = [e for e in seen if e[0] > t_done]
                if not after:
                    continue
                to_write.append(after[0][0] - t_done)
                phase = before[-1][1] if before else None
                moved = next((e for e in after if e[1] != phase), None)
                if moved is not None:
                    to_phase.append(moved[0] - t_done)
        return to_write, to_phase


@dataclass
class Bench:
    kubeconfig: str
    kubectl: str
    state: Path
    tmp: Path
    workers: int | None
    poll_seconds: float | None
    supervise_seconds: float | None = None
    seconds_per_schema: float = 6.0  # the time allowed to all Ready, per schema
    log_level: str | None = None  # the operators' (debug: one line per pass)
    keep: bool = False  # write each scale's timeline beside the logs
    extra_args: list[str] = field(default_factory=list)  # appended to the operator's argv

    def component_pids(self) -> dict[str, int]:
        procs = devcluster.procs(self.state)
        pids = {name: procs[name].pid() for name in COMPONENTS}
        return {name: pid for name, pid in pids.items() if pid is not None}

    def cpu_snapshot(self, operator: int) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, pid in self.component_pids().items():
            own, children = cpu_of(pid)
            out[name] = own
            if name == "node-agent":
                out["runners"] = children  # the Pods' processes are the agent's children
        out["operator"] = cpu_of(operator)[0]
        return out

    def namespace(self) -> str:
        ns = f"bench-{uuid.uuid4().hex[:6]}"
        subprocess.run(
            [self.kubectl, f"--kubeconfig={self.kubeconfig}", "create", "ns", ns],
            check=True,
            capture_output=True,
        )
        return ns

    def operator(
        self, ns: str, log_name: str, resync: float | None = None
    ) -> tuple[subprocess.Popen[bytes], int]:
        metrics_port, health_port = _port(), _port()
        ptah = Path(sys.executable).parent / "ptah"
        argv = [
            str(ptah),
            "operator",
            "run",
            f"--kubeconfig={self.kubeconfig}",
            f"--namespace-scope={ns}",
            f"--lock-namespace={ns}",
            f"--metrics-port={metrics_port}",
            f"--health-port={health_port}",
            "--bind-address=127.0.0.1",
        ]
        if self.workers is not None:
            argv.append(f"--workers={self.workers}")
        if self.poll_seconds is not None:
            argv.append(f"--poll-seconds={self.poll_seconds}")
        if self.supervise_seconds is not None:
            argv.append(f"--supervise-seconds={self.supervise_seconds}")
        argv += self.extra_args
        if resync is not None:
            argv.append(f"--resync-seconds={resync}")
        if self.log_level is not None:
            argv.append(f"--log-level={self.log_level}")
        log = (self.tmp / log_name).open("wb")
        proc = subprocess.Popen(argv, stdout=log, stderr=log)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                ready = LOCAL.get(f"http://127.0.0.1:{health_port}/readyz", timeout=2)
                if ready.status_code == 200 and metrics(metrics_port)["ptah_leader"] == 1:
                    return proc, metrics_port
            except httpx.HTTPError:
                pass
            if proc.poll() is not None:
                raise SystemExit(f"the operator exited; see {self.tmp / log_name}")
            time.sleep(0.2)
        proc.kill()
        proc.wait()
        raise SystemExit("the operator did not become ready")

    def create(self, kube: RealCluster, ns: str, n: int) -> None:
        for i in range(n):
            kube.create(
                SECRET,
                {
                    "metadata": {"name": f"db{i}", "namespace": ns},
                    "stringData": {"url": f"sqlite:///{self.tmp}/{ns}-db{i}.db"},
                },
            )

    def schemas(self, kube: RealCluster, ns: str, n: int, drift: int | None) -> None:
        for i in range(n):
            spec: dict[str, Any] = {
                "target": {"engine": "sqlite", "secretRef": {"name": f"db{i}"}},
                "source": {"inline": SQL},
            }
            if drift is not None:
                spec["driftCheckIntervalSeconds"] = drift
            kube.create(SCHEMA, {"metadata": {"name": f"s{i}", "namespace": ns}, "spec": spec})

    def converge(
        self, n: int, drift: int | None = None, idle: float = 0.0, resync: float | None = None
    ) -> dict[str, Any]:
        """N schemas from creation to all Ready under a fresh operator; figures."""
        ns = self.namespace()
        proc, port = self.operator(ns, f"operator-{ns}.log", resync)
        line = Timeline(expected=n)
        stop = threading.Event()
        try:
            with RealCluster.from_kubeconfig(self.kubeconfig) as kube:
                watchers = [
                    Watcher(kube, SCHEMA, line.on_schema, namespace=ns, stop=stop),
                    Watcher(kube, JOB, line.on_job, namespace=ns, stop=stop),
                ]
                for w in watchers:
                    w.start()
                for w in watchers:
                    w.synced.wait(30)
                self.create(kube, ns, n)
                m0, c0 = metrics(port), self.cpu_snapshot(proc.pid)
                t0 = time.monotonic()
                self.schemas(kube, ns, n, drift)
                if not line.all_ready.wait(max(600.0, n * self.seconds_per_schema)):
                    raise SystemExit(f"{len(line.ready)}/{n} Ready after the timeout ({ns})")
                elapsed = time.monotonic() - t0
                m1, c1 = metrics(port), self.cpu_snapshot(proc.pid)
                if self.keep:
                    self.dump(line, ns)
                result: dict[str, Any] = {
                    "n": n,
                    "elapsed": elapsed,
                    "m": {k: m1[k] - m0.get(k, 0.0) for k in m1},
                    "cpu": {k: c1[k] - c0.get(k, 0.0) for k in c1},
                    "latency": line.latencies(),
                }
                if idle:
                    result["idle"] = self.idle(kube, ns, proc.pid, port, idle)
                    result["idle"]["resync"] = resync
                return result
        finally:
            stop.set()
            proc.terminate()
            proc.wait(60)

    def dump(self, line: Timeline, ns: str) -> None:
        """The bench's own timeline (wall clock, to set beside the operator's log)."""
        offset = time.time() - time.monotonic()
        with line.lock:
            data = {
                "jobs": {j: (t + offset, o) for j, (t, o) in line.job_done.items()},
                "schemas": {
                    k: [(t + offset, ph, rv) for t, ph, rv in v] for k, v in line.schemas.items()
                },
            }
        (self.tmp / f"timeline-{ns}.json").write_text(json.dumps(data))

    def idle(
        self, kube: RealCluster, ns: str, pid: int, port: int, seconds: float
    ) -> dict[str, Any]:
        rss, peak = rss_mb(pid)
        before = {
            o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in kube.list(SCHEMA, ns)
        }
        m0, c0 = metrics(port), cpu_of(pid)[0]
        time.sleep(seconds)
        m1, c1 = metrics(port), cpu_of(pid)[0]
        after = {
            o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in kube.list(SCHEMA, ns)
        }
        requests = {
            k.split("{", 1)[1].rstrip("}"): m1[k] - m0.get(k, 0.0)
            for k in m1
            if k.startswith("ptah_kube_requests_total{") and m1[k] - m0.get(k, 0.0)
        }
        return {
            "rss": rss,
            "peak": peak,
            "seconds": seconds,
            "requests": requests,
            "passes": m1["ptah_reconcile_total"] - m0["ptah_reconcile_total"],
            "cpu": c1 - c0,
            "moved": sum(before[k] != after.get(k) for k in before),
            "resources": len(before),
        }


def report(r: dict[str, Any], single: float | None) -> None:
    n, m, cpu = r["n"], r["m"], r["cpu"]
    ops = m.get("ptah_operations_total", 0.0) or float("nan")
    requests = m.get("ptah_kube_requests_total", 0.0)
    line = f"schemas={n:<5d} all Ready {r['elapsed']:7.1f} s  {r['elapsed'] / n:5.2f} s/schema"
    if single:
        line += f"  overlap {r['elapsed'] / (n * single):5.3f} (of {n} x {single:.2f} s)"
    print(line)
    writes = sum(
        v
        for k, v in m.items()
        if k.startswith("ptah_kube_requests_total{")
        and any(f'verb="{w}"' in k for w in ("create", "patch", "update", "delete"))
    )
    print(
        f"  per schema: passes {m.get('ptah_reconcile_total', 0) / n:.1f}, Jobs "
        f"{m.get('ptah_jobs_created_total', 0) / n:.1f}, operations {ops / n:.1f}; "
        f"API requests per operation {requests / ops:.1f} (writes {writes / ops:.1f}); "
        f"operator CPU per operation {cpu['operator'] / ops * 1000:.0f} ms"
    )
    kinds = sorted(
        ((k, v) for k, v in m.items() if k.startswith("ptah_kube_requests_total{")),
        key=lambda kv: -kv[1],
    )
    print(
        "  requests per operation: "
        + ", ".join(f"{_labels(k)} {v / ops:.1f}" for k, v in kinds[:10] if v / ops >= 0.1)
    )
    parts = ", ".join(f"{k} {v / n:.3f}" for k, v in sorted(cpu.items(), key=lambda kv: -kv[1]))
    print(f"  CPU s per schema: {parts} (total {sum(cpu.values()) / n:.3f})")
    to_write, to_phase = r["latency"]
    if to_write and to_phase:
        print(
            f"  Job complete -> next status write p50 {percentile(to_write, 0.5):.3f} s "
            f"p95 {percentile(to_write, 0.95):.3f} s; -> next phase p50 "
            f"{percentile(to_phase, 0.5):.3f} s p95 {percentile(to_phase, 0.95):.3f} s "
            f"({len(to_phase)} Jobs; target p50 < 1 s)"
        )


def report_ratio(now: dict[str, Any], ref: dict[str, Any]) -> None:
    """The configured run against the reference run of the same scale, same script."""

    def per_op(r: dict[str, Any]) -> float:
        m = r["m"]
        return float(m.get("ptah_kube_requests_total", 0.0)) / (
            m.get("ptah_operations_total", 0.0) or float("nan")
        )

    def p50(r: dict[str, Any]) -> float:
        to_phase = r["latency"][1]
        return percentile(to_phase, 0.5) if to_phase else float("nan")

    print(
        f"  configured / reference: all Ready {now['elapsed'] / ref['elapsed']:.3f}, "
        f"API requests per operation {per_op(now) / per_op(ref):.3f}, "
        f"Job complete -> next phase p50 {p50(now) / p50(ref):.3f} "
        f"({p50(now):.3f} vs {p50(ref):.3f} s)"
    )


def _labels(key: str) -> str:
    """``name{verb="get",resource="leases"}`` -> ``get leases``."""
    inner = key.split("{", 1)[1].rstrip("}")
    return " ".join(part.split("=", 1)[1].strip('"') for part in inner.split(","))


def report_idle(r: dict[str, Any]) -> None:
    i = r["idle"]
    per_minute = 60.0 / i["seconds"]
    reqs = ", ".join(
        f"{_labels('{' + k + '}')} {v * per_minute:.0f}"
        for k, v in sorted(i["requests"].items(), key=lambda kv: -kv[1])
    )
    writes = sum(
        v
        for k, v in i["requests"].items()
        if any(f'verb="{w}"' in k for w in ("create", "patch", "update", "delete"))
    )
    lease_writes = sum(
        v
        for k, v in i["requests"].items()
        if 'resource="leases"' in k
        and any(f'verb="{w}"' in k for w in ("create", "patch", "update", "delete"))
    )
    print(
        f"converged={i['resources']}: operator RSS {i['rss']:.0f} MB (peak {i['peak']:.0f} MB; "
        f"target <= 200 MB)"
    )
    if i.get("resync"):
        print(f"  periodic resync every {i['resync']:.0f} s during the idle window")
    print(
        f"  idle minute: {sum(i['requests'].values()) * per_minute:.0f} requests ({reqs}); "
        f"writes {writes * per_minute:.0f} (the leader's Lease {lease_writes * per_minute:.0f}); "
        f"passes {i['passes'] * per_minute:.0f}; resources written {i['moved']}; "
        f"operator CPU {i['cpu'] * per_minute:.2f} s"
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--schemas", default="10,50,200", help="comma-separated scales")
    ap.add_argument("--converged", type=int, default=1000, help="fleet for RSS/idle; 0 skips")
    ap.add_argument("--idle-seconds", type=float, default=60.0)
    ap.add_argument("--state-dir", default=None, help="reuse this dev cluster")
    ap.add_argument("--workers", type=int, default=None, help="default: the operator's")
    ap.add_argument("--poll-seconds", type=float, default=None, help="default: the operator's")
    ap.add_argument("--supervise-seconds", type=float, default=None, help="default: the operator's")
    ap.add_argument(
        "--operator-args",
        default="",
        help="more arguments of the configured operator, space-separated "
        "(e.g. '--max-operations=32')",
    )
    ap.add_argument(
        "--reference-args",
        default=None,
        help="run each --schemas scale first with an operator given these arguments instead "
        "of --operator-args (e.g. '--max-operations=0': unbounded; '--supervise-seconds=5': "
        "every pass of a running Job, as before the watches drove supervision), then as "
        "configured, and print the ratios",
    )
    ap.add_argument("--resync-seconds", type=float, default=20.0, help="the idle fleet's")
    ap.add_argument("--keep", action="store_true", help="keep the operators' logs")
    ap.add_argument("--log-level", default=None, help="the operators' (debug: every pass)")
    ap.add_argument(
        "--timeout-per-schema", type=float, default=6.0, help="seconds allowed per schema"
    )
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="ptah-bench-op-"))
    state = Path(args.state_dir) if args.state_dir else tmp / "cluster"
    info = devcluster.up(state, timeout=180.0)
    kubectl, kc = str(info.binaries.kubectl), str(info.kubeconfig)
    subprocess.run(
        [kubectl, f"--kubeconfig={kc}", "apply", "-f", str(ROOT / "deploy/crds")],
        check=True,
        capture_output=True,
    )
    bench = Bench(
        kc,
        kubectl,
        state,
        tmp,
        args.workers,
        args.poll_seconds,
        args.supervise_seconds,
        args.timeout_per_schema,
        args.log_level,
        args.keep,
        args.operator_args.split(),
    )
    try:
        one = bench.converge(1)
        single = one["elapsed"]
        report(one, None)
        for n in (int(x) for x in args.schemas.split(",") if x.strip()):
            if args.reference_args is None:
                report(bench.converge(n), single)
                continue
            configured = bench.extra_args
            bench.extra_args = args.reference_args.split()
            print(f"reference: operator {args.reference_args}")
            ref = bench.converge(n)
            report(ref, single)
            bench.extra_args = configured
            print(f"configured: operator {' '.join(configured) or '(defaults)'}")
            now = bench.converge(n)
            report(now, single)
            report_ratio(now, ref)
        if args.converged:
            fleet = bench.converge(
                args.converged, drift=3600, idle=args.idle_seconds, resync=args.resync_seconds
            )
            report(fleet, single)  # its convergence is one more scale
            report_idle(fleet)
    finally:
        if not args.state_dir:
            devcluster.down(state)
        if args.keep:
            print(f"logs kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
