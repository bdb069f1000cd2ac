"""After an abandoned proof: no replay, a fresh reading at once, and a release on evidence.

* the abandoned plan's digest is never dispatched again: the fresh reading's plan folds
  in the abandonment, has its own digest and needs its own approval;
* an abandon (and a repair recorded in a migration's history) leads to a fresh reading
  by itself, so a repaired migration reaches Ready without an unrelated event: the
  loops here pass only when the previous pass asked to be requeued;
* a claim whose Job was never seen under its reserved name is not taken for one that
  never ran (absence is not evidence: a Job created and deleted with its Pods before
  anyone saw it leaves the same empty name): its proof and its release wait for the hold,
  the record saying so, and the Lease is then left to expire, never released.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from ptah.kube.clock import SimClock
from ptah.kube.kinds import CONFIGMAP, EVENT, JOB, MIGRATION, SCHEMA, SECRET
from ptah.lifecycle.context import ABANDON_ANNOTATION, Env
from ptah.lifecycle.reconcile import reconcile
from ptah.lifecycle.step import Result
from ptah.testing.memory import PROCEED, MemoryCluster
from ptah.testing.sim.database import Databases
from ptah.testing.sim.kubelet import NS, Kubelet
from ptah.testing.sim.world import MIGRATION_FAMILY, ControllerStopped, _migrations_cm
from support.lifecycle_harness import NAME, SIDES, MemoryHarness


def _events(cluster: Any) -> list[tuple[str, str]]:
    return [(e["reason"], e["message"]) for e in cluster.list(EVENT, NS)]


def _abandon(h: MemoryHarness, kind: Any, name: str, operation_id: str) -> None:
    h.admin.patch(kind, NS, name, {"metadata": {"annotations": {ABANDON_ANNOTATION: operation_id}}})


def _looked(h: MemoryHarness) -> None:
    """Until the release step has looked for the run's Job and Pods (it writes what it
    saw into the staged release): the hold counts from that first look without the Job
    (ptah.lifecycle.hold.looked), so a test that lets the hold pass waits for it first."""
    h.run(lambda: bool((h.status().get("pendingLockRelease") or {}).get("withheld")))


def _uncertain_apply_that_never_ran(h: MemoryHarness) -> dict[str, Any]:
    """The controller stops right after ``dispatchStarted``: no Job is ever created. No
    one can tell that from a Job deleted unseen, so the proof waits for the hold; then
    the proving reading finds the database unchanged and does not settle."""
    h.run(lambda: (h.claim() or {}).get("type") == "Apply")
    h.run_to_stop("after", "write_dispatch_started")
    claim = h.claim()
    assert claim is not None and claim["type"] == "Apply" and claim["dispatchStarted"]
    h.run(lambda: h.phase() == "ProofOwed")
    record = h.status()["pendingObservation"]
    assert record["reason"] == "JobMissing"
    _looked(h)
    h.clock.advance(h.status()["pendingLockRelease"]["holdSeconds"] + 1)
    h.run(lambda: h.phase() == "ProofNotSettled")
    return dict(record)


def _apply_digests(h: MemoryHarness) -> list[str]:
    return [
        j["metadata"]["labels"].get("ptah.io/input-fingerprint", "")
        or j["spec"]["template"]["metadata"]["annotations"].get("ptah.io/input-fingerprint", "")
        for j in h.jobs()
        if j["metadata"]["labels"].get("ptah.io/operation-type") == "Apply"
    ]


def test_abandon_never_replays_the_plan_and_the_new_one_needs_its_own_approval() -> None:
    h = MemoryHarness(SIDES["schema"])
    h.create(approval="Always")
    h.run(lambda: h.phase() == "WaitingForApproval")
    abandoned_digest = h.status()["currentPlan"]["digest"]
    h.approve(abandoned_digest, "first")
    record = _uncertain_apply_that_never_ran(h)
    assert record["planDigest"] == abandoned_digest
    # The proving reading found the same database, so it planned the same digest.
    assert h.status()["currentPlan"]["digest"] == abandoned_digest

    _abandon(h, SCHEMA, NAME, record["operationId"])
    h.run(lambda: h.phase() == "WaitingForApproval")
    s = h.status()
    new_digest = s["currentPlan"]["digest"]
    assert new_digest != abandoned_digest
    assert record["operationId"] in s["abandonedProofs"]
    # A person approving the abandoned digest again authorizes nothing.
    h.approve(abandoned_digest, "again")
    for _ in range(20):
        h.one_pass()
        h.wait(Result())
    assert h.phase() == "WaitingForApproval"
    assert h.claim() is None and h.job_creates == 0
    h.approve(new_digest, "new")
    h.run(lambda: h.phase() == "Ready" and not h.status().get("pendingLockRelease"), passes=400)
    assert h.job_creates == 1
    assert h.status()["lastMutation"]["planDigest"] == new_digest
    assert h.tables() == h.desired_tables()


def test_abandon_with_no_approval_needed_dispatches_only_a_new_digest() -> None:
    h = MemoryHarness(SIDES["schema"])
    h.create(approval="Never")
    record = _uncertain_apply_that_never_ran(h)
    claimed: list[str] = []

    def until() -> bool:
        claim = h.claim()
        if claim is not None and claim["type"] == "Apply":
            claimed.append(claim["planDigest"])
        return h.phase() == "Ready" and not h.status().get("pendingLockRelease")

    _abandon(h, SCHEMA, NAME, record["operationId"])
    h.run(until, passes=400)
    assert claimed and record["planDigest"] not in claimed, claimed
    assert h.job_creates == 1


def test_a_reserved_name_never_seen_as_a_job_holds_the_proof_and_the_release() -> None:
    """The controller stops after ``dispatchStarted``: no Job and no Pod is ever seen
    under the reserved name. That is also what a Job created, then deleted with its Pods
    before anyone saw it, leaves behind while its process may still run, so nothing is
    settled and nothing released on it: the proof reads nothing and the Lease stays held
    until the hold (the Job's deadline + the Pod's + 60 s) has passed, the record saying
    why; then the Lease is left to expire, never released, and only then the proof reads."""
    h = MemoryHarness(SIDES["schema"])
    h.create()
    h.run(lambda: (h.claim() or {}).get("type") == "Apply")
    h.run_to_stop("after", "write_dispatch_started")
    h.run(lambda: h.phase() == "ProofOwed")
    s = h.status()
    record, staged = s["pendingObservation"], s["pendingLockRelease"]
    assert record["reason"] == "JobMissing"
    jobs = len(h.jobs())
    for _ in range(60):  # 300 s: past a full resync, far short of the hold
        h.one_pass()
        h.wait(Result())
    s = h.status()
    assert h.phase() == "ProofOwed" and len(h.jobs()) == jobs  # no reading dispatched
    withheld = s["pendingLockRelease"]["withheld"]
    assert f"no Job and no Pod was ever seen under the reserved name {record['jobName']}" in (
        withheld
    )
    assert "not evidence that none ran" in withheld, withheld
    message = next(c["message"] for c in s["conditions"] if c["type"] == "Ready")
    assert "not evidence that none ran" in message, message
    assert "never said" not in message
    lease = h.lease()
    assert lease is not None and lease["spec"]["holderIdentity"] == staged["holder"]
    h.clock.advance(staged["holdSeconds"])
    h.run(lambda: h.phase() == "ProofNotSettled")
    events = _events(h.admin)
    left = [m for r, m in events if r == "LeaseLeftToExpire"]
    assert left and "not evidence that none ran" in left[0], events
    assert not [m for r, m in events if r == "LeaseReleased"]
    assert h.admin.get(JOB, NS, record["jobName"]) is None


def test_a_job_appearing_under_the_reserved_name_keeps_the_release_withheld() -> None:
    h = MemoryHarness(SIDES["schema"])
    h.create()
    h.run(lambda: (h.claim() or {}).get("type") == "Apply")
    h.run_to_stop("after", "write_dispatch_started")
    h.run(lambda: h.phase() == "ProofOwed")
    record = h.status()["pendingObservation"]
    # A create that was in flight lands late: a Job (and its running Pod) appear.
    h.admin.create(
        JOB,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": record["jobName"],
                "namespace": NS,
                "labels": {"ptah.io/operation-id": record["operationId"]},
            },
            "spec": {"template": {"metadata": {"labels": {}}, "spec": {"containers": []}}},
        },
    )
    h.clock.advance(400)
    for _ in range(5):
        h.one_pass()
    s = h.status()
    assert s["pendingLockRelease"]["withheld"] == f"the Job {record['jobName']} has not finished"
    lease = h.lease()
    assert lease is not None and lease["spec"]["holderIdentity"]


# ---------------------------------------------------------------- migrations


class MigrationRig:
    """One PtahMigration on the in-memory API; the loop honours the pass's own requeue
    and nothing else, so progress never depends on an unrelated event."""

    def __init__(self, files: int = 3) -> None:
        self.clock = SimClock()
        self.cluster = MemoryCluster(clock=self.clock, seed=11)
        self.cluster.faults = lambda req: PROCEED
        self.dbs = Databases()
        self.db = self.dbs.add("db1")
        self.kubelet = Kubelet(self.cluster, self.dbs, random.Random(11), faults_on=False)
        self.api = self.cluster.system
        self.stop_at: tuple[str, str] | None = None
        self.env = self.fresh_env()
        self.api.create(
            SECRET,
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "mig-db", "namespace": NS},
                "stringData": {"url": "sim://u:pw@db1"},
            },
        )
        self.api.create(CONFIGMAP, _migrations_cm("mig-dir", files))
        self.api.create(
            MIGRATION,
            {
                "apiVersion": "ptah.io/v1alpha1",
                "kind": "PtahMigration",
                "metadata": {"name": "mig", "namespace": NS},
                "spec": {
                    "target": {"engine": "postgres", "secretRef": {"name": "mig-db"}},
                    "directory": {"configMaps": ["mig-dir"]},
                },
            },
        )

    def _hook(self, when: str, name: str) -> None:
        if self.stop_at == (when, name):
            self.stop_at = None
            raise ControllerStopped(name)

    def fresh_env(self) -> Env:
        return Env(cluster=self.cluster, hook=self._hook, poll_seconds=2.0)

    def status(self) -> dict[str, Any]:
        obj = self.api.get(MIGRATION, NS, "mig")
        assert obj is not None
        return dict(obj.get("status") or {})

    def history_jobs(self) -> int:
        return sum(
            j["metadata"]["labels"].get("ptah.io/operation-type") == "History"
            for j in self.api.list(JOB, NS)
        )

    def drive(self, until: Callable[[], bool], passes: int = 200) -> bool:
        if until():
            return True
        for _ in range(passes):
            try:
                result = reconcile(self.env, MIGRATION_FAMILY, NS, "mig")
            except ControllerStopped:
                self.env = self.fresh_env()
                return until()
            if until():
                return True
            if result.requeue_after is None:
                return False  # it would wait for an unrelated event
            self.kubelet.step()
            self.clock.advance(max(result.requeue_after, 0.5))
        return until()


def _ready(rig: MigrationRig, versions: list[str]) -> Callable[[], bool]:
    def pred() -> bool:
        s = rig.status()
        return (
            s.get("phase") == "Ready"
            and (s.get("history") or {}).get("applied") == versions
            and not s.get("activeOperation")
        )

    return pred


def test_resolve_and_abandon_lead_to_a_fresh_reading_and_ready() -> None:
    """The Migrate Pod killed mid-file 2 (partial, dirty); the proof's reading shows it
    dirty; a person resolves the row as applied and abandons right away: a fresh History
    reading follows at once and the migration reaches Ready by itself."""
    rig = MigrationRig()
    rig.stop_at = ("after", "write_job_uid")
    for _ in range(3):
        rig.drive(lambda: False, passes=50)
        claim = rig.status().get("activeOperation") or {}
        if claim.get("type") == "Migrate":
            break
        rig.stop_at = ("after", "write_job_uid")
    assert claim.get("type") == "Migrate"
    rig.kubelet.step()  # the Pod starts
    (run,) = list(rig.kubelet.runs.values())
    # Killed in the middle of file 2: the container exits 137 without a frame, having
    # recorded file 1 and left file 2 dirty.
    run.fault, run.steps_left, run.exit_lag = "killed", 1, 0
    rig.kubelet.step()
    assert run.operation_id not in rig.db.writers
    rig.db.history[:] = ["1"]
    rig.db.dirty = "2"
    assert rig.drive(lambda: rig.status().get("phase") == "ProofNotSettled")
    s = rig.status()
    record = s["unresolvedRun"]
    assert s["history"]["dirty"][0]["version"] == "2"
    readings = rig.history_jobs()

    rig.db.dirty = None  # ptah migrate resolve --as applied
    rig.db.history.append("2")
    rig.api.patch(
        MIGRATION,
        NS,
        "mig",
        {"metadata": {"annotations": {ABANDON_ANNOTATION: record["operationId"]}}},
    )
    started = rig.clock.now()
    assert rig.drive(_ready(rig, ["1", "2", "3"])), rig.status()
    assert rig.history_jobs() > readings
    waited = (rig.clock.now() - started).total_seconds()
    assert waited < rig.env.proof_retry_seconds, waited
    assert rig.db.history == ["1", "2", "3"]
    assert rig.status()["lastMutation"]["planDigest"] != record["planDigest"]


def test_a_dirty_migration_reads_again_by_itself_after_a_resolve() -> None:
    """Dirty found by an ordinary reading (no uncertain run): Blocked, and the History is
    read again after a pause, so a repair done in the database alone is noticed."""
    rig = MigrationRig(files=2)
    rig.db.history[:] = []
    rig.db.dirty = "1"
    assert rig.drive(lambda: rig.status().get("phase") == "Blocked")
    s = rig.status()
    stalled = next(c for c in s["conditions"] if c["type"] == "Stalled")
    assert stalled["reason"] == "Dirty" and "read again every 300 s" in stalled["message"]
    rig.db.dirty = None  # ptah migrate resolve --as applied
    rig.db.history.append("1")
    assert rig.drive(_ready(rig, ["1", "2"])), rig.status()
    assert rig.history_jobs() >= 2


def test_a_reading_stamped_ahead_by_another_clock_is_not_a_reading_after_the_record() -> None:
    """Two controllers' clocks cannot order a reading and a record: a reading taken
    before the record, stamped by a replica whose clock runs ahead, carries a later
    ``lastReadingAt`` than the record's ``recordedAt``. The prove step must still read
    (the 100,000-schedule run of session 5 found both families resting with a record
    never read, seeds 5054201 and 5008591); only a reading that finished with the record
    in place (``proofReadAt`` on the record) paces the next one."""
    h = MemoryHarness(SIDES["schema"])
    h.create()
    h.run(lambda: (h.claim() or {}).get("type") == "Apply")
    h.run_to_stop("after", "write_dispatch_started")
    h.run(lambda: h.phase() == "ProofOwed")
    _looked(h)
    h.clock.advance(h.status()["pendingLockRelease"]["holdSeconds"] + 1)
    record = h.status()["pendingObservation"]
    assert not record.get("proofReadAt")
    ahead = (h.clock.now() + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    h.admin.patch(SIDES["schema"].kind, NS, NAME, {"status": {"lastReadingAt": ahead}}, "status")
    claimed: list[str] = []

    def settled_or_not() -> bool:
        claimed.append(str((h.claim() or {}).get("type")))
        return h.phase() == "ProofNotSettled"

    h.run(settled_or_not)
    assert "Plan" in claimed, "the proof rested on a reading from before the record"
    assert h.status()["pendingObservation"]["proofReadAt"]
