"""One test per row of the seed's "Every durable write, and what follows it" table,
for both families (a PtahSchema's Apply, a PtahMigration's Migrate) on both cluster
ports: the in-memory API and the real control plane.

Each test stops the controller right after that write, starts a fresh one on what
was left, and asserts the table's third column: what the next pass must see.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ptah.kube.kinds import APPROVAL
from ptah.kube.real import RealCluster
from ptah.lifecycle.context import FINALIZER
from ptah.workload.job import ANNOTATION_ADMISSION
from support.lifecycle_harness import SIDES, Harness, MemoryHarness, RealHarness

CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds"


@pytest.fixture(scope="session")
def crds(cluster: Any) -> None:
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRDS))
    for crd in ("ptahschemas", "ptahmigrations", "ptahplans", "ptahapprovals"):
        cluster.kubectl(
            "wait", "--for=condition=Established", f"crd/{crd}.ptah.io", "--timeout=60s"
        )


@pytest.fixture(
    params=[(port, family) for port in ("memory", "real") for family in SIDES],
    ids=lambda param: "-".join(param),
)
def h(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    """A resource whose plan waits for approval, then approved: the next claim is the
    mutation (a PtahSchema's Apply, a PtahMigration's Migrate)."""
    port_name, family = request.param
    harness: Harness
    if port_name == "memory":
        harness = MemoryHarness(SIDES[family])
    else:
        cluster = request.getfixturevalue("cluster")
        request.getfixturevalue("crds")
        namespace = request.getfixturevalue("namespace")
        port = RealCluster.from_kubeconfig(str(cluster.kubeconfig))
        harness = RealHarness(SIDES[family], port, namespace, tmp_path / "shop.db")
    harness.create(approval="Always")
    harness.run(lambda: harness.phase() == "WaitingForApproval")
    harness.approve(harness.status()["currentPlan"]["digest"])
    harness.job_creates = 0
    yield harness


def _finish(h: Harness) -> None:
    h.run(lambda: h.phase() == "Ready" and not h.status().get("pendingLockRelease"))
    assert h.done()


def test_finalizer_without_claim_is_removed_first(h: Harness) -> None:
    h.run_to_stop("after", "add_finalizer")
    assert FINALIZER in h.obj()["metadata"]["finalizers"]
    assert h.claim() is None
    h.writes.clear()
    h.one_pass()
    assert h.writes == ["remove_finalizer"]
    assert FINALIZER not in (h.obj()["metadata"].get("finalizers") or [])
    _finish(h)
    assert h.job_creates == 1


def test_claim_without_dispatch_marker_proceeds(h: Harness) -> None:
    h.run_to_stop("after", "write_claim")
    claim = h.claim()
    assert claim is not None and claim["type"] == h.mutation
    assert "dispatchStarted" not in claim
    assert h.job(claim["jobName"]) is None
    _finish(h)
    assert h.job_creates == 1
    assert [j["metadata"]["name"] for j in h.mutation_jobs()] == [claim["jobName"]]


def test_lease_taken_before_epoch_written_is_adopted_before_dispatch(h: Harness) -> None:
    h.run_to_stop("after", "acquire_lease")
    claim = h.claim()
    assert claim is not None and claim["lease"].get("epoch") is None
    lease = h.lease()
    assert lease is not None and lease["spec"]["holderIdentity"] == claim["lease"]["holder"]
    transitions = lease["spec"]["leaseTransitions"]
    h.one_pass()
    claim = h.claim()
    assert claim is not None and claim["lease"]["epoch"] == transitions
    lease = h.lease()
    assert lease is not None and lease["spec"]["leaseTransitions"] == transitions
    _finish(h)
    assert h.job_creates == 1


def test_epoch_changed_after_dispatch_is_continuity_loss(h: Harness) -> None:
    h.run_to_stop("after", "write_job_uid")
    lease = h.lease()
    assert lease is not None
    h.patch_lease(
        lease["metadata"]["name"],
        {
            "spec": {
                "holderIdentity": "someone-else",
                "leaseTransitions": lease["spec"]["leaseTransitions"] + 1,
            }
        },
    )
    h.one_pass()
    record = h.record()
    assert record is not None and record.reason == "ContinuityLost"
    assert h.claim() is None
    assert h.job_creates == 1


@pytest.mark.parametrize("changed_by", ["spec", "installation"])
def test_admission_snapshot_returns_and_a_changed_template_is_refused(
    h: Harness, changed_by: str
) -> None:
    """The template changes through the spec (its generation moves too, so the plan's
    authorization refuses as well) or through the installation alone: the fresh
    controller comes up with another default runner image, the spec unchanged, and only
    the snapshot's digest can refuse."""
    h.run_to_stop("after", "write_admission_snapshot")
    claim = h.claim()
    assert claim is not None and claim["admissionSnapshot"]["digest"]
    assert not h.mutation_jobs()
    if changed_by == "spec":
        h.patch_resource({"spec": {"runner": {"image": "ptah/ptah:other"}}})
    else:
        h.runner_defaults = {**h.runner_defaults, "image": "ptah/ptah:other"}
        h.env = h.fresh_env()
    h.one_pass()
    assert h.claim() is None
    assert not h.mutation_jobs()
    assert h.job_creates == 0


def test_admission_snapshot_digest_is_what_the_job_carries(h: Harness) -> None:
    h.run_to_stop("after", "write_admission_snapshot")
    claim = h.claim()
    assert claim is not None
    digest = claim["admissionSnapshot"]["digest"]
    _finish(h)
    jobs = h.mutation_jobs()
    assert len(jobs) == 1
    assert jobs[0]["metadata"]["annotations"][ANNOTATION_ADMISSION] == digest


def test_consumed_approval_authorizes_no_second_attempt(h: Harness) -> None:
    approved = h.status()["currentPlan"]["digest"]
    read_before = h.status()["lastReadingAt"]
    h.run_to_stop("after", "consume_approval")
    approval = h.admin.get(APPROVAL, h.namespace, "ok")
    assert approval is not None
    assert any(c["type"] == "Consumed" for c in approval["status"]["conditions"])
    claim = h.claim()
    assert claim is not None and "dispatchStarted" not in claim
    # Evidence that the fresh controller looked: the claim the spent approval named is
    # gone, a new reading ran (a later lastReadingAt) and planned the same digest again,
    # and the resource waits for a new approval of it: the spent one was skipped.
    h.run(
        lambda: (
            h.claim() is None
            and h.status().get("lastReadingAt", "") > read_before
            and h.phase() == "WaitingForApproval"
        )
    )
    assert h.status()["currentPlan"]["digest"] == approved
    assert h.job_creates == 0
    assert not h.mutation_jobs()


def test_dispatch_marker_without_job_is_unknown_never_recreated(h: Harness) -> None:
    h.run_to_stop("after", "write_dispatch_started")
    claim = h.claim()
    assert claim is not None and claim["dispatchStarted"]
    h.one_pass()
    record = h.record()
    assert record is not None and record.reason == "JobMissing"
    assert h.job_creates == 0
    assert not h.mutation_jobs()


def test_job_created_before_uid_written_is_adopted(h: Harness) -> None:
    h.run_to_stop("after", "create_job")
    claim = h.claim()
    assert claim is not None and "jobUid" not in claim
    job = h.job(claim["jobName"])
    assert job is not None
    h.one_pass()
    claim = h.claim()
    assert claim is not None and claim["jobUid"] == job["metadata"]["uid"]
    _finish(h)
    assert h.job_creates == 1


def test_job_uid_written_then_supervised_not_recreated(h: Harness) -> None:
    h.run_to_stop("after", "write_job_uid")
    uid = (h.claim() or {})["jobUid"]
    _finish(h)
    assert h.job_creates == 1
    assert h.status()["lastMutation"]["outcome"] == "Succeeded"
    assert [j["metadata"]["uid"] for j in h.mutation_jobs()] == [uid]


def test_ttl_written_under_live_claim_reaches_same_verdict(h: Harness) -> None:
    h.run_to_stop("after", "write_job_ttl")
    claim = h.claim()
    assert claim is not None
    job = h.job(claim["jobName"])
    assert job is not None and job["spec"]["ttlSecondsAfterFinished"] > 0
    h.one_pass()
    status = h.status()
    assert status["lastMutation"] == {**status["lastMutation"], "outcome": "Succeeded"}
    assert status["lastMutation"]["operationId"] == claim["operationId"]
    _finish(h)
    assert h.job_creates == 1


def test_outcome_patch_leaves_exactly_a_claim_or_a_record(h: Harness) -> None:
    h.run_to_stop("after", "write_outcome")
    status = h.status()
    assert status.get("activeOperation") is None
    assert h.record() is None
    assert status["lastMutation"]["outcome"] == "Succeeded"
    assert status["pendingLockRelease"]["executorStopped"] is True
    _finish(h)


def test_staged_release_is_done_before_anything_else(h: Harness) -> None:
    h.run_to_stop("after", "write_outcome")
    lease = h.lease()
    assert lease is not None and lease["spec"].get("holderIdentity")
    h.writes.clear()
    h.one_pass()
    assert h.writes == ["release_lease", "clear_lock_release"]
    lease = h.lease()
    assert lease is not None and not lease["spec"].get("holderIdentity")
    assert "pendingLockRelease" not in h.status()
