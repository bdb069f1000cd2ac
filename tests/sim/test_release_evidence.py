"""The release counts every Pod of the operation, whichever Job made it.

An Apply runs and is accounted: every Pod of its Job was seen to stop, so the outcome
patch stages the release of its Lease as owed. Before the next pass releases it, a person
puts the Job back under its reserved name from a saved manifest (a GitOps sync, a backup
restore): a new UID, and its Pod runs the same operation at once. The release step asks
the same evidence rule the takeover check asks: a Pod of the operation that has not
stopped may still write, whichever Job made it, so the release waits for it, renewing the
Lease, and goes through once that Pod is seen to stop. (The mutant
release-counts-adopted-job-only counted the adopted Job's Pods only, and released beside
the copy's running Pod: the simulation's fault job-put-back-after-account.)
"""

from __future__ import annotations

from ptah.kube.kinds import JOB, LEASE
from ptah.testing.sim.world import SCHEMA_FAMILY, World
from support.simworld import drive, hand_world, one_pass, status


def _lease_holder(world: World) -> str | None:
    leases = world.cluster.system.list(LEASE, "ptah-system")
    assert len(leases) == 1, leases
    holder = leases[0]["spec"].get("holderIdentity")
    return None if holder is None else str(holder)


def test_a_release_waits_for_a_pod_of_a_job_put_back_under_the_reserved_name() -> None:
    world, inv = hand_world([(SCHEMA_FAMILY, "apply", "sim://u:{pw}@db1", "db1", "team-a")])
    api = world.cluster.system
    staged = drive(
        world,
        inv,
        0,
        lambda s: bool((s.get("pendingLockRelease") or {}).get("executorStopped")),
        "no Apply accounted with its release staged as owed",
        passes=120,
    )["pendingLockRelease"]
    assert staged["operationId"].startswith("apply-")
    holder = _lease_holder(world)
    assert holder == staged["holder"]

    # The Job is put back under its name (a new UID); its Pod runs the same operation.
    job = api.get(JOB, "team-a", staged["jobName"])
    assert job is not None and job["metadata"]["uid"] == staged["jobUid"]
    api.delete(JOB, "team-a", staged["jobName"], propagation="Background")
    world.put_back_job(job)
    (run,) = world.kubelet.start_now(staged["jobName"], "team-a")
    assert run.started and run.namespace == "team-a"
    run.steps_left = 10**6
    copy = api.get(JOB, "team-a", staged["jobName"])
    assert copy is not None and copy["metadata"]["uid"] != staged["jobUid"]

    for _ in range(3):
        one_pass(world, inv, 0)
        world.clock.advance(5)
    current = status(world, 0)
    assert current["pendingLockRelease"]["operationId"] == staged["operationId"], current
    assert _lease_holder(world) == holder  # held, and renewed meanwhile
    ready = next(c["message"] for c in current["conditions"] if c["type"] == "Ready")
    assert f"Pod {run.pod} has not stopped" in ready, ready

    # The copy's Pod ends (seen to stop): now the release goes through.
    run.steps_left = 1
    for _ in range(4):
        world.kubelet.step()
    assert not world.kubelet.runs
    drive(world, inv, 0, lambda s: not s.get("pendingLockRelease"), "the release never went")
    assert _lease_holder(world) is None
    assert inv.violations == []
