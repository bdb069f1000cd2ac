"""A re-plan from a runner Job uses the installation's cache volume, and never over a
changed database.

The real control plane and its real node: the runner defaults name a cache volume (a
PersistentVolumeClaim bound to a hostPath PersistentVolume on the node, as a user's
claim would be bound by their storage), and each Plan Job's runner, in its container,
plans a real PostgreSQL database through it. The evidence is each Plan's own frame
(``data.cache``: which side the cache gave) read from the Pod's log, beside what the
lifecycle made of it:

1. the first plan finds nothing cached; the proof reading after the Apply reuses the
   normalised desired schema but reads the target again (the Apply moved its catalogs);
2. a drift reading with nothing changed reuses the inspection too, and agrees with the
   target's real fingerprint;
3. after a change made outside Ptah, the next reading reads the target afresh and plans
   the change back: a cached inspection is never trusted over a changed database.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ptah.engines.connect import open_target
from ptah.engines.planner import current_fingerprint
from ptah.kube.kinds import JOB, POD
from ptah.kube.real import RealCluster
from ptah.lifecycle.step import Result
from ptah.runner.frame import parse_result_for
from ptah.workload.job import CONTAINER, LABEL_OPERATION, LABEL_OPERATION_TYPE
from support.databases import database_url, fresh_database
from support.lifecycle_harness import SIDES, Harness, real_pause

pytestmark = pytest.mark.integration

CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds"
DESIRED = (
    "CREATE TABLE a (id integer PRIMARY KEY, name text NOT NULL);\n"
    "CREATE TABLE b (id integer PRIMARY KEY, a_id integer REFERENCES a (id));\n"
    "CREATE INDEX b_a_id ON b (a_id);\n"
)


class PostgresHarness(Harness):
    """One PtahSchema on a real PostgreSQL database, its runners in the node's Pods."""

    engine = "postgres"
    schema_source = DESIRED

    def __init__(
        self, port: RealCluster, namespace: str, url: str, pod_url: str, cache_claim: str
    ) -> None:
        self.namespace = namespace
        self.lock_namespace = namespace
        self.url, self.pod_url = url, pod_url
        self.runner_defaults = {
            "cacheVolume": {"persistentVolumeClaim": {"claimName": cache_claim}}
        }
        super().__init__(SIDES["schema"], port, port)

    def secret_url(self) -> str:
        return self.pod_url

    def wait(self, result: Result) -> None:
        real_pause(result)

    def tables(self) -> set[str]:
        with open_target(self.url) as target, target.connection.cursor() as cur:
            cur.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
            return {r[0] for r in cur.fetchall()}

    def desired_tables(self) -> set[str]:
        return {"a", "b"}

    def plan_jobs(self) -> list[dict[str, Any]]:
        jobs = self.admin.list(JOB, self.namespace, {LABEL_OPERATION_TYPE: "Plan"})
        return sorted(jobs, key=lambda j: str(j["metadata"]["creationTimestamp"]))

    def plan_frame(self, job: dict[str, Any]) -> dict[str, Any]:
        """The data of the Plan Job's one frame, from its Pod's log."""
        op = job["metadata"]["labels"][LABEL_OPERATION]
        (pod,) = self.admin.list(POD, self.namespace, {LABEL_OPERATION: op})
        log = self.admin.read_log(self.namespace, pod["metadata"]["name"], CONTAINER)
        verdict = parse_result_for(log, op)
        assert verdict.frame is not None, (verdict.reason, log[-2000:])
        return dict(verdict.frame.data)

    def at_rest_after(self, plans: int) -> bool:
        """``plans`` Plan Jobs made, the last one accounted, and the resource Ready."""
        return len(self.plan_jobs()) == plans and self.claim() is None and self.phase() == "Ready"

    def plan_complete(self, n: int) -> bool:
        """The ``n``-th Plan Job has completed (the controller has not necessarily read
        it yet; the next pass would)."""
        jobs = self.plan_jobs()
        return len(jobs) >= n and any(
            c.get("type") == "Complete" and c.get("status") == "True"
            for c in (jobs[n - 1].get("status") or {}).get("conditions") or []
        )


@pytest.fixture
def cache_claim(cluster: Any, namespace: str, tmp_path: Path) -> Iterator[str]:
    """A PersistentVolumeClaim in ``namespace`` bound to a hostPath PersistentVolume on
    the node (opened to the runner's uid, as fsGroup would open a real claim)."""
    directory = tmp_path / "plan-cache"
    directory.mkdir()
    directory.chmod(0o777)
    pv, claim = f"ptah-plan-cache-{namespace}", "ptah-plan-cache"
    docs = [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": pv},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "ptah-test-manual",
                "persistentVolumeReclaimPolicy": "Retain",
                "hostPath": {"path": str(directory), "type": "Directory"},
                "claimRef": {"namespace": namespace, "name": claim},
            },
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim, "namespace": namespace},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "ptah-test-manual",
                "volumeName": pv,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    ]
    cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))
    cluster.kubectl(
        "wait",
        "--for=jsonpath={.status.phase}=Bound",
        f"pvc/{claim}",
        "--timeout=60s",
        namespace=namespace,
    )
    try:
        yield claim
    finally:
        with contextlib.suppress(AssertionError):
            cluster.kubectl("delete", "pv", pv, "--wait=false")


def test_a_replan_from_a_job_reuses_the_cache_until_the_database_changes(
    cluster: Any, namespace: str, cache_claim: str
) -> None:
    pg_admin_url = database_url("PTAH_TEST_PG_URL", "PostgreSQL 15")
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRDS))
    cluster.wait_established("ptahschemas.ptah.io", "ptahplans.ptah.io")
    with fresh_database(pg_admin_url, "ptah_cache_") as url:
        port = RealCluster.from_kubeconfig(str(cluster.kubeconfig))
        h = PostgresHarness(port, namespace, url, cluster.pod_url(url), cache_claim)
        h.create(approval="Never")

        # 1. Plan, Apply, the proof reading, Ready.
        h.run(lambda: h.at_rest_after(2))
        assert h.desired_tables() <= h.tables()
        first, proof = (h.plan_frame(j) for j in h.plan_jobs())
        assert first["cache"] == {"desired": False, "inspection": False}, first
        assert proof["cache"] == {"desired": True, "inspection": False}, proof
        assert proof["changes"] is False

        # 2. A drift reading with nothing changed: both sides from the cache, and the
        # reused inspection agrees with the target's real fingerprint.
        # (Between two runs no pass runs, so nothing is dispatched behind the test's back.)
        h.patch_resource({"spec": {"driftCheckIntervalSeconds": 1}})
        h.run(lambda: h.plan_complete(3))
        again = h.plan_frame(h.plan_jobs()[2])
        assert again["cache"] == {"desired": True, "inspection": True}, again
        assert again["changes"] is False
        with open_target(url) as target:
            assert again["fingerprintBefore"] == current_fingerprint(target)

        # 3. Changed outside Ptah: read afresh, and the change is planned back.
        with open_target(url) as target, target.connection.cursor() as cur:
            cur.execute("ALTER TABLE a ADD COLUMN added_outside text")
            target.connection.commit()
        h.run(lambda: h.plan_complete(4))
        drift = h.plan_frame(h.plan_jobs()[3])
        assert drift["cache"] == {"desired": True, "inspection": False}, drift
        assert drift["changes"] is True
        assert drift["fingerprintBefore"] != again["fingerprintBefore"]
        assert any("added_outside" in s["sql"] for s in drift["statements"]), drift
