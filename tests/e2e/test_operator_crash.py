"""The operator SIGKILLed at chosen durable writes of an Apply, then started again.

The kill comes from the operator's test hook (``PTAH_TEST_KILL_AT``): the process
kills itself right before or after the named write, exactly there. The restarted
process runs without it. Whatever the point, the Job is never created twice (the
operator logs every create; the apiserver holds the Jobs) and the outcome is
either accounted (``lastMutation``) or retained as uncertain and then proved or
refused by a fresh reading.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
from e2esupport import (
    Operator,
    approve,
    events,
    jobs_of,
    ready,
    schema,
    secret,
    set_sql,
    sqlite_tables,
    status,
    uid_of,
    wait_passes,
    wait_status,
)

from ptah.kube.kinds import LEASE, SCHEMA
from ptah.kube.real import RealCluster

pytestmark = pytest.mark.integration

SQL = "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL);"
SQL_AGAIN = "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL); -- again"


def kill_and_restart(op: Operator, point: str) -> None:
    op.start(env={"PTAH_TEST_KILL_AT": point})
    code = op.wait_exit(timeout=120)
    assert code == -signal.SIGKILL, f"operator exited {code}, not killed at {point}"
    assert any(line.get("event") == "test_kill" for line in op.lines())
    op.start()


def apply_creates(op: Operator) -> list[dict[str, Any]]:
    return [
        line
        for line in op.lines()
        if line.get("event") in ("job_created", "job_create_failed") and line.get("type") == "Apply"
    ]


def one_apply_job(kube: RealCluster, ns: str, uid: str, op: Operator) -> dict[str, Any]:
    creates = apply_creates(op)
    assert [c["event"] for c in creates] == ["job_created"], creates
    jobs = jobs_of(kube, ns, uid, "Apply")
    assert len(jobs) == 1, [j["metadata"]["name"] for j in jobs]
    assert jobs[0]["metadata"]["uid"] == creates[0]["uid"]
    return jobs[0]


ACCOUNTED = [
    "after:write_claim:Apply",
    "after:acquire_lease:Apply",
    "after:write_admission_snapshot:Apply",
    "after:create_job:Apply",
    "after:write_job_uid:Apply",
    "before:write_outcome:Apply",
    "after:write_outcome:Apply",
    "after:release_lease:Apply",
]


@pytest.mark.parametrize("point", ACCOUNTED)
def test_killed_at_a_durable_write_then_accounted(
    kube: RealCluster, namespace: str, operator: Operator, tmp_path: Path, point: str
) -> None:
    db = tmp_path / "app.db"
    secret(kube, namespace, "db", f"sqlite:///{db}")
    schema(kube, namespace, "app", SQL, "db", "sqlite")
    kill_and_restart(operator, point)

    s = wait_status(kube, namespace, "app", "Ready", ready, log=operator.log_path)
    assert sqlite_tables(db) == ["users"]
    uid = uid_of(kube, namespace, "app")
    one_apply_job(kube, namespace, uid, operator)
    assert s["lastMutation"]["outcome"] == "Succeeded"
    assert not s.get("pendingObservation") and not s.get("pendingLockRelease")
    # The database's Lease was handed back once the outcome was written.
    leases = [
        lease
        for lease in kube.list(LEASE, namespace)
        if lease["metadata"]["name"].startswith("ptah-realm-")
    ]
    assert len(leases) == 1 and not leases[0]["spec"].get("holderIdentity")


def test_killed_after_dispatch_started_is_uncertain_and_never_recreated(
    kube: RealCluster, namespace: str, operator: Operator, tmp_path: Path
) -> None:
    """Killed after dispatchStarted and before the create: the Job may or may not exist,
    so the restarted operator never creates it; the outcome is uncertain. An empty
    reserved name is no evidence that nothing ran (a Job deleted with its Pods before
    anyone saw it leaves the same), so the proof waits for the hold with the Lease kept;
    then the Lease is left to expire and the fresh reading (the database still lacks the
    table) refuses to settle it. Only after a person abandons the proof by annotation does
    a new claim dispatch, under a new name."""
    db = tmp_path / "app.db"
    secret(kube, namespace, "db", f"sqlite:///{db}")
    # A Job never seen "may still be writing": the Lease is kept for the hold (the Job's
    # deadline + the Pod's + 60 s, from the restarted operator's first sighting), then
    # left to expire. The shortest deadline and Lease keep this test near two minutes.
    schema(kube, namespace, "app", SQL, "db", "sqlite", runner={"activeDeadlineSeconds": 10})
    operator.options["--lease-duration"] = "10"
    kill_and_restart(operator, "after:write_dispatch_started:Apply")

    s = wait_status(
        kube,
        namespace,
        "app",
        "the proof owed, the release withheld",
        # The release is staged with the outcome; the pass after it says why it is withheld.
        lambda s: (
            s.get("phase") == "ProofOwed"
            and bool((s.get("pendingLockRelease") or {}).get("withheld"))
        ),
        timeout=60,
        log=operator.log_path,
    )
    assert s["pendingLockRelease"]["operationId"] == s["pendingObservation"]["operationId"]
    assert "not evidence that none ran" in s["pendingLockRelease"]["withheld"], s
    holder = s["pendingLockRelease"]["holder"]
    lease = kube.get(LEASE, namespace, s["pendingLockRelease"]["leaseName"])
    assert lease is not None and lease["spec"]["holderIdentity"] == holder
    record = s["pendingObservation"]
    assert record["reason"] == "JobMissing"
    s = wait_status(
        kube,
        namespace,
        "app",
        "proof not settled",
        lambda s: s.get("phase") == "ProofNotSettled",
        timeout=150,
        log=operator.log_path,
    )
    # The proof read only once the hold had passed and the Lease was left to expire.
    assert not s.get("pendingLockRelease")
    reasons = [e["reason"] for e in events(kube, namespace, "app")]
    assert "LeaseLeftToExpire" in reasons and "LeaseReleased" not in reasons, reasons
    assert s["pendingObservation"]["operationId"] == record["operationId"]
    assert s["lastMutation"]["outcome"] == "Uncertain"
    assert sqlite_tables(db) == []
    uid = uid_of(kube, namespace, "app")
    assert jobs_of(kube, namespace, uid, "Apply") == []
    assert apply_creates(operator) == []
    stalled = next(c for c in s["conditions"] if c["type"] == "Stalled")
    assert stalled["status"] == "True" and "ptah.io/abandon-proof" in stalled["message"]

    kube.patch(
        SCHEMA,
        namespace,
        "app",
        {"metadata": {"annotations": {"ptah.io/abandon-proof": record["operationId"]}}},
    )
    # After the audited abandonment a fresh reading plans again. Whether the lifecycle
    # then dispatches the new plan by itself or refuses it as a replay of the abandoned
    # one (Failed, asking for a spec change), the abandoned claim's Job is never created.
    s = wait_status(
        kube,
        namespace,
        "app",
        "proof abandoned, then planned again",
        lambda s: not s.get("pendingObservation") and (ready(s) or s.get("phase") == "Failed"),
        timeout=120,
        log=operator.log_path,
    )
    assert record["operationId"] in s["abandonedProofs"]
    if s["phase"] == "Failed":
        set_sql(kube, namespace, "app", SQL_AGAIN)
        wait_status(
            kube,
            namespace,
            "app",
            "Ready after the spec change",
            lambda s: ready(s) and s.get("observedGeneration") == 2,
            timeout=120,
            log=operator.log_path,
        )
    assert sqlite_tables(db) == ["users"]
    job = one_apply_job(kube, namespace, uid, operator)
    assert job["metadata"]["name"] != record["jobName"]


def test_killed_after_the_approval_was_consumed_needs_a_new_approval(
    kube: RealCluster, namespace: str, operator: Operator, tmp_path: Path
) -> None:
    """A consumed approval is evidence that a decision was spent, not permission: after
    a kill between consumption and dispatch, it authorizes nothing."""
    db = tmp_path / "app.db"
    secret(kube, namespace, "db", f"sqlite:///{db}")
    schema(kube, namespace, "app", SQL, "db", "sqlite", policy={"approval": "Always"})
    operator.start(env={"PTAH_TEST_KILL_AT": "after:consume_approval:Apply"})
    s = wait_status(
        kube,
        namespace,
        "app",
        "waiting for approval",
        lambda s: s.get("phase") == "WaitingForApproval",
        log=operator.log_path,
    )
    digest = s["currentPlan"]["digest"]
    approve(kube, namespace, "first", "app", digest)
    code = operator.wait_exit(timeout=60)
    assert code == -signal.SIGKILL
    operator.start()
    s = wait_status(
        kube,
        namespace,
        "app",
        "waiting for a new approval",
        lambda s: s.get("phase") == "WaitingForApproval" and not s.get("activeOperation"),
        log=operator.log_path,
    )
    # The restarted operator looked again (twice) with the spent approval in place, and
    # it authorized nothing.
    wait_passes(kube, operator, SCHEMA, namespace, "app")
    assert status(kube, namespace, "app")["phase"] == "WaitingForApproval"
    assert sqlite_tables(db) == []
    assert apply_creates(operator) == []
    approve(kube, namespace, "second", "app", s["currentPlan"]["digest"])
    wait_status(kube, namespace, "app", "Ready", ready, log=operator.log_path)
    assert sqlite_tables(db) == ["users"]
