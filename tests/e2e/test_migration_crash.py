"""The operator SIGKILLed at chosen durable writes of a PtahMigration's Migrate, then
started again (SQLite target; the lifecycle is engine-blind).

The kill comes from the operator's test hook (``PTAH_TEST_KILL_AT``): the process kills
itself right before or after the named write. Whatever the point, the Migrate Job is
created at most once (the operator logs every create; the apiserver holds the Jobs),
every file is applied exactly once (the history table says so), and the outcome is
either accounted (``lastMutation``) or retained as ``unresolvedRun`` and then proved by a
History reading of the same database, or refused until a person abandons the proof.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
from e2esupport import Operator, events, secret, wait_for
from migflow import (
    condition,
    configmap,
    history,
    migrate_jobs,
    migration,
    mstatus,
    ready_at,
    realm_leases,
    uid_of,
    wait_history,
    wait_mstatus,
    with_sum,
)

from ptah.kube.kinds import JOB, MIGRATION
from ptah.kube.real import RealCluster

pytestmark = pytest.mark.integration

FILES = {
    "0001_users.sql": "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL);\n",
    "0002_teams.sql": "CREATE TABLE teams (id INTEGER PRIMARY KEY, title TEXT);\n",
}
VERSIONS = ["1", "2"]


def kill_at(op: Operator, point: str) -> None:
    op.start(env={"PTAH_TEST_KILL_AT": point})
    code = op.wait_exit(timeout=120)
    assert code == -signal.SIGKILL, f"operator exited {code}, not killed at {point}"
    assert any(line.get("event") == "test_kill" for line in op.lines())


def migrate_creates(op: Operator) -> list[dict[str, Any]]:
    return [
        line
        for line in op.lines()
        if line.get("event") in ("job_created", "job_create_failed")
        and line.get("type") == "Migrate"
    ]


def setup(kube: RealCluster, ns: str, tmp_path: Path, **spec: Any) -> str:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    secret(kube, ns, "db", url)
    configmap(kube, ns, "mig", with_sum(FILES))
    migration(kube, ns, "app", "db", "sqlite", configmaps=["mig"], **spec)
    return url


def applied_once(url: str) -> None:
    rows = history(url)
    assert sorted(rows) == VERSIONS, rows
    assert len({r["operation_id"] for r in rows.values()}) == 1
    assert all(r["finished_at"] and r["error"] is None for r in rows.values())


ACCOUNTED = [
    "after:write_claim:Migrate",
    "after:acquire_lease:Migrate",
    "after:write_lease_epoch:Migrate",
    "after:write_admission_snapshot:Migrate",
    "after:create_job:Migrate",
    "after:write_job_uid:Migrate",
    "after:write_job_ttl:Migrate",
    "before:write_outcome:Migrate",
    "after:write_outcome:Migrate",
    "after:release_lease:Migrate",
]


@pytest.mark.parametrize("point", ACCOUNTED)
def test_killed_at_a_durable_write_then_accounted(
    kube: RealCluster, namespace: str, operator: Operator, tmp_path: Path, point: str
) -> None:
    url = setup(kube, namespace, tmp_path)
    kill_at(operator, point)
    operator.start()

    s = wait_mstatus(kube, namespace, "app", "Ready", ready_at(VERSIONS), log=operator.log_path)
    assert s["lastMutation"]["outcome"] == "Succeeded"
    assert not s.get("unresolvedRun") and not s.get("pendingLockRelease")
    applied_once(url)
    creates = migrate_creates(operator)
    assert [c["event"] for c in creates] == ["job_created"], creates
    jobs = migrate_jobs(kube, namespace, uid_of(kube, namespace, "app"))
    assert [j["metadata"]["uid"] for j in jobs] == [creates[0]["uid"]]
    # The database's Lease was handed back once the outcome was written.
    leases = realm_leases(kube, namespace)
    assert len(leases) == 1 and not leases[0]["spec"].get("holderIdentity"), leases


@pytest.mark.parametrize(
    "point", ["after:write_dispatch_started:Migrate", "before:create_job:Migrate"]
)
def test_killed_between_marker_and_create_is_never_recreated(
    kube: RealCluster, namespace: str, operator: Operator, tmp_path: Path, point: str
) -> None:
    """Killed after dispatchStarted, before the create: the restarted operator never
    creates the Job; the run is ``unresolvedRun``. An empty reserved name is no evidence
    that nothing ran (a Job deleted with its Pods unseen leaves the same), so the proof
    and the release wait for the hold (the Job's deadline + the Pod's + 60 s: 80 s with
    a 10 s ``activeDeadlineSeconds``); then the Lease is left to expire and the proving
    History reading (the versions still pending) does not settle it; Stalled until a
    person abandons the proof. Deletion is held while the proof is owed."""
    url = setup(kube, namespace, tmp_path, runner={"activeDeadlineSeconds": 10})
    kill_at(operator, point)
    operator.start()
    s = wait_mstatus(
        kube,
        namespace,
        "app",
        "the proof owed, the release withheld",
        # The release is staged with the outcome; the pass after it says why it is withheld.
        lambda s: (
            s.get("phase") == "ProofOwed"
            and bool((s.get("pendingLockRelease") or {}).get("withheld"))
        ),
        log=operator.log_path,
    )
    assert "not evidence that none ran" in s["pendingLockRelease"]["withheld"], s
    s = wait_mstatus(
        kube,
        namespace,
        "app",
        "proof not settled",
        lambda s: s.get("phase") == "ProofNotSettled",
        timeout=150,
        log=operator.log_path,
    )
    assert not s.get("pendingLockRelease")
    record = s["unresolvedRun"]
    assert record["reason"] == "JobMissing"
    assert s["lastMutation"]["outcome"] == "Uncertain"
    assert s["history"]["pending"] == VERSIONS
    stalled = condition(s, "Stalled")
    assert stalled["status"] == "True" and "ptah.io/abandon-proof" in stalled["message"]
    uid = uid_of(kube, namespace, "app")
    assert migrate_jobs(kube, namespace, uid) == []
    assert migrate_creates(operator) == []

    # Deletion is held while proof is owed.
    kube.delete(MIGRATION, namespace, "app")
    obj = kube.get(MIGRATION, namespace, "app")
    assert obj is not None and obj["metadata"].get("deletionTimestamp")
    assert obj["status"]["unresolvedRun"]["operationId"] == record["operationId"]

    kube.patch(
        MIGRATION,
        namespace,
        "app",
        {"metadata": {"annotations": {"ptah.io/abandon-proof": record["operationId"]}}},
    )
    wait_for(
        "the resource let go once the proof was abandoned",
        lambda: kube.get(MIGRATION, namespace, "app") is None,
        timeout=90,
    )
    assert not history_exists(url)  # nothing ever ran
    reasons = [e["reason"] for e in events(kube, namespace, "app")]
    assert "ProofAbandoned" in reasons and "LeaseLeftToExpire" in reasons, reasons
    assert "LeaseReleased" not in reasons, reasons


def history_exists(url: str) -> bool:
    try:
        history(url)
    except Exception:
        return False
    return True


def test_outcome_lost_is_proved_by_a_history_reading(
    kube: RealCluster, namespace: str, operator: Operator, tmp_path: Path
) -> None:
    """Killed right after the create; the Job runs to the end and is then deleted with
    its Pod before the operator returns, so its frame is gone. The run is uncertain
    (``JobGone``), and the History reading that follows (nothing pending, same
    database) settles it: converged, no Migrate attributed. The proof and the Lease
    release wait for the hold (the vanished Job was never seen to end: the Job's deadline
    + the Pod's + 60 s, 80 s from the restarted operator's first sighting), and only then
    is the resource Ready."""
    url = setup(kube, namespace, tmp_path, runner={"activeDeadlineSeconds": 10})
    kill_at(operator, "after:write_job_uid:Migrate")
    wait_history(
        url,
        "the runner finished both files",
        lambda h: sorted(h) == VERSIONS and all(r["finished_at"] for r in h.values()),
    )
    uid = uid_of(kube, namespace, "app")
    (job,) = migrate_jobs(kube, namespace, uid)
    wait_for(
        "the Job to finish",
        lambda: (
            (kube.get(JOB, namespace, job["metadata"]["name"]) or {})
            .get("status", {})
            .get("succeeded")
        ),
        timeout=60,
    )
    kube.delete(JOB, namespace, job["metadata"]["name"], propagation="Foreground")
    wait_for(
        "the Job gone",
        lambda: kube.get(JOB, namespace, job["metadata"]["name"]) is None,
        timeout=60,
    )
    operator.start()
    wait_for(
        "the proof settled",
        lambda: any(e["reason"] == "ProofSettled" for e in events(kube, namespace, "app")),
        timeout=150,
    )
    s = mstatus(kube, namespace, "app")
    assert not s.get("unresolvedRun")
    # Convergence is not attribution: no Migrate is credited with the versions.
    assert (s.get("lastMutation") or {}).get("outcome") in (None, "Converged")
    s = wait_mstatus(
        kube, namespace, "app", "Ready", ready_at(VERSIONS), timeout=150, log=operator.log_path
    )
    applied_once(url)
    reasons = [e["reason"] for e in events(kube, namespace, "app")]
    assert "OutcomeUncertain" in reasons and "ProofSettled" in reasons, reasons
    assert [c["event"] for c in migrate_creates(operator)] == ["job_created"]
    assert migrate_jobs(kube, namespace, uid) == []
