"""A simulated world built by hand, for tests that replay one schedule the simulation
found: no random faults, resources chosen by the test, the invariants listening to every
write and checked after every step."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from ptah.kube.clock import SimClock
from ptah.lifecycle.family import AnyFamily
from ptah.testing.memory import MemoryCluster
from ptah.testing.sim.database import Databases
from ptah.testing.sim.invariants import Invariants
from ptah.testing.sim.kubelet import NS, OTHER_DATABASE, Kubelet
from ptah.testing.sim.world import World

# family, name, URL template, database, and optionally its namespace (else NS)
Resource = tuple[AnyFamily, str, str, str] | tuple[AnyFamily, str, str, str, str]


def hand_world(resources: list[Resource], seed: int = 11) -> tuple[World, Invariants]:
    """One controller replica, no faults, no approvals in the way."""
    clock = SimClock()
    cluster = MemoryCluster(clock=clock, seed=seed)
    dbs = Databases()
    for name in ("db1", "db2", OTHER_DATABASE):
        dbs.add(name)
    kubelet = Kubelet(cluster, dbs, random.Random(seed), faults_on=False)
    world = World(seed, random.Random(seed), clock, cluster, dbs, kubelet)
    world.faults_on = False
    for family, name, url, db, *rest in resources:
        namespace = rest[0] if rest else NS
        world._add_resource(family, name, url, db, namespace)
        world.cluster.system.patch(
            family.kind, namespace, name, {"spec": {"policy": {"approval": "Never"}}}
        )
    world.replicas.append(world._replica("c0", 0.0))
    inv = Invariants(world)
    world.watcher = inv
    inv.install()
    return world, inv


def status(world: World, index: int = 0) -> dict[str, Any]:
    res = world.resources[index]
    obj = world.cluster.system.get(res.family.kind, res.namespace, res.name)
    assert obj is not None
    return dict(obj.get("status") or {})


def one_pass(world: World, inv: Invariants, index: int = 0) -> None:
    world.reconcile_one(world.resources[index])
    inv.after_step(check_secrets=False)


def drive(
    world: World,
    inv: Invariants,
    index: int,
    until: Callable[[dict[str, Any]], bool],
    what: str,
    passes: int = 80,
) -> dict[str, Any]:
    """Passes over one resource, the kubelet stepping and the clock moving 5 s after
    each, until ``until`` holds for its status (returned); ``what`` names the failure."""
    for _ in range(passes):
        current = status(world, index)
        if until(current):
            return current
        one_pass(world, inv, index)
        world.kubelet.step()
        world.clock.advance(5)
    raise AssertionError(f"{what}: {status(world, index)}")
