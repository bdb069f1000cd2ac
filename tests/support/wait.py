"""Polling: the one place a test waits. Every wait polls for evidence (a status, a
row, a pass count, an Event) and fails naming what it waited for; no test sleeps."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(
    what: str, probe: Callable[[], Any], timeout: float = 60.0, interval: float = 0.2
) -> Any:
    """Poll ``probe`` until it returns something truthy, and return that; fail naming
    ``what``. The probe runs at least once, so a zero timeout means "now"."""
    deadline = time.monotonic() + timeout
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() >= deadline:
            break
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
