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

import pytest

from ptah.kube.kinds import JOB, LEASE, POD
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


@pytest.mark.parametrize(
    ("deleted", "why"),
    [
        ("job", "is gone and nothing shows its executor stopped"),
        ("pod", "the Pod was deleted before it was seen to stop"),
    ],
)
def test_an_expired_lease_is_not_taken_while_a_vanished_pods_process_writes(
    deleted: str, why: str
) -> None:
    """The holder's node is cut off from the API, and meanwhile its Job is deleted (its
    Pod collected) or its Pod force-deleted (the Job turns Failed): the API shows no Pod,
    and the process writes on. The holder's controller is silent, so the Lease expires by
    the Migrate's own observation; neither a vanished Job nor a terminal one whose Pod
    was never seen to stop hands the database over, as the simulated database's own
    writer count demands."""
    world, inv = _world()
    apply_, migrate = 0, 1
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
    db = world.dbs.by_name["db1"]
    assert claim["operationId"] in db.writers

    # The Apply's controller is silent from here on; the Migrate reads and waits.
    for _ in range(80):
        if _status(world, migrate).get("phase") == "WaitingForTarget":
            break
        _pass(world, inv, migrate)
        world.kubelet.step()
        world.clock.advance(5)
    else:
        raise AssertionError(f"the Migrate never waited for the Lease: {_status(world, migrate)}")

    # The node loses the API; the Apply's Job is deleted meanwhile (its Pod collected).
    world.kubelet.partitioned = 10**6
    if deleted == "job":
        world.cluster.system.delete(JOB, NS, run.job, propagation="Background")
    else:
        world.cluster.system.delete(POD, NS, run.pod)
    world.kubelet.step()
    job = world.cluster.system.get(JOB, NS, run.job)
    assert job is None if deleted == "job" else job["status"]["conditions"][0]["type"] == "Failed"
    assert world.cluster.system.get(POD, NS, run.pod) is None
    assert claim["operationId"] in db.writers  # gone from the API, still writing
    for _ in range(3):
        world.clock.advance(130)
        _pass(world, inv, migrate)
    status = _status(world, migrate)
    assert status["phase"] == "WaitingForTarget", status
    message = next(c["message"] for c in status["conditions"] if c["type"] == "Ready")
    assert why in message, message
    assert _lease_holder(world) == holder
    assert claim["operationId"] in db.writers
    assert inv.violations == []
