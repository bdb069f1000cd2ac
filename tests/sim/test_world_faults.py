"""Faults of the world the simulation's schedules draw, each replayed once by hand.

* a Job replaced under its reserved name (a policy controller rewriting Jobs by delete
  and create, ``kubectl replace --force``): edited, before the controller reads it back,
  it is not adopted (its spec is not the intent the claim created); recreated as it was,
  after its UID was adopted, the next pass does not go on supervising it;
* a proof abandoned while the run may still write: the record goes, the withheld
  release stays, and nothing is claimed until it is done;
* a release whose write is delayed past the Lease duration while another resource on
  the same database takes the Lease: the late write clears nothing;
* spec.runner edited between the admission snapshot and the dispatch (its image kept):
  the claim is dropped, no Job of another template is created;
* a quiet holder whose Job is deleted with its Pods orphaned, or left Terminating on a
  node cut off from the API, or whose finalizer a person stripped: its expired Lease is
  not taken while its Pods show;
* a Pod orphaned while it waits for a node: the hold starts again while it waits;
* a never-scheduled Pod kept Terminating by a finalizer: it holds no proof back.

Each test fails with the break of its rule applied (tests/mutants: intent-drift-ignores-
spec, watch-rebinds-by-name, withheld-release-lets-claims-through, release-without-
precondition, template-matches-image-only, takeover-ignores-running-pod,
takeover-deleted-pod-stopped, hold-ignores-waiting-pod, proof-waits-on-pod-phase).
"""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import pytest

from ptah.kube import errors
from ptah.kube.kinds import JOB, LEASE, POD
from ptah.testing.memory import PROCEED, FaultDecision, ReadRequest, WriteRequest
from ptah.testing.sim.invariants import Invariants
from ptah.testing.sim.kubelet import NS, PodRun
from ptah.testing.sim.world import LOCK_NS, MIGRATION_FAMILY, SCHEMA_FAMILY, World
from ptah.workload.job import LABEL_OPERATION
from ptah.workload.names import lease_name
from support.simworld import drive, hand_world, one_pass, status

ONE = [(SCHEMA_FAMILY, "r0", "sim://u:{pw}@db1", "db1")]
TWO = [*ONE, (MIGRATION_FAMILY, "r1", "sim://u:{pw}@DB1:5432/", "db1")]


class _Always(random.Random):
    """A fault's own stream, drawn so that the fault always fires, for as long as it may."""

    def random(self) -> float:
        return 0.0

    def randint(self, a: int, b: int) -> int:
        return b


def _dispatched_apply(world: World, inv: Invariants, index: int = 0) -> dict[str, Any]:
    claim = drive(
        world,
        inv,
        index,
        lambda s: bool(
            (s.get("activeOperation") or {}).get("type") in {"Apply", "Migrate"}
            and s["activeOperation"].get("jobUid")
        ),
        "no mutation dispatched",
        passes=80,
    )["activeOperation"]
    return dict(claim)


def test_a_job_replaced_with_another_spec_before_its_read_back_is_not_adopted() -> None:
    world, inv = hand_world(ONE)
    world.replaced = random.Random(1)
    world.crash = ("create_job", "after", 1)  # the first mutating create, then a stop
    claim = drive(
        world,
        inv,
        0,
        lambda s: world.crash is None and bool((s.get("activeOperation") or {}).get("type")),
        "the Apply's create never stopped the controller",
    )["activeOperation"]
    assert claim["type"] == "Apply" and claim["dispatchStarted"] and not claim.get("jobUid")
    job = world.cluster.system.get(JOB, NS, claim["jobName"])
    assert job is not None
    world._replace_job(job, edited=True)
    one_pass(world, inv, 0)
    s = status(world)
    assert not s.get("activeOperation")
    assert s["pendingObservation"]["reason"] == "JobIntentDrift", s["pendingObservation"]
    assert inv.violations == []


def test_a_job_recreated_under_its_name_after_adoption_ends_the_claim() -> None:
    world, inv = hand_world(ONE)
    claim = _dispatched_apply(world, inv)
    job = world.cluster.system.get(JOB, NS, claim["jobName"])
    assert job is not None
    world._replace_job(job, edited=False)  # the same spec, another UID
    again = world.cluster.system.get(JOB, NS, claim["jobName"])
    assert again is not None and again["metadata"]["uid"] != claim["jobUid"]
    one_pass(world, inv, 0)
    s = status(world)
    assert (s.get("activeOperation") or {}).get("operationId") != claim["operationId"]
    assert s["pendingObservation"]["reason"] == "JobGone", s["pendingObservation"]
    assert inv.violations == []


def _cut_off_writer(world: World, claim: dict[str, Any]) -> PodRun:
    """The Apply's Pod runs on a node that loses the API, and is force-deleted there:
    the process writes on, unseen."""
    world.kubelet.step()
    (run,) = [r for r in world.kubelet.runs.values() if r.operation_id == claim["operationId"]]
    assert run.started
    world.kubelet.partition(10**6)
    run.steps_left = 10**6
    world.cluster.system.delete(POD, NS, run.pod)
    return run


def test_an_abandon_while_the_run_may_write_claims_nothing_beside_the_withheld_release() -> None:
    world, inv = hand_world(ONE)
    claim = _dispatched_apply(world, inv)
    run = _cut_off_writer(world, claim)
    s = drive(world, inv, 0, lambda s: s.get("phase") == "ProofOwed", "no proof owed")
    assert s["pendingLockRelease"]["withheld"]
    world._annotate(world.resources[0], s["pendingObservation"]["operationId"])
    for _ in range(12):
        one_pass(world, inv, 0)
        world.clock.advance(5)
    s = status(world)
    assert claim["operationId"] in s["abandonedProofs"]
    assert s["pendingLockRelease"]["operationId"] == claim["operationId"]
    assert not s.get("activeOperation"), s["activeOperation"]
    assert run.truth is not None and run.truth.alive
    assert inv.violations == []


def _delayed_release(world: World) -> Any:
    def faults(req: WriteRequest) -> FaultDecision:
        world._release_delayed(req)
        return PROCEED

    return faults


def test_a_release_delayed_past_the_lease_duration_clears_no_one_elses_lease() -> None:
    world, inv = hand_world(TWO)
    # The migration claims its Migrate and waits while the schema's Apply holds the Lease.
    claim = _dispatched_apply(world, inv, 0)
    drive(
        world,
        inv,
        1,
        lambda s: s.get("phase") == "WaitingForTarget",
        "the Migrate never waited for the Lease",
    )
    # The Apply ends; its release is read, and its write delayed while the Migrate, by
    # its own clock, finds the Lease expired, its holder's run stopped, and takes it.
    drive(
        world,
        inv,
        0,
        lambda s: (s.get("pendingLockRelease") or {}).get("operationId") == claim["operationId"],
        "the Apply's release was never staged",
    )
    world.faults_on = True
    world.delays = _Always()
    inv.install(_delayed_release(world))
    one_pass(world, inv, 0)
    world.faults_on = False
    assert inv.faults["release-overtaken"] == 1, inv.faults
    lease = world.cluster.system.get(LEASE, LOCK_NS, _lease_name(world))
    assert lease is not None
    migrate = status(world, 1)["activeOperation"]
    assert lease["spec"]["holderIdentity"] == migrate["lease"]["holder"]
    assert inv.violations == []


def _lease_name(world: World) -> str:
    return lease_name(world.dbs.by_name["db1"].identity.digest)


class _Never(random.Random):
    """A stream whose faults never fire (every threshold is below its draws)."""

    def random(self) -> float:
        return 0.999


def test_a_runner_edit_between_the_snapshot_and_the_dispatch_drops_the_claim() -> None:
    """The schema's first reading: claimed, then its admission snapshot written, and
    right after it a person edits spec.runner, the image kept (the fault aimed at that
    write, its own stream fixed): the dispatch refuses the template."""
    world, inv = hand_world(ONE)
    claim = drive(world, inv, 0, lambda s: bool(s.get("activeOperation")), "nothing claimed")[
        "activeOperation"
    ]
    assert claim["type"] == "Plan" and not claim.get("admissionSnapshot")
    world.faults_on = True
    world.races = _Never()
    world.rng = _Never()
    world.edits = _Always()  # fires; the edit is the runner's resources
    one_pass(world, inv, 0)
    world.faults_on = False
    assert inv.faults["runner-edited-in-flight"] == 1
    obj = world.cluster.system.get(SCHEMA_FAMILY.kind, NS, "r0")
    assert obj is not None and obj["spec"]["runner"]["resources"]
    assert status(world)["activeOperation"]["admissionSnapshot"]
    one_pass(world, inv, 0)
    s = status(world)
    assert (s.get("activeOperation") or {}).get("operationId") != claim["operationId"]
    assert world.cluster.system.get(JOB, NS, claim["jobName"]) is None
    assert inv.violations == []


def _quiet_holder(world: World, inv: Invariants) -> tuple[dict[str, Any], PodRun]:
    """What holder_goes_quiet does, its draws fixed: the Apply dispatched and writing, the
    Migrate on the same database waiting for its Lease, then the Apply's worker stuck and
    its executor's node cut off, the executor writing on."""
    claim = _dispatched_apply(world, inv, 0)
    world.kubelet.step()
    (run,) = [r for r in world.kubelet.runs.values() if r.operation_id == claim["operationId"]]
    run.steps_left = 10**6  # a long run
    drive(world, inv, 1, lambda s: s.get("phase") == "WaitingForTarget", "no wait")
    world.starved_until["r0"] = world.clock.now() + timedelta(days=1)
    world.kubelet.partition(10**6)
    return claim, run


def _migrate_waits_past_expiry(world: World, inv: Invariants, claim: dict[str, Any]) -> None:
    for _ in range(4):
        world.clock.advance(130)
        world.kubelet.step()
        one_pass(world, inv, 1)
    assert status(world, 1)["phase"] == "WaitingForTarget"
    lease = world.cluster.system.get(LEASE, LOCK_NS, _lease_name(world))
    assert lease is not None and lease["spec"]["holderIdentity"].endswith(claim["operationId"])
    assert claim["operationId"] in world.dbs.by_name["db1"].writers
    assert inv.violations == []


@pytest.mark.parametrize("draw", [0.55, 0.8], ids=["orphaned", "terminating"])
def test_a_quiet_holders_lease_is_not_taken_while_its_pods_are_shown(draw: float) -> None:
    """The holder's worker is stuck, its node cut off, and its Job deleted with its Pods
    orphaned (shown running) or left Terminating (only the node can confirm they
    stopped): the Migrate on the same database waits past the Lease's expiry."""
    world, inv = hand_world(TWO)
    claim, _ = _quiet_holder(world, inv)
    world._delete_quiet_job(world.resources[0], claim["jobName"], draw)
    pods = world.cluster.system.list(POD, NS, {"ptah.io/operation-id": claim["operationId"]})
    assert pods, "the holder's Pod is still shown"
    _migrate_waits_past_expiry(world, inv, claim)


def test_a_holder_whose_finalizer_a_person_stripped_keeps_its_lease_while_its_pods_show() -> None:
    """The holder's worker is stuck and its node cut off; a person deletes the holder and
    strips Ptah's finalizer by hand. Its claim and staged release are gone with it, and
    its Job is collected, but its Pod, left Terminating on the cut-off node, is shown not
    stopped: the Migrate on the same database waits past the Lease's expiry (killed
    without the takeover's own look at the operation's Pods, or with a Pod being deleted
    taken as stopped)."""
    world, inv = hand_world(TWO)
    claim, run = _quiet_holder(world, inv)
    world._strip_quiet_holder(world.resources[0], {claim["jobName"]})
    assert world.cluster.system.get(SCHEMA_FAMILY.kind, NS, "r0") is None
    pod = world.cluster.system.get(POD, NS, run.pod)
    assert pod is not None and pod["metadata"].get("deletionTimestamp")
    _migrate_waits_past_expiry(world, inv, claim)


def test_the_hold_is_counted_from_this_controllers_own_sighting_of_the_run() -> None:
    """The replica that dispatched runs on a node whose clock is 400 s behind; its
    process goes down and another replica, on a true clock, stages the release of the
    run whose Pod was force-deleted on a node cut off from the API. Counted from the
    dispatch stamp (the other clock), the hold (60 + 60 + 60 s) would be over at once,
    the process still writing: counted from this process's own sighting, it is not."""
    world, inv = hand_world(ONE)
    world.cluster.system.patch(
        SCHEMA_FAMILY.kind, NS, "r0", {"spec": {"runner": {"activeDeadlineSeconds": 60}}}
    )
    world.replicas[0] = world._replica("c0", -400.0)
    claim = _dispatched_apply(world, inv)
    run = _cut_off_writer(world, claim)
    world.replicas[0].down_until = world.clock.now() + timedelta(days=1)
    world.replicas.append(world._replica("c1", 0.0))
    world.kubelet.step()  # the Job controller counts the deleted Pod failed
    for _ in range(6):
        one_pass(world, inv, 0)
        world.clock.advance(5)
    assert inv.violations == []
    s = status(world)
    assert (s.get("pendingLockRelease") or {}).get("operationId") == claim["operationId"]
    assert s["pendingLockRelease"]["withheld"]
    assert run.truth is not None and run.truth.alive


def _passes(world: World, inv: Invariants, count: int, seconds: int) -> None:
    """``count`` passes over the resource, each with a kubelet step and ``seconds`` after it."""
    for _ in range(count):
        one_pass(world, inv, 0)
        world.kubelet.step()
        world.clock.advance(seconds)


def _still_withheld(world: World, inv: Invariants, claim: dict[str, Any], run: PodRun) -> None:
    """The run's process writes on, and its release is still staged, the Lease held."""
    assert run.truth is not None and run.truth.alive
    staged = status(world).get("pendingLockRelease") or {}
    assert staged.get("operationId") == claim["operationId"], status(world)
    assert inv.violations == []


def _orphan_waiting_for_a_node() -> tuple[World, Invariants, dict[str, Any], PodRun]:
    """The Apply (runner deadline 60 s) dispatched, its Pod left waiting for a node, and
    its Job deleted with the Pod orphaned."""
    world, inv = hand_world(ONE)
    world.cluster.system.patch(
        SCHEMA_FAMILY.kind, NS, "r0", {"spec": {"runner": {"activeDeadlineSeconds": 60}}}
    )
    later = world.clock.now() + timedelta(days=1)
    world.kubelet._late_start = lambda job: later  # type: ignore[method-assign]
    claim = _dispatched_apply(world, inv)
    world.kubelet.step()
    (run,) = [r for r in world.kubelet.runs.values() if r.operation_id == claim["operationId"]]
    assert not run.started
    world.cluster.system.delete(JOB, NS, claim["jobName"], propagation="Orphan")
    return world, inv, claim, run


def _start_and_lose(world: World, run: PodRun) -> None:
    """A node fits the orphan at last: it starts, its node loses the API, the Pod is
    deleted, and the process writes on."""
    run.start_after = world.clock.now()
    world.kubelet.step()
    assert run.started
    run.steps_left = 10**6
    world.kubelet.partition(10**6)
    world.cluster.system.delete(POD, NS, run.pod)


def test_a_pod_orphaned_while_it_waits_for_a_node_keeps_the_hold_going() -> None:
    """The Apply's Pod waits for a node (unscheduled) when its Job is deleted with the
    Pod orphaned: no Job deadline bounds when it starts any more. Long past a hold
    counted from the dispatch (60 + 60 + 60 s), the release is still withheld and the
    Lease held while the Pod waits; once it starts and is deleted unseen on a node cut
    off from the API, the hold counts again from then, so it is never handed back while
    the process writes (the invariants' hold-outlives-run and lease-while-executor)."""
    world, inv, claim, run = _orphan_waiting_for_a_node()
    _passes(world, inv, 8, 65)  # 8 x 65 s: well past a hold counted from the dispatch
    staged = status(world).get("pendingLockRelease") or {}
    assert staged.get("operationId") == claim["operationId"], status(world)
    assert world.cluster.system.get(POD, NS, run.pod) is not None
    ready = next(c for c in status(world)["conditions"] if c["type"] == "Ready")
    assert "a Pod of the run waits to start" in ready["message"], ready
    # A node fits at last: the Pod starts, its node loses the API, the Pod is deleted.
    _start_and_lose(world, run)
    _passes(world, inv, 2, 20)  # within its own deadline (60 s): it writes on
    _still_withheld(world, inv, claim, run)


def test_an_orphan_started_and_lost_before_the_first_look_restarts_the_hold() -> None:
    """Seed 2100747: the Apply's Job is deleted with its waiting Pod orphaned, and no
    controller looks while the Pod waits; it starts long after the dispatch and is deleted
    unseen on a node cut off from the API, before the controller's first look. That look
    finds the Job and the Pod gone, with nothing seen waiting: a hold counted from the
    dispatch would end while the process writes on, so the hold counts again from the first
    look without the Job, and the Lease stays held through the Pod's own deadline."""
    world, inv, claim, run = _orphan_waiting_for_a_node()
    world.clock.advance(150)  # past the Job's deadline + 60 s from the dispatch
    _start_and_lose(world, run)
    _passes(world, inv, 3, 15)  # 3 x 15 s: past a hold counted from the dispatch (180 s)
    assert run.truth is not None and run.truth.alive  # within its own deadline (60 s)
    staged = status(world).get("pendingLockRelease") or {}
    assert staged.get("operationId") == claim["operationId"], status(world)
    assert inv.violations == []


def _reads_fail(world: World) -> dict[str, bool]:
    """Every read of a Job or a Pod fails from now (the operator's permission to read
    them taken away, say) until the returned switch is turned off."""
    unreadable = {"on": True}

    def read_faults(req: ReadRequest) -> errors.ApiError | None:
        if unreadable["on"] and req.kind in (JOB, POD):
            return errors.Forbidden("injected: pods is forbidden")
        return None

    world.cluster.read_faults = read_faults
    return unreadable


def _orphan_lost_while_unread(
    world: World, inv: Invariants, claim: dict[str, Any], run: PodRun
) -> None:
    """Reads fail for far longer than a hold (6 x 65 s); then the orphan starts and is
    deleted unseen on a node cut off from the API, the reads come back, and the
    controller looks twice within the Pod's own deadline (60 s) of its start. The
    release must still be staged: its process writes on."""
    unreadable = _reads_fail(world)
    _passes(world, inv, 6, 65)
    _start_and_lose(world, run)
    _passes(world, inv, 2, 10)
    unreadable["on"] = False
    _passes(world, inv, 2, 10)
    _still_withheld(world, inv, claim, run)


def test_an_orphan_that_starts_while_its_run_cannot_be_read_keeps_the_hold_going() -> None:
    """The controller sees the orphaned Pod wait; then every read of the run's Job and
    Pods fails, and meanwhile the Pod starts and is lost. A hold counted from the look
    that saw it wait would pass while the process writes: it cannot pass while the look
    after the waiting one is owed, so the Lease stays held, and the first look that reads
    counts it again."""
    world, inv, claim, run = _orphan_waiting_for_a_node()
    _passes(world, inv, 2, 15)
    assert status(world)["pendingLockRelease"]["operationId"] == claim["operationId"]
    _orphan_lost_while_unread(world, inv, claim, run)


def test_a_restarted_controller_that_cannot_read_the_run_keeps_the_hold_going() -> None:
    """The release is staged, the orphan seen waiting, and the controller restarts: the
    fresh process has no sighting of the run, and every read of its Job and Pods fails.
    Its hold cannot pass before its first look that reads (only such a look can find the
    Job gone and start the hold again), however long the reads fail."""
    world, inv, claim, run = _orphan_waiting_for_a_node()
    one_pass(world, inv, 0)
    assert status(world)["pendingLockRelease"]["operationId"] == claim["operationId"]
    for replica in world.replicas:
        world.restart(replica)
    _orphan_lost_while_unread(world, inv, claim, run)


def test_a_never_scheduled_pod_kept_terminating_holds_no_proof_back() -> None:
    """Seed 1972, by hand: the Apply's Job is deleted and its Pod force-deleted, while
    only a replacement that was never scheduled stays listed, Terminating behind the
    Job's tracking finalizer (which nobody removes here). That Pod provably never ran:
    once the hold has passed, the owed proof reads, instead of waiting on its phase
    (Pending) for as long as the finalizer stays."""
    world, inv = hand_world(ONE)
    world.cluster.system.patch(
        SCHEMA_FAMILY.kind, NS, "r0", {"spec": {"runner": {"activeDeadlineSeconds": 60}}}
    )
    claim = _dispatched_apply(world, inv)
    world.kubelet.step()
    world._lose_quiet_pods(world.resources[0], claim["jobName"])
    (kept,) = world.cluster.system.list(POD, NS, {LABEL_OPERATION: claim["operationId"]})
    assert kept["metadata"]["deletionTimestamp"] and kept["metadata"]["finalizers"]
    assert not kept["spec"].get("nodeName")
    s = drive(world, inv, 0, lambda s: s.get("phase") == "ProofOwed", "no proof owed")
    assert s["pendingObservation"]["operationId"] == claim["operationId"]
    # 180 s of hold (60 + 60 + 60 s), then the reading: 100 passes 5 s apart.
    s = drive(
        world,
        inv,
        0,
        lambda s: (
            (s.get("pendingObservation") or {}).get("operationId") != claim["operationId"]
            or bool(s["pendingObservation"].get("proofReadAt"))
        ),
        "the proof never read",
        passes=100,
    )
    assert world.cluster.system.get(POD, NS, kept["metadata"]["name"]) is not None
    assert inv.violations == []


def test_a_resource_whose_secret_is_deleted_while_it_owes_proof_keeps_reading() -> None:
    """The proof comes before the execution binding: a Secret deleted while proof is owed
    (a secrets operator re-syncing it) stalls nothing; the resource reads on, and never
    says it waits for its Secret (tests/mutants/binding-before-proof)."""
    world, inv = hand_world(ONE)
    claim = _dispatched_apply(world, inv)
    (run,) = [r for r in world.kubelet.runs.values() if r.operation_id == claim["operationId"]]
    run.fault = "log-lost"  # its log is gone: uncertain, with its Pod seen to stop
    drive(world, inv, 0, lambda s: bool(s.get("pendingObservation")), "no record written")
    world.unsecret = _Always()
    world._secret_gone_while_owed(world.resources[0])
    assert world.secrets_gone, "the Secret was not deleted"
    before = inv.readings_of["r0"]
    for _ in range(20):
        one_pass(world, inv, 0)
        world.kubelet.step()
        world.clock.advance(5)
        stalled = [
            c.get("reason")
            for c in status(world).get("conditions") or []
            if c.get("type") == "Stalled" and c.get("status") == "True"
        ]
        assert "SecretMissing" not in stalled
    assert inv.readings_of["r0"] > before, status(world)
    assert inv.violations == []
