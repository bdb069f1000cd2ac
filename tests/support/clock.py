"""A monotonic clock the test moves by hand (``clock.t += 5``)."""

from __future__ import annotations


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t
