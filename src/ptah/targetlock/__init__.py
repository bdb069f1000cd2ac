"""The realm: one Lease per coordination digest of a physical database.

Two resources that address one database, however their targets are spelled,
derive one digest from the identity the database itself reported, and so
serialize through one Lease. The Lease's ``leaseTransitions`` is the epoch: each
acquisition raises it by one, so a claim can tell its own tenure from a later one.

Foreign-lease expiry is measured from this process's own first observation of
an unchanged record (same resourceVersion), never from the renewTime another
node wrote: clocks disagree, and a paused holder's last renewTime says nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ptah.kube import errors
from ptah.kube.kinds import LEASE
from ptah.kube.port import Cluster

DEFAULT_DURATION_SECONDS = 120


def _micro(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class LeaseView:
    holder: str | None
    epoch: int
    duration: int
    resource_version: str

    @classmethod
    def of(cls, obj: dict[str, Any]) -> LeaseView:
        spec = obj.get("spec", {})
        return cls(
            holder=spec.get("holderIdentity") or None,
            epoch=int(spec.get("leaseTransitions") or 0),
            duration=int(spec.get("leaseDurationSeconds") or DEFAULT_DURATION_SECONDS),
            resource_version=obj["metadata"]["resourceVersion"],
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
) -> Outcome:
    """Take the Lease at exactly epoch ``expected``, or say why not.

    Already ours at ``expected`` (a crash after the Lease write) is acquired.
    Free, or foreign and expired by our own clock, is taken with a
    resourceVersion precondition. Any other epoch returns ``next_epoch`` so the
    caller can persist a fresh expectation before trying again.
    """
    now = cluster.now()
    view = read(cluster, namespace, name)
    if view is None:
        if expected != 1:
            return Outcome(False, next_epoch=1)
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": namespace},
            "spec": _spec(holder, 1, duration, now, now),
        }
        cluster.create(LEASE, body)
        return Outcome(True, epoch=1)
    if view.holder == holder:
        if view.epoch == expected:
            return Outcome(True, epoch=expected)
        return Outcome(False, held_by=holder, next_epoch=view.epoch + 1)
    if view.holder is not None and not observer.expired(namespace, name, view, now):
        return Outcome(False, held_by=view.holder)
    if view.epoch + 1 != expected:
        return Outcome(False, next_epoch=view.epoch + 1)
    patch = {
        "metadata": {"resourceVersion": view.resource_version},
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
