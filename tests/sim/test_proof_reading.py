"""A proof is judged by what its reading saw (issue 11's 100,000-schedule run, seeds
1001432 and 1002844).

An uncertain Apply's proof reading read the database while it matched the desired
schema; before the controller read the reading's frame, another resource's Apply (its
Lease legitimately taken) changed the database. The proof settled on the reading, as
the contract says it must. The invariant ``record-cleared-by-reading`` used to judge
the database as it was when the record was cleared, and called that a violation; it
now judges what the settling reading's Pod saw when it read, from the kubelet's truth.
"""

from __future__ import annotations

from ptah.kube import errors
from ptah.kube.kinds import JOB, POD
from ptah.testing.memory import ReadRequest
from ptah.testing.sim.invariants import Invariants
from ptah.testing.sim.kubelet import NS
from ptah.testing.sim.world import SCHEMA_FAMILY, World
from ptah.workload.job import LABEL_OPERATION
from support.simworld import hand_world, one_pass, status

DESIRED = "CREATE TABLE t0\nCREATE TABLE t1"


def _uncertain_apply() -> tuple[World, Invariants]:
    """The Apply ran to the end; its Job vanished before the controller read its frame,
    and the hold has passed."""
    world, inv = hand_world([(SCHEMA_FAMILY, "s", "sim://u:{pw}@db1", "db1")])
    world.cluster.system.patch(
        SCHEMA_FAMILY.kind, NS, "s", {"spec": {"source": {"inline": DESIRED}}}
    )
    for _ in range(100):
        claim = status(world).get("activeOperation") or {}
        if claim.get("type") == "Apply" and claim.get("jobUid"):
            break
        one_pass(world, inv)
        world.kubelet.step()
        world.clock.advance(5)
    else:
        raise AssertionError(f"no Apply dispatched: {status(world)}")
    while world.kubelet.runs:
        world.kubelet.step()
    assert world.dbs.by_name["db1"].tables == set(DESIRED.splitlines())
    world.cluster.system.delete(JOB, NS, claim["jobName"], propagation="Background")
    one_pass(world, inv)
    record = status(world)["pendingObservation"]
    assert record["operationId"] == claim["operationId"]
    # No one saw the Job end, so its executor may still write: the proof waits until the
    # hold (the Job's deadline + the Pod's + 60 s) has passed and the Lease is left to
    # expire.
    one_pass(world, inv)
    assert status(world)["phase"] == "ProofOwed"
    world.clock.advance(status(world)["pendingLockRelease"]["holdSeconds"] + 1)
    return world, inv


def _proof_read(world: World, inv: Invariants) -> str:
    """Passes and kubelet steps until the proof reading's Pod has read and printed its
    frame, the controller not yet having read it. Returns the reading's Job."""
    for _ in range(100):
        claim = status(world).get("activeOperation") or {}
        seen = [t for t in world.kubelet.pods_of_job(claim.get("jobName", "")) if t.observed]
        if claim.get("type") == "Plan" and seen:
            return str(claim["jobName"])
        one_pass(world, inv)
        world.kubelet.step()
        world.clock.advance(5)
    raise AssertionError(f"no proof reading: {status(world)}")


def _settle(world: World, inv: Invariants) -> None:
    for _ in range(20):
        if not status(world).get("pendingObservation"):
            return
        one_pass(world, inv)
    raise AssertionError(f"the proof never settled: {status(world)}")


def test_a_writer_after_the_reading_does_not_unsettle_its_proof() -> None:
    world, inv = _uncertain_apply()
    record = status(world)["pendingObservation"]
    _proof_read(world, inv)
    # Another writer changes the database after the reading, before its frame is read.
    world.dbs.by_name["db1"].apply_statements(["CREATE TABLE t5"])
    _settle(world, inv)
    last = status(world)["lastMutation"]
    assert last["operationId"] == record["operationId"] and last["outcome"] == "Converged"
    assert inv.violations == []


def test_a_reading_that_saw_an_unsettled_database_settles_nothing() -> None:
    """The invariant can fail: the same proof, but the kubelet's truth says the reading
    saw the database with changes left (as a product that settled on any reading)."""
    world, inv = _uncertain_apply()
    job = _proof_read(world, inv)
    for truth in world.kubelet.pods_of_job(job):
        truth.observed = {"fingerprint": "elsewhere", "changes": True}
    _settle(world, inv)
    assert [v.split(":")[0] for v in inv.violations] == ["record-cleared-by-reading"]


def test_a_pod_read_that_fails_as_the_reading_is_accounted_spends_no_reading() -> None:
    """Seed 900207: the API could not list the uncertain run's Pods just as the proof
    reading's frame was accounted. "Could not say" is no evidence that the run stopped,
    so nothing settles on it; but it is no reason to spend the reading either: the pass
    is retried, nothing written, and the retry settles on the same reading."""
    world, inv = _uncertain_apply()
    record = status(world)["pendingObservation"]
    _proof_read(world, inv)
    failed: list[str] = []

    def pod_lists_fail(req: ReadRequest) -> errors.ApiError | None:
        run = (req.labels or {}).get(LABEL_OPERATION)
        if req.kind is POD and run == record["operationId"] and not failed:
            failed.append(req.verb)
            return errors.Unavailable("injected: the read timed out")
        return None

    world.cluster.read_faults = pod_lists_fail
    before = status(world)
    for _ in range(20):
        one_pass(world, inv)
        if failed:
            break
    assert failed, "the account never listed the run's Pods"
    assert status(world).get("pendingObservation", {}).get("proofReadAt") is None
    assert status(world).get("activeOperation") == before.get("activeOperation")
    _settle(world, inv)
    last = status(world)["lastMutation"]
    assert last["operationId"] == record["operationId"] and last["outcome"] == "Converged"
    assert inv.violations == []
