"""The one Event builder: every Event the operator records (a lifecycle step, a phase
change, a rollout's progress) has the same shape, so ``kubectl describe`` and the tests
read them all alike.

An Event is telemetry, not a durable record: nothing the lifecycle decides reads one,
and a lost one loses no state. So a pass never waits for one. Every caller records
through an ``EventSink``: ``record_event`` writes at once (the simulation and the
in-memory tests, which read Events right after a pass), and the operator's
``EventEmitter`` hands each Event to one background writer, so the create never sits
between a pass's durable write and the step after it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Protocol

import structlog

from ptah.kube import errors
from ptah.kube.clock import rfc3339
from ptah.kube.kinds import EVENT
from ptah.kube.port import Cluster, Obj

log = structlog.get_logger("ptah.events")

#: The apiserver keeps an Event's message short; a longer one is cut here, not refused.
MESSAGE_LIMIT = 1024


class EventSink(Protocol):
    """Where a pass records an Event about ``obj`` (see the module docstring)."""

    def __call__(
        self,
        cluster: Cluster,
        obj: Obj,
        reason: str,
        message: str,
        *,
        warning: bool,
        component: str,
    ) -> None: ...


def event_body(
    cluster: Cluster, obj: Obj, reason: str, message: str, *, warning: bool, component: str
) -> Obj:
    """The Event about ``obj`` as it is now (its resourceVersion, this instant)."""
    meta = obj["metadata"]
    now = rfc3339(cluster.now())
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
        "involvedObject": {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
            "resourceVersion": meta.get("resourceVersion"),
        },
        "reason": reason,
        "message": message[:MESSAGE_LIMIT],
        "type": "Warning" if warning else "Normal",
        "source": {"component": component},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


def _create(cluster: Cluster, body: Obj) -> bool:
    """Best effort: a refused create is dropped rather than failing anyone."""
    try:
        cluster.create(EVENT, body)
    except errors.ApiError:
        return False
    return True


def record_event(
    cluster: Cluster, obj: Obj, reason: str, message: str, *, warning: bool, component: str
) -> None:
    """Create an Event about ``obj`` now, in the caller's thread. Best effort."""
    _create(
        cluster,
        event_body(cluster, obj, reason, message, warning=warning, component=component),
    )


class EventEmitter:
    """One writer thread for every Event of the process, in the order they were
    recorded. ``__call__`` (an ``EventSink``) builds the Event at once, as the object
    and the clock are then, and returns without waiting for the apiserver: a pass
    records an Event after its durable write, and its next step (or the next pass of a
    chain) no longer waits for the create. Still best effort: a full queue drops the
    newest Event (counted, never blocking a pass), and a refused create is not retried.
    ``outcome`` is told ``written``, ``refused`` or ``dropped`` for each one."""

    def __init__(
        self, capacity: int = 1000, outcome: Callable[[str], None] = lambda _: None
    ) -> None:
        self._queue: queue.Queue[tuple[Cluster, Obj] | None] = queue.Queue(capacity)
        self._outcome = outcome
        self._thread: threading.Thread | None = None

    def __call__(
        self,
        cluster: Cluster,
        obj: Obj,
        reason: str,
        message: str,
        *,
        warning: bool,
        component: str,
    ) -> None:
        body = event_body(cluster, obj, reason, message, warning=warning, component=component)
        try:
            self._queue.put_nowait((cluster, body))
        except queue.Full:
            self._outcome("dropped")

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="events", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Write what is queued (for at most ``timeout`` seconds), then stop."""
        if self._thread is None:
            return
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            return  # the writer is stuck: it is a daemon thread, and Events are best effort
        self._thread.join(timeout)

    def pending(self) -> int:
        return self._queue.qsize()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            try:
                written = _create(*item)
            except Exception as exc:  # a bug in one Event must not stop the others
                log.warning("event_failed", error=type(exc).__name__)
                written = False
            self._outcome("written" if written else "refused")
