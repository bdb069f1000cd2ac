"""Faults to the operator as users run it: the chart installed on the real node, the
operator in containers of its Deployment, runner Jobs in containers.

* The leader operator Pod force-deleted (``--grace-period=0 --force``) while its runner
  Job is in the middle of an Apply statement: the standby takes the leader Lease, the
  database Lease stays held while the runner lives, the one Job's outcome is accounted
  from its Pod, and the Lease is handed back after that.
* The operator container killed at a durable write (the test hook, right after the Job
  create, before its uid is recorded) and restarted by the kubelet in the same Pod: the
  new process adopts the Job it created, never creates a second, and accounts it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from chartflow import RELEASE, helm, install, leader, operator_pods, pod_ready, ready_pods
from e2esupport import jobs_of, pg_columns, ready, wait_for, wait_status
from migflow import job_finished, realm_leases

from ptah.kube.kinds import JOB, POD, SCHEMA, SECRET
from ptah.kube.real import RealCluster

if TYPE_CHECKING:
    from support.cluster import Cluster

pytestmark = pytest.mark.integration

#: The Apply's last statement sleeps in the target database (the Plan's load runs it
#: in the scratch database, another datname), so a test sees "mid-statement" there.
SLOW_SQL = (
    "CREATE TABLE item (id bigint PRIMARY KEY);\n"
    "CREATE MATERIALIZED VIEW slow AS SELECT pg_sleep(12) IS NOT NULL AS done;\n"
)
FAST_SQL = "CREATE TABLE item (id bigint PRIMARY KEY);\n"
#: Short Leases, so a takeover and a hand-back happen within the test.
LEASES = ("--set=leaderElection.leaseDurationSeconds=6", "--set=operator.databaseLeaseSeconds=20")


@contextlib.contextmanager
def chart(c: Cluster, ns: str, *values: str) -> Iterator[RealCluster]:
    """The chart installed in ``ns``; uninstalled after the test's resources are gone
    (a PtahSchema left behind would keep its finalizer and the namespace)."""
    install(c, ns, *LEASES, *values)
    with RealCluster.from_kubeconfig(c.kubeconfig) as kube:
        try:
            yield kube
        finally:
            for obj in kube.list(SCHEMA, ns):
                kube.delete(SCHEMA, ns, obj["metadata"]["name"])
            c.wait_for("schemas deleted", lambda: not kube.list(SCHEMA, ns), timeout=90)
    helm(c, ns, "uninstall", RELEASE, "--wait", "--timeout=120s")


def apply_schema(c: Cluster, kube: RealCluster, ns: str, url: str, sql: str) -> str:
    """Secret and PtahSchema ``shop``; its uid."""
    kube.create(
        SECRET, {"metadata": {"name": "db", "namespace": ns}, "stringData": {"url": c.pod_url(url)}}
    )
    obj = kube.create(
        SCHEMA,
        {
            "metadata": {"name": "shop", "namespace": ns},
            "spec": {
                "target": {"engine": "postgres", "secretRef": {"name": "db"}},
                "source": {"inline": sql},
            },
        },
    )
    return str(obj["metadata"]["uid"])


def sleeping_in(url: str) -> bool:
    """A statement of the Apply is running pg_sleep in the database of ``url``."""
    dbname = url.rpartition("/")[2]
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND state = 'active'"
            " AND query ILIKE %s AND pid <> pg_backend_pid()",
            (dbname, "%pg_sleep%"),
        ).fetchone()
    return bool(row and row[0])


def log_events(text: str, event: str) -> list[dict[str, Any]]:
    """The operator's JSON log lines of one ``event``."""
    out = []
    for raw in text.splitlines():
        with contextlib.suppress(ValueError):
            line = json.loads(raw)
            if isinstance(line, dict) and line.get("event") == event:
                out.append(line)
    return out


def handed_back(kube: RealCluster, ns: str) -> None:
    """Every database Lease of the namespace is free once the outcome is written."""
    leases = realm_leases(kube, ns)
    assert len(leases) == 1, [lease["metadata"]["name"] for lease in leases]
    wait_for(
        "the database Lease handed back",
        lambda: not (realm_leases(kube, ns)[0]["spec"].get("holderIdentity")),
        timeout=60,
    )


def test_leader_pod_force_deleted_mid_apply(
    real_cluster: Cluster, real_namespace: str, pg_database: str
) -> None:
    c, ns = real_cluster, real_namespace
    with chart(c, ns) as kube:
        ready_pods(c, ns, 2)
        first = c.wait_for("leader Lease held", lambda: leader(c, ns), timeout=60)
        uid = apply_schema(c, kube, ns, pg_database, SLOW_SQL)
        c.wait_for("the Apply mid-statement", lambda: sleeping_in(pg_database), timeout=120)
        (job,) = jobs_of(kube, ns, uid, "Apply")
        assert leader(c, ns) == first
        (held,) = realm_leases(kube, ns)
        holder = held["spec"]["holderIdentity"]
        assert holder, held
        c.kubectl("delete", "pod", first, "--grace-period=0", "--force", namespace=ns)

        # While the runner lives, its database Lease stays with the claim that
        # dispatched it: nobody releases or takes it under a live executor.
        def runner_done() -> bool:
            lease = realm_leases(kube, ns)[0]
            done = job_finished(kube.get(JOB, ns, job["metadata"]["name"]))
            if not done:
                assert lease["spec"].get("holderIdentity") == holder, lease["spec"]
            return done

        c.wait_for("the runner Job finished", runner_done, timeout=120, interval=0.3)
        new = c.wait_for(
            "a new leader", lambda: (leader(c, ns) or first) != first and leader(c, ns), timeout=60
        )
        assert new in {p["metadata"]["name"] for p in operator_pods(c, ns)}
        s = wait_status(kube, ns, "shop", "Ready", ready, timeout=180)
        assert s["lastMutation"]["outcome"] == "Succeeded", s["lastMutation"]
        assert not s.get("pendingObservation"), s["pendingObservation"]
        assert [j["metadata"]["uid"] for j in jobs_of(kube, ns, uid, "Apply")] == [
            job["metadata"]["uid"]
        ]
        assert pg_columns(pg_database, "item") == ["id"]
        with psycopg.connect(pg_database) as conn:
            assert conn.execute("SELECT done FROM slow").fetchall() == [(True,)]
        handed_back(kube, ns)


def test_operator_container_killed_at_a_durable_write_restarts_in_its_pod(
    real_cluster: Cluster, real_namespace: str, pg_database: str
) -> None:
    c, ns = real_cluster, real_namespace
    kill = (
        "--set=replicaCount=1",
        "--set=operator.extraEnv[0].name=PTAH_TEST_KILL_AT",
        # Right after the Job create, before the uid is recorded: the window where a
        # fresh process could create a second Job for the claim.
        "--set=operator.extraEnv[0].value=after:create_job:Apply",
    )
    with chart(c, ns, *kill) as kube:
        (pod,) = ready_pods(c, ns, 1)
        uid = apply_schema(c, kube, ns, pg_database, FAST_SQL)

        def restarted() -> dict[str, Any] | None:
            now = kube.get(POD, ns, pod["metadata"]["name"])
            cs = ((now or {}).get("status") or {}).get("containerStatuses") or [{}]
            return now if cs[0].get("restartCount") and pod_ready(now or {}) else None

        again = c.wait_for("the operator container restarted", restarted, timeout=120)
        s = wait_status(kube, ns, "shop", "Ready", ready, timeout=180)
        # The same Pod (no replacement), its container restarted once by the kubelet
        # after the hook's kill (exit status 137).
        assert again["metadata"]["uid"] == pod["metadata"]["uid"]
        cs = kube.get(POD, ns, pod["metadata"]["name"])["status"]["containerStatuses"][0]  # type: ignore[index]
        assert cs["restartCount"] == 1, cs
        assert cs["lastState"]["terminated"]["exitCode"] == 137, cs["lastState"]
        previous = c.kubectl("logs", "--previous", pod["metadata"]["name"], namespace=ns).stdout
        current = c.kubectl("logs", pod["metadata"]["name"], namespace=ns).stdout
        assert [e["at"] for e in log_events(previous, "test_kill")] == ["after:create_job"]
        assert not log_events(current, "test_kill")
        # One create in all, by the killed process; the restarted one adopted that Job.
        creates = log_events(previous, "job_created") + log_events(current, "job_created")
        creates += log_events(previous + current, "job_create_failed")
        (job,) = jobs_of(kube, ns, uid, "Apply")
        assert [(e["type"], e["uid"]) for e in creates if e.get("type") == "Apply"] == [
            ("Apply", job["metadata"]["uid"])
        ], creates
        assert len(operator_pods(c, ns)) == 1
        assert s["lastMutation"]["outcome"] == "Succeeded", s["lastMutation"]
        assert pg_columns(pg_database, "item") == ["id"]
        handed_back(kube, ns)
