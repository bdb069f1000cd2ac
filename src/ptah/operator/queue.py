"""A deduplicating, rate-limited work queue keyed by resource.

The semantics are client-go's workqueue, because the lifecycle depends on two
of them: a key is never processed by two workers at once (a pass assumes it is
the only writer of its resource in this process), and a key added while it is
being processed runs again afterwards, so no event is lost. A key waiting in
the queue absorbs further adds (a burst of events is one pass).

Failed passes back off per key, exponentially; a global token bucket bounds
the overall pass rate so a storm of events cannot hammer the apiserver.

An ``urgent`` add goes ahead of the keys waiting in order: the operator uses it for
work in flight (a Job or Pod of the key moved), so accounting a finished Job and
handing its Lease back never waits behind a queue of new claims. Urgency changes only
the order: a key is still deduplicated, never processed twice at once, never lost.
A worker running a chain of passes for a key it did not take as urgent asks
``urgent_waiting`` between passes and, when so, hands the key back with ``resume``: it
goes first among the keys waiting in order, behind the urgent ones.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass
class RateLimiter(Generic[K]):
    """Per-key exponential back-off (base * 2**failures, capped) combined with a
    global token bucket (``qps``, ``burst``): the larger delay wins."""

    base: float = 0.5
    cap: float = 300.0
    qps: float = 20.0
    burst: int = 100
    clock: Callable[[], float] = time.monotonic
    _failures: dict[K, int] = field(default_factory=dict)
    _tokens: float | None = None  # full on first use
    _last: float = 0.0

    def when(self, key: K) -> float:
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        per_key = min(self.cap, self.base * (2**n))
        return float(max(per_key, self._bucket()))

    def _bucket(self) -> float:
        now = self.clock()
        tokens = float(self.burst) if self._tokens is None else self._tokens
        tokens = min(float(self.burst), tokens + (now - self._last) * self.qps) - 1.0
        self._tokens, self._last = tokens, now
        return 0.0 if tokens >= 0 else -tokens / self.qps

    def failures(self, key: K) -> int:
        return self._failures.get(key, 0)

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)


class ShutDown(Exception):
    """The queue was shut down; workers return."""


class WorkQueue(Generic[K]):
    def __init__(
        self,
        limiter: RateLimiter[K] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._limiter: RateLimiter[K] = limiter or RateLimiter()
        self._clock = clock
        self._cond = threading.Condition()
        self._ready: deque[K] = deque()
        self._urgent: deque[K] = deque()  # taken before _ready
        self._dirty: set[K] = set()
        self._dirty_urgent: set[K] = set()  # dirty keys added urgent while processing
        self._dirty_resume: set[K] = set()  # dirty keys resumed while processing
        self._taken_urgent: set[K] = set()  # keys being processed that were taken urgent
        self._processing: set[K] = set()
        self._delayed: list[tuple[float, int, K]] = []
        self._due: dict[K, float] = {}
        self._seq = itertools.count()
        self._shutdown = False
        self._since: dict[K, float] = {}  # dirty key -> when it became so
        self._waited: dict[K, float] = {}  # key being processed -> how long it waited

    # -- adding --

    def add(self, key: K, urgent: bool = False) -> None:
        with self._cond:
            self._add_locked(key, urgent)

    def _add_locked(self, key: K, urgent: bool = False) -> None:
        if self._shutdown:
            return
        if key in self._dirty:
            if urgent and key in self._processing:
                self._dirty_urgent.add(key)
            elif urgent and key not in self._urgent:
                self._ready.remove(key)  # waiting in order: move it ahead
                self._urgent.append(key)
            return
        self._dirty.add(key)
        self._since.setdefault(key, self._clock())
        if key in self._processing:
            if urgent:
                self._dirty_urgent.add(key)
            return
        (self._urgent if urgent else self._ready).append(key)
        self._cond.notify()

    def resume(self, key: K) -> None:
        """Queue ``key`` again first among the keys waiting in order (behind the urgent
        ones): a chain of passes cut short so that urgent work need not wait for it."""
        with self._cond:
            if self._shutdown:
                return
            if key in self._dirty:
                return  # already waiting (or due to run again): it keeps its place
            self._dirty.add(key)
            if key in self._processing:
                self._dirty_resume.add(key)
                return
            self._ready.appendleft(key)
            self._cond.notify()

    def urgent_waiting(self) -> bool:
        """Whether a key added urgent is waiting for a worker."""
        with self._cond:
            return bool(self._urgent)

    def waited(self, key: K) -> float:
        """How long ``key``, being processed, waited in the queue once due (seconds)."""
        with self._cond:
            return self._waited.get(key, 0.0)

    def taken_urgent(self, key: K) -> bool:
        """Whether ``key``, being processed, was taken from the urgent keys."""
        with self._cond:
            return key in self._taken_urgent

    def add_after(self, key: K, delay: float) -> None:
        """Add ``key`` after ``delay`` seconds; an earlier pending time for it wins."""
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            if self._shutdown:
                return
            at = self._clock() + delay
            if key in self._due and self._due[key] <= at:
                return
            self._due[key] = at
            heapq.heappush(self._delayed, (at, next(self._seq), key))
            self._cond.notify()

    def reschedule(self, key: K, delay: float | None) -> None:
        """Replace ``key``'s pending time with ``delay`` (None: no pending time), even a
        sooner one; a key already waiting or being processed is left as it is."""
        with self._cond:
            self._due.pop(key, None)  # its heap entry no longer matches: dropped when due
        if delay is not None:
            self.add_after(key, delay)

    def add_rate_limited(self, key: K) -> float:
        with self._cond:
            delay = self._limiter.when(key)
            self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        with self._cond:
            self._limiter.forget(key)

    def failures(self, key: K) -> int:
        with self._cond:
            return self._limiter.failures(key)

    # -- taking --

    def get(self, timeout: float | None = None) -> K | None:
        """The next key to process (marked processing until ``done``), None on timeout.
        Raises ShutDown once the queue is shut down."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while True:
                if self._shutdown:
                    raise ShutDown
                self._promote_due()
                if self._urgent or self._ready:
                    if self._urgent:
                        key = self._urgent.popleft()
                        self._taken_urgent.add(key)
                    else:
                        key = self._ready.popleft()
                    self._dirty.discard(key)
                    self._processing.add(key)
                    since = self._since.pop(key, None)
                    self._waited[key] = 0.0 if since is None else self._clock() - since
                    return key
                wait = None if deadline is None else deadline - self._clock()
                if self._delayed:
                    next_due = self._delayed[0][0] - self._clock()
                    wait = next_due if wait is None else min(wait, next_due)
                if wait is not None and wait <= 0:
                    if deadline is not None and self._clock() >= deadline:
                        return None
                    continue
                self._cond.wait(wait)

    def _promote_due(self) -> None:
        now = self._clock()
        while self._delayed and self._delayed[0][0] <= now:
            at, _, key = heapq.heappop(self._delayed)
            if self._due.get(key) == at:
                del self._due[key]
                self._add_locked(key)

    def done(self, key: K) -> None:
        with self._cond:
            self._processing.discard(key)
            self._taken_urgent.discard(key)
            self._waited.pop(key, None)
            urgent = key in self._dirty_urgent
            resumed = key in self._dirty_resume
            self._dirty_urgent.discard(key)
            self._dirty_resume.discard(key)
            if key in self._dirty:
                if urgent:
                    self._urgent.append(key)
                elif resumed:
                    self._ready.appendleft(key)
                else:
                    self._ready.append(key)
                self._cond.notify()

    # -- lifecycle --

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._urgent) + len(self._ready) + len(self._delayed)

    def processing(self) -> int:
        with self._cond:
            return len(self._processing)
