"""Open a target from its URL: the only place Ptah turns a URL into a connection.

A failure to open says, in one line, what failed and where, in the terms of its
failure class (:mod:`ptah.failures`): the server cannot be reached, it refused
the credentials, the database does not exist, the file is not a database, the URL is
bad. The driver's own words follow; credentials never do.
"""

from __future__ import annotations

import os
import re

from ptah import failures
from ptah.engines.base import EngineError, Target, TargetUnavailable
from ptah.engines.urls import DbUrl, UrlError, parse_url, scrub

__all__ = ["open_target", "open_url", "scrub"]

_LABEL = {"postgres": "PostgreSQL", "mysql": "MariaDB/MySQL", "sqlite": "SQLite"}
_AUTH = (
    "password authentication failed",
    "authentication failed",
    "no password supplied",
    "pg_hba.conf",
    "access denied for user",
)
_PG_NO_DB = re.compile(r'database "[^"]*" does not exist')
_MYSQL_AUTH_CODES = {1044, 1045, 1698}
_MYSQL_NO_DB = 1049


def open_target(url: str, *, read_only: bool = False) -> Target:
    """Connect to ``url`` and return the opened :class:`Target`; ``read_only`` for a
    reading that must leave no trace (see :meth:`SqliteTarget.open`: the servers' engines
    create nothing on opening either way).

    Raises :class:`TargetUnavailable` with a scrubbed one-line message on any failure.
    """
    try:
        parsed = parse_url(url)
    except UrlError as exc:
        raise bad_url(exc) from None
    return open_url(parsed, read_only=read_only)


def bad_url(exc: UrlError) -> TargetUnavailable:
    return TargetUnavailable(f"bad database URL: {exc}", failures.BAD_URL.reason)


def open_url(parsed: DbUrl, *, read_only: bool = False) -> Target:
    """Connect to an already parsed URL (``read_only``: see :func:`open_target`)."""
    try:
        if parsed.engine == "postgres":
            from ptah.engines.postgres.target import PostgresTarget

            return PostgresTarget.open(parsed)
        if parsed.engine == "mysql":
            from ptah.engines.mysql.target import MysqlTarget

            return MysqlTarget.open(parsed)
        return _open_sqlite(parsed, read_only)
    except EngineError:
        raise
    except Exception as exc:
        raise classify(exc, parsed) from None


def _open_sqlite(parsed: DbUrl, read_only: bool) -> Target:
    from ptah.engines.sqlite.target import SqliteTarget

    path = parsed.path
    if path != ":memory:":
        where = os.path.realpath(path)
        if not os.path.isdir(os.path.dirname(where)):
            raise TargetUnavailable(
                f"the directory of the SQLite database {where} does not exist",
                failures.DATABASE_NOT_FOUND.reason,
            )
        if os.path.isdir(where):
            raise TargetUnavailable(
                f"{where} is a directory, not an SQLite database file",
                failures.NOT_A_DATABASE.reason,
            )
        if os.path.exists(where) and not os.path.isfile(where):
            # A device or a FIFO: /dev/null reads as an empty database (a plan against it
            # said "No changes" and an apply would write beside it, in /dev).
            raise TargetUnavailable(
                f"{where} is not a regular file, so not an SQLite database file",
                failures.NOT_A_DATABASE.reason,
            )
    target = SqliteTarget.open(parsed, read_only=read_only)
    try:
        # SQLite reads the file only when first asked: make "not a database" (or a
        # schema it cannot read: a damaged file) an opening failure, not a surprise
        # half-way through an operation.
        target.connection.execute("SELECT count(sql) FROM sqlite_master").fetchone()
    except Exception:
        target.close()
        raise
    return target


def _detail(text: str) -> str:
    """The driver's message as one line, without its connection preamble."""
    line = " ".join(text.split())
    match = re.search(r".*failed: (?:FATAL: +)?(.*)$", line)
    return match.group(1) if match else line


def classify(exc: BaseException, url: DbUrl) -> TargetUnavailable:
    """The failure class and one-line message for a driver's error while opening."""
    text = scrub(str(exc), *url.secrets) or type(exc).__name__
    detail = _detail(text)
    if len(exc.args) > 1 and isinstance(exc.args[0], int):  # PyMySQL: (code, message)
        detail = _detail(scrub(str(exc.args[1]), *url.secrets))
    label = _LABEL[url.engine]
    if url.engine == "sqlite":
        where = os.path.realpath(url.path) if url.path != ":memory:" else url.path
        name = str(getattr(exc, "sqlite_errorname", ""))
        if name == "SQLITE_NOTADB" or "not a database" in text:
            return TargetUnavailable(
                f"{where} is not an SQLite database ({detail})", failures.NOT_A_DATABASE.reason
            )
        if name == "SQLITE_CORRUPT" or "malformed" in text:
            # Damaged, not busy: trying again cannot help (TargetUnavailable is transient).
            return TargetUnavailable(
                f"{where} is not a usable SQLite database ({detail})",
                failures.NOT_A_DATABASE.reason,
            )
        return TargetUnavailable(
            f"cannot open the SQLite database {where}: {detail}", failures.UNREACHABLE.reason
        )
    server = f"the {label} server at {url.host or 'localhost'}:{url.port or _port(url)}"
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
    lowered = text.lower()
    if code in _MYSQL_AUTH_CODES or any(marker in lowered for marker in _AUTH):
        return TargetUnavailable(
            f"{server} refused the credentials of user {url.user!r}: {detail}",
            failures.AUTH_FAILED.reason,
        )
    if code == _MYSQL_NO_DB or _PG_NO_DB.search(text):
        return TargetUnavailable(
            f"database {url.database!r} does not exist on {server}",
            failures.DATABASE_NOT_FOUND.reason,
        )
    return TargetUnavailable(f"cannot reach {server}: {detail}", failures.UNREACHABLE.reason)


def _port(url: DbUrl) -> int:
    return 5432 if url.engine == "postgres" else 3306
