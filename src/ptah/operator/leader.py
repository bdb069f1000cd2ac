"""Lease-based leader election among operator replicas.

One Lease (``ptah-operator-leader`` in the operator namespace) names the replica
that reconciles. A candidate takes it when it is free or when the holder's record
has not changed for a whole lease duration *by this process's own clock* (as the
target Leases do, see ``ptah.targetlock``): another replica's renewTime says
nothing about clocks here. The leader renews with a resourceVersion precondition;
if it cannot renew within ``renew_deadline`` it has lost, and says so at once
(``is_leader`` turns False before anyone else may take over, because the renew
deadline is shorter than the lease duration).

Losing leadership must stop reconciling at once: the controller checks
``is_leader`` before every pass and before every durable write.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from ptah.kube import errors
from ptah.kube.kinds import LEASE
from ptah.kube.port import Cluster

LEADER_LEASE = "ptah-operator-leader"


def _micro(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        cluster: Cluster,
        *,
        namespace: str,
        identity: str,
        name: str = LEADER_LEASE,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        on_lost: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        assert renew_deadline < lease_duration
        self.cluster = cluster
        self.namespace = namespace
        self.identity = identity
        self.name = name
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.on_lost = on_lost
        self.clock = clock
        self.stop = threading.Event()
        self.elected = threading.Event()
        self._leader = False
        self._last_renew = 0.0
        self._seen: tuple[str, float] | None = None  # (resourceVersion, first seen)
        self._held_by_other = False

    def is_leader(self) -> bool:
        """True only while this replica holds a tenure renewed within the renew deadline."""
        return self._leader and (self.clock() - self._last_renew) < self.renew_deadline

    # -- one attempt --

    def try_acquire_or_renew(self) -> bool:
        self._held_by_other = False
        now = self.cluster.now()
        lease = self.cluster.get(LEASE, self.namespace, self.name)
        if lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(now, transitions=0, acquired=now),
            }
            self.cluster.create(LEASE, body)
            return True
        spec: dict[str, Any] = lease.get("spec") or {}
        rv = str(lease["metadata"]["resourceVersion"])
        holder = spec.get("holderIdentity")
        transitions = int(spec.get("leaseTransitions") or 0)
        if holder == self.identity:
            patch = {"metadata": {"resourceVersion": rv}, "spec": {"renewTime": _micro(now)}}
            self.cluster.patch(LEASE, self.namespace, self.name, patch)
            return True
        if holder and not self._expired(rv, float(spec.get("leaseDurationSeconds") or 15)):
            self._held_by_other = True
            return False
        patch = {
            "metadata": {"resourceVersion": rv},
            "spec": self._spec(now, transitions=transitions + 1, acquired=now),
        }
        self.cluster.patch(LEASE, self.namespace, self.name, patch)
        return True

    def _expired(self, rv: str, duration: float) -> bool:
        now = self.clock()
        if self._seen is None or self._seen[0] != rv:
            self._seen = (rv, now)
            return False
        return now - self._seen[1] > duration

    def _spec(self, now: datetime, *, transitions: int, acquired: datetime) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_duration),
            "leaseTransitions": transitions,
            "acquireTime": _micro(acquired),
            "renewTime": _micro(now),
        }

    # -- the loop --

    def run(self) -> None:
        """Campaign until elected, then renew until stopped or lost."""
        while not self.stop.is_set():
            started = self.clock()
            try:
                ok = self.try_acquire_or_renew()
            except errors.ApiError:
                ok = False
            if ok:
                self._last_renew = started
                if not self._leader:
                    self._leader = True
                    self.elected.set()
            elif self._leader and (
                self._held_by_other or self.clock() - self._last_renew >= self.renew_deadline
            ):
                # Another replica holds it, or we could not renew in time: lost. (A single
                # Conflict or API error is retried; the renew deadline decides.)
                self._lose()
                return
            if self.stop.wait(self.retry_period):
                break
        if self._leader:
            self._leader = False
            self.release()

    def _lose(self) -> None:
        self._leader = False
        if self.on_lost is not None:
            self.on_lost()

    def release(self) -> None:
        """On graceful shutdown: hand the Lease over at once instead of letting it expire."""
        try:
            lease = self.cluster.get(LEASE, self.namespace, self.name)
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            patch = {
                "metadata": {"resourceVersion": lease["metadata"]["resourceVersion"]},
                "spec": {"holderIdentity": None, "renewTime": None},
            }
            self.cluster.patch(LEASE, self.namespace, self.name, patch)
        except errors.ApiError:
            return

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, name="leader-election", daemon=True)
        thread.start()
        return thread
