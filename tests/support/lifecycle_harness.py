"""Drive one resource of either family (a PtahSchema or a PtahMigration) through the
lifecycle, in this process, on either cluster port: the in-memory API with the simulated
kubelet, or the real control plane whose node runs the real ``ptah-runner`` against
SQLite (in a container on the real node, the database's directory mounted at its own
path; a migration directory as a ConfigMap volume). The controller can be stopped at
any durable write and a fresh one started on what was left.

A ``Side`` is what differs by family (its kind, its mutation, how a resource is made
and what its mutation leaves in the database); a ``Harness`` subclass is what differs
by port. The row tests read both through the ``Harness`` only."""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ptah.api.common import UncertainRecord
from ptah.families.migration import MigrationFamily
from ptah.families.schema import SchemaFamily
from ptah.kube.clock import SimClock
from ptah.kube.kinds import APPROVAL, CONFIGMAP, JOB, LEASE, MIGRATION, SCHEMA, SECRET, Kind
from ptah.kube.port import Cluster, Obj
from ptah.lifecycle.context import Env
from ptah.lifecycle.family import AnyFamily
from ptah.lifecycle.reconcile import reconcile
from ptah.lifecycle.step import Result
from ptah.testing.memory import PROCEED, MemoryCluster
from ptah.testing.sim.database import Databases
from ptah.testing.sim.kubelet import NS, Kubelet
from ptah.testing.sim.world import ControllerStopped
from ptah.workload.job import LABEL_OPERATION_TYPE
from support.cluster import runner_mount
from support.migration_dir import with_sum

NAME = "shop"
DIRECTORY = "shop-dir"  # the PtahMigration's directory, one ConfigMap


class Side:
    """One family as the row tests drive it."""

    family: AnyFamily
    kind: Kind
    mutation: str  # the mutating operation's type

    def spec(self, h: Harness, approval: str) -> dict[str, Any]:
        """The family's part of the spec; creates what it references."""
        raise NotImplementedError

    def done(self, h: Harness) -> bool:
        """The mutation's work is in the database."""
        raise NotImplementedError


class SchemaSide(Side):
    family = SchemaFamily()
    kind = SCHEMA
    mutation = "Apply"

    def spec(self, h: Harness, approval: str) -> dict[str, Any]:
        return {
            "source": {"inline": h.schema_source},
            "policy": {"approval": approval, "allowDestructive": True},
            "driftCheckIntervalSeconds": 0,
        }

    def done(self, h: Harness) -> bool:
        return h.desired_tables() <= h.tables()


class MigrationSide(Side):
    family = MigrationFamily()
    kind = MIGRATION
    mutation = "Migrate"

    def spec(self, h: Harness, approval: str) -> dict[str, Any]:
        h.admin.create(
            CONFIGMAP,
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": DIRECTORY, "namespace": h.namespace},
                "data": h.migration_files,
            },
        )
        return {"directory": {"configMaps": [DIRECTORY]}, "policy": {"approval": approval}}

    def done(self, h: Harness) -> bool:
        return h.migrated()


def real_pause(result: Result) -> None:
    """Between two passes on the real port: the pass's own requeue, at most 0.5 s, while
    the real node runs the Job (pacing, not evidence; the callers wait on state)."""
    time.sleep(min(result.requeue_after or 0.5, 0.5))


SIDES: dict[str, Side] = {"schema": SchemaSide(), "migration": MigrationSide()}


def _is_mutation_create(side: Side, kind: Kind, verb: str, body: Any) -> bool:
    labels = dict(body or {}).get("metadata", {}).get("labels", {})
    return kind == JOB and verb == "create" and labels.get(LABEL_OPERATION_TYPE) == side.mutation


class Harness:
    """What a row test needs, whatever the port and the family."""

    namespace: str = NS
    lock_namespace: str = "ptah-system"
    schema_source: str = ""
    migration_files: dict[str, str] = {}
    runner_defaults: dict[str, Any] = {}

    def __init__(self, side: Side, cluster: Cluster, admin: Cluster) -> None:
        self.side = side
        self.cluster = cluster  # what the controller uses
        self.admin = admin  # what people and assertions use
        self.writes: list[str] = []
        self.stop_at: tuple[str, str] | None = None
        self.job_creates = 0  # the mutation's Jobs only
        self.env = self.fresh_env()

    @property
    def mutation(self) -> str:
        return self.side.mutation

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
        return reconcile(self.env, self.side.family, self.namespace, NAME)

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

    def create(self, approval: str = "Never") -> None:
        self.admin.create(
            SECRET,
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "shop-db", "namespace": self.namespace},
                "stringData": {"url": self.secret_url()},
            },
        )
        kind = self.side.kind
        self.admin.create(
            kind,
            {
                "apiVersion": kind.api_version,
                "kind": kind.kind,
                "metadata": {"name": NAME, "namespace": self.namespace},
                "spec": {
                    "target": {"engine": self.engine, "secretRef": {"name": "shop-db"}},
                    **self.side.spec(self, approval),
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
                "spec": {
                    "resourceRef": {"kind": self.side.kind.kind, "name": NAME},
                    "planDigest": digest,
                },
            },
        )

    def patch_resource(self, patch: Obj) -> None:
        self.admin.patch(self.side.kind, self.namespace, NAME, patch)

    # --- reading the world

    def obj(self) -> Obj:
        obj = self.admin.get(self.side.kind, self.namespace, NAME)
        assert obj is not None
        return obj

    def status(self) -> dict[str, Any]:
        return dict(self.obj().get("status") or {})

    def claim(self) -> dict[str, Any] | None:
        claim = self.status().get("activeOperation")
        return dict(claim) if claim else None

    def record(self) -> UncertainRecord | None:
        """The family's uncertainty record, read through its status model."""
        return self.side.family.status_of(self.obj()).record

    def phase(self) -> str:
        return str(self.status().get("phase"))

    def jobs(self) -> list[Obj]:
        return self.admin.list(JOB, self.namespace)

    def mutation_jobs(self) -> list[Obj]:
        prefix = f"ptah-{self.mutation.lower()}-"
        return [j for j in self.jobs() if j["metadata"]["name"].startswith(prefix)]

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

    def done(self) -> bool:
        return self.side.done(self)

    def tables(self) -> set[str]:
        raise NotImplementedError

    def desired_tables(self) -> set[str]:
        raise NotImplementedError

    def migrated(self) -> bool:
        """Every version of the directory is in the database."""
        raise NotImplementedError


class MemoryHarness(Harness):
    schema_source = "CREATE TABLE a\nCREATE TABLE b"
    migration_files = {"1_a.sql": "CREATE TABLE a (id int);", "2_b.sql": "CREATE TABLE b (id int);"}

    def __init__(self, side: Side) -> None:
        self.clock = SimClock()
        memory = MemoryCluster(clock=self.clock, seed=7)
        self.dbs = Databases()
        self.db = self.dbs.add("db1")
        self.kubelet = Kubelet(memory, self.dbs, random.Random(7), faults_on=False)
        memory.faults = self._count
        super().__init__(side, memory, memory.system)  # type: ignore[arg-type]

    def _count(self, req: Any) -> Any:
        if _is_mutation_create(self.side, req.kind, req.verb, req.body):
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
        return set(self.schema_source.splitlines())

    def migrated(self) -> bool:
        versions = {name.split("_", 1)[0] for name in self.migration_files}
        return versions <= set(self.db.history)


class CountingCluster:
    """The real port, counting the mutation's Jobs the controller creates."""

    def __init__(self, inner: Cluster, side: Side, on_create: Callable[[], None]) -> None:
        self._inner = inner
        self._side = side
        self._on = on_create

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def create(self, kind: Kind, obj: Obj) -> Obj:
        if _is_mutation_create(self._side, kind, "create", obj):
            self._on()
        return self._inner.create(kind, obj)


class RealHarness(Harness):
    """The real control plane; its node runs ``ptah-runner`` against SQLite. The
    database's directory is opened to the runner's uid and mounted into every runner
    Pod at its own path (a hostPath volume), so the host and the runner see one file."""

    engine = "sqlite"
    schema_source = (
        "CREATE TABLE a (id INTEGER PRIMARY KEY, name TEXT NOT NULL);\n"
        "CREATE TABLE b (id INTEGER PRIMARY KEY, a_id INTEGER REFERENCES a(id));\n"
    )
    migration_files = with_sum(
        {
            "1_a.sql": "CREATE TABLE a (id INTEGER PRIMARY KEY, name TEXT NOT NULL);\n",
            "2_b.sql": "CREATE TABLE b (id INTEGER PRIMARY KEY, a_id INTEGER REFERENCES a(id));\n",
        }
    )

    def __init__(self, side: Side, port: Cluster, namespace: str, db_path: Path) -> None:
        self.namespace = namespace
        self.lock_namespace = namespace
        self.db_path = db_path
        self.runner_defaults = runner_mount(db_path.parent)

        def bump() -> None:
            self.job_creates += 1

        super().__init__(side, CountingCluster(port, side, bump), port)  # type: ignore[arg-type]

    def secret_url(self) -> str:
        return f"sqlite:///{self.db_path}"

    def wait(self, result: Result) -> None:
        real_pause(result)

    def tables(self) -> set[str]:
        if not self.db_path.exists():
            return set()
        with sqlite3.connect(self.db_path) as conn:
            rows = conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
        return {r[0] for r in rows}

    def desired_tables(self) -> set[str]:
        return {"a", "b"}

    def migrated(self) -> bool:
        return self.desired_tables() <= self.tables()  # 1_a.sql and 2_b.sql ran
