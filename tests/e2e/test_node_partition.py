"""A force-deleted runner Pod on a node cut off from the API is not a stopped runner.

Real processes, no test hook: the node agent (the cluster's kubelet) is paused with
SIGSTOP while a Migrate runs against PostgreSQL, and the running Pod is force-deleted
(``kubectl delete pod --grace-period=0 --force``). The Job controller, which is not cut
off, counts the Pod failed and the Job turns Failed; the runner process on the node is
untouched and goes on writing. Its second file waits on a lock the test holds, so the
runner demonstrably writes files 2, 3 and 4 *after* the Job turned Failed (the lock is
an advisory one: a table made for it would make the database need a baseline).

The operator must keep the database's Lease for as long as the runner writes: it
records the run as uncertain saying what it saw (the Pod was deleted before it was seen
to stop, never "0 Pods ran"), keeps renewing the Lease with the reason in
``status.pendingLockRelease.withheld``, and never releases it: no evidence that the Pod
stopped ever reaches the API (its object is gone), and a History reading showing the
run's work complete is not such evidence either, so the proof does not read until the
hold (the Job's deadline + the Pod's + 60 s; the test sets a 60 s deadline, so 180 s)
has passed. Then the
Lease is left to expire, the proof reads, and the run is settled as converged. A
background sampler of the Lease shows it held by the run, and unexpired, at every
sample until the runner's writes had ended (its database session gone).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import psycopg
import pytest
from e2esupport import Operator, events, secret, wait_event, wait_for
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
    wait_mstatus,
    with_sum,
)

from ptah.kube.kinds import JOB, LEASE, POD
from ptah.kube.real import RealCluster
from ptah.testing.devcluster.cluster import procs

pytestmark = pytest.mark.integration
# The process node agent; test_node_partition_realnode.py runs this on the real node.
E2E_NODE = "agent"

GATE = 424242  # an advisory lock the test holds; file 2 waits on it

FILES = {
    "0001_users.sql": "CREATE TABLE users (id INT PRIMARY KEY);\n",
    "0002_gate.sql": f"SELECT pg_advisory_xact_lock({GATE});\nCREATE TABLE gated (id INT);\n",
    "0003_orders.sql": "CREATE TABLE orders (id INT PRIMARY KEY);\n",
    "0004_items.sql": "CREATE TABLE items (id INT PRIMARY KEY);\n",
}
VERSIONS = ["1", "2", "3", "4"]


# The runner's activeDeadlineSeconds (its Job's and its Pod's): the hold is twice this
# + 60 s. The runner's own life, blocked on the gate, is spent with its node paused (the
# kubelet cannot enforce the Pod's deadline then), so 60 s is enough.
DEADLINE = 60


class HolderSampler:
    """The realm Lease, sampled every 20 ms on a thread: (monotonic, holder, whether it
    was unexpired at the sample's wall-clock time, by its renewTime and duration)."""

    def __init__(self, kube: RealCluster, ns: str, name: str) -> None:
        self.kube, self.ns, self.name = kube, ns, name
        self.samples: list[tuple[float, str, bool]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            with contextlib.suppress(Exception):
                lease = self.kube.get(LEASE, self.ns, self.name) or {}
                spec = lease.get("spec") or {}
                stamp = spec.get("renewTime")
                renewed = datetime.fromisoformat(stamp).timestamp() if stamp else 0.0
                live = renewed + float(spec.get("leaseDurationSeconds") or 0) > time.time()
                self.samples.append((time.monotonic(), spec.get("holderIdentity") or "", live))
            self.stop.wait(0.02)

    def __enter__(self) -> HolderSampler:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(5)


def node_link(cluster: Any) -> int:
    """The pid of the node's one link to the API: the process node agent, or the real
    node's kubelet (containerd and the container's shim keep the runner running)."""
    components = procs(cluster.state_dir)
    name = "node-agent" if "node-agent" in components else "kubelet"
    pid = components[name].pid()
    assert pid is not None, f"the {name} is not running"
    return pid


@contextlib.contextmanager
def paused(pid: int) -> Iterator[None]:
    """SIGSTOP ``pid`` (the node agent or the kubelet); SIGCONT it whatever happens."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def _backends(admin: psycopg.Connection[Any], database: str, mine: set[int]) -> list[Any]:
    rows = admin.execute(
        "SELECT pid, wait_event, query FROM pg_stat_activity"
        " WHERE datname = %s AND backend_type = 'client backend'",
        (database,),
    ).fetchall()
    return [r for r in rows if r[0] not in mine]


def _stamp(event: dict[str, Any]) -> str:
    return str(event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp"))


def _job_failed(kube: RealCluster, ns: str, name: str) -> bool:
    job = kube.get(JOB, ns, name) or {}
    conds = (job.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Failed" and c.get("status") == "True" for c in conds)


def test_force_deleted_pod_on_a_paused_node_keeps_the_lease_until_the_runner_stops(
    kube: RealCluster,
    cluster: Any,
    namespace: str,
    operator: Operator,
    pg_database: str,
    pg_admin_url: str,
) -> None:
    url = pg_database
    database = url.rsplit("/", 1)[1]
    agent = node_link(cluster)
    gate = psycopg.connect(url, autocommit=True)  # holds the lock file 2 waits on
    admin = psycopg.connect(pg_admin_url, autocommit=True)
    mine = {gate.info.backend_pid, admin.info.backend_pid}
    try:
        gate.execute("SELECT pg_advisory_lock(%s)", (GATE,))
        secret(kube, namespace, "db", url)
        configmap(kube, namespace, "mig", with_sum(FILES))
        operator.start()
        migration(
            kube,
            namespace,
            "app",
            "db",
            "postgres",
            configmaps=["mig"],
            runner={"activeDeadlineSeconds": DEADLINE},
        )

        # Barrier: the runner has applied file 1 and waits on the gate in file 2.
        (runner,) = wait_for(
            "the runner blocked in file 2",
            lambda: [
                r
                for r in _backends(admin, database, mine)
                if r[1] == "advisory" and "pg_advisory_xact_lock" in (r[2] or "")
            ],
            timeout=120,
        )
        uid = uid_of(kube, namespace, "app")
        (job,) = migrate_jobs(kube, namespace, uid)
        job_name = job["metadata"]["name"]
        (pod,) = kube.list(POD, namespace, {"job-name": job_name})
        s = mstatus(kube, namespace, "app")
        claim = s["activeOperation"]
        holder = claim["lease"]["holder"]
        lease_name = claim["lease"]["leaseName"]
        assert [x["metadata"]["name"] for x in realm_leases(kube, namespace)] == [lease_name]

        with HolderSampler(kube, namespace, lease_name) as sampler:
            with paused(agent):
                cluster.kubectl(
                    "delete",
                    "pod",
                    pod["metadata"]["name"],
                    "--grace-period=0",
                    "--force",
                    namespace=namespace,
                )
                wait_for("the Job Failed", lambda: _job_failed(kube, namespace, job_name), 30)
                failed_at = time.monotonic()
                # The operator looked: the run is recorded, saying what was seen.
                s = wait_mstatus(
                    kube,
                    namespace,
                    "app",
                    "the run recorded as uncertain, the release withheld",
                    lambda s: bool(s.get("unresolvedRun")) and bool(s.get("pendingLockRelease")),
                    timeout=30,
                    log=operator.log_path,
                )
                record, staged = s["unresolvedRun"], s["pendingLockRelease"]
                assert record["reason"] == "PodDeletedUnseen", record
                assert "deleted before it was seen to stop" in record["detail"]
                assert staged["withheld"] == "the Pod was deleted before it was seen to stop"
                assert staged["jobPods"] == 1 and not staged["executorStopped"]
                # And it keeps looking: the Lease, still ours, renewed after the record.
                recorded = (kube.get(LEASE, namespace, lease_name) or {}).get("spec") or {}
                assert recorded.get("holderIdentity") == holder, recorded

                def renewed() -> bool:
                    spec = (kube.get(LEASE, namespace, lease_name) or {}).get("spec") or {}
                    assert spec.get("holderIdentity") == holder, f"released: {spec}"
                    return spec.get("renewTime") != recorded.get("renewTime")

                wait_for("a renewal after the record", renewed, timeout=20)
                assert [r[0] for r in _backends(admin, database, mine)] == [runner[0]]

                # The runner writes after the Job turned Failed: open the gate.
                gate.execute("SELECT pg_advisory_unlock(%s)", (GATE,))
                wait_for(
                    "the runner's writes ended (files 2-4 committed, its session gone)",
                    lambda: (
                        sorted(history(url)) == VERSIONS
                        and all(r["finished_at"] for r in history(url).values())
                        and not _backends(admin, database, mine)
                    ),
                    timeout=30,
                    interval=0.05,
                )
                ended_at = time.monotonic()
                assert ended_at > failed_at
                s = mstatus(kube, namespace, "app")
                assert s["pendingLockRelease"]["withheld"] == staged["withheld"]
            # The node is back. The runner's Pod was never seen to stop, and the
            # database's showing the work complete is not evidence that it did: the
            # Lease is kept and the proof waits, until the hold has passed.
            wait_event(
                kube,
                namespace,
                "app",
                "LeaseLeftToExpire",
                "deleted before it was seen to stop",
                timeout=2 * DEADLINE + 150,
            )
        held = [(h, live) for t, h, live in sampler.samples if t <= ended_at]
        assert held and set(held) == {(holder, True)}, set(held)

        s = wait_mstatus(
            kube, namespace, "app", "Ready", ready_at(VERSIONS), timeout=120, log=operator.log_path
        )
        assert s["lastMutation"]["outcome"] == "Converged"
        assert not s.get("pendingLockRelease") and not s.get("unresolvedRun")
        assert condition(s, "Ready")["status"] == "True"
        evs = events(kube, namespace, "app")
        messages = [(e["reason"], e["message"]) for e in evs]
        uncertain = [m for r, m in messages if r == "OutcomeUncertain"]
        assert uncertain and "deleted before it was seen to stop" in uncertain[0], messages
        assert not any("0 Pods" in m for _, m in messages), messages
        assert not [m for r, m in messages if r == "LeaseReleased"], messages
        # Settled only by a reading dispatched after the hold, never before.
        settled = [e for e in evs if e["reason"] == "ProofSettled"]
        left = [e for e in evs if e["reason"] == "LeaseLeftToExpire"]
        assert settled and left, messages
        assert _stamp(settled[0]) >= _stamp(left[0]), (settled[0], left[0])
        assert len(migrate_jobs(kube, namespace, uid)) == 1
    finally:
        gate.close()
        admin.close()
