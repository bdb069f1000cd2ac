"""PtahSchema from creation to an applied, verified schema, on the real control plane
with the operator as its own process and real SQLite and PostgreSQL targets."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
from e2esupport import (
    Operator,
    approve,
    events,
    jobs_of,
    pass_writes,
    pg_columns,
    ready,
    schema,
    secret,
    set_sql,
    sqlite_columns,
    sqlite_tables,
    status,
    uid_of,
    wait_event,
    wait_passes,
    wait_status,
)

from ptah.kube.kinds import APPROVAL, PLAN, POD, SCHEMA
from ptah.kube.real import RealCluster

pytestmark = pytest.mark.integration

V1 = "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL);"
V2 = (
    "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT);\n"
    "CREATE TABLE teams (id INTEGER PRIMARY KEY, title TEXT);"
)
PG_V1 = "CREATE TABLE users (id bigint PRIMARY KEY, name text NOT NULL);"
PG_V2 = "CREATE TABLE users (id bigint PRIMARY KEY, name text NOT NULL, email text);"
PG_V3 = "CREATE TABLE users (id bigint PRIMARY KEY, name text NOT NULL);"  # drops email
PG_V4 = "CREATE TABLE users (id bigint PRIMARY KEY);"  # drops name too


def sqlite_schema(path: Path) -> dict[str, list[str]]:
    return {t: sqlite_columns(path, t) for t in sqlite_tables(path)}


def test_sqlite_create_ready_then_spec_change(
    kube: RealCluster, namespace: str, operator: Operator, tmp_path: Path, cluster: Any
) -> None:
    db = tmp_path / "app.db"
    secret(kube, namespace, "db", f"sqlite:///{db}")
    operator.start()
    schema(kube, namespace, "app", V1, "db", "sqlite")

    s = wait_status(kube, namespace, "app", "Ready", ready, log=operator.log_path)
    assert sqlite_schema(db) == {"users": ["id", "name"]}
    assert s["lastMutation"]["outcome"] == "Succeeded"
    assert s["observedGeneration"] == 1
    conds = {c["type"]: c["status"] for c in s["conditions"]}
    assert conds == {
        "Ready": "True",
        "Reconciling": "False",
        "Stalled": "False",
        "SourceApplied": "True",
    }
    assert s["appliedSource"] == hashlib.sha256(V1.encode()).hexdigest()
    first_applied = s["appliedPlanDigest"]

    # Printer columns show the phase and the plan.
    out = cluster.kubectl("get", "pschema", "app", namespace=namespace).stdout
    assert "Ready" in out and s["currentPlan"]["name"] in out, out

    set_sql(kube, namespace, "app", V2)
    s = wait_status(
        kube,
        namespace,
        "app",
        "the change applied",
        lambda s: (
            ready(s)
            and s.get("appliedPlanDigest") != first_applied
            and s.get("observedGeneration") == 2
        ),
        log=operator.log_path,
    )
    assert sqlite_schema(db) == {"users": ["id", "name", "email"], "teams": ["id", "title"]}

    # Every transition has an Event; the plans are immutable objects named by digest.
    wait_event(kube, namespace, "app", "Ready")
    reasons = [e["reason"] for e in events(kube, namespace, "app")]
    for expected in ("Reading", "Applying", "ApplySucceeded", "Verifying", "Ready"):
        assert expected in reasons, reasons
    plans = kube.list(PLAN, namespace)
    assert all(p["metadata"]["name"].startswith("app-") for p in plans)
    assert any(p["spec"]["changes"] for p in plans)
    uid = uid_of(kube, namespace, "app")
    assert len(jobs_of(kube, namespace, uid, "Apply")) == 2

    # An idle resource is left alone: a pass that changes nothing writes nothing. Over
    # the operator's passes after the pokes its passes send no write request at all (a
    # write of the same status would keep the resourceVersion, so the requests are the
    # evidence: `pass_writes`), and the resourceVersion is still the last poke's.
    writes = pass_writes(operator)
    rv = wait_passes(kube, operator, SCHEMA, namespace, "app")
    assert pass_writes(operator) == writes
    assert kube.get(SCHEMA, namespace, "app")["metadata"]["resourceVersion"] == rv  # type: ignore[index]


def _no_password(password: str, *blobs: Any) -> None:
    for blob in blobs:
        text = blob if isinstance(blob, str) else json.dumps(blob)
        assert password not in text


def test_postgres_plan_warnings_reach_the_plan_its_status_and_an_event(
    kube: RealCluster, namespace: str, operator: Operator, pg_database: str
) -> None:
    """What the plan reading says beside its statements (here: a table left alone under
    spec.policy.ignore) is kept on the PtahPlan, counted in status and named by an Event,
    instead of ending with the runner's frame."""
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute("CREATE TABLE legacy (id int)")
    secret(kube, namespace, "pg", pg_database)
    operator.start()
    schema(
        kube, namespace, "pg", PG_V1, "pg", "postgres", policy={"ignore": ["table public.legacy"]}
    )
    s = wait_status(kube, namespace, "pg", "Ready", ready, log=operator.log_path)
    plan = kube.get(PLAN, namespace, s["currentPlan"]["name"])
    assert plan is not None
    said = plan["spec"]["warnings"]
    assert [w for w in said if "spec.policy.ignore" in w and "legacy" in w], said
    assert s["currentPlan"]["warnings"] == len(said)
    wait_event(kube, namespace, "pg", "PlanWarnings", f"{len(said)} warning(s)")
    assert pg_columns(pg_database, "legacy") == ["id"]
    assert pg_columns(pg_database, "users") == ["id", "name"]


def test_postgres_destructive_change_waits_for_approval(
    kube: RealCluster, namespace: str, operator: Operator, pg_database: str
) -> None:
    secret(kube, namespace, "pg", pg_database)
    operator.start()
    schema(
        kube,
        namespace,
        "pg",
        PG_V1,
        "pg",
        "postgres",
        policy={"approval": "Destructive", "allowDestructive": True},
    )
    s = wait_status(kube, namespace, "pg", "Ready", ready, log=operator.log_path)
    assert pg_columns(pg_database, "users") == ["id", "name"]

    set_sql(kube, namespace, "pg", PG_V2)  # additive: applies without approval
    s = wait_status(
        kube,
        namespace,
        "pg",
        "email added",
        lambda s: ready(s) and s.get("observedGeneration") == 2,
        log=operator.log_path,
    )
    assert pg_columns(pg_database, "users") == ["id", "name", "email"]

    set_sql(kube, namespace, "pg", PG_V3)  # drops a column: waits for an approval
    s = wait_status(
        kube,
        namespace,
        "pg",
        "waiting for approval",
        lambda s: (
            s.get("phase") == "WaitingForApproval"
            and (s.get("currentPlan") or {}).get("generation") == 3
        ),
        log=operator.log_path,
    )
    stale = s["currentPlan"]
    assert stale["destructive"] is True
    assert "approval of plan" in s["waitingFor"]
    wait_event(kube, namespace, "pg", "WaitingForApproval", "ptah approve")

    # The spec moves on before anyone approves: a new plan, and the old one is stale.
    set_sql(kube, namespace, "pg", PG_V4)
    s = wait_status(
        kube,
        namespace,
        "pg",
        "waiting for approval of the new plan",
        lambda s: (
            s.get("phase") == "WaitingForApproval"
            and (s.get("currentPlan") or {}).get("generation") == 4
        ),
        log=operator.log_path,
    )
    current = s["currentPlan"]
    assert current["digest"] != stale["digest"]

    # Approvals that must never authorize: the stale plan's digest, and the current
    # digest for another resource.
    approve(kube, namespace, "stale", "pg", stale["digest"])
    approve(kube, namespace, "other-resource", "not-pg", current["digest"])
    wait_passes(kube, operator, SCHEMA, namespace, "pg")
    s = status(kube, namespace, "pg")
    assert s["phase"] == "WaitingForApproval", s["phase"]
    assert pg_columns(pg_database, "users") == ["id", "name", "email"]
    for name in ("stale", "other-resource"):
        a = kube.get(APPROVAL, namespace, name)
        assert a is not None and not (a.get("status") or {}).get("consumedByOperation")

    # The operator's gauges are computed from status: one resource waits for approval.
    metrics = operator.metrics()
    assert 'ptah_approvals_waiting{family="schema"} 1.0' in metrics, metrics
    assert 'ptah_operations_total{family="schema",outcome="Succeeded",type="Apply"}' in metrics

    approve(kube, namespace, "ok", "pg", current["digest"])
    s = wait_status(
        kube,
        namespace,
        "pg",
        "applied after approval",
        lambda s: ready(s) and s.get("appliedPlanDigest") == current["digest"],
        log=operator.log_path,
    )
    assert pg_columns(pg_database, "users") == ["id"]
    a = kube.get(APPROVAL, namespace, "ok")
    assert a is not None and a["status"]["consumedByOperation"]
    assert any(c["type"] == "Consumed" for c in a["status"]["conditions"])

    # Credentials never appear in a status, an Event, a log line or a frame.
    password = pg_database.split("://", 1)[1].split("@", 1)[0].split(":", 1)[1]
    pods = kube.list(POD, namespace)
    logs = [kube.read_log(namespace, p["metadata"]["name"], "runner") for p in pods]
    _no_password(
        password,
        kube.get(SCHEMA, namespace, "pg"),
        events(kube, namespace, "pg"),
        kube.list(PLAN, namespace),
        operator.log_path.read_text(),
        *logs,
    )
