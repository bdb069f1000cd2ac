"""A staged release (the record a withheld Lease release lives in) for the unit tests of
its evidence and its hold."""

from __future__ import annotations

from typing import Any

from ptah.api.common import LockRelease


def staged_release(operation_id: str = "apply-1", **fields: Any) -> LockRelease:
    """The release of ``operation_id``'s Lease, staged with a 180 s hold, its Job ``j``."""
    return LockRelease(
        operation_id=operation_id,
        lease_name="l",
        holder=f"h/{operation_id}",
        job_name="j",
        hold_seconds=180,
        staged_at="2026-01-01T00:00:00Z",
        **fields,
    )
