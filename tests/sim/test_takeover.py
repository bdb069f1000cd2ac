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

from dataclasses import dataclass
from typing import Any

import pytest

from ptah.kube.kinds import JOB, LEASE, POD
from ptah.testing.sim.invariants import Invariants
from ptah.testing.sim.kubelet import NS, PodRun
from ptah.testing.sim.world import MIGRATION_FAMILY, SCHEMA_FAMILY, World
from support.simworld import drive, hand_world, one_pass, status

APPLY, MIGRATE = 0, 1  # the two resources' indexes, both on database db1
# Where the two live: one namespace, or each its own (one realm, one Lease in the lock
# namespace, shared across namespaces; the holder's Job and Pods in the holder's).
LAYOUTS = {"one namespace": (NS, NS), "two namespaces": ("team-a", "team-b")}


def _lease_holder(world: World) -> str:
    leases = world.cluster.system.list(LEASE, "ptah-system")
    assert len(leases) == 1, leases
    return str(leases[0]["spec"].get("holderIdentity"))


@dataclass
class HeldRealm:
    """The Apply holds db1's Lease and its runner runs on (until the test says otherwise);
    the Apply's controller is silent from here on, and the Migrate on the same database
    waits for the Lease."""

    world: World
    inv: Invariants
    claim: dict[str, Any]  # the Apply's
    run: PodRun  # the Apply's runner
    holder: str  # the Lease's holder identity, the Apply's
    namespace: str  # the Apply's, where its Job and Pods live

    def wait_out_the_lease(self) -> str:
        """Long past the Lease duration by the Migrate's own observation: it still waits
        and the Lease keeps its holder. Returns what the Migrate's Ready condition says."""
        for _ in range(3):
            self.world.clock.advance(130)
            one_pass(self.world, self.inv, MIGRATE)
        current = status(self.world, MIGRATE)
        assert current["phase"] == "WaitingForTarget", current
        assert _lease_holder(self.world) == self.holder
        return str(next(c["message"] for c in current["conditions"] if c["type"] == "Ready"))


@pytest.fixture(params=sorted(LAYOUTS))
def held(request: pytest.FixtureRequest) -> HeldRealm:
    apply_ns, migrate_ns = LAYOUTS[request.param]
    world, inv = hand_world(
        [
            (SCHEMA_FAMILY, "apply", "sim://u:{pw}@db1", "db1", apply_ns),
            (MIGRATION_FAMILY, "migrate", "sim://u:{pw}@DB1:5432/", "db1", migrate_ns),
        ]
    )
    # The Apply claims, binds the realm and dispatches; its Pod starts and keeps running.
    claim = drive(
        world,
        inv,
        APPLY,
        lambda s: bool(
            (s.get("activeOperation") or {}).get("type") == "Apply"
            and s["activeOperation"].get("jobUid")
        ),
        "no Apply dispatched",
        passes=60,
    )["activeOperation"]
    world.kubelet.step()  # the Apply's Pod is Running
    (run,) = world.kubelet.runs.values()
    run.steps_left = 10**6
    holder = _lease_holder(world)
    assert holder.endswith(claim["operationId"])
    assert claim["operationId"] in world.dbs.by_name["db1"].writers
    # The migration reads its history (its History Job runs beside the Apply's, being
    # read-only) and claims its Migrate, which waits for the Lease.
    drive(
        world,
        inv,
        MIGRATE,
        lambda s: s.get("phase") == "WaitingForTarget",
        "the Migrate never waited for the Lease",
    )
    return HeldRealm(world, inv, claim, run, holder, apply_ns)


def test_an_expired_lease_is_not_taken_while_its_holders_job_runs(held: HeldRealm) -> None:
    world, inv, claim, run = held.world, held.inv, held.claim, held.run
    message = held.wait_out_the_lease()
    assert "expired" in message and claim["operationId"] in message and run.pod in message
    assert world.dbs.by_name["db1"].max_concurrent_writers == 1
    assert not any(
        j["metadata"]["labels"]["ptah.io/operation-type"] == "Migrate"
        for j in world.cluster.system.list(JOB, "")
    )

    # The Apply's executor stops (its controller still silent): now the Lease is taken.
    run.steps_left = 1
    for _ in range(4):
        world.kubelet.step()
    assert not world.kubelet.runs
    for _ in range(40):
        if (status(world, MIGRATE).get("activeOperation") or {}).get("jobUid"):
            break
        world.clock.advance(130)
        one_pass(world, inv, MIGRATE)
    migrate_claim = status(world, MIGRATE)["activeOperation"]
    assert migrate_claim["type"] == "Migrate" and migrate_claim["jobUid"]
    assert _lease_holder(world).endswith(migrate_claim["operationId"])

    # The Apply's controller comes back: its tenure is gone, so no account is accepted.
    one_pass(world, inv, APPLY)
    record = status(world, APPLY)["pendingObservation"]
    assert record["operationId"] == claim["operationId"]
    assert record["reason"] == "ContinuityLost"
    assert inv.violations == []


@pytest.mark.parametrize(
    ("deleted", "why"),
    [
        ("job", "was deleted before it was seen to end"),
        ("pod", "the Pod was deleted before it was seen to stop"),
    ],
)
def test_an_expired_lease_is_not_taken_while_a_vanished_pods_process_writes(
    held: HeldRealm, deleted: str, why: str
) -> None:
    """The holder's node is cut off from the API, and meanwhile its Job is deleted (its
    Pod collected) or its Pod force-deleted (the Job turns Failed): the API shows no Pod,
    and the process writes on. The holder's controller is silent, so the Lease expires by
    the Migrate's own observation; neither a vanished Job nor a terminal one whose Pod
    was never seen to stop hands the database over, as the simulated database's own
    writer count demands."""
    world, claim, run = held.world, held.claim, held.run
    db = world.dbs.by_name["db1"]

    # The node loses the API; the Apply's Job is deleted meanwhile (its Pod collected).
    world.kubelet.partition(10**6)
    if deleted == "job":
        world.cluster.system.delete(JOB, held.namespace, run.job, propagation="Background")
    else:
        world.cluster.system.delete(POD, held.namespace, run.pod)
    world.kubelet.step()
    job = world.cluster.system.get(JOB, held.namespace, run.job)
    assert job is None if deleted == "job" else job["status"]["conditions"][0]["type"] == "Failed"
    assert world.cluster.system.get(POD, held.namespace, run.pod) is None
    assert claim["operationId"] in db.writers  # gone from the API, still writing
    message = held.wait_out_the_lease()
    assert why in message, message
    assert claim["operationId"] in db.writers
    assert held.inv.violations == []


def test_an_expired_lease_is_not_taken_while_an_orphaned_pod_runs(held: HeldRealm) -> None:
    """The holder's Job is deleted with its Pods orphaned (``propagationPolicy: Orphan``):
    no Job, and the API still shows the Pod Running, its process writing. The Pods the
    Lease's holder names are asked, not only its Job and its resource: the Migrate waits."""
    world, claim, run = held.world, held.claim, held.run
    world.cluster.system.delete(JOB, held.namespace, run.job, propagation="Orphan")
    world.kubelet.step()
    assert world.cluster.system.get(JOB, held.namespace, run.job) is None
    pod = world.cluster.system.get(POD, held.namespace, run.pod)
    assert pod is not None and pod["status"]["phase"] == "Running"
    message = held.wait_out_the_lease()
    assert f"its Pod {run.pod} has not stopped" in message, message
    assert claim["operationId"] in world.dbs.by_name["db1"].writers
    assert held.inv.violations == []


def test_a_holder_stripped_of_its_finalizer_is_waited_for_by_its_pods(held: HeldRealm) -> None:
    """A person deletes the quiet holder and strips Ptah's finalizer by hand: the holder's
    resource is gone, its Job collected, and its Pod, on a node cut off from the API, left
    Terminating while its process writes on. Nothing of the holder says it holds the Lease
    but that Pod, which lives in the holder's namespace (the Lease names it): listed there,
    it keeps the Migrate waiting, wherever the Migrate lives (the mutant
    takeover-lists-own-namespace lists the Migrate's own namespace and takes the Lease)."""
    world, claim, run = held.world, held.claim, held.run
    db = world.dbs.by_name["db1"]
    world._strip_quiet_holder(world.resources[APPLY], {run.job})
    world.kubelet.step()
    api = world.cluster.system
    assert api.get(SCHEMA_FAMILY.kind, held.namespace, "apply") is None
    pod = api.get(POD, held.namespace, run.pod)
    assert pod is not None and pod["metadata"].get("deletionTimestamp"), pod
    assert claim["operationId"] in db.writers
    message = held.wait_out_the_lease()
    assert f"its Pod {run.pod} has not stopped" in message, message
    assert claim["operationId"] in db.writers
    assert db.max_concurrent_writers == 1
    assert held.inv.violations == []


def test_a_stopped_pod_in_the_listing_is_no_count_of_the_pods_that_ran(held: HeldRealm) -> None:
    """The holder's Job is deleted while its node is cut off (its Pod collected, its
    process writing on), and the API still lists a stopped Pod of the same operation (a
    copy someone made with its labels, or a retry that finished). Without the Job, or
    the count its controller kept, the listing says nothing of a Pod deleted unseen: the
    Migrate waits, and the simulated database keeps one writer."""
    world, claim, run = held.world, held.claim, held.run
    world.kubelet.partition(10**6)
    job = world.cluster.system.get(JOB, held.namespace, run.job)
    assert job is not None
    world.cluster.system.delete(JOB, held.namespace, run.job, propagation="Background")
    world.kubelet.step()
    assert world.cluster.system.get(POD, held.namespace, run.pod) is None
    copy = f"{run.pod}-copy"
    world.cluster.system.create(
        POD,
        {
            "metadata": {
                "name": copy,
                "namespace": held.namespace,
                "labels": dict(job["spec"]["template"]["metadata"]["labels"]),
            },
            "spec": {"nodeName": "node-2", "containers": [{"name": "runner", "image": "x"}]},
        },
    )
    stopped = {
        "phase": "Succeeded",
        "containerStatuses": [{"name": "runner", "state": {"terminated": {"exitCode": 0}}}],
    }
    world.cluster.system.patch(POD, held.namespace, copy, {"status": stopped}, "status")
    assert claim["operationId"] in world.dbs.by_name["db1"].writers
    message = held.wait_out_the_lease()
    assert "was deleted before it was seen to end" in message, message
    assert claim["operationId"] in world.dbs.by_name["db1"].writers
    assert held.inv.violations == []


def test_a_job_put_back_under_the_reserved_name_is_not_the_holders_run(held: HeldRealm) -> None:
    """The holder's node is cut off; its Job is deleted (its Pod collected, its process
    writing on; a Pod the Job controller had just made, never scheduled, left Terminating)
    and then put back under its reserved name from a saved manifest (a GitOps sync, a
    backup restore): a new UID. The copy's Pod runs elsewhere and ends, so the Job under
    the name is terminal, counting one Pod that was seen to stop, and the one Pod the
    API lists of the first Job provably never started. Only the UID the holder's claim
    adopted tells the copy from its run: the Migrate waits, and the database keeps one
    writer (the mutants takeover-ignores-holder-job-uid and judge-other-job-under-name)."""
    world, claim, run = held.world, held.claim, held.run
    db = world.dbs.by_name["db1"]
    world.kubelet.partition(10**6)
    job = world.cluster.system.get(JOB, held.namespace, run.job)
    assert job is not None and job["metadata"]["uid"] == claim["jobUid"]
    world._unscheduled_replacement(job)
    world.cluster.system.delete(JOB, held.namespace, run.job, propagation="Background")
    world.kubelet.step()
    assert world.cluster.system.get(POD, held.namespace, run.pod) is None
    world.put_back_job(job)
    copy = world.cluster.system.get(JOB, held.namespace, run.job)
    assert copy is not None and copy["metadata"]["uid"] != claim["jobUid"]
    for _ in range(60):
        world.kubelet.step()
        copy = world.cluster.system.get(JOB, held.namespace, run.job)
        if copy and (copy.get("status") or {}).get("conditions"):
            break
        world.clock.advance(20)
    assert copy and (copy.get("status") or {}).get("conditions"), copy
    assert claim["operationId"] in db.writers  # the first Job's process writes on
    message = held.wait_out_the_lease()
    assert "was deleted before it was seen to end" in message, message
    assert claim["operationId"] in db.writers

    # The holder's controller comes back: the Job under the name is not the one it
    # adopted, so the outcome is unknown, and the release it stages stays withheld (the
    # copy's terminal Job and stopped Pod are not its run's; the mutant
    # staged-release-omits-job-uid releases on them).
    for _ in range(3):
        one_pass(world, held.inv, APPLY)
    current = status(world, APPLY)
    assert current["pendingObservation"]["operationId"] == claim["operationId"]
    assert current["pendingLockRelease"]["jobUid"] == claim["jobUid"]
    assert _lease_holder(world) == held.holder
    assert claim["operationId"] in db.writers
    assert db.max_concurrent_writers == 1
    assert held.inv.violations == []
