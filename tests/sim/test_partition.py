"""A force-deleted runner Pod on a node cut off from the API is not a stopped runner.

The simulated kubelet is partitioned while the Apply's container runs; the Pod is
force-deleted; the Job controller (not cut off) counts it failed and fails the Job.
The container keeps writing. The Lease must stay held for as long as the simulated
database counts that executor as a writer, the record must say what was seen (the
Pod was deleted before it was seen to stop), and the release must come only on
evidence: every Pod the Job counted seen to stop, or the hold passing (then the Lease
is left to expire, never released). Until then no proof reads: a database that looks
complete says nothing about a process that may still write.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from ptah.kube.clock import parse_rfc3339
from ptah.kube.kinds import EVENT, JOB, POD
from ptah.lifecycle import executor, outcome, reconcile, release
from ptah.lifecycle.executor import Verdict
from ptah.testing.sim.kubelet import NS, PodRun
from ptah.testing.sim.schedule import run_schedule
from ptah.testing.sim.world import SkewedView
from support.lifecycle_harness import SIDES, MemoryHarness


def _running_apply(h: MemoryHarness) -> PodRun:
    h.create()
    for _ in range(3):  # the Plan's Job, then the Apply's
        h.run_to_stop("after", "write_job_uid")  # the controller stops; a fresh one follows
        claim = h.claim()
        if claim is not None and claim["type"] == "Apply":
            break
    assert claim is not None and claim["type"] == "Apply"
    h.kubelet.step()  # the Job controller creates the Pod; the kubelet starts it
    (run,) = [r for r in h.kubelet.runs.values() if r.op == "apply"]
    assert run.started and run.operation_id in h.db.writers
    return run


def _partition_and_force_delete(h: MemoryHarness, run: PodRun) -> None:
    h.kubelet.partition(10**6)
    run.steps_left = 10**6  # still writing, long after the Job fails
    h.admin.delete(POD, NS, run.pod)
    h.kubelet.step()  # the Job controller counts the deleted Pod failed


def _holder(h: MemoryHarness) -> str | None:
    lease = h.lease()
    assert lease is not None
    return lease["spec"].get("holderIdentity")


def _events(h: MemoryHarness) -> list[tuple[str, str]]:
    return [(e["reason"], e["message"]) for e in h.admin.list(EVENT, NS)]


def _passes(h: MemoryHarness, n: int) -> None:
    for _ in range(n):
        h.one_pass()
        h.kubelet.step()
        h.clock.advance(5)


def test_the_lease_stays_held_while_the_partitioned_runner_writes() -> None:
    h = MemoryHarness(SIDES["schema"])
    run = _running_apply(h)
    op = run.operation_id
    _partition_and_force_delete(h, run)
    h.run(lambda: h.status().get("pendingObservation") is not None)
    s = h.status()
    record = s["pendingObservation"]
    assert record["reason"] == "PodDeletedUnseen"
    assert "deleted before it was seen to stop" in record["detail"]
    assert record["pods"]["count"] == 1  # the Job's own count, not "0 Pods ran"
    staged = s["pendingLockRelease"]
    assert staged["jobPods"] == 1 and staged["pods"] == []
    assert not staged["executorStopped"]
    assert staged["withheld"] == "the Pod was deleted before it was seen to stop"
    messages = [m for r, m in _events(h) if r == "OutcomeUncertain"]
    assert any("deleted before it was seen to stop" in m for m in messages), messages
    assert not any("0 Pods" in m for _, m in _events(h))

    # Many passes later (the proof's reading cannot run: the node is cut off), the
    # executor still writes and the Lease is still ours, renewed.
    _passes(h, 40)
    assert op in h.db.writers
    assert _holder(h) == staged["holder"]
    assert h.status()["pendingLockRelease"]["withheld"] == staged["withheld"]

    # The runner finishes on its own and the node reconnects. Nothing the API shows says
    # the deleted Pod stopped, and a database that looks complete is not evidence either:
    # the release stays withheld and the proof does not read until the hold has passed.
    run.steps_left = 1
    h.kubelet.step()
    assert op not in h.db.writers
    h.kubelet.partitioned = 1
    h.kubelet.step()
    jobs = {j["metadata"]["name"] for j in h.jobs()}
    _passes(h, 20)
    assert {j["metadata"]["name"] for j in h.jobs()} == jobs  # no reading dispatched
    assert h.status()["pendingLockRelease"]["withheld"] == staged["withheld"]
    assert h.status()["pendingObservation"]["operationId"] == op
    assert h.phase() == "ProofOwed" and "may still be writing" in _message(h)
    assert _holder(h) == staged["holder"]
    _past_the_hold(h)
    h.run(lambda: h.status().get("pendingObservation") is None, passes=400)
    assert h.status().get("pendingLockRelease") is None
    assert h.db.executions[op] == 1
    assert h.status()["lastMutation"]["outcome"] == "Converged"
    left = [m for r, m in _events(h) if r == "LeaseLeftToExpire"]
    assert left and "the Pod was deleted before it was seen to stop" in left[0], left
    assert not [r for r, _ in _events(h) if r == "LeaseReleased"]


def _past_the_hold(h: MemoryHarness) -> None:
    """Time moves past the hold: the Job's deadline + the Pod's + 60 s (1,860 s by
    default), from this controller's first sighting of the run."""
    staged = h.status()["pendingLockRelease"]
    assert staged["holdSeconds"] == 900 + 900 + 60, staged
    h.clock.advance(staged["holdSeconds"] + 1)


def _message(h: MemoryHarness) -> str:
    ready = [c for c in h.status().get("conditions") or [] if c["type"] == "Ready"]
    return str(ready[0]["message"]) if ready else ""


def _zombie_with_complete_work(h: MemoryHarness) -> PodRun:
    """The Apply's Pod force-deleted on a cut-off node, its process finishing the plan's
    work (the database reaches the plan's expected schema) and then living on after the
    node is back, as a process does while it handles SIGTERM: alive, its Pod gone."""
    run = _running_apply(h)
    _partition_and_force_delete(h, run)
    h.run(lambda: h.status().get("pendingObservation") is not None)
    run.steps_left = 1
    run.exit_lag = 10**6
    h.kubelet.step()  # the work is done; the process has not exited
    assert run.done and run.truth is not None and run.truth.alive
    run.grace = 10**6
    h.kubelet.partitioned = 1
    h.kubelet.step()  # the node is back; the process lives on without its Pod
    assert run.truth.alive
    return run


def test_a_complete_looking_database_does_not_settle_a_run_that_may_still_write() -> None:
    """The database showing the run's work complete is not evidence that its executor
    stopped (another Pod of the Job, or this one before it exits, may write yet): no
    proof reads and the record is not settled while a Pod deleted before it was seen to
    stop may live; both wait for the hold."""
    h = MemoryHarness(SIDES["schema"])
    run = _zombie_with_complete_work(h)
    assert run.truth is not None
    op = run.operation_id
    _passes(h, 30)
    assert run.truth.alive
    s = h.status()
    assert s["pendingObservation"]["operationId"] == op
    assert s["pendingLockRelease"]["withheld"] == "the Pod was deleted before it was seen to stop"
    assert h.phase() == "ProofOwed", h.phase()
    assert h.claim() is None  # no reading was claimed meanwhile
    assert _holder(h) == s["pendingLockRelease"]["holder"]
    run.grace = 0  # the process dies; the API still cannot say so
    h.kubelet.step()
    assert not run.truth.alive
    _past_the_hold(h)
    h.run(lambda: h.status().get("pendingObservation") is None, passes=400)
    assert h.status()["lastMutation"]["outcome"] == "Converged"
    assert h.db.executions[op] == 1


def test_the_old_proof_rule_settles_under_a_live_executor(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scenario can fail: with the proof judging only the Pods the API still shows
    (the defect), it reads and settles the record while the deleted Pod's process lives."""
    for module in (reconcile, outcome):  # the prove step and the settling reading
        monkeypatch.setattr(
            module,
            "uncertain_run_may_write",
            lambda p, op: "running" if release.operation_running(p, op) else None,
        )
    h = MemoryHarness(SIDES["schema"])
    run = _zombie_with_complete_work(h)
    assert run.truth is not None
    h.run(lambda: h.status().get("pendingObservation") is None, passes=400)
    assert run.truth.alive


def test_without_evidence_the_lease_is_left_to_expire_saying_what_was_seen() -> None:
    h = MemoryHarness(SIDES["schema"])
    run = _running_apply(h)
    _partition_and_force_delete(h, run)
    h.run(lambda: h.status().get("pendingObservation") is not None)
    holder = h.status()["pendingLockRelease"]["holder"]
    # Past the old hold (dispatch + the Job's deadline + 60 s): a Pod admitted just before
    # the Job's deadline may still run for its own, so the release is still withheld.
    h.clock.advance(900 + 60 + 5)
    _passes(h, 3)
    assert h.status()["pendingLockRelease"]["holder"] == holder
    _past_the_hold(h)
    h.run(lambda: h.status().get("pendingLockRelease") is None)
    # Never released by us: the holder stays until the Lease expires by itself.
    assert _holder(h) == holder
    left = [m for r, m in _events(h) if r == "LeaseLeftToExpire"]
    assert left and "the Pod was deleted before it was seen to stop" in left[0], left
    assert not [r for r, _ in _events(h) if r == "LeaseReleased"]


def _extra_pod(h: MemoryHarness, job: dict[str, Any], name: str) -> None:
    """A Pod of the Job the simulated Job controller does not track (a stray)."""
    template = job["spec"]["template"]
    h.admin.create(
        POD,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": NS,
                "labels": dict(template["metadata"]["labels"]),
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": job["metadata"]["name"],
                        "uid": job["metadata"]["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": {**template["spec"], "nodeName": "sim-node"},
        },
    )
    running = {
        "phase": "Running",
        "containerStatuses": [{"name": "runner", "state": {"running": {}}}],
    }
    h.admin.patch(POD, NS, name, {"status": running}, "status")


def _stop(h: MemoryHarness, name: str) -> None:
    state = {"terminated": {"exitCode": 1, "reason": "Error"}}
    h.admin.patch(
        POD,
        NS,
        name,
        {"status": {"phase": "Failed", "containerStatuses": [{"name": "runner", "state": state}]}},
        "status",
    )


def test_a_pod_seen_to_stop_and_then_collected_still_counts() -> None:
    """The evidence is kept in the staged release: a Pod observed terminated by one pass
    and collected before the next still counts as stopped, so once the last Pod stops the
    release goes at once, not after the hold."""
    h = MemoryHarness(SIDES["schema"])
    run = _running_apply(h)
    job = h.job(run.job)
    assert job is not None
    _extra_pod(h, job, "stray-1")
    _extra_pod(h, job, "stray-2")
    while run.pod in h.kubelet.runs:  # the Job's own Pod finishes
        h.kubelet.step()
    # The Job controller marks the Job terminal before it sees the strays stop (lag).
    done = {"type": "Complete", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    h.admin.patch(JOB, NS, run.job, {"status": {"conditions": [done]}}, "status")
    h.run(lambda: h.status().get("pendingObservation") is not None)
    s = h.status()
    assert s["pendingObservation"]["reason"] == "MoreThanOnePod"
    assert "has not stopped" in s["pendingLockRelease"]["withheld"]
    _stop(h, "stray-1")
    _passes(h, 2)
    seen = {p["name"]: p["stopped"] for p in h.status()["pendingLockRelease"]["pods"]}
    assert seen == {run.pod: True, "stray-1": True, "stray-2": False}, seen
    h.admin.delete(POD, NS, "stray-1")
    _stop(h, "stray-2")
    h.run(lambda: h.status().get("pendingLockRelease") is None)
    assert _holder(h) in (None, "")
    released = [m for r, m in _events(h) if r == "LeaseReleased"]
    assert released and "every Pod of the Job was seen to stop" in released[0], released
    assert not [r for r, _ in _events(h) if r == "LeaseLeftToExpire"]


def _old_release(p: Any, staged: Any) -> Verdict:
    """The defect: a terminal Job with no Pods left taken as "executor stopped"."""
    job = p.cluster.get(JOB, p.namespace, staged.job_name or "")
    stopped = staged.job_name is None or staged.executor_stopped
    stopped = stopped or (job is not None and executor.job_terminal(job))
    return Verdict(not stopped, "mutant", staged)


def test_the_old_rule_releases_under_a_live_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scenario can fail: with the defect back, the release happens while the
    simulated database still counts the executor as a writer."""
    monkeypatch.setattr(release, "may_still_write", _old_release)
    h = MemoryHarness(SIDES["schema"])
    run = _running_apply(h)
    _partition_and_force_delete(h, run)
    h.run(lambda: h.status().get("pendingObservation") is not None)
    _passes(h, 3)
    assert run.operation_id in h.db.writers
    assert _holder(h) in (None, "")


def test_the_simulation_kills_the_old_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """Across seeded fault schedules (partitions and force deletes among the kubelet's
    faults), the invariant on the simulated databases' writer count catches the defect."""
    monkeypatch.setattr(release, "may_still_write", _old_release)
    found: list[str] = []
    for seed in range(200):  # stops at the first schedule that catches it
        found = [v for v in run_schedule(seed).violations if v.startswith("release-under-writer")]
        if found:
            break
    assert found and "still writes to" in found[0], found


def test_a_cut_off_process_dies_at_its_pods_own_deadline() -> None:
    """The Job's deadline is enforced through the API, which a node cut off from it
    cannot hear; the runner Pod carries its own deadline, which the node's kubelet
    enforces alone. The simulated kubelet kills a cut-off process there, whatever its
    work still needs, so the hold (the Job's deadline + the Pod's + 60 s) is a bound."""
    h = MemoryHarness(SIDES["schema"])
    run = _running_apply(h)
    assert run.truth is not None and run.started_at is not None
    job = h.admin.get(JOB, NS, run.job)
    assert job is not None
    assert job["spec"]["template"]["spec"]["activeDeadlineSeconds"] == 900
    assert run.deadline == 900
    _partition_and_force_delete(h, run)  # steps_left = 10**6: it would write for ever
    started = run.started_at
    h.clock.advance(899 - (h.clock.now() - started).total_seconds())
    h.kubelet.step()
    assert run.truth.alive and run.operation_id in h.db.writers
    h.clock.advance(1)
    h.kubelet.step()
    assert not run.truth.alive and run.operation_id not in h.db.writers
    assert h.kubelet.partitioned  # still cut off: the kubelet needed no API for it


def test_a_controller_whose_clock_runs_ahead_does_not_end_the_hold_early() -> None:
    """The hold is measured on each controller's own clock, from its own first sighting of
    the run, never from ``holdUntil`` (stamped with the dispatching controller's clock). A
    replica whose clock is 1,500 s ahead takes over while the force-deleted Pod's process
    writes on: by its clock ``holdUntil`` has long passed, yet it keeps the Lease, and the
    proof waits, for the whole hold from when it first saw the run."""
    h = MemoryHarness(SIDES["schema"])
    run = _running_apply(h)
    assert run.truth is not None
    _partition_and_force_delete(h, run)
    h.run(lambda: h.status().get("pendingObservation") is not None)
    staged = h.status()["pendingLockRelease"]
    ahead = SkewedView(h.cluster, 1500)  # type: ignore[arg-type]
    h.env = h.fresh_env()
    h.env.cluster = ahead  # type: ignore[assignment]
    h.clock.advance(staged["holdSeconds"] - 1500 + 60)
    assert ahead.now() > parse_rfc3339(staged["holdUntil"])
    _passes(h, 5)
    assert run.truth.alive  # within its deadlines, still writing
    s = h.status()
    assert s["pendingLockRelease"]["operationId"] == staged["operationId"], s
    assert s["pendingObservation"]["operationId"] == staged["operationId"]
    assert h.phase() == "ProofOwed"
    assert _holder(h) == staged["holder"]
    assert not [r for r, _ in _events(h) if r == "LeaseLeftToExpire"]
    # The process dies at its Pod's deadline; the hold, by this replica's clock, passes.
    h.clock.advance(staged["holdSeconds"])
    h.run(lambda: h.status().get("pendingObservation") is None, passes=400)
    assert not run.truth.alive
    assert [r for r, _ in _events(h) if r == "LeaseLeftToExpire"]


def test_the_simulation_reschedules_a_replica_onto_another_clock_during_a_hold() -> None:
    """The simulation reaches the hold's window: while a release is withheld and its
    executor writes on, cut off, an operator replica goes down and comes back on a node
    whose clock is off by minutes (seed 83). The hold, measured from the process's own
    sighting, holds there (test_a_controller_whose_clock_runs_ahead_does_not_end_the_hold_
    early shows the rule itself, and hold-from-foreign-stamp its mutant)."""
    result = run_schedule(83)
    assert result.faults.get("clock-moved") and "hold>own-clock" in result.windows
    assert not result.violations, result.violations


def test_the_simulation_starts_a_runner_in_the_job_controllers_lag() -> None:
    """The simulation reaches the latest a runner can write (seed 746): a container held
    back on its node starts inside the Job controller's lag at its Job's deadline as the
    node loses the API, and its Pod's own deadline kills it on the node. The hold, with its
    whole margin, holds there (hold-without-margin and hold-margin-is-grace, its mutants,
    are killed at this seed)."""
    result = run_schedule(746)
    assert result.faults.get("fault:pod-start-in-deadline-lag")
    assert result.faults.get("pod-deadline-kill")
    assert not result.violations, result.violations


def test_a_pod_pending_at_its_jobs_deadline_never_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hold's premise: past the Job's deadline no Pod of it starts (the Job controller
    deletes a Pod still Pending as the deadline passes). The simulated clock can jump past
    a deadline between two kubelet steps; the Pod left Pending must then never start, or
    its process would outlive the hold (seed 8004419 of the 100,000-schedule run: started
    200 s after its Job's deadline, it was still writing when the hold ended and the
    proof read)."""
    h = MemoryHarness(SIDES["migration"])

    def left_unscheduled(job: dict[str, Any]) -> Any:
        return parse_rfc3339(job["metadata"]["creationTimestamp"]) + timedelta(seconds=10)

    monkeypatch.setattr(h.kubelet, "_late_start", left_unscheduled)
    h.create()
    for _ in range(3):
        h.run_to_stop("after", "write_job_uid")
        claim = h.claim()
        if claim is not None and claim["type"] == "Migrate":
            break
    assert claim is not None and claim["type"] == "Migrate"
    job = h.admin.get(JOB, NS, claim["jobName"])
    assert job is not None
    h.kubelet.step()  # the Pod is created, left unscheduled for 10 s
    (run,) = [r for r in h.kubelet.runs.values() if r.op == "migrate"]
    assert not run.started and run.start_after is not None
    h.clock.advance(int(job["spec"]["activeDeadlineSeconds"]) + 200)  # past the deadline
    h.kubelet.step()
    assert not run.started and run.operation_id not in h.db.writers
    assert h.admin.get(POD, NS, run.pod) is None  # deleted at the deadline
    failed = h.admin.get(JOB, NS, claim["jobName"])
    assert failed is not None
    assert failed["status"]["conditions"][0]["reason"] == "DeadlineExceeded"


def test_a_pod_that_never_started_is_no_writer() -> None:
    """Two Pods of one Job (the extra-Pod fault) on a node cut off from the API: one runs
    and exits, the other was left unscheduled and its object is gone. It never wrote and
    never will, so the database's own writer count drops the operation when the one that
    ran exits, and the world's truth calls the other over (seed 9001106: its run, still
    listed, kept the operation counted as a writer, and the takeover after the hold
    looked like a second writer)."""
    h = MemoryHarness(SIDES["schema"])
    run = _running_apply(h)
    assert run.truth is not None
    twin_truth = dataclasses.replace(run.truth, pod=run.pod + "-twin")
    twin = dataclasses.replace(
        run, pod=run.pod + "-twin", started=False, started_at=None, truth=twin_truth
    )
    h.kubelet.truth[twin.pod] = twin_truth
    h.kubelet.runs[twin.pod] = twin  # listed, never started, with no Pod object
    h.kubelet.partition(10**6)  # the node, cut off, never hears the twin is gone
    run.steps_left = 1
    for _ in range(3):
        h.kubelet.step()
    assert not run.truth.alive and run.pod not in h.kubelet.runs
    assert run.operation_id not in h.db.writers
    assert not twin_truth.alive and twin.pod not in h.kubelet.runs


@pytest.mark.parametrize("into", [0.5, 0.95])
def test_a_runner_started_in_the_job_controllers_lag_keeps_the_lease_until_it_dies(
    into: float,
) -> None:
    """The latest a dispatched runner can write: its container, held back on its node,
    starts inside the Job controller's lag at its Job's deadline, the node loses the API as
    it does, the Job controller fails the Job and deletes the Pod, and the process ignores
    the SIGTERM at its Pod's own deadline until the SIGKILL at the grace period's end. The
    controller that dispatched the run, passing every 5 s, keeps the Lease (the release
    withheld) for as long as that process lives: the hold's 60 s margin is there for the
    lag and the grace, and a pass inside it sees the hold not yet passed."""
    h = MemoryHarness(SIDES["schema"])
    h.create()
    h.patch_resource({"spec": {"runner": {"activeDeadlineSeconds": 60}}})
    claim = None
    for _ in range(200):  # one controller process throughout: its hold counts from its dispatch
        h.one_pass()
        claim = h.claim()
        if claim is not None and claim["type"] == "Apply" and claim.get("jobUid"):
            break
        h.kubelet.step()
        h.clock.advance(5)
    assert claim is not None and claim["type"] == "Apply" and claim.get("jobUid"), claim
    run = h.kubelet.create_held_back(claim["jobName"], NS, into)
    assert run is not None and run.truth is not None
    dispatched = parse_rfc3339(claim["dispatchStarted"])
    holder = _holder(h)
    staged = False
    for _ in range(100):
        h.one_pass()
        h.kubelet.step()
        pending = h.status().get("pendingLockRelease")
        staged = staged or pending is not None
        if staged and pending is None:
            break
        h.clock.advance(5)
    assert staged and h.status().get("pendingLockRelease") is None
    # The shape: started inside the lag, the Pod gone with the Job failed at its deadline.
    assert run.started_at == dispatched + timedelta(seconds=60 + into * 15)
    assert run.kill_grace == 30
    assert h.admin.get(POD, NS, run.pod) is None
    job = h.admin.get(JOB, NS, claim["jobName"])
    assert job is not None and job["status"]["conditions"][0]["reason"] == "DeadlineExceeded"
    # Given up (left to expire, never released) only once the process was dead.
    assert not run.truth.alive and run.operation_id not in h.db.writers
    assert run.truth.seen_alive_at == run.started_at + timedelta(seconds=60 + 30)
    assert h.clock.now() > run.truth.seen_alive_at
    assert _holder(h) == holder
    left = [m for r, m in _events(h) if r == "LeaseLeftToExpire"]
    assert left and "the Pod was deleted before it was seen to stop" in left[0], left
