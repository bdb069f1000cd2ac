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

from ptah.kube.kinds import JOB, LEASE
from ptah.testing.sim.invariants import Invariants
from ptah.testing.sim.kubelet import NS
from ptah.testing.sim.world import MIGRATION_FAMILY, SCHEMA_FAMILY, World
from support.simworld import hand_world, one_pass, status


def _world() -> tuple[World, Invariants]:
    return hand_world(
        [
            (SCHEMA_FAMILY, "apply", "sim://u:{pw}@db1", "db1"),
            (MIGRATION_FAMILY, "migrate", "sim://u:{pw}@DB1:5432/", "db1"),
        ]
    )


_status = status
_pass = one_pass


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
