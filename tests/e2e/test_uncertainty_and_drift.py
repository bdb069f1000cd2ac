"""An Apply Pod killed mid-run, proved by a fresh reading; drift made by hand,
detected at the next interval and re-planned."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from e2esupport import (
    Operator,
    approve,
    events,
    jobs_of,
    pg_columns,
    ready,
    schema,
    secret,
    set_sql,
    sqlite_tables,
    status,
    uid_of,
    wait_for,
    wait_status,
)

from ptah.kube.kinds import PLAN, POD
from ptah.kube.real import RealCluster
from support.databases import database_of

pytestmark = pytest.mark.integration

PG_V1 = "CREATE TABLE users (id bigint PRIMARY KEY, name text NOT NULL);"
PG_V2 = "CREATE TABLE users (id bigint PRIMARY KEY, name text NOT NULL, email text);"


def _lock_waiter(admin: psycopg.Connection[Any], database: str, holder: int) -> int | None:
    row = admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock'"
        " AND pid <> %s",
        (database, holder),
    ).fetchone()
    return None if row is None else int(row[0])


# The runner's activeDeadlineSeconds (its Job's and its Pod's) in the uncertain-Apply
# test: the hold is twice this + 60 s (120 s), as long as it was with a 60 s Job deadline.
DEADLINE = 30


def test_apply_pod_killed_mid_run_is_uncertain_until_a_reading_proves_it(
    kube: RealCluster, namespace: str, operator: Operator, pg_database: str, pg_admin_url: str
) -> None:
    database = database_of(pg_database)
    secret(kube, namespace, "pg", pg_database)
    operator.start(proof_retry_seconds="5")
    # The Pod is deleted before anyone sees it stop, so nothing proves its process ended:
    # the proof waits for the hold (the Job's deadline + the Pod's + 60 s), kept short here.
    schema(
        kube,
        namespace,
        "pg",
        PG_V1,
        "pg",
        "postgres",
        policy={"approval": "Always"},
        runner={"activeDeadlineSeconds": DEADLINE},
    )
    s = wait_status(
        kube,
        namespace,
        "pg",
        "first plan waits for approval",
        lambda s: s.get("phase") == "WaitingForApproval",
        log=operator.log_path,
    )
    approve(kube, namespace, "a1", "pg", s["currentPlan"]["digest"])
    wait_status(kube, namespace, "pg", "Ready", ready, log=operator.log_path)

    set_sql(kube, namespace, "pg", PG_V2)
    s = wait_status(
        kube,
        namespace,
        "pg",
        "the change waits for approval",
        lambda s: (
            s.get("phase") == "WaitingForApproval"
            and (s.get("currentPlan") or {}).get("generation") == 2
        ),
        log=operator.log_path,
    )
    # Hold the table so the Apply blocks mid-run, then approve and kill its Pod there.
    with (
        psycopg.connect(pg_database) as holder,
        psycopg.connect(pg_admin_url, autocommit=True) as admin,
    ):
        holder.execute("LOCK TABLE users IN ACCESS EXCLUSIVE MODE")
        holder_pid = holder.info.backend_pid
        approve(kube, namespace, "a2", "pg", s["currentPlan"]["digest"])
        waiter = wait_for(
            "the Apply blocked on the table lock",
            lambda: _lock_waiter(admin, database, holder_pid),
            timeout=60,
        )
        uid = uid_of(kube, namespace, "pg")
        running = [
            j
            for j in jobs_of(kube, namespace, uid, "Apply")
            if not (j.get("status") or {}).get("succeeded")
        ]
        (job,) = running
        op_id = job["metadata"]["labels"]["ptah.io/operation-id"]
        (pod,) = kube.list(POD, namespace, {"ptah.io/operation-id": op_id})
        kube.delete(POD, namespace, pod["metadata"]["name"])
        wait_for(
            "the Apply Pod gone",
            lambda: not kube.list(POD, namespace, {"ptah.io/operation-id": op_id}),
            timeout=60,
        )
        # The server side of the killed connection would otherwise still hold its place
        # in the lock queue; end it so nothing of this attempt can commit later.
        admin.execute("SELECT pg_terminate_backend(%s)", (waiter,))
        holder.rollback()

    s = wait_status(
        kube,
        namespace,
        "pg",
        "the outcome recorded as uncertain",
        lambda s: bool(s.get("pendingObservation")),
        log=operator.log_path,
    )
    record = s["pendingObservation"]
    assert record["operationId"] == op_id
    assert record["reason"] in ("PodDeletedUnseen", "FrameNoFrame", "LogLost"), record
    assert s["lastMutation"]["outcome"] == "Uncertain"
    # The reading runs once the hold has passed (no evidence that the deleted Pod's process
    # stopped ever reaches the API); the database does not match the plan, so it does not
    # settle.
    s = wait_status(
        kube,
        namespace,
        "pg",
        "the reading refuses to settle",
        lambda s: s.get("phase") == "ProofNotSettled",
        timeout=2 * DEADLINE + 150,
        log=operator.log_path,
    )
    assert pg_columns(pg_database, "users") == ["id", "name"]
    assert len(jobs_of(kube, namespace, uid, "Apply")) == 2  # no replay while proof is owed
    assert any(e["reason"] == "OutcomeUncertain" for e in events(kube, namespace, "pg"))

    # A person finishes the change by hand; the next reading proves convergence.
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute("ALTER TABLE users ADD COLUMN email text")
    s = wait_status(
        kube,
        namespace,
        "pg",
        "proof settled, Ready",
        lambda s: ready(s) and not s.get("pendingObservation"),
        timeout=120,
        log=operator.log_path,
    )
    # Convergence is not attribution: recorded as converged, no Apply credited.
    assert s["lastMutation"]["outcome"] == "Converged"
    assert s["lastMutation"]["operationId"] == op_id
    assert s.get("appliedPlanDigest") != record["planDigest"]
    assert any(e["reason"] == "ProofSettled" for e in events(kube, namespace, "pg"))
    assert len(jobs_of(kube, namespace, uid, "Apply")) == 2


def test_drift_by_hand_is_detected_at_the_next_interval_and_replanned(
    kube: RealCluster, namespace: str, operator: Operator, tmp_path: Path
) -> None:
    db = tmp_path / "app.db"
    secret(kube, namespace, "db", f"sqlite:///{db}")
    operator.start()
    sql = (
        "CREATE TABLE users (id INTEGER PRIMARY KEY);\nCREATE TABLE teams (id INTEGER PRIMARY KEY);"
    )
    schema(kube, namespace, "app", sql, "db", "sqlite", driftCheckIntervalSeconds=8)
    s = wait_status(kube, namespace, "app", "Ready", ready, log=operator.log_path)
    assert sqlite_tables(db) == ["teams", "users"]
    first = s["lastMutation"]["operationId"]
    read_at = s["lastReadingAt"]

    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE teams")
    dropped = time.monotonic()
    s = wait_status(
        kube,
        namespace,
        "app",
        "drift re-applied",
        lambda s: (
            ready(s) and (s.get("lastMutation") or {}).get("operationId") not in (None, first)
        ),
        timeout=60,
        log=operator.log_path,
    )
    assert time.monotonic() - dropped < 40
    assert sqlite_tables(db) == ["teams", "users"]
    assert s["lastReadingAt"] > read_at and s["observedGeneration"] == 1
    drift_plans = [
        p
        for p in kube.list(PLAN, namespace)
        if p["spec"]["changes"]
        and any("teams" in st["sql"] for st in p["spec"]["statements"])
        and len(p["spec"]["statements"]) == 1
    ]
    assert drift_plans, "no plan re-creating the dropped table"
    assert status(kube, namespace, "app")["phase"] == "Ready"
