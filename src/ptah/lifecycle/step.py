"""What a step returns, and how it publishes where the resource stands."""

from __future__ import annotations

from dataclasses import dataclass, field

from ptah.lifecycle import writes
from ptah.lifecycle.conditions import differs, observation
from ptah.lifecycle.context import Pass
from ptah.lifecycle.family import Observe
from ptah.lifecycle.report import PassReport


@dataclass(frozen=True)
class Result:
    """When to run the next pass: now (0), after a delay, or on the next event (None);
    and what the pass did (``report``, for telemetry only)."""

    requeue_after: float | None = None
    report: PassReport = field(default_factory=PassReport, compare=False)


AGAIN = Result(0.0)


def observe(p: Pass, obs: Observe) -> Result:
    """Publish ``obs``; a pass that changes nothing writes nothing."""
    fields = observation(p, obs)
    if differs(p, fields):
        writes.write_observation(p, fields)
    return Result(obs.requeue_after)


def seconds_since(p: Pass, stamp: str | None, not_before: str) -> float | None:
    """Seconds since ``stamp`` (negative when it lies ahead), or None when there is no
    stamp or it is older than ``not_before``."""
    if not stamp or stamp < not_before:
        return None
    return p.seconds_since(stamp)


def next_attempt_number(p: Pass) -> int:
    return (p.status.next_attempt or 1) + 1
