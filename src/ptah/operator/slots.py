"""Operation slots: at most ``limit`` claimed operations in flight at once.

Every operation runs a Job, and the Jobs share the cluster's nodes with the apiserver
this operator talks to. Unbounded, a burst of new resources starts as many runner Pods
at once; on a small cluster they starve the apiserver, and every pass in flight (the
accounting of a finished Job, the release of its Lease) waits behind them. So a new
claim is admitted only while fewer than ``limit`` operations are in flight; one refused
waits in order (first refused, first admitted) and is woken when a slot frees.

This is a throttle, not a safety rule: no durable write depends on it, and a count that
is briefly off only admits a little early or late. The count is read from the watch
(a resource is in flight while its last-seen status names an active operation), plus
the keys admitted whose claim the watch has not shown yet: those count for ``grace``
seconds at most, so a claim whose write failed does not hold its slot for ever.
Operations already in flight are never stopped and only new claims wait; the reading that
proves an uncertain run never does (the lifecycle does not ask for a slot then).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)


def in_flight(obj: dict[str, Any] | None) -> bool:
    """Whether the resource, as last seen, has a claimed operation."""
    return bool(((obj or {}).get("status") or {}).get("activeOperation"))


class OperationSlots(Generic[K]):
    def __init__(
        self,
        limit: int | None,
        wake: Callable[[K], None],
        *,
        grace: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if limit is not None and limit < 1:
            raise ValueError(f"operation slots: limit must be at least 1, not {limit}")
        self.limit = limit
        self._wake = wake
        self._grace = grace
        self._clock = clock
        self._lock = threading.Lock()
        self._running: set[K] = set()  # in flight, as the watch last showed them
        self._admitted: dict[K, float] = {}  # admitted, claim not seen yet -> since when
        self._queued: dict[K, None] = {}  # refused, in the order they were (first first)

    def saw(self, key: K, obj: dict[str, Any] | None) -> None:
        """The watch's latest copy of ``key`` (None: deleted); wakes waiters when a
        slot freed."""
        with self._lock:
            was = key in self._running
            if in_flight(obj):
                self._running.add(key)
                self._admitted.pop(key, None)
            else:
                self._running.discard(key)
            if obj is None:
                self._admitted.pop(key, None)
                self._queued.pop(key, None)
            freed = was and key not in self._running
            woken = self._next_locked() if freed and self.limit is not None else []
        for k in woken:
            self._wake(k)

    def admit(self, key: K) -> bool:
        """Whether ``key`` may claim now; when not, it waits its turn (see module)."""
        if self.limit is None:
            return True
        with self._lock:
            if key in self._running or key in self._admitted:
                return True
            free = self._free_locked()
            ahead = list(self._queued)[:free]
            if free > 0 and (key in ahead or len(ahead) < free):
                self._queued.pop(key, None)
                self._admitted[key] = self._clock()
                return True
            self._queued.setdefault(key, None)
            return False

    def leave(self, key: K) -> None:
        """``key``'s pass ended without being refused: it waits no more (it claimed, or
        needs no claim now); its place goes to the next in order if a slot is free."""
        if self.limit is None:
            return
        with self._lock:
            if key not in self._queued:
                return
            del self._queued[key]
            woken = self._next_locked()
        for k in woken:
            self._wake(k)

    def _free_locked(self) -> int:
        assert self.limit is not None
        now = self._clock()
        for k, since in list(self._admitted.items()):
            if now - since > self._grace:
                del self._admitted[k]
        return self.limit - len(self._running) - len(self._admitted)

    def _next_locked(self) -> list[K]:
        """The waiting keys the free slots go to, first refused first."""
        return list(self._queued)[: max(0, self._free_locked())]

    def in_flight(self) -> int:
        """Operations counted against the limit now (claimed or just admitted)."""
        with self._lock:
            return len(self._running) + len(self._admitted)

    def waiting(self) -> int:
        with self._lock:
            return len(self._queued)
