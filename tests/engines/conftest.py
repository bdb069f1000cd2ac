"""Real database URLs for engine tests: env vars first, then ${PTAH_CACHE}/db/env.

`bash hack/databases.sh` starts the databases and writes that file. In CI
(CI=true) a missing database fails the test naming the component; locally it skips.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ptah.engines.connect import open_target

SCHEMAS = Path(__file__).parent / "schemas"


def _env_file() -> dict[str, str]:
    cache = Path(os.environ.get("PTAH_CACHE", Path.home() / ".cache" / "ptah"))
    out: dict[str, str] = {}
    path = cache / "db" / "env"
    if path.exists():
        for line in path.read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep:
                out[key.strip()] = value.strip()
    return out


def _url(name: str, component: str) -> str:
    url = os.environ.get(name) or _env_file().get(name)
    problem = ""
    if not url:
        problem = f"{name} not set and not in ${{PTAH_CACHE}}/db/env"
    else:
        try:
            open_target(url).close()
        except Exception as exc:
            problem = f"{component} unreachable: {type(exc).__name__}"
    if problem:
        message = f"{component} is missing ({problem}); run `bash hack/databases.sh`"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    assert url is not None
    return url


@pytest.fixture(scope="session")
def pg_url() -> str:
    return _url("PTAH_TEST_PG_URL", "PostgreSQL 15")


@pytest.fixture(scope="session")
def pg_nocreatedb_url() -> str:
    return _url("PTAH_TEST_PG_NOCREATEDB_URL", "PostgreSQL 15 (role without CREATEDB)")


@pytest.fixture(scope="session")
def mysql_url() -> str:
    return _url("PTAH_TEST_MYSQL_URL", "MariaDB 10.11")


@pytest.fixture
def pg_db(pg_url: str) -> Iterator[str]:
    """A fresh empty PostgreSQL database per test."""
    name = "ptah_t_" + uuid.uuid4().hex[:10]
    with open_target(pg_url) as admin:
        admin.connection.execute(f'CREATE DATABASE "{name}"')
    yield pg_url.rsplit("/", 1)[0] + "/" + name
    with open_target(pg_url) as admin:
        admin.connection.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def _fresh_mysql(mysql_url: str, prefix: str) -> Iterator[str]:
    name = prefix + uuid.uuid4().hex[:10]
    with open_target(mysql_url) as admin, admin.connection.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}`")
    yield mysql_url.rsplit("/", 1)[0] + "/" + name
    with open_target(mysql_url) as admin, admin.connection.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")


@pytest.fixture
def mysql_db(mysql_url: str) -> Iterator[str]:
    """A fresh empty MariaDB database per test."""
    yield from _fresh_mysql(mysql_url, "ptah_t_")


@pytest.fixture
def mysql_db2(mysql_url: str) -> Iterator[str]:
    """A second fresh MariaDB database, e.g. for the native client's run beside the target."""
    yield from _fresh_mysql(mysql_url, "ptah_t2_")


@pytest.fixture
def sqlite_db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/target.db"
