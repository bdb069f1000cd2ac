"""Helpers for the end-to-end tests: the operator as a child process, resource and
status helpers, PostgreSQL helpers. Fixtures live in conftest.py."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg
from prometheus_client.parser import text_string_to_metric_families

from ptah.kube.kinds import APPROVAL, CONFIGMAP, EVENT, JOB, PLAN, SCHEMA, SECRET, Kind
from ptah.kube.real import RealCluster
from support.databases import db_env, in_ci, missing, with_database
from support.wait import wait_for

__all__ = ["db_env", "in_ci", "missing", "wait_for", "with_database"]

ROOT = Path(__file__).resolve().parents[2]
PTAH = Path(sys.executable).parent / "ptah"


def _same(url: str) -> str:
    return url


#: How a runner Pod must write a database URL; the ``cluster`` fixture sets it (a
#: loopback host becomes the node's bridge address). ``secret`` applies it.
pod_url: Callable[[str], str] = _same
#: Runner defaults every operator started here gets ($PTAH_RUNNER_DEFAULTS): on the real
#: node, the test data root as a hostPath volume at the same path, so a SQLite path or
#: a migrations directory means the same file on the host and in the runner container.
runner_defaults: Path | None = None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Operator:
    """``ptah operator run`` as a child process, restartable, its log kept in one file."""

    def __init__(
        self, kubeconfig: Path, namespace: str, log_path: Path, identity: str | None = None
    ) -> None:
        self.identity = identity or f"e2e-{namespace}"
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.health_port = 0
        self.metrics_port = 0
        self.runs = 0
        self.options: dict[str, str] = {
            "--poll-seconds": "1",
            "--proof-retry-seconds": "300",
            "--leader-lease-duration": "6",
            "--resync-seconds": "60",
        }

    def start(self, env: dict[str, str] | None = None, **options: str) -> Operator:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.options.update({f"--{k.replace('_', '-')}": v for k, v in options.items()})
        self.health_port, self.metrics_port = _free_port(), _free_port()
        argv = [
            str(PTAH),
            "operator",
            "run",
            f"--kubeconfig={self.kubeconfig}",
            f"--namespace-scope={self.namespace}",
            f"--lock-namespace={self.namespace}",
            f"--health-port={self.health_port}",
            f"--metrics-port={self.metrics_port}",
            "--bind-address=127.0.0.1",
            f"--identity={self.identity}",
        ]
        argv += [f"{k}={v}" for k, v in self.options.items()]
        child_env = {k: v for k, v in os.environ.items() if k != "PTAH_TEST_KILL_AT"}
        if runner_defaults is not None:
            child_env["PTAH_RUNNER_DEFAULTS"] = str(runner_defaults)
        child_env.update(env or {})
        self.runs += 1
        with self.log_path.open("ab") as log:
            log.write(f'{{"event": "e2e_start", "run": {self.runs}}}\n'.encode())
            log.flush()
            self.proc = subprocess.Popen(argv, stdout=log, stderr=log, env=child_env)
        wait_for(f"operator ready ({self.log_path})", self.ready, timeout=120)
        return self

    def ready(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"operator exited {self.proc.returncode}; see {self.log_path}")
        try:
            r = httpx.get(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2)
        except httpx.HTTPError:
            return False
        return r.status_code == 200

    def wait_exit(self, timeout: float = 120) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(
                f"operator still running after {timeout}s; see {self.log_path}"
            ) from exc

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 40) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(sig)
        return self.wait_exit(timeout)

    def lines(self) -> list[dict[str, Any]]:
        out = []
        for raw in self.log_path.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                obj = json.loads(raw)
                if isinstance(obj, dict):
                    out.append(obj)
        return out

    def metrics(self) -> str:
        return httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).text


# ------------------------------------------------------------------ helpers


def secret(kube: RealCluster, ns: str, name: str, url: str) -> dict[str, Any]:
    """A Secret with ``url`` as the runner Pod reaches that database (``pod_url``)."""
    body = {"metadata": {"name": name, "namespace": ns}, "stringData": {"url": pod_url(url)}}
    return kube.create(SECRET, body)


def schema(
    kube: RealCluster, ns: str, name: str, sql: str, secret_name: str, engine: str, **spec: Any
) -> dict[str, Any]:
    body = {
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "target": {"engine": engine, "secretRef": {"name": secret_name}},
            "source": {"inline": sql},
            **spec,
        },
    }
    return kube.create(SCHEMA, body)


def set_sql(kube: RealCluster, ns: str, name: str, sql: str) -> None:
    kube.patch(SCHEMA, ns, name, {"spec": {"source": {"inline": sql}}})


def status(kube: RealCluster, ns: str, name: str, kind: Kind = SCHEMA) -> dict[str, Any]:
    obj = kube.get(kind, ns, name)
    assert obj is not None, f"{kind.kind} {ns}/{name} is gone"
    return dict(obj.get("status") or {})


def wait_status(
    kube: RealCluster,
    ns: str,
    name: str,
    what: str,
    pred: Callable[[dict[str, Any]], bool],
    timeout: float = 90,
    log: Path | None = None,
    kind: Kind = SCHEMA,
    show: tuple[str, ...] = ("phase", "waitingFor", "lastMutation", "currentPlan"),
) -> dict[str, Any]:
    """Poll the resource's status until ``pred``; on timeout show where it stands."""
    holder: dict[str, Any] = {}

    def probe() -> bool:
        holder["s"] = status(kube, ns, name, kind)
        return pred(holder["s"])

    try:
        wait_for(f"{name}: {what}", probe, timeout=timeout, interval=0.3)
    except AssertionError as exc:
        s = holder.get("s") or {}
        brief = {k: s.get(k) for k in show}
        raise AssertionError(f"{exc}\nstatus: {json.dumps(brief)}\nlog: {log}") from None
    return holder["s"]


def uid_of(kube: RealCluster, ns: str, name: str, kind: Kind = SCHEMA) -> str:
    obj = kube.get(kind, ns, name)
    assert obj is not None, f"{kind.kind} {ns}/{name} is gone"
    return str(obj["metadata"]["uid"])


def ready(s: dict[str, Any]) -> bool:
    return s.get("phase") == "Ready" and not s.get("activeOperation")


def events(kube: RealCluster, ns: str, name: str) -> list[dict[str, Any]]:
    evs = [e for e in kube.list(EVENT, ns) if (e.get("involvedObject") or {}).get("name") == name]
    return sorted(evs, key=lambda e: (e.get("firstTimestamp") or "", e["metadata"]["name"]))


def wait_event(
    kube: RealCluster, ns: str, name: str, reason: str, text: str = "", timeout: float = 60
) -> dict[str, Any]:
    """The first Event about ``name`` with ``reason`` (and ``text`` in its message). A
    phase change's Event is recorded after the pass that wrote the phase, so a test that
    saw the status wait for its Event rather than list the Events at once."""

    def found() -> dict[str, Any] | None:
        return next(
            (
                e
                for e in events(kube, ns, name)
                if e["reason"] == reason and text in (e.get("message") or "")
            ),
            None,
        )

    event: dict[str, Any] = wait_for(f"a {reason} Event about {name}", found, timeout)
    return event


def jobs_of(kube: RealCluster, ns: str, owner_uid: str, op_type: str) -> list[dict[str, Any]]:
    return kube.list(JOB, ns, {"ptah.io/owner-uid": owner_uid, "ptah.io/operation-type": op_type})


def owned_by(kube: RealCluster, ns: str, owner_uid: str) -> list[str]:
    """The Jobs, PtahPlans and ConfigMaps of ``ns`` with an owner reference to
    ``owner_uid`` ("Kind/name"): what garbage collection takes once the owner goes."""
    return [
        f"{kind.kind}/{o['metadata']['name']}"
        for kind in (JOB, PLAN, CONFIGMAP)
        for o in kube.list(kind, ns)
        if any(r.get("uid") == owner_uid for r in o["metadata"].get("ownerReferences", []))
    ]


def approve(
    kube: RealCluster, ns: str, name: str, resource: str, digest: str, kind: Kind = SCHEMA
) -> None:
    """A PtahApproval ``name`` of ``digest`` for the ``kind`` named ``resource``."""
    kube.create(
        APPROVAL,
        {
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "resourceRef": {"kind": kind.kind, "name": resource},
                "planDigest": digest,
                "approvedBy": "e2e",
            },
        },
    )


# ------------------------------------------------------------------ databases


def sqlite_tables(path: Path) -> list[str]:
    """The tables of the SQLite database at ``path``, sorted ([] before it exists)."""
    if not path.exists():
        return []
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
    return sorted(r[0] for r in rows)


def sqlite_columns(path: Path, table: str) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]


def pg_columns(url: str, table: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = 'public' AND table_name = %s ORDER BY ordinal_position",
            (table,),
        ).fetchall()
    return [r[0] for r in rows]


def now() -> float:
    return time.monotonic()


def metric(operator: Operator, name: str, /, **labels: str) -> float:
    """The sum of the operator's samples of ``name`` carrying ``labels`` (0 when none)."""
    total = 0.0
    for family in text_string_to_metric_families(operator.metrics()):
        for sample in family.samples:
            if sample.name == name and labels.items() <= sample.labels.items():
                total += float(sample.value)
    return total


def resource_passes(operator: Operator, kind: str, namespace: str, name: str) -> float:
    """The operator's pass count over one resource (``ptah_resource_passes_total``): the
    evidence that it looked, for a test that asserts something did not happen."""
    labels = {"kind": kind, "namespace": namespace, "name": name}
    return metric(operator, "ptah_resource_passes_total", **labels)


WRITE_VERBS = frozenset({"create", "patch", "update", "delete"})


def pass_writes(operator: Operator) -> dict[str, float]:
    """The write requests the operator's passes have sent so far, by verb and resource
    (``ptah_api_requests_total``): what a pass over an idle resource must not add to.
    Requests, not resourceVersions: the apiserver keeps the resourceVersion of a patch
    that changes nothing (the same status written again), and an Event or a Lease write
    changes another object, so only the count of requests sees every write."""
    writes: dict[str, float] = {}
    for family in text_string_to_metric_families(operator.metrics()):
        for sample in family.samples:
            verb = sample.labels.get("verb", "")
            if sample.name == "ptah_api_requests_total" and verb in WRITE_VERBS:
                writes[f"{verb} {sample.labels.get('resource', '')}"] = float(sample.value)
    return writes


POKE_ANNOTATION = "e2e.ptah.io/poke"


def wait_passes(
    kube: RealCluster,
    operator: Operator,
    kind: Kind,
    namespace: str,
    name: str,
    passes: int = 2,
    timeout: float = 120.0,
) -> str:
    """The barrier before asserting that something did NOT happen: ``passes`` times,
    poke the resource (an annotation: metadata only, its inputs unchanged) and wait
    until the operator has finished one more pass over it. Passes over one resource
    never overlap and are counted when they end, so with two rounds the last counted
    pass began after this call: the operator looked at the state the test set up.
    Returns the resourceVersion the last poke wrote (what an idle pass leaves)."""
    assert passes >= 1
    version = ""
    for round_ in range(passes):
        seen = resource_passes(operator, kind.kind, namespace, name)
        poke = {"metadata": {"annotations": {POKE_ANNOTATION: uuid.uuid4().hex[:8]}}}
        version = str(kube.patch(kind, namespace, name, poke)["metadata"]["resourceVersion"])

        def looked(seen: float = seen) -> bool:
            return resource_passes(operator, kind.kind, namespace, name) > seen

        wait_for(
            f"pass {round_ + 1} of {passes} over {kind.kind} {namespace}/{name}"
            f" (log: {operator.log_path})",
            looked,
            timeout=timeout,
        )
    return version
