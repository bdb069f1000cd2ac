"""Helpers for the PostgreSQL corpus: load with psql, dump with pg_dump, plan and apply with Ptah.

The comparison is the issue's proof: a database Ptah brought to a desired file
from empty must dump (``pg_dump -s``) like the same file loaded by psql, with
the dump's objects compared as a multiset (order is pg_dump's own business).
"""

from __future__ import annotations

import contextlib
import difflib
import os
import subprocess
from pathlib import Path

from ptah.engines import planner
from ptah.engines.connect import open_target
from ptah.engines.model import Plan
from support.databases import fresh_database

PG_BIN = Path(os.environ.get("PTAH_PG_BIN", "/usr/lib/postgresql/15/bin"))


def _tool(name: str) -> str:
    """psql/pg_dump 15 (from `bash hack/databases.sh`); missing fails in CI, skips locally."""
    import pytest

    path = PG_BIN / name
    if not path.exists():
        message = f"{name} 15 is missing ({path}); run `bash hack/databases.sh`"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return str(path)


def _libpq_env(url: str) -> dict[str, str]:
    from ptah.engines.urls import parse_url

    u = parse_url(url)
    env = dict(os.environ)
    env.update(
        PGHOST=u.host or "127.0.0.1",
        PGPORT=str(u.port or 5432),
        PGUSER=u.user,
        PGPASSWORD=u.password,
        PGDATABASE=u.database,
    )
    return env


CORPUS_ROLES = ("ptah_corpus_reader", "ptah_corpus_writer")


def ensure_roles(admin_url: str) -> None:
    """The roles the corpus grants to (cluster-wide, created once, never dropped)."""
    with open_target(admin_url) as admin:
        for role in CORPUS_ROLES:
            admin.connection.execute(
                f"DO $$ BEGIN CREATE ROLE {role} NOLOGIN; EXCEPTION WHEN duplicate_object"
                " THEN NULL; END $$"
            )


def database(admin_url: str) -> contextlib.AbstractContextManager[str]:
    return fresh_database(admin_url, "ptah_c_")


def psql_load(url: str, sql: str) -> None:
    proc = subprocess.run(
        [_tool("psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", "-"],
        input=sql,
        text=True,
        capture_output=True,
        env=_libpq_env(url),
    )
    assert proc.returncode == 0, proc.stderr


def raw_dump(url: str, *options: str) -> str:
    proc = subprocess.run(
        [_tool("pg_dump"), "-s", *options],
        text=True,
        capture_output=True,
        env=_libpq_env(url),
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def dump(url: str) -> list[str]:
    """pg_dump -s as a sorted list of object blocks, without comments, SETs and owners."""
    text = raw_dump(url, "--no-owner")
    blocks: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith("-- Name:") or line.startswith("-- TOC entry"):
            if current:
                blocks.append("\n".join(current))
            current = []
            continue
        if (
            not line.strip()
            or line.startswith("--")
            or line.startswith("\\")
            or line.startswith("SET ")
            or line.startswith("SELECT pg_catalog.set_config")
        ):
            continue
        current.append(line)
    if current:
        blocks.append("\n".join(current))
    return sorted(b for b in blocks if b.strip())


def assert_same_dump(ptah_url: str, psql_url: str) -> None:
    got, want = dump(ptah_url), dump(psql_url)
    if got != want:
        delta = "\n".join(
            difflib.unified_diff(want, got, "psql-loaded", "ptah-applied", lineterm="", n=0)
        )
        raise AssertionError("pg_dump -s differs:\n" + delta[:6000])


def apply_plan(url: str, sql: str) -> Plan:
    """Plan and apply ``sql`` on ``url``; assert it converged and re-plans empty."""
    with open_target(url) as t:
        plan = planner.plan(t, sql)
        result = planner.apply(
            t,
            plan.statements,
            plan.fingerprint_before,
            allow_destructive=True,
            expected_after=plan.fingerprint_after,
        )
        assert result.outcome == "succeeded", (result.message, [s.sql for s in plan.statements])
        assert result.fingerprint_after == plan.fingerprint_after, "apply did not converge"
        again = planner.plan(t, sql)
        assert again.statements == [], [s.sql for s in again.statements]
    return plan


def assert_edit_like_psql(admin_url: str, first: str, second: str) -> None:
    """Ptah brings a database from ``first`` to ``second``: it dumps like ``second``
    loaded by psql, and re-plans empty."""
    ensure_roles(admin_url)
    with database(admin_url) as ptah_db, database(admin_url) as psql_db:
        apply_plan(ptah_db, first)
        apply_plan(ptah_db, second)
        psql_load(psql_db, second)
        assert_same_dump(ptah_db, psql_db)


def refusal(admin_url: str, first: str, second: str) -> str:
    """The one-line refusal of the plan from ``first`` (applied; empty: nothing) to
    ``second``."""
    import pytest

    from ptah.engines.model import PlanError

    with database(admin_url) as url:
        if first:
            apply_plan(url, first)
        with open_target(url) as t, pytest.raises(PlanError) as refused:
            planner.plan(t, second)
    said = str(refused.value)
    assert "\n" not in said, said
    return said
