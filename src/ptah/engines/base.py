"""The engine layer's small, stable surface: an opened target database.

A :class:`Target` is the one connection the runner (and the migration runner
built on it) uses. It knows which engine it is, reports the identity of the
database it actually opened, and scrubs credentials out of any text before
that text leaves the process. Everything engine-specific (inspection, diff,
scratch loading) hangs off :attr:`Target.engine_ops`, so callers that only
need a connection and an identity never depend on the planner.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ptah.engines.urls import DbUrl, EngineName, scrub

if TYPE_CHECKING:
    from ptah.engines.report import DatabaseIdentity

__all__ = [
    "DesiredSchemaInvalid",
    "EngineError",
    "EngineName",
    "ScratchUnavailable",
    "Target",
    "TargetUnavailable",
]


class EngineError(Exception):
    """A database-side failure, with a message that is already scrubbed.

    ``reason`` is a short CamelCase word suitable for a frame's ``reason``.
    """

    def __init__(self, message: str, reason: str = "EngineError") -> None:
        super().__init__(message)
        self.reason = reason


class NothingRan(EngineError):
    """An engine's check before a run's first statement stopped it (the target's rows
    would fail a statement part way): nothing was changed. Its ``reason`` says which
    check, and becomes the run's."""


class TargetUnavailable(EngineError):
    """The target could not be opened. ``reason`` names the failure class
    (:mod:`ptah.failures`): unreachable, credentials refused, no such database,
    not a database, bad URL."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message, reason)


class ScratchUnavailable(EngineError):
    """No scratch database to normalise the desired schema in."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "ScratchUnavailable")


class DesiredSchemaInvalid(ScratchUnavailable):
    """The desired source does not load: the same source will fail the same way again.

    ``line``: the desired file's line of the statement that failed, when known."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.reason = "DesiredSchemaInvalid"
        self.line = line


class Target(ABC):
    """An opened database. Use as a context manager; ``close`` is idempotent."""

    engine: EngineName

    def __init__(self, url: DbUrl, connection: Any) -> None:
        self.url = url
        self.connection = connection
        self._closed = False

    @abstractmethod
    def identity(self) -> DatabaseIdentity:
        """Who we are actually talking to, as the database reports it."""

    def _identity(self, key: dict[str, str], details: dict[str, str]) -> DatabaseIdentity:
        """The identity record of this engine's database (the record's module loads once
        the target is open: see ``ptah.runner.main.AFTER_CONNECT``)."""
        from ptah.engines.report import DatabaseIdentity

        return DatabaseIdentity(engine=self.engine, key=key, details=details)

    def scrub(self, text: str) -> str:
        """``text`` without this target's credentials or any URL userinfo."""
        return scrub(text, *self.url.secrets)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # Closing a broken connection must not mask the error that broke it.
        with contextlib.suppress(Exception):
            self.connection.close()

    def __enter__(self) -> Target:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
