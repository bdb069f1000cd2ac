"""Drive one PtahSchema through the lifecycle on the in-memory API, stopping the
controller at a chosen durable write and starting a fresh one on what was left."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from ptah.families.schema import SchemaFamily
from ptah.kube.clock import SimClock
from ptah.kube.kinds import APPROVAL, JOB, LEASE, SCHEMA, SECRET
from ptah.kube.memory import MemoryCluster
from ptah.lifecycle.context import Env
from ptah.lifecycle.reconcile import Result, reconcile
from ptah.sim.database import Databases
from ptah.sim.kubelet import NS, Kubelet
from ptah.sim.world import ControllerStopped
from ptah.workload.job import LABEL_OPERATION_TYPE

FAMILY = SchemaFamily()
NAME = "shop"


@dataclass
class Harness:
    clock: SimClock = field(default_factory=SimClock)
    writes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.cluster = MemoryCluster(clock=self.clock, seed=7)
        self.dbs = Databases()
        self.db = self.dbs.add("db1")
        self.kubelet = Kubelet(self.cluster, self.dbs, random.Random(7), faults_on=False)
        self.stop_at: tuple[str, str] | None = None
        self.job_creates = 0  # Apply Jobs only
        self.cluster.faults = self._observe
        self.env = self.fresh_env()

    def _observe(self, req: Any) -> Any:
        from ptah.kube.memory import PROCEED

        labels = dict(req.body or {}).get("metadata", {}).get("labels", {})
        if req.kind == JOB and req.verb == "create" and labels.get(LABEL_OPERATION_TYPE) == "Apply":
            self.job_creates += 1
        return PROCEED

    def _hook(self, when: str, name: str) -> None:
        if when == "after":
            self.writes.append(name)
        if self.stop_at == (when, name):
            self.stop_at = None
            raise ControllerStopped(f"{when} {name}")

    def fresh_env(self) -> Env:
        """A new controller process: nothing remembered."""
        return Env(cluster=self.cluster, lock_namespace="ptah-system", hook=self._hook)

    # --- setup

    def create_schema(self, desired: str, approval: str = "Never") -> None:
        api = self.cluster.system
        api.create(
            SECRET,
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "shop-db", "namespace": NS},
                "stringData": {"url": "sim://app:s3cret-pass@db1"},
            },
        )
        api.create(
            SCHEMA,
            {
                "apiVersion": "ptah.io/v1alpha1",
                "kind": "PtahSchema",
                "metadata": {"name": NAME, "namespace": NS},
                "spec": {
                    "target": {"engine": "postgres", "secretRef": {"name": "shop-db"}},
                    "source": {"inline": desired},
                    "policy": {"approval": approval, "allowDestructive": True},
                    "driftCheckIntervalSeconds": 0,
                },
            },
        )

    def approve(self, digest: str, name: str = "ok") -> None:
        self.cluster.system.create(
            APPROVAL,
            {
                "apiVersion": "ptah.io/v1alpha1",
                "kind": "PtahApproval",
                "metadata": {"name": name, "namespace": NS},
                "spec": {"resourceRef": {"kind": "PtahSchema", "name": NAME}, "planDigest": digest},
            },
        )

    # --- driving

    def obj(self) -> dict[str, Any]:
        obj = self.cluster.system.get(SCHEMA, NS, NAME)
        assert obj is not None
        return obj

    def status(self) -> dict[str, Any]:
        return dict(self.obj().get("status") or {})

    def claim(self) -> dict[str, Any] | None:
        claim = self.status().get("activeOperation")
        return dict(claim) if claim else None

    def one_pass(self) -> Result:
        return reconcile(self.env, FAMILY, NS, NAME)

    def run(self, until: Any, passes: int = 200) -> None:
        """Passes and kubelet steps until ``until()``; a stop replaces the controller."""
        for _ in range(passes):
            if until():
                return
            try:
                result = self.one_pass()
            except ControllerStopped:
                self.env = self.fresh_env()
                raise
            if result.requeue_after is None or result.requeue_after > 0:
                self.kubelet.step()
                self.clock.advance(5)
        raise AssertionError(f"did not converge; status: {self.status()}")

    def run_to_stop(self, when: str, write: str, passes: int = 200) -> None:
        self.stop_at = (when, write)
        try:
            self.run(lambda: False, passes)
        except ControllerStopped:
            return
        raise AssertionError(f"never reached {when} {write}")

    def phase(self) -> str:
        return str(self.status().get("phase"))

    def jobs(self) -> list[dict[str, Any]]:
        return self.cluster.system.list(JOB, NS)

    def lease(self) -> dict[str, Any] | None:
        leases = self.cluster.system.list(LEASE, "ptah-system")
        return leases[0] if leases else None
