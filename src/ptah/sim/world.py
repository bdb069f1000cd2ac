"""One simulated world: the in-memory API, databases, the kubelet, controller replicas,
and the people who edit, approve, suspend, delete and rotate."""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ptah.families.migration import MigrationFamily
from ptah.families.schema import SchemaFamily
from ptah.kube import errors
from ptah.kube.clock import SimClock
from ptah.kube.kinds import APPROVAL, CONFIGMAP, JOB, MIGRATION, SCHEMA, SECRET
from ptah.kube.memory import MemoryCluster
from ptah.lifecycle.context import ABANDON_ANNOTATION, Env
from ptah.lifecycle.family import Family
from ptah.lifecycle.reconcile import reconcile
from ptah.sim.database import Databases
from ptah.sim.kubelet import BROKEN, NS, Kubelet

SCHEMA_FAMILY = SchemaFamily()
MIGRATION_FAMILY = MigrationFamily()
TABLES = [f"CREATE TABLE t{i}" for i in range(6)]


class ControllerStopped(Exception):
    """Raised from a write hook: the controller process stops right there."""


class SkewedView:
    """The cluster as one controller replica sees it: the same API, its own clock."""

    def __init__(self, cluster: MemoryCluster, skew: float) -> None:
        self._c = cluster
        self._skew = timedelta(seconds=skew)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._c, name)

    def now(self) -> datetime:
        return self._c.now() + self._skew


@dataclass
class Replica:
    name: str
    env: Env
    skew: float
    restarts: int = 0


@dataclass
class SimResource:
    family: Family
    name: str
    secret: str
    db: str


@dataclass
class World:
    seed: int
    rng: random.Random
    clock: SimClock
    cluster: MemoryCluster
    dbs: Databases
    kubelet: Kubelet
    replicas: list[Replica] = field(default_factory=list)
    resources: list[SimResource] = field(default_factory=list)
    secrets: dict[str, str] = field(default_factory=dict)
    crash: tuple[str, str, int] | None = None
    crashes: list[str] = field(default_factory=list)
    api_fault_rate: float = 0.0

    @classmethod
    def build(cls, seed: int) -> World:
        rng = random.Random(seed)
        clock = SimClock()
        cluster = MemoryCluster(clock=clock, seed=seed)
        dbs = Databases()
        dbs.add("db1")
        dbs.add("db2")
        world = cls(seed, rng, clock, cluster, dbs, Kubelet(cluster, dbs, rng))
        world._populate()
        return world

    # --- setup

    def _populate(self) -> None:
        api = self.cluster.system
        if self.rng.random() < 0.5:
            api.create(CONFIGMAP, _policy_cm({"allowDestructive": "true"}))
        spellings = ["sim://u:{pw}@db1/app", "sim://u:{pw}@DB1:5432/app/"]
        count = self.rng.choice([1, 2, 2, 3])
        for i in range(count):
            family: Family = SCHEMA_FAMILY if self.rng.random() < 0.55 else MIGRATION_FAMILY
            shared = i > 0 and self.rng.random() < 0.6
            url = (spellings[i % 2] if shared or i == 0 else "sim://u:{pw}@db2/app").replace(
                "/app", ""
            )
            db = "db1" if shared or i == 0 else "db2"
            self._add_resource(family, f"r{i}", url, db)
        for i in range(self.rng.choice([1, 2])):
            skew = self.rng.uniform(-30, 30) if i else 0.0
            self.replicas.append(self._replica(f"c{i}", skew))

    def _add_resource(self, family: Family, name: str, url_template: str, db: str) -> None:
        api = self.cluster.system
        password = f"pw-{self.seed}-{name}-secret"
        self.secrets[name] = password
        api.create(
            SECRET,
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": f"{name}-db", "namespace": NS},
                "stringData": {"url": url_template.format(pw=password)},
            },
        )
        target = {"engine": "postgres", "secretRef": {"name": f"{name}-db", "key": "url"}}
        if family is SCHEMA_FAMILY:
            spec: dict[str, Any] = {
                "target": target,
                "source": {"inline": self._source(3)},
                "policy": {
                    "approval": self.rng.choice(["Never", "Destructive", "Always"]),
                    "allowDestructive": self.rng.random() < 0.7,
                },
                "driftCheckIntervalSeconds": self.rng.choice([0, 300]),
            }
            kind = SCHEMA
        else:
            api.create(CONFIGMAP, _migrations_cm(f"{name}-dir", self.rng.randint(1, 3)))
            spec = {
                "target": target,
                "directory": {"configMaps": [f"{name}-dir"]},
                "policy": {"approval": self.rng.choice(["Never", "Always"])},
            }
            kind = MIGRATION
        api.create(
            kind,
            {
                "apiVersion": "ptah.io/v1alpha1",
                "kind": kind.kind,
                "metadata": {"name": name, "namespace": NS},
                "spec": spec,
            },
        )
        self.resources.append(SimResource(family, name, f"{name}-db", db))

    def _replica(self, name: str, skew: float) -> Replica:
        view = SkewedView(self.cluster, skew)
        env = Env(cluster=view, lock_namespace="ptah-system", controller=name, hook=self._hook)
        return Replica(name, env, skew)

    # --- controller stops

    def _hook(self, when: str, write: str) -> None:
        if self.crash is None:
            return
        target_write, target_when, remaining = self.crash
        if write != target_write or when != target_when:
            return
        if remaining > 1:
            self.crash = (target_write, target_when, remaining - 1)
            return
        self.crash = None
        self.crashes.append(f"{when}:{write}")
        raise ControllerStopped(f"{when} {write}")

    def restart(self, replica: Replica) -> None:
        """A fresh process on what was left: no memory, including Lease observations."""
        fresh = self._replica(replica.name, replica.skew)
        replica.env = fresh.env
        replica.restarts += 1

    # --- one step

    def reconcile_one(self, res: SimResource | None = None) -> None:
        replica = self.rng.choice(self.replicas)
        res = res or self.rng.choice(self.resources)
        try:
            reconcile(replica.env, res.family, NS, res.name)
        except ControllerStopped:
            self.restart(replica)
        except errors.ApiError:
            pass

    def person_acts(self, quiet: bool) -> None:
        """People: approve, edit, suspend, delete, rotate, abandon a proof."""
        api = self.cluster.system
        res = self.rng.choice(self.resources)
        obj = api.get(res.family.kind, NS, res.name)
        if obj is None:
            return
        status = obj.get("status") or {}
        roll = self.rng.random()
        if status.get("phase") == "WaitingForApproval" and roll < 0.6:
            plan = status.get("currentPlan") or {}
            digest = plan.get("digest", "")
            if not quiet and self.rng.random() < 0.2:
                digest = "0" * 40  # an approval of a stale or foreign plan never authorizes
            self._approve(res, digest)
            return
        if status.get("phase") in {"ProofNotSettled"} and roll < (0.3 if quiet else 0.1):
            record = status.get("pendingObservation") or status.get("unresolvedRun") or {}
            self._annotate(res, record.get("operationId", ""))
            return
        if quiet:
            if obj["spec"].get("suspend"):
                api.patch(res.family.kind, NS, res.name, {"spec": {"suspend": False}})
            return
        if roll < 0.08 and res.family is SCHEMA_FAMILY:
            text = self._source(self.rng.randint(2, 4))
            api.patch(SCHEMA, NS, res.name, {"spec": {"source": {"inline": text}}})
        elif roll < 0.12:
            api.patch(
                res.family.kind, NS, res.name, {"spec": {"suspend": not obj["spec"].get("suspend")}}
            )
        elif roll < 0.14:
            self._rotate(res)
        elif roll < 0.16:
            for job in api.list(JOB, NS):
                if self.rng.random() < 0.5:
                    api.delete(JOB, NS, job["metadata"]["name"], propagation="Background")
        elif roll < 0.18:
            cm = api.get(CONFIGMAP, NS, "ptah-verification-policy")
            if cm is None:
                api.create(CONFIGMAP, _policy_cm({"allowDestructive": "true"}))
            else:
                api.patch(
                    CONFIGMAP,
                    NS,
                    "ptah-verification-policy",
                    {"data": {"edited": str(self.rng.random())}},
                )
        elif roll < 0.19 and res.family is MIGRATION_FAMILY:
            api.patch(CONFIGMAP, NS, f"{res.name}-dir", {"data": {f"{9}_later.sql": "SELECT 9;"}})
        elif roll < 0.20:
            with contextlib.suppress(errors.NotFound):
                api.delete(res.family.kind, NS, res.name)
        elif roll < 0.21:
            for approval in api.list(APPROVAL, NS):
                api.delete(APPROVAL, NS, approval["metadata"]["name"])

    def _source(self, tables: int) -> str:
        """A desired source; now and then one that does not load (until it is edited)."""
        lines = self.rng.sample(TABLES, tables)
        if self.rng.random() < 0.25:
            lines.insert(self.rng.randrange(len(lines) + 1), BROKEN)
        return "\n".join(lines)

    def _approve(self, res: SimResource, digest: str) -> None:
        name = f"{res.name}-approval-{self.rng.randint(0, 10**6)}"
        self.cluster.system.create(
            APPROVAL,
            {
                "apiVersion": "ptah.io/v1alpha1",
                "kind": "PtahApproval",
                "metadata": {"name": name, "namespace": NS},
                "spec": {
                    "resourceRef": {"kind": res.family.kind.kind, "name": res.name},
                    "planDigest": digest,
                },
            },
        )

    def _annotate(self, res: SimResource, operation_id: str) -> None:
        self.cluster.system.patch(
            res.family.kind,
            NS,
            res.name,
            {"metadata": {"annotations": {ABANDON_ANNOTATION: operation_id}}},
        )

    def _rotate(self, res: SimResource) -> None:
        """A rotated Secret: a new execution-binding epoch; sometimes a new spelling."""
        api = self.cluster.system
        secret = api.get(SECRET, NS, res.secret)
        if secret is None:
            return
        url = secret["stringData"]["url"]
        url = url.replace("@db1", "@Db1") if "@db1" in url else url.replace("@Db1", "@db1")
        api.patch(SECRET, NS, res.secret, {"stringData": {"url": url}})


def _policy_cm(data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "ptah-verification-policy", "namespace": NS},
        "data": data,
    }


def _migrations_cm(name: str, count: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS},
        "data": {f"{i}_step{i}.sql": f"CREATE TABLE m{i} (id int);" for i in range(1, count + 1)},
    }
