"""The realm's Lease: expiry by this process's own observation, never by the holder's
clock, and no takeover without the holder's executor known stopped."""

from __future__ import annotations

from datetime import timedelta

from ptah.kube.clock import SimClock
from ptah.kube.kinds import LEASE
from ptah.targetlock import (
    HOLDER_JOB,
    HOLDER_NAME,
    ExpiryObserver,
    HolderCheck,
    LeaseView,
    Outcome,
    acquire,
    read,
    renew,
)
from ptah.testing.memory import PROCEED, FaultDecision, MemoryCluster, WriteRequest

NS = "ptah-system"
NAME = "ptah-realm-x"


def _cluster() -> tuple[MemoryCluster, SimClock]:
    clock = SimClock()
    return MemoryCluster(clock=clock, seed=1), clock


def _held_by_other(cluster: MemoryCluster, renewed_seconds_ago: float) -> None:
    stamp = cluster.now() - timedelta(seconds=renewed_seconds_ago)
    cluster.system.create(
        LEASE,
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": NAME,
                "namespace": NS,
                "annotations": {HOLDER_NAME: "other", HOLDER_JOB: "job-1"},
            },
            "spec": {
                "holderIdentity": "uid-o/apply-1",
                "leaseDurationSeconds": 120,
                "leaseTransitions": 1,
                "renewTime": stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            },
        },
    )


def _take(
    cluster: MemoryCluster, observer: ExpiryObserver, holder_stopped: HolderCheck | None = None
) -> Outcome:
    return acquire(
        cluster,
        observer,
        namespace=NS,
        name=NAME,
        holder="uid-me/migrate-1",
        expected=2,
        describe={HOLDER_NAME: "me"},
        holder_stopped=holder_stopped,
    )


def test_a_stale_renew_time_does_not_expire_a_lease_at_first_sight() -> None:
    cluster, clock = _cluster()
    _held_by_other(cluster, renewed_seconds_ago=10_000)  # the holder's clock is far behind
    observer = ExpiryObserver()
    first = _take(cluster, observer)
    assert not first.acquired
    clock.advance(119)
    assert not _take(cluster, observer).acquired
    clock.advance(2)
    taken = _take(cluster, observer)
    assert taken.acquired
    lease = read(cluster, NS, NAME)
    assert lease is not None and lease.holder == "uid-me/migrate-1" and lease.epoch == 2
    # The description is the new holder's alone: nothing of the last holder's stays.
    assert dict(lease.described) == {HOLDER_NAME: "me"}


def test_a_renewal_restarts_the_observation() -> None:
    cluster, clock = _cluster()
    _held_by_other(cluster, renewed_seconds_ago=0)
    observer = ExpiryObserver()
    assert not _take(cluster, observer).acquired
    clock.advance(100)
    cluster.system.patch(LEASE, NS, NAME, {"spec": {"renewTime": "2026-01-01T00:01:40.000000Z"}})
    clock.advance(100)
    assert not _take(cluster, observer).acquired


def test_an_expired_lease_whose_holder_may_still_run_is_not_taken() -> None:
    cluster, clock = _cluster()
    _held_by_other(cluster, renewed_seconds_ago=0)
    observer = ExpiryObserver()
    seen: list[LeaseView] = []

    def running(view: LeaseView) -> str | None:
        seen.append(view)
        return "its Job job-1 has not finished"

    _take(cluster, observer, holder_stopped=running)
    clock.advance(500)
    outcome = _take(cluster, observer, holder_stopped=running)
    assert not outcome.acquired
    assert outcome.holder_running == "its Job job-1 has not finished"
    assert seen and seen[-1].described[HOLDER_JOB] == "job-1"
    lease = read(cluster, NS, NAME)
    assert lease is not None and lease.holder == "uid-o/apply-1"
    stopped = _take(cluster, observer, holder_stopped=lambda view: None)
    assert stopped.acquired


def test_a_renewal_overtaken_on_its_way_keeps_nothing() -> None:
    """The renewal read the Lease as ours; before its write lands, another resource took
    the Lease (the renewal was delayed past the Lease duration). The write carries the
    version it read, so it is refused, and the renewal says the tenure is lost instead of
    overwriting the taker's renewTime and letting its caller dispatch beside the taker."""
    cluster, _ = _cluster()
    _held_by_other(cluster, renewed_seconds_ago=0)
    taken = {"done": False}

    def overtaken(req: WriteRequest) -> FaultDecision:
        if req.kind == LEASE and not taken["done"]:
            taken["done"] = True
            cluster.system.patch(
                LEASE,
                NS,
                NAME,
                {"spec": {"holderIdentity": "uid-t/apply-2", "leaseTransitions": 2}},
            )
        return PROCEED

    cluster.faults = overtaken
    assert not renew(cluster, namespace=NS, name=NAME, holder="uid-o/apply-1", epoch=1)
    lease = read(cluster, NS, NAME)
    assert lease is not None and lease.holder == "uid-t/apply-2" and lease.epoch == 2
