"""API requests per completed Apply and per idle pass over a converged resource.

Runs the real lifecycle on the in-memory API (which counts every request, reads and
writes apart) with the simulated kubelet executing the runner's operations. Prints
figures; the target is no write at all on an idle pass.

    python bench/lifecycle.py
"""

from __future__ import annotations

import random
import time
from typing import Any

from ptah.families.migration import MigrationFamily
from ptah.families.schema import SchemaFamily
from ptah.kube.clock import SimClock
from ptah.kube.kinds import CONFIGMAP, SECRET
from ptah.lifecycle.context import Env
from ptah.lifecycle.family import AnyFamily
from ptah.lifecycle.reconcile import reconcile
from ptah.testing.memory import MemoryCluster
from ptah.testing.sim.database import Databases
from ptah.testing.sim.kubelet import NS, Kubelet


def _world() -> tuple[MemoryCluster, SimClock, Kubelet, Env]:
    clock = SimClock()
    cluster = MemoryCluster(clock=clock)
    dbs = Databases()
    dbs.add("db1")
    kubelet = Kubelet(cluster, dbs, random.Random(1), faults_on=False)
    cluster.system.create(
        SECRET,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "db", "namespace": NS},
            "stringData": {"url": "sim://u:pw@db1"},
        },
    )
    return cluster, clock, kubelet, Env(cluster=cluster, lock_namespace="ptah-system")


def _converge(
    cluster: MemoryCluster,
    clock: SimClock,
    kubelet: Kubelet,
    env: Env,
    family: AnyFamily,
    name: str,
) -> int:
    for passes in range(1, 501):
        result = reconcile(env, family, NS, name)
        obj = cluster.system.get(family.kind, NS, name) or {}
        status: dict[str, Any] = obj.get("status") or {}
        if status.get("phase") == "Ready" and not status.get("pendingLockRelease"):
            return passes
        if result.requeue_after is None or result.requeue_after > 0:
            kubelet.step()
            clock.advance(5)
    raise SystemExit(f"{name} did not converge: {status}")


def _measure(family: AnyFamily, spec: dict[str, Any], extra: list[dict[str, Any]]) -> None:
    cluster, clock, kubelet, env = _world()
    for obj in extra:
        cluster.system.create(CONFIGMAP, obj)
    kind = family.kind
    cluster.system.create(
        kind,
        {
            "apiVersion": "ptah.io/v1alpha1",
            "kind": kind.kind,
            "metadata": {"name": "bench", "namespace": NS},
            "spec": spec,
        },
    )
    cluster.requests.reset()
    passes = _converge(cluster, clock, kubelet, env, family, "bench")
    r = cluster.requests
    print(
        f"{kind.kind:14s} create->Ready (one reading, one {family.mutation_type}, one verifying "
        f"reading): passes={passes} reads={r.total_reads} writes={r.total_writes} "
        f"effective_writes={r.effective_writes}"
    )
    cluster.requests.reset()
    idle = 200
    started = time.perf_counter()
    for _ in range(idle):
        reconcile(env, family, NS, "bench")
    seconds = time.perf_counter() - started
    r = cluster.requests
    print(
        f"{kind.kind:14s} idle pass over a converged resource: "
        f"reads/pass={r.total_reads / idle:.1f} writes/pass={r.total_writes / idle:.1f} "
        f"(target 0) cpu/pass={seconds / idle * 1e6:.0f}us"
    )


def main() -> None:
    target = {"engine": "postgres", "secretRef": {"name": "db"}}
    _measure(
        SchemaFamily(),
        {
            "target": target,
            "source": {"inline": "CREATE TABLE a\nCREATE TABLE b"},
            "driftCheckIntervalSeconds": 0,
        },
        [],
    )
    _measure(
        MigrationFamily(),
        {"target": target, "directory": {"configMaps": ["dir"]}},
        [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "dir", "namespace": NS},
                "data": {"1_a.sql": "CREATE TABLE a (id int);", "2_b.sql": "SELECT 1;"},
            }
        ],
    )


if __name__ == "__main__":
    main()
