"""Open a target from its URL: the only place Ptah turns a URL into a connection."""

from __future__ import annotations

from ptah.engines.base import EngineError, Target, TargetUnavailable
from ptah.engines.urls import DbUrl, UrlError, parse_url, scrub

__all__ = ["open_target", "open_url", "scrub"]


def open_target(url: str) -> Target:
    """Connect to ``url`` and return the opened :class:`Target`.

    Raises :class:`TargetUnavailable` with a scrubbed message on any failure.
    """
    try:
        parsed = parse_url(url)
    except UrlError as exc:
        raise TargetUnavailable(str(exc)) from None
    return open_url(parsed)


def open_url(parsed: DbUrl) -> Target:
    """Connect to an already parsed URL."""
    try:
        if parsed.engine == "postgres":
            from ptah.engines.postgres.target import PostgresTarget

            return PostgresTarget.open(parsed)
        if parsed.engine == "mysql":
            from ptah.engines.mysql.target import MysqlTarget

            return MysqlTarget.open(parsed)
        from ptah.engines.sqlite.target import SqliteTarget

        return SqliteTarget.open(parsed)
    except EngineError:
        raise
    except Exception as exc:
        message = scrub(f"cannot open {parsed.redacted()}: {exc}", *parsed.secrets)
        raise TargetUnavailable(message) from None
