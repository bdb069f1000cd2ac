"""Two PtahMigrations addressing one PostgreSQL database through differently spelled
targets (``127.0.0.1`` and ``localhost?application_name=...``) serialize through one
Lease: the database reports one identity, so both claims name one coordination digest.

A applies files 1-2 (``targetVersion: "2"``); B, created while A's Migrate runs,
applies the rest. Shown three ways: there is only ever one realm Lease; B's Migrate Job
is created only after A's outcome released it; and in the history table, written by
the database's own clock, the files of the two operations never overlap in time.
"""

from __future__ import annotations

import migflow
import pytest
from e2esupport import Operator, secret
from migflow import (
    LeaseWatch,
    configmap,
    history,
    migrate_jobs,
    migration,
    ready_at,
    uid_of,
    wait_history,
    wait_mstatus,
    with_sum,
)

from ptah.kube.real import RealCluster

pytestmark = pytest.mark.integration

FILES = {
    f"{n:04d}_t{n}.sql": f"CREATE TABLE t{n} (id integer PRIMARY KEY);\nSELECT pg_sleep(1);\n"
    for n in range(1, 5)
}


def test_two_migrations_on_one_database_never_run_at_once(
    kube: RealCluster, namespace: str, operator: Operator, pg_database: str
) -> None:
    other = pg_database.replace("127.0.0.1", "localhost") + "?application_name=ptah-b"
    secret(kube, namespace, "a", pg_database)
    secret(kube, namespace, "b", other)
    configmap(kube, namespace, "mig", with_sum(FILES))
    watch = LeaseWatch(kube, namespace)
    operator.start()
    migration(kube, namespace, "a", "a", "postgres", configmaps=["mig"], targetVersion="2")
    wait_history(pg_database, "A applying", lambda h: bool(h), timeout=60)
    migration(kube, namespace, "b", "b", "postgres", configmaps=["mig"])

    def both_ready() -> bool:
        watch.sample()
        a = migflow.mstatus(kube, namespace, "a")
        b = migflow.mstatus(kube, namespace, "b")
        return ready_at(["1", "2"])(a) and ready_at(["1", "2", "3", "4"])(b)

    migflow.wait_for("both Ready", both_ready, timeout=180, interval=0.2)
    wait_mstatus(kube, namespace, "a", "A Ready", ready_at(["1", "2"]), log=operator.log_path)

    assert len(watch.names) == 1, watch.names
    ua, ub = uid_of(kube, namespace, "a"), uid_of(kube, namespace, "b")
    holders = [h.split("/")[0] for h in watch.holders]
    assert ua in holders and ub in holders and holders.index(ua) < holders.index(ub), holders
    (job_a,) = migrate_jobs(kube, namespace, ua)
    (job_b,) = migrate_jobs(kube, namespace, ub)
    finished_a = job_a["status"].get("completionTime")
    assert finished_a and job_b["metadata"]["creationTimestamp"] >= finished_a

    rows = history(pg_database)
    assert sorted(rows) == ["1", "2", "3", "4"]
    by_op: dict[str, list[dict[str, object]]] = {}
    for row in rows.values():
        by_op.setdefault(str(row["operation_id"]), []).append(row)
    assert len(by_op) == 2, by_op
    spans = sorted(
        (min(r["started_at"] for r in rs), max(r["finished_at"] for r in rs))  # type: ignore[type-var]
        for rs in by_op.values()
    )
    assert spans[0][1] <= spans[1][0], spans
