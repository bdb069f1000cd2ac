"""PtahSchema lifecycle edges on the real control plane: suspend, deletion (with and
without proof owed), a rotated Secret, a changed verification policy, a spec change
mid-apply, and two resources addressing one database through different spellings."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from e2esupport import (
    Operator,
    approve,
    jobs_of,
    owned_by,
    pg_columns,
    ready,
    schema,
    secret,
    set_sql,
    sqlite_tables,
    status,
    uid_of,
    wait_for,
    wait_passes,
    wait_status,
)

from ptah.kube.kinds import APPROVAL, CONFIGMAP, JOB, LEASE, PLAN, POD, SCHEMA, SECRET
from ptah.kube.real import RealCluster
from support.databases import database_of

pytestmark = pytest.mark.integration

SQL = "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL);"
SQL2 = "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT);"
PG_V1 = "CREATE TABLE users (id bigint PRIMARY KEY, name text NOT NULL);"
PG_V2 = "CREATE TABLE users (id bigint PRIMARY KEY, name text NOT NULL, email text);"
PG_V3 = "CREATE TABLE users (id bigint PRIMARY KEY, name text NOT NULL, email text, age int);"


def test_suspend_then_resume(
    kube: RealCluster, namespace: str, operator: Operator, tmp_path: Path
) -> None:
    db = tmp_path / "app.db"
    secret(kube, namespace, "db", f"sqlite:///{db}")
    operator.start()
    schema(kube, namespace, "app", SQL, "db", "sqlite", suspend=True)
    wait_status(
        kube,
        namespace,
        "app",
        "Suspended",
        lambda s: s.get("phase") == "Suspended",
        log=operator.log_path,
    )
    wait_passes(kube, operator, SCHEMA, namespace, "app")
    assert kube.list(JOB, namespace) == [] and sqlite_tables(db) == []
    kube.patch(SCHEMA, namespace, "app", {"spec": {"suspend": False}})
    wait_status(kube, namespace, "app", "Ready", ready, log=operator.log_path)
    assert sqlite_tables(db) == ["users"]


def test_deletion_collects_jobs_plans_and_inputs(
    kube: RealCluster, namespace: str, operator: Operator, tmp_path: Path
) -> None:
    db = tmp_path / "app.db"
    secret(kube, namespace, "db", f"sqlite:///{db}")
    operator.start()
    schema(kube, namespace, "app", SQL, "db", "sqlite")
    wait_status(kube, namespace, "app", "Ready", ready, log=operator.log_path)
    uid = uid_of(kube, namespace, "app")
    assert jobs_of(kube, namespace, uid, "Apply") and kube.list(PLAN, namespace)
    kube.delete(SCHEMA, namespace, "app")
    wait_for("the PtahSchema gone", lambda: kube.get(SCHEMA, namespace, "app") is None, 30)

    wait_for(
        "Jobs, PtahPlans and input ConfigMaps collected",
        lambda: not owned_by(kube, namespace, uid),
        timeout=60,
    )
    assert sqlite_tables(db) == ["users"]  # deleting the resource never touches the database


def _mounted_inputs(kube: RealCluster, namespace: str, uid: str) -> set[str]:
    """The input ConfigMaps the Jobs of the resource ``uid`` mount."""
    return {
        v["configMap"]["name"]
        for kind in ("Plan", "Apply")
        for job in jobs_of(kube, namespace, uid, kind)
        for v in job["spec"]["template"]["spec"].get("volumes", [])
        if "configMap" in v
    }


def test_deleting_one_of_two_resources_with_the_same_inputs_keeps_the_others(
    kube: RealCluster, namespace: str, operator: Operator, tmp_path: Path
) -> None:
    """Two resources with the same desired source (so the same runner inputs): deleting
    the first lets garbage collection take what it owns, and what the second's Jobs
    mount is the second's own and stays."""
    for name in ("first", "second"):
        secret(kube, namespace, name, f"sqlite:///{tmp_path / name}.db")
    operator.start()
    schema(kube, namespace, "first", SQL, "first", "sqlite")
    wait_status(kube, namespace, "first", "Ready", ready, log=operator.log_path)
    schema(kube, namespace, "second", SQL, "second", "sqlite")
    wait_status(kube, namespace, "second", "Ready", ready, log=operator.log_path)
    first, second = uid_of(kube, namespace, "first"), uid_of(kube, namespace, "second")
    mounted = _mounted_inputs(kube, namespace, second)
    assert mounted, "the second resource's Jobs mount their inputs"
    for name in mounted:
        cm = kube.get(CONFIGMAP, namespace, name)
        assert cm is not None
        assert [r["uid"] for r in cm["metadata"]["ownerReferences"]] == [second], name
    kube.delete(SCHEMA, namespace, "first")
    wait_for("the first PtahSchema gone", lambda: kube.get(SCHEMA, namespace, "first") is None, 30)

    # The first's dependents gone is the evidence that garbage collection has run.
    wait_for(
        "the first resource's dependents collected",
        lambda: not owned_by(kube, namespace, first),
        timeout=60,
    )
    assert all(kube.get(CONFIGMAP, namespace, name) is not None for name in mounted)
    assert ready(status(kube, namespace, "second"))


def test_rotated_secret_starts_a_new_binding_epoch(
    kube: RealCluster, namespace: str, operator: Operator, tmp_path: Path
) -> None:
    db = tmp_path / "app.db"
    secret(kube, namespace, "db", f"sqlite:///{db}")
    operator.start()
    schema(kube, namespace, "app", SQL, "db", "sqlite")
    s = wait_status(kube, namespace, "app", "Ready", ready, log=operator.log_path)
    assert s["executionBinding"]["epoch"] == 1 and s["currentPlan"]["bindingEpoch"] == 1
    kube.patch(SECRET, namespace, "db", {"stringData": {"rotated": "yes"}})
    s = wait_status(
        kube,
        namespace,
        "app",
        "replanned under epoch 2",
        lambda s: ready(s) and (s.get("currentPlan") or {}).get("bindingEpoch") == 2,
        log=operator.log_path,
    )
    assert s["executionBinding"]["epoch"] == 2


def test_changed_verification_policy_discards_the_plan(
    kube: RealCluster, namespace: str, operator: Operator, tmp_path: Path
) -> None:
    db = tmp_path / "app.db"
    secret(kube, namespace, "db", f"sqlite:///{db}")
    kube.create(
        CONFIGMAP,
        {
            "metadata": {"name": "ptah-verification-policy", "namespace": namespace},
            "data": {"allowedEngines": "sqlite,postgres"},
        },
    )
    operator.start()
    schema(kube, namespace, "app", SQL, "db", "sqlite", policy={"approval": "Always"})
    s = wait_status(
        kube,
        namespace,
        "app",
        "waiting for approval",
        lambda s: s.get("phase") == "WaitingForApproval",
        log=operator.log_path,
    )
    first = s["currentPlan"]["digest"]
    kube.patch(CONFIGMAP, namespace, "ptah-verification-policy", {"data": {"note": "tightened"}})
    approve(kube, namespace, "first", "app", first)
    s = wait_status(
        kube,
        namespace,
        "app",
        "a new plan under the new policy",
        lambda s: (
            s.get("phase") == "WaitingForApproval"
            and (s.get("currentPlan") or {}).get("digest") not in (None, first)
        ),
        log=operator.log_path,
    )
    assert sqlite_tables(db) == []
    a = kube.get(APPROVAL, namespace, "first")
    assert a is not None and not (a.get("status") or {}).get("consumedByOperation")
    approve(kube, namespace, "second", "app", s["currentPlan"]["digest"])
    wait_status(kube, namespace, "app", "Ready", ready, log=operator.log_path)
    assert sqlite_tables(db) == ["users"]


# ------------------------------------------------------------ PostgreSQL, blocked applies


def _lock_waiter(admin: psycopg.Connection[Any], database: str, holder: int) -> int | None:
    row = admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock'"
        " AND pid <> %s",
        (database, holder),
    ).fetchone()
    return None if row is None else int(row[0])


@contextmanager
def table_locked(url: str, admin_url: str) -> Iterator[tuple[psycopg.Connection[Any], Any]]:
    """Hold ``users`` exclusively; yields (holder, a function returning the blocked pid)."""
    database = database_of(url)
    with psycopg.connect(url) as holder, psycopg.connect(admin_url, autocommit=True) as admin:
        holder.execute("LOCK TABLE users IN ACCESS EXCLUSIVE MODE")
        pid = holder.info.backend_pid
        yield holder, lambda: _lock_waiter(admin, database, pid)


def test_spec_change_mid_apply_lets_the_dispatched_apply_finish_then_replans(
    kube: RealCluster, namespace: str, operator: Operator, pg_database: str, pg_admin_url: str
) -> None:
    secret(kube, namespace, "pg", pg_database)
    operator.start()
    schema(kube, namespace, "pg", PG_V1, "pg", "postgres")
    wait_status(kube, namespace, "pg", "Ready", ready, log=operator.log_path)
    with table_locked(pg_database, pg_admin_url) as (holder, waiter):
        set_sql(kube, namespace, "pg", PG_V2)
        wait_for("the Apply blocked on the lock", waiter, timeout=60)
        set_sql(kube, namespace, "pg", PG_V3)  # generation 3 while generation 2 applies
        wait_passes(kube, operator, SCHEMA, namespace, "pg")
        s = status(kube, namespace, "pg")
        assert (s.get("activeOperation") or {}).get("generation") == 2, s.get("activeOperation")
        holder.rollback()
    wait_status(
        kube,
        namespace,
        "pg",
        "generation 3 applied",
        lambda s: ready(s) and s.get("observedGeneration") == 3,
        log=operator.log_path,
    )
    assert pg_columns(pg_database, "users") == ["id", "name", "email", "age"]
    uid = uid_of(kube, namespace, "pg")
    assert len(jobs_of(kube, namespace, uid, "Apply")) == 3  # v1, v2 (finished), v3


def test_deletion_waits_while_proof_is_owed(
    kube: RealCluster, namespace: str, operator: Operator, pg_database: str, pg_admin_url: str
) -> None:
    secret(kube, namespace, "pg", pg_database)
    operator.start(proof_retry_seconds="5")
    # The Apply Pod is deleted and may be gone before anyone sees it stop; then the proof
    # waits for the hold (the Job's deadline + the Pod's + 60 s: 120 s), kept short here.
    schema(kube, namespace, "pg", PG_V1, "pg", "postgres", runner={"activeDeadlineSeconds": 30})
    wait_status(kube, namespace, "pg", "Ready", ready, log=operator.log_path)
    with table_locked(pg_database, pg_admin_url) as (holder, waiter):
        set_sql(kube, namespace, "pg", PG_V2)
        blocked = wait_for("the Apply blocked on the lock", waiter, timeout=60)
        kube.delete(SCHEMA, namespace, "pg")
        op = wait_status(
            kube,
            namespace,
            "pg",
            "Apply claim",
            lambda s: (s.get("activeOperation") or {}).get("type") == "Apply",
            log=operator.log_path,
        )["activeOperation"]
        (pod,) = kube.list(POD, namespace, {"ptah.io/operation-id": op["operationId"]})
        kube.delete(POD, namespace, pod["metadata"]["name"])
        wait_for(
            "the Apply Pod gone",
            lambda: not kube.list(POD, namespace, {"ptah.io/operation-id": op["operationId"]}),
            timeout=60,
        )
        with psycopg.connect(pg_admin_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (blocked,))
        holder.rollback()
    s = wait_status(
        kube,
        namespace,
        "pg",
        "proof owed, deletion held",
        lambda s: s.get("phase") == "ProofNotSettled",
        timeout=240,
        log=operator.log_path,
    )
    obj = kube.get(SCHEMA, namespace, "pg")
    assert obj is not None and obj["metadata"].get("deletionTimestamp")
    assert s["pendingObservation"]["operationId"] == op["operationId"]
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute("ALTER TABLE users ADD COLUMN email text")
    wait_for(
        "the PtahSchema gone once proved",
        lambda: kube.get(SCHEMA, namespace, "pg") is None,
        timeout=90,
    )


def _iso(ts: str) -> datetime:
    return datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ")


def test_two_resources_one_database_differently_spelled_serialize_through_one_lease(
    kube: RealCluster, namespace: str, operator: Operator, pg_database: str
) -> None:
    other = pg_database.replace("@127.0.0.1:", "@localhost:") + "?connect_timeout=7"
    assert other != pg_database
    secret(kube, namespace, "one", pg_database)
    secret(kube, namespace, "two", other)
    operator.start(workers="4")
    schema(kube, namespace, "one", PG_V1, "one", "postgres")
    schema(kube, namespace, "two", PG_V1, "two", "postgres")
    s1 = wait_status(kube, namespace, "one", "Ready", ready, timeout=120, log=operator.log_path)
    s2 = wait_status(kube, namespace, "two", "Ready", ready, timeout=120, log=operator.log_path)
    assert s1["targetIdentity"]["digest"] == s2["targetIdentity"]["digest"]
    realm = [
        lease
        for lease in kube.list(LEASE, namespace)
        if lease["metadata"]["name"].startswith("ptah-realm-")
    ]
    assert len(realm) == 1, [r["metadata"]["name"] for r in realm]
    assert realm[0]["spec"]["leaseTransitions"] == 2  # each Apply took it once, in turn
    jobs = [
        j
        for name in ("one", "two")
        for j in jobs_of(kube, namespace, uid_of(kube, namespace, name), "Apply")
    ]
    assert len(jobs) == 2
    first, second = sorted(jobs, key=lambda j: j["status"]["startTime"])
    assert _iso(first["status"]["completionTime"]) <= _iso(second["status"]["startTime"])
    outcomes = sorted(s["lastMutation"]["outcome"] for s in (s1, s2))
    # The second Apply found the schema already changed and refused; it then read again.
    assert outcomes in (["Refused", "Succeeded"], ["Succeeded", "Succeeded"]), outcomes
    assert pg_columns(pg_database, "users") == ["id", "name"]
