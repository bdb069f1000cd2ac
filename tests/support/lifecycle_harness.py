"""Drive one PtahSchema through the lifecycle, in this process, on either cluster port:
the in-memory API with the simulated kubelet, or the real control plane whose node
runs the real ``ptah-runner`` against SQLite (in a container on the real node, the
database's directory mounted at its own path). The controller can be stopped at
any durable write and a fresh one started on what was left."""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ptah.families.schema import SchemaFamily
from ptah.kube.clock import SimClock
from ptah.kube.kinds import APPROVAL, JOB, LEASE, SCHEMA, SECRET, Kind
from ptah.kube.port import Cluster, Obj
from ptah.lifecycle.context import Env
from ptah.lifecycle.reconcile import Result, reconcile
from ptah.testing.memory import PROCEED, MemoryCluster
from ptah.testing.sim.database import Databases
from ptah.testing.sim.kubelet import NS, Kubelet
from ptah.testing.sim.world import ControllerStopped
from ptah.workload.job import LABEL_OPERATION_TYPE
from support.cluster import runner_mount

FAMILY = SchemaFamily()
NAME = "shop"


def _is_apply_create(kind: Kind, verb: str, body: Any) -> bool:
    labels = dict(body or {}).get("metadata", {}).get("labels", {})
    return kind == JOB and verb == "create" and labels.get(LABEL_OPERATION_TYPE) == "Apply"


class Harness:
    """What a row test needs, whatever the port."""

    namespace: str = NS
    lock_namespace: str = "ptah-system"
    desired: str = ""
    runner_defaults: dict[str, Any] = {}

    def __init__(self, cluster: Cluster, admin: Cluster) -> None:
        self.cluster = cluster  # what the controller uses
        self.admin = admin  # what people and assertions use
        self.writes: list[str] = []
        self.stop_at: tuple[str, str] | None = None
        self.job_creates = 0  # Apply Jobs only
        self.env = self.fresh_env()

    # --- the controller

    def _hook(self, when: str, name: str) -> None:
        if when == "after":
            self.writes.append(name)
        if self.stop_at == (when, name):
            self.stop_at = None
            raise ControllerStopped(f"{when} {name}")

    def fresh_env(self) -> Env:
        """A new controller process: nothing remembered."""
        return Env(
            cluster=self.cluster,
            lock_namespace=self.lock_namespace,
            hook=self._hook,
            poll_seconds=0.5,
            runner_defaults=self.runner_defaults,
        )

    def one_pass(self) -> Result:
        return reconcile(self.env, FAMILY, self.namespace, NAME)

    def wait(self, result: Result) -> None:
        """Let the world move on between passes."""
        raise NotImplementedError

    def run(self, until: Callable[[], bool], passes: int = 300) -> None:
        for _ in range(passes):
            if until():
                return
            try:
                result = self.one_pass()
            except ControllerStopped:
                self.env = self.fresh_env()
                raise
            if result.requeue_after is None or result.requeue_after > 0:
                self.wait(result)
        raise AssertionError(f"did not converge; status: {self.status()}")

    def run_to_stop(self, when: str, write: str, passes: int = 300) -> None:
        self.stop_at = (when, write)
        try:
            self.run(lambda: False, passes)
        except ControllerStopped:
            return
        raise AssertionError(f"never reached {when} {write}")

    # --- people

    def secret_url(self) -> str:
        raise NotImplementedError

    def create_schema(self, approval: str = "Never") -> None:
        self.admin.create(
            SECRET,
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "shop-db", "namespace": self.namespace},
                "stringData": {"url": self.secret_url()},
            },
        )
        self.admin.create(
            SCHEMA,
            {
                "apiVersion": "ptah.io/v1alpha1",
                "kind": "PtahSchema",
                "metadata": {"name": NAME, "namespace": self.namespace},
                "spec": {
                    "target": {"engine": self.engine, "secretRef": {"name": "shop-db"}},
                    "source": {"inline": self.desired},
                    "policy": {"approval": approval, "allowDestructive": True},
                    "driftCheckIntervalSeconds": 0,
                },
            },
        )

    engine = "postgres"

    def approve(self, digest: str, name: str = "ok") -> None:
        self.admin.create(
            APPROVAL,
            {
                "apiVersion": "ptah.io/v1alpha1",
                "kind": "PtahApproval",
                "metadata": {"name": name, "namespace": self.namespace},
                "spec": {"resourceRef": {"kind": "PtahSchema", "name": NAME}, "planDigest": digest},
            },
        )

    def patch_schema(self, patch: Obj) -> None:
        self.admin.patch(SCHEMA, self.namespace, NAME, patch)

    # --- reading the world

    def obj(self) -> Obj:
        obj = self.admin.get(SCHEMA, self.namespace, NAME)
        assert obj is not None
        return obj

    def status(self) -> dict[str, Any]:
        return dict(self.obj().get("status") or {})

    def claim(self) -> dict[str, Any] | None:
        claim = self.status().get("activeOperation")
        return dict(claim) if claim else None

    def phase(self) -> str:
        return str(self.status().get("phase"))

    def jobs(self) -> list[Obj]:
        return self.admin.list(JOB, self.namespace)

    def job(self, name: str) -> Obj | None:
        return self.admin.get(JOB, self.namespace, name)

    def lease(self) -> Obj | None:
        leases = [
            obj
            for obj in self.admin.list(LEASE, self.lock_namespace)
            if obj["metadata"]["name"].startswith("ptah-realm-")
        ]
        return leases[0] if leases else None

    def patch_lease(self, name: str, patch: Obj) -> None:
        self.admin.patch(LEASE, self.lock_namespace, name, patch)

    def tables(self) -> set[str]:
        raise NotImplementedError

    def desired_tables(self) -> set[str]:
        raise NotImplementedError


class MemoryHarness(Harness):
    desired = "CREATE TABLE a\nCREATE TABLE b"

    def __init__(self) -> None:
        self.clock = SimClock()
        memory = MemoryCluster(clock=self.clock, seed=7)
        self.dbs = Databases()
        self.db = self.dbs.add("db1")
        self.kubelet = Kubelet(memory, self.dbs, random.Random(7), faults_on=False)
        memory.faults = self._count
        super().__init__(memory, memory.system)  # type: ignore[arg-type]

    def _count(self, req: Any) -> Any:
        if _is_apply_create(req.kind, req.verb, req.body):
            self.job_creates += 1
        return PROCEED

    def secret_url(self) -> str:
        return "sim://app:s3cret-pass@db1"

    def wait(self, result: Result) -> None:
        self.kubelet.step()
        self.clock.advance(5)

    def tables(self) -> set[str]:
        return set(self.db.tables)

    def desired_tables(self) -> set[str]:
        return set(self.desired.splitlines())


class CountingCluster:
    """The real port, counting the Apply Jobs the controller creates."""

    def __init__(self, inner: Cluster, on_apply_create: Callable[[], None]) -> None:
        self._inner = inner
        self._on = on_apply_create

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def create(self, kind: Kind, obj: Obj) -> Obj:
        if _is_apply_create(kind, "create", obj):
            self._on()
        return self._inner.create(kind, obj)


class RealHarness(Harness):
    """The real control plane; its node runs ``ptah-runner`` against SQLite. The
    database's directory is opened to the runner's uid and mounted into every runner
    Pod at its own path (a hostPath volume), so the host and the runner see one file."""

    engine = "sqlite"
    desired = (
        "CREATE TABLE a (id INTEGER PRIMARY KEY, name TEXT NOT NULL);\n"
        "CREATE TABLE b (id INTEGER PRIMARY KEY, a_id INTEGER REFERENCES a(id));\n"
    )

    def __init__(self, port: Cluster, namespace: str, db_path: Path) -> None:
        self.namespace = namespace
        self.lock_namespace = namespace
        self.db_path = db_path
        self.runner_defaults = runner_mount(db_path.parent)

        def bump() -> None:
            self.job_creates += 1

        super().__init__(CountingCluster(port, bump), port)  # type: ignore[arg-type]

    def secret_url(self) -> str:
        return f"sqlite:///{self.db_path}"

    def wait(self, result: Result) -> None:
        time.sleep(min(result.requeue_after or 0.5, 0.5))

    def tables(self) -> set[str]:
        if not self.db_path.exists():
            return set()
        with sqlite3.connect(self.db_path) as conn:
            rows = conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
        return {r[0] for r in rows}

    def desired_tables(self) -> set[str]:
        return {"a", "b"}
