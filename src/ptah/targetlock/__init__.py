"""The realm: one Lease per coordination digest of a physical database.

Two resources that address one database, however their targets are spelled,
derive one digest from the identity the database itself reported, and so
serialize through one Lease. The Lease's ``leaseTransitions`` is the epoch: each
acquisition raises it by one, so a claim can tell its own tenure from a later one.

Foreign-lease expiry is measured from this process's own first observation of
an unchanged record (same resourceVersion), never from the renewTime another
node wrote: clocks disagree, and a paused holder's last renewTime says nothing.

Expiry alone never hands the database over. A Lease records who holds it (the
holder's resource and the Job its operation runs as, :data:`HOLDER_ANNOTATIONS`),
and an expired foreign Lease is taken only when the caller's ``holder_stopped``
check says that executor is known stopped or never started. A holder whose
controller stopped renewing may still have a Job writing the database: expiry
says the controller is silent, not that the executor is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ptah.kube import errors
from ptah.kube.kinds import LEASE
from ptah.kube.port import Cluster

DEFAULT_DURATION_SECONDS = 120
# Who holds the Lease, written with each acquisition: what a taker checks.
HOLDER_NAMESPACE = "ptah.io/holder-namespace"
HOLDER_KIND = "ptah.io/holder-kind"
HOLDER_NAME = "ptah.io/holder-name"
HOLDER_JOB = "ptah.io/holder-job"
HOLDER_ANNOTATIONS = (HOLDER_NAMESPACE, HOLDER_KIND, HOLDER_NAME, HOLDER_JOB)


def _micro(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class LeaseView:
    holder: str | None
    epoch: int
    duration: int
    resource_version: str
    described: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, obj: dict[str, Any]) -> LeaseView:
        spec = obj.get("spec", {})
        annotations = obj["metadata"].get("annotations") or {}
        return cls(
            holder=spec.get("holderIdentity") or None,
            epoch=int(spec.get("leaseTransitions") or 0),
            duration=int(spec.get("leaseDurationSeconds") or DEFAULT_DURATION_SECONDS),
            resource_version=obj["metadata"]["resourceVersion"],
            described={k: str(annotations[k]) for k in HOLDER_ANNOTATIONS if k in annotations},
        )


@dataclass
class ExpiryObserver:
    """This process's first sighting of each foreign Lease record, by resourceVersion."""

    first_seen: dict[tuple[str, str], tuple[str, datetime]] = field(default_factory=dict)

    def expired(self, namespace: str, name: str, view: LeaseView, now: datetime) -> bool:
        key = (namespace, name)
        seen = self.first_seen.get(key)
        if seen is None or seen[0] != view.resource_version:
            self.first_seen[key] = (view.resource_version, now)
            return False
        return (now - seen[1]).total_seconds() > view.duration


@dataclass(frozen=True)
class Outcome:
    """What an acquisition attempt found."""

    acquired: bool
    epoch: int | None = None
    held_by: str | None = None
    next_epoch: int | None = None
    # An expired Lease not taken because its holder's executor may still run: why.
    holder_running: str | None = None


# Given an expired foreign Lease: None when its holder's executor is known stopped or
# never started, else why it may still be running.
HolderCheck = Callable[[LeaseView], str | None]


def read(cluster: Cluster, namespace: str, name: str) -> LeaseView | None:
    obj = cluster.get(LEASE, namespace, name)
    return None if obj is None else LeaseView.of(obj)


def expected_epoch(cluster: Cluster, namespace: str, name: str) -> int:
    """The epoch an acquisition would produce now: persisted before acquiring."""
    view = read(cluster, namespace, name)
    return 1 if view is None else view.epoch + 1


def acquire(
    cluster: Cluster,
    observer: ExpiryObserver,
    *,
    namespace: str,
    name: str,
    holder: str,
    expected: int,
    duration: int = DEFAULT_DURATION_SECONDS,
    describe: Mapping[str, str] | None = None,
    holder_stopped: HolderCheck | None = None,
) -> Outcome:
    """Take the Lease at exactly epoch ``expected``, or say why not.

    Already ours at ``expected`` (a crash after the Lease write) is acquired.
    Free is taken with a resourceVersion precondition; foreign is taken only once
    it has expired by our own clock and ``holder_stopped`` finds its holder's
    executor stopped or never started (without a check, expiry alone decides).
    Any other epoch returns ``next_epoch`` so the caller can persist a fresh
    expectation before trying again. ``describe`` (:data:`HOLDER_ANNOTATIONS`) is
    written with the acquisition, so the next taker can check on us.
    """
    now = cluster.now()
    view = read(cluster, namespace, name)
    annotations = dict(describe or {})
    if view is None:
        if expected != 1:
            return Outcome(False, next_epoch=1)
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
            "spec": _spec(holder, 1, duration, now, now),
        }
        cluster.create(LEASE, body)
        return Outcome(True, epoch=1)
    if view.holder == holder:
        if view.epoch == expected:
            return Outcome(True, epoch=expected)
        return Outcome(False, held_by=holder, next_epoch=view.epoch + 1)
    if view.holder is not None:
        if not observer.expired(namespace, name, view, now):
            return Outcome(False, held_by=view.holder)
        running = holder_stopped(view) if holder_stopped is not None else None
        if running is not None:
            return Outcome(False, held_by=view.holder, holder_running=running)
    if view.epoch + 1 != expected:
        return Outcome(False, next_epoch=view.epoch + 1)
    # Every holder key is written (None removes one), so no word of the last holder stays.
    described: dict[str, str | None] = {k: annotations.get(k) for k in HOLDER_ANNOTATIONS}
    patch = {
        "metadata": {"resourceVersion": view.resource_version, "annotations": described},
        "spec": _spec(holder, expected, duration, now, now),
    }
    cluster.patch(LEASE, namespace, name, patch)
    return Outcome(True, epoch=expected)


def renew(cluster: Cluster, *, namespace: str, name: str, holder: str, epoch: int) -> bool:
    """Renew our tenure; False when the Lease is no longer ours at ``epoch``."""
    view = read(cluster, namespace, name)
    if view is None or view.holder != holder or view.epoch != epoch:
        return False
    patch = {
        "metadata": {"resourceVersion": view.resource_version},
        "spec": {"renewTime": _micro(cluster.now())},
    }
    try:
        cluster.patch(LEASE, namespace, name, patch)
    except errors.Conflict:
        return renew(cluster, namespace=namespace, name=name, holder=holder, epoch=epoch)
    return True


def release(cluster: Cluster, *, namespace: str, name: str, holder: str) -> None:
    """Idempotent: gives the Lease up if it is still ours, does nothing otherwise."""
    view = read(cluster, namespace, name)
    if view is None or view.holder != holder:
        return
    patch = {
        "metadata": {"resourceVersion": view.resource_version},
        "spec": {"holderIdentity": None, "renewTime": None},
    }
    cluster.patch(LEASE, namespace, name, patch)


def _spec(
    holder: str, epoch: int, duration: int, acquired: datetime, renewed: datetime
) -> dict[str, Any]:
    return {
        "holderIdentity": holder,
        "leaseDurationSeconds": duration,
        "leaseTransitions": epoch,
        "acquireTime": _micro(acquired),
        "renewTime": _micro(renewed),
    }
