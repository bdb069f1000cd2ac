"""The test databases: where their URLs come from, and how a test names a database of
its own on the same server. A missing one fails under CI and skips elsewhere."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

import pytest


def cache_dir() -> Path:
    """``$PTAH_CACHE`` (default ``~/.cache/ptah``), where ``hack/*.sh`` keep their state."""
    return Path(os.environ.get("PTAH_CACHE") or Path.home() / ".cache" / "ptah")


def db_env() -> dict[str, str]:
    """``${PTAH_CACHE}/db/env`` as written by ``hack/databases.sh`` (``KEY=url`` lines);
    empty when the databases were never started."""
    path = cache_dir() / "db" / "env"
    out: dict[str, str] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep:
                out[key.strip()] = value.strip()
    return out


def env_url(var: str) -> str | None:
    """The URL in ``$var``, else in the env file."""
    return os.environ.get(var) or db_env().get(var)


def with_database(url: str, database: str) -> str:
    """``url`` naming ``database`` instead (same engine, role, password, host, query)."""
    p = urlsplit(url)
    return urlunsplit((p.scheme, p.netloc, "/" + database, p.query, p.fragment))


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


def missing(message: str) -> NoReturn:
    """A component the test needs is not there: fail under CI (a green run must never
    mean "it did not run"), skip elsewhere."""
    if in_ci():
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def database_url(var: str, component: str) -> str:
    """The URL in ``$var`` (or the env file) of a server that answers; else the test
    fails under CI, or skips, naming ``component`` and how to start it."""
    from ptah.engines.connect import open_target

    url = env_url(var)
    if not url:
        missing(f"{component} is missing ({var} unset); run `bash hack/databases.sh`")
    assert url is not None
    try:
        open_target(url).close()
    except Exception as exc:
        missing(f"{component} unreachable ({type(exc).__name__}); run `bash hack/databases.sh`")
    return url


def database_of(url: str) -> str:
    """The database ``url`` names."""
    return urlsplit(url).path.lstrip("/")


@contextlib.contextmanager
def fresh_database(admin_url: str, prefix: str = "ptah_t_") -> Iterator[str]:
    """A new, empty database on the server of ``admin_url`` (PostgreSQL or MariaDB),
    named ``prefix`` + a random suffix; yields its URL and drops it afterwards."""
    from ptah.engines.connect import open_target

    name = prefix + uuid.uuid4().hex[:10]
    postgres = urlsplit(admin_url).scheme.startswith("postgres")
    quoted = f'"{name}"' if postgres else f"`{name}`"

    def admin(sql: str) -> None:
        with (
            open_target(admin_url) as target,
            contextlib.closing(target.connection.cursor()) as cur,
        ):
            cur.execute(sql)

    admin(f"CREATE DATABASE {quoted}")
    try:
        yield with_database(admin_url, name)
    finally:
        admin(f"DROP DATABASE IF EXISTS {quoted}" + (" WITH (FORCE)" if postgres else ""))


def mysql_session(url: Any, database: str | None = None) -> Any:
    """A plain autocommit session of the test's own on MariaDB ``url``'s server (in
    ``database``, else in none): a second client beside the code under test."""
    import pymysql

    from ptah.engines.urls import parse_url

    u = parse_url(url) if isinstance(url, str) else url  # a URL, or one parsed already
    return pymysql.connect(
        host=u.host or "localhost",
        port=u.port or 3306,
        user=u.user,
        password=u.password or "",
        database=database,
        autocommit=True,
    )
