"""Clocks for the cluster port.

The lifecycle never reads the wall clock itself; it asks the port. On a real
cluster that is the wall clock; in the simulation it is a ``SimClock`` that only
moves when the simulation says so, which keeps runs deterministic and lets one
schedule span hours of Lease expiry without sleeping.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta
from typing import Protocol

SIM_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""


class WallClock:
    """The real time, UTC."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class SimClock:
    """A clock that stands still until ``advance`` is called."""

    def __init__(self, start: datetime = SIM_EPOCH) -> None:
        if start.tzinfo is None:
            raise ValueError("SimClock needs a timezone-aware start")
        self._now = start.astimezone(UTC)

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> datetime:
        """Move forward (never back: real clocks the lifecycle relies on are monotonic enough)."""
        if seconds < 0:
            raise ValueError("a SimClock only moves forward")
        self._now += timedelta(seconds=seconds)
        return self._now


def rfc3339(t: datetime) -> str:
    """Kubernetes ``Time`` format: second precision, ``Z`` suffix."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@functools.lru_cache(maxsize=4096)
def parse_rfc3339(text: str) -> datetime:
    """The inverse of :func:`rfc3339` (second precision, ``Z``). Cached: the same
    stamps are read on every pass, and a datetime is immutable."""
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
