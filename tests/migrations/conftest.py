"""Real databases for the migration tests: a fresh database per test, on each engine.

URLs come from the environment (``PTAH_TEST_PG_URL``, ``PTAH_TEST_MYSQL_URL``) or
from ``${PTAH_CACHE:-~/.cache/ptah}/db/env`` written by ``hack/databases.sh``. A
missing database skips locally but fails in CI (``CI=true``) with a message naming
it: a green CI run must never mean "the database tests did not run".
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.databases import database_url, fresh_database

ENGINES = ("postgres", "mysql", "sqlite")
_VARS = {"postgres": "PTAH_TEST_PG_URL", "mysql": "PTAH_TEST_MYSQL_URL"}


def base_url(engine: str) -> str:
    return database_url(_VARS[engine], f"{engine} test database")


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
    with fresh_database(base_url(engine), "ptah_mig_") as url:
        yield url
