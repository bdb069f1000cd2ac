"""No takeover under a live executor (issue 11, part 3): the schedule the simulation found.

An Apply is dispatched; its controller then makes no pass for longer than the Lease
duration. Another resource on the same database sees the Lease unchanged for that long
by its own clock. Expiry alone used to hand it the database, and it dispatched a
Migrate while the Apply's Job was still running: two writers. Now it follows the Lease
to the holder's Job and Pods and waits while they run, saying who holds the database;
once the Apply's executor has stopped it takes the Lease, and the Apply's controller,
back, finds its tenure gone and records continuity loss instead of an account.
"""

from __future__ import annotations

import random
from typing import Any

from ptah.kube.clock import SimClock
from ptah.kube.kinds import JOB, LEASE
from ptah.kube.memory import MemoryCluster
from ptah.sim.database import Databases
from ptah.sim.invariants import Invariants
from ptah.sim.kubelet import NS, OTHER_DATABASE, Kubelet
from ptah.sim.world import MIGRATION_FAMILY, SCHEMA_FAMILY, World


def _world() -> tuple[World, Invariants]:
    clock = SimClock()
    cluster = MemoryCluster(clock=clock, seed=11)
    dbs = Databases()
    for name in ("db1", "db2", OTHER_DATABASE):
        dbs.add(name)
    world = World(
        11,
        random.Random(11),
        clock,
        cluster,
        dbs,
        Kubelet(cluster, dbs, random.Random(11), faults_on=False),
    )
    world.faults_on = False
    world._add_resource(SCHEMA_FAMILY, "apply", "sim://u:{pw}@db1", "db1")
    world._add_resource(MIGRATION_FAMILY, "migrate", "sim://u:{pw}@DB1:5432/", "db1")
    for res in world.resources:  # no approvals in the way
        world.cluster.system.patch(
            res.family.kind, NS, res.name, {"spec": {"policy": {"approval": "Never"}}}
        )
    world.replicas.append(world._replica("c0", 0.0))
    inv = Invariants(world)
    world.watcher = inv
    cluster.faults = inv.write_hook(None)
    return world, inv


def _status(world: World, index: int) -> dict[str, Any]:
    res = world.resources[index]
    obj = world.cluster.system.get(res.family.kind, NS, res.name)
    assert obj is not None
    return dict(obj.get("status") or {})


def _pass(world: World, inv: Invariants, index: int) -> None:
    world.reconcile_one(world.resources[index])
    inv.after_step(check_secrets=False)


def _lease_holder(world: World) -> str:
    leases = world.cluster.system.list(LEASE, "ptah-system")
    assert len(leases) == 1, leases
    return str(leases[0]["spec"].get("holderIdentity"))


def test_an_expired_lease_is_not_taken_while_its_holders_job_runs() -> None:
    world, inv = _world()
    apply_, migrate = 0, 1
    # The Apply claims, binds the realm and dispatches; its Pod starts and keeps running.
    for _ in range(60):
        claim = _status(world, apply_).get("activeOperation") or {}
        if claim.get("type") == "Apply" and claim.get("jobUid"):
            break
        _pass(world, inv, apply_)
        world.kubelet.step()
        world.clock.advance(5)
    else:
        raise AssertionError(f"no Apply dispatched: {_status(world, apply_)}")
    world.kubelet.step()  # the Apply's Pod is Running
    (run,) = world.kubelet.runs.values()
    run.steps_left = 10**6
    holder = _lease_holder(world)
    assert holder.endswith(claim["operationId"])

    # The Apply's controller is silent from here on. The migration reads its history
    # (its History Job runs beside the Apply's, being read-only) and claims its Migrate.
    for _ in range(80):
        status = _status(world, migrate)
        if status.get("phase") == "WaitingForTarget":
            break
        _pass(world, inv, migrate)
        world.kubelet.step()
        world.clock.advance(5)
    else:
        raise AssertionError(f"the Migrate never waited for the Lease: {status}")
    # Long past the Lease duration by the migration's own observation.
    for _ in range(3):
        world.clock.advance(130)
        _pass(world, inv, migrate)
    status = _status(world, migrate)
    assert status["phase"] == "WaitingForTarget", status
    message = next(c["message"] for c in status["conditions"] if c["type"] == "Ready")
    assert "expired" in message and claim["operationId"] in message and run.pod in message
    assert _lease_holder(world) == holder
    assert world.dbs.by_name["db1"].max_concurrent_writers == 1
    assert not any(
        j["metadata"]["labels"]["ptah.io/operation-type"] == "Migrate"
        for j in world.cluster.system.list(JOB, NS)
    )

    # The Apply's executor stops (its controller still silent): now the Lease is taken.
    run.steps_left = 1
    for _ in range(4):
        world.kubelet.step()
    assert not world.kubelet.runs
    for _ in range(40):
        if (_status(world, migrate).get("activeOperation") or {}).get("jobUid"):
            break
        world.clock.advance(130)
        _pass(world, inv, migrate)
    migrate_claim = _status(world, migrate)["activeOperation"]
    assert migrate_claim["type"] == "Migrate" and migrate_claim["jobUid"]
    assert _lease_holder(world).endswith(migrate_claim["operationId"])

    # The Apply's controller comes back: its tenure is gone, so no account is accepted.
    _pass(world, inv, apply_)
    record = _status(world, apply_)["pendingObservation"]
    assert record["operationId"] == claim["operationId"]
    assert record["reason"] == "ContinuityLost"
    assert inv.violations == []
