"""The operator process as a list of runnables, started in order and stopped in the
reverse order.

The order is the point. The metrics and probe servers come first, so a process that
hangs later is still observable; the leader election before the workers, so no pass
runs before a replica knows whether it leads; the workers before the watches, so the
first events find someone to take them. Shutdown runs backwards: the watches stop
delivering, the workers let the passes in flight finish (each is one short step
ending in a durable write or nothing), then the election hands the leader Lease over
so a standby takes over at once instead of after expiry, and the servers go last.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import structlog

log = structlog.get_logger("ptah.operator")


@dataclass(frozen=True)
class Runnable:
    """One part of the process: how it starts, and how it stops (bounded: ``stop``
    returns once the part has stopped or gave up waiting)."""

    name: str
    start: Callable[[], None]
    stop: Callable[[], None] = lambda: None


class Manager:
    """Starts ``runnables`` in their order, stops the started ones in reverse."""

    def __init__(self, runnables: Sequence[Runnable]) -> None:
        self.runnables = list(runnables)
        self.started: list[Runnable] = []

    def start(self) -> None:
        """Start every runnable; if one fails to start, stop those already started (in
        reverse) and raise."""
        for r in self.runnables:
            try:
                r.start()
            except BaseException:
                log.error("start_failed", runnable=r.name)
                self.stop()
                raise
            self.started.append(r)

    def stop(self) -> None:
        """Stop the started runnables, last started first; one that fails to stop is
        logged and does not keep the others running."""
        while self.started:
            r = self.started.pop()
            try:
                r.stop()
            except Exception as exc:
                log.error("stop_failed", runnable=r.name, error=type(exc).__name__)

    def run(self, stop: threading.Event, poll: float = 1.0) -> None:
        """Start, wait for ``stop``, then shut down in order."""
        self.start()
        try:
            while not stop.wait(poll):
                pass
        finally:
            self.stop()
