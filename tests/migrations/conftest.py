"""Real databases for the migration tests: a fresh database per test, on each engine.

URLs come from the environment (``PTAH_TEST_PG_URL``, ``PTAH_TEST_MYSQL_URL``) or
from ``${PTAH_CACHE:-~/.cache/ptah}/db/env`` written by ``hack/databases.sh``. A
missing database skips locally but fails in CI (``CI=true``) with a message naming
it: a green CI run must never mean "the database tests did not run".
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

ENGINES = ("postgres", "mysql", "sqlite")
_VARS = {"postgres": "PTAH_TEST_PG_URL", "mysql": "PTAH_TEST_MYSQL_URL"}


def _env_file() -> dict[str, str]:
    cache = Path(os.environ.get("PTAH_CACHE") or Path.home() / ".cache" / "ptah")
    path = cache / "db" / "env"
    out: dict[str, str] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep:
                out[key.strip()] = value.strip()
    return out


def base_url(engine: str) -> str:
    var = _VARS[engine]
    url = os.environ.get(var) or _env_file().get(var)
    if not url:
        message = (
            f"{engine} test database not configured: set {var} or run `bash hack/databases.sh`"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return url


def _with_db(url: str, name: str) -> str:
    p = urlsplit(url)
    return urlunsplit((p.scheme, p.netloc, "/" + name, p.query, p.fragment))


def _admin_exec(engine: str, url: str, sql: str) -> None:
    from ptah.engines.connect import open_target

    with open_target(url) as target:
        conn = target.connection
        with conn.cursor() as cur:
            cur.execute(sql)


@pytest.fixture(params=ENGINES)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL to a new, empty database on each engine; dropped afterwards."""
    yield from _fresh(request.param, tmp_path)


@pytest.fixture
def pg_url(tmp_path: Path) -> Iterator[str]:
    yield from _fresh("postgres", tmp_path)


@pytest.fixture
def mysql_url(tmp_path: Path) -> Iterator[str]:
    yield from _fresh("mysql", tmp_path)


def _fresh(engine: str, tmp_path: Path) -> Iterator[str]:
    if engine == "sqlite":
        yield f"sqlite:///{tmp_path / 'target.db'}"
        return
    base = base_url(engine)
    name = f"ptah_mig_{uuid.uuid4().hex[:12]}"
    _admin_exec(engine, base, f"CREATE DATABASE {name}")
    try:
        yield _with_db(base, name)
    finally:
        drop = f"DROP DATABASE IF EXISTS {name}"
        if engine == "postgres":
            drop += " WITH (FORCE)"
        _admin_exec(engine, base, drop)
