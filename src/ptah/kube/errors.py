"""Errors the cluster port raises, the same for the real API and the in-memory one.

Callers branch on these types, never on HTTP status codes, so the lifecycle reads
alike on both ports.
"""

from __future__ import annotations


class ApiError(Exception):
    """Any API failure. ``uncertain`` means the write may have taken effect."""

    status: int = 500
    reason: str = "InternalError"

    def __init__(self, message: str = "", *, uncertain: bool = False) -> None:
        super().__init__(message or self.reason)
        self.uncertain = uncertain


class NotFound(ApiError):
    status = 404
    reason = "NotFound"


class AlreadyExists(ApiError):
    status = 409
    reason = "AlreadyExists"


class Conflict(ApiError):
    """resourceVersion precondition failed: someone wrote since we read."""

    status = 409
    reason = "Conflict"


class Invalid(ApiError):
    status = 422
    reason = "Invalid"


class Forbidden(ApiError):
    status = 403
    reason = "Forbidden"


class Unavailable(ApiError):
    """Transport or server failure; the request may or may not have been applied."""

    status = 503
    reason = "ServiceUnavailable"


def from_status(status: int, message: str, reason: str = "") -> ApiError:
    """Map an HTTP status (and Kubernetes reason) to a port error."""
    if status == 404:
        return NotFound(message)
    if status == 409:
        return AlreadyExists(message) if reason == "AlreadyExists" else Conflict(message)
    if status == 422:
        return Invalid(message)
    if status == 403:
        return Forbidden(message)
    if status >= 500 or status == 0:
        return Unavailable(message, uncertain=True)
    err = ApiError(message)
    err.status = status
    return err
