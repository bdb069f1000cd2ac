"""Real database URLs for engine tests: env vars first, then ${PTAH_CACHE}/db/env.

`bash hack/databases.sh` starts the databases and writes that file. In CI
(CI=true) a missing database fails the test naming the component; locally it skips.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.databases import database_url, fresh_database

SCHEMAS = Path(__file__).parent / "schemas"


@pytest.fixture(scope="session")
def pg_url() -> str:
    return database_url("PTAH_TEST_PG_URL", "PostgreSQL 15")


@pytest.fixture(scope="session")
def pg_nocreatedb_url() -> str:
    return database_url("PTAH_TEST_PG_NOCREATEDB_URL", "PostgreSQL 15 (role without CREATEDB)")


@pytest.fixture(scope="session")
def mysql_url() -> str:
    return database_url("PTAH_TEST_MYSQL_URL", "MariaDB 10.11")


@pytest.fixture
def pg_db(pg_url: str) -> Iterator[str]:
    """A fresh empty PostgreSQL database per test."""
    with fresh_database(pg_url) as url:
        yield url


@pytest.fixture
def mysql_db(mysql_url: str) -> Iterator[str]:
    """A fresh empty MariaDB database per test."""
    with fresh_database(mysql_url) as url:
        yield url


@pytest.fixture
def mysql_db2(mysql_url: str) -> Iterator[str]:
    """A second fresh MariaDB database, e.g. for the native client's run beside the target."""
    with fresh_database(mysql_url, "ptah_t2_") as url:
        yield url


@pytest.fixture
def sqlite_db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/target.db"
