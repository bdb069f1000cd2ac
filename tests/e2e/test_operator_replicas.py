"""Operator replicas: one leader through a Lease, a hand-over on SIGTERM, and a leader
that was paused past its lease stopping at once when it wakes."""

from __future__ import annotations

import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from e2esupport import Operator, metric, ready, schema, secret, wait_for, wait_status

from ptah.kube.kinds import LEASE
from ptah.kube.real import RealCluster

pytestmark = pytest.mark.integration

SQL = "CREATE TABLE users (id INTEGER PRIMARY KEY);"


def leader(kube: RealCluster, ns: str) -> str | None:
    lease = kube.get(LEASE, ns, "ptah-operator-leader")
    return None if lease is None else (lease.get("spec") or {}).get("holderIdentity")


def lease_reads(op: Operator) -> float:
    return metric(op, "ptah_kube_requests_total", verb="get", resource="leases")


def events(op: Operator, name: str) -> list[dict[str, Any]]:
    return [line for line in op.lines() if line.get("event") == name]


def test_standby_takes_over_on_sigterm_and_a_woken_leader_stops_at_once(
    kube: RealCluster, namespace: str, operator: Operator, cluster: Any, tmp_path: Path
) -> None:
    a = operator
    a.identity = "replica-a"
    b = Operator(cluster.kubeconfig, namespace, tmp_path / "replica-b.log", identity="replica-b")
    try:
        a.start()
        wait_for("a leads", lambda: leader(kube, namespace) == "replica-a", 30)
        b.start()
        # b campaigns (a Lease read each retry period) and is refused while a renews:
        # after three of its attempts a still leads and b was never elected.
        wait_for("b asked for the Lease three times", lambda: lease_reads(b) >= 3, 30)
        assert leader(kube, namespace) == "replica-a" and not events(b, "elected")
        assert metric(b, "ptah_leader") == 0

        # Graceful: a hands the Lease over on SIGTERM, so b leads well before expiry.
        stopped = time.monotonic()
        assert a.stop(signal.SIGTERM) == 0
        wait_for("b leads", lambda: leader(kube, namespace) == "replica-b", 30)
        assert time.monotonic() - stopped < 5

        db = tmp_path / "app.db"
        secret(kube, namespace, "db", f"sqlite:///{db}")
        schema(kube, namespace, "app", SQL, "db", "sqlite")
        wait_status(kube, namespace, "app", "Ready under b", ready, log=b.log_path)
        assert events(b, "job_created") and not [
            e for e in events(a, "job_created") if e.get("job", "").startswith("ptah-")
        ]

        # b is paused past its lease (6 s); a takes over; b, woken, must not write on.
        a.start()
        assert b.proc is not None
        b.proc.send_signal(signal.SIGSTOP)
        wait_for("a leads again", lambda: leader(kube, namespace) == "replica-a", 40)
        b.proc.send_signal(signal.SIGCONT)
        assert b.wait_exit(30) == 1  # leadership lost: stop reconciling, exit non-zero
        assert events(b, "leadership_lost")
        with sqlite3.connect(db) as conn:
            assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["users"]
    finally:
        b.stop(signal.SIGKILL)
