"""A desired file that computes or waits while it loads is refused within the load's bound.

Loading a desired file runs it in the scratch, on the target's own server. Before the
bound, a materialized view over an unbounded recursive query ran for ten minutes until
cancelled by hand, and a routine of the file called at load time slept as long as it
liked (``SET statement_timeout = 0`` first disarms a session setting). Each case here
plans such a file with the bound lowered to 2 s and expects the plan refused, naming the
line, well before a safety net of the test's own (which cancels the hostile statement
after 60 s, so the test fails instead of hanging on code without the bound), with no
backend left running the file's statement.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from ptah.engines import deadline
from ptah.runner.frame import ResultFrame
from support.databases import fresh_database
from support.plans import backends, plan_frame, public_relations

pytestmark = pytest.mark.integration

SAFETY_NET = 60.0


@pytest.fixture(autouse=True)
def no_size_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scratch's size bound out of the way: an unbounded recursive query spills its
    work table to temporary files, which that bound (tests/engines/test_pg_scratch_size.py)
    may stop first, within the time bound these cases are about."""
    monkeypatch.setattr(deadline, "SCRATCH_BYTES", 1 << 50)


@pytest.fixture
def safety_net(pg_url: str) -> Iterator[str]:
    """A marker to put in the hostile statement; after SAFETY_NET seconds, the backends
    running it are cancelled (so unbounded code fails the test rather than hanging)."""
    marker = "ptah_hostile_" + uuid.uuid4().hex[:8]
    done = threading.Event()

    def net() -> None:
        if done.wait(SAFETY_NET):
            return
        while not done.is_set():
            with psycopg.connect(pg_url, autocommit=True) as conn:
                for pid in backends(pg_url, marker, active_only=True):
                    conn.execute("SELECT pg_cancel_backend(%s)", (pid,))
            done.wait(1.0)

    thread = threading.Thread(target=net, daemon=True)
    thread.start()
    yield marker
    done.set()
    thread.join()


def _refused_in_time(frame: ResultFrame, line: int, started: float, bound: float = 2.0) -> None:
    elapsed = time.monotonic() - started
    message = str(frame.data.get("message", ""))
    assert frame.outcome == "failed", frame
    assert frame.reason == "DesiredSchemaInvalid", frame
    assert f"did not load within {bound:g} s (line {line} of the desired file)" in message, message
    assert elapsed < bound + 20, f"refused after {elapsed:.1f} s"


HOSTILE = {
    "recursive materialized view": (
        "CREATE TABLE kept (id int PRIMARY KEY);\n"
        "CREATE MATERIALIZED VIEW {m} AS\n"
        "  WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r)\n"
        "  SELECT count(*) AS n FROM r;\n",
        2,
    ),
    "a routine of the file called at load, the session's timeout disarmed first": (
        "SET statement_timeout = 0;\n"
        "CREATE FUNCTION {m}() RETURNS int LANGUAGE plpgsql AS\n"
        "  $$ BEGIN PERFORM pg_sleep(3600); RETURN 1; END $$;\n"
        "CREATE TABLE kept (id int PRIMARY KEY);\n"
        "SELECT {m}();\n",
        5,
    ),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_file_that_computes_at_load_is_refused_within_the_bound(
    case: str,
    pg_db: str,
    pg_url: str,
    safety_net: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(deadline, "LOAD_SECONDS", 2.0)
    sql, line = HOSTILE[case]
    started = time.monotonic()
    frame = plan_frame(pg_db, sql.format(m=safety_net), tmp_path, "op-deadline")
    _refused_in_time(frame, line, started)
    assert backends(pg_url, safety_net, active_only=True) == []


def test_the_bound_holds_in_a_dev_database_which_is_left_empty(
    pg_db: str,
    pg_url: str,
    safety_net: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(deadline, "LOAD_SECONDS", 2.0)
    sql, line = HOSTILE["recursive materialized view"]
    with fresh_database(pg_url, "ptah_dev_") as dev_url:
        started = time.monotonic()
        frame = plan_frame(pg_db, sql.format(m=safety_net), tmp_path, "op-deadline", dev_url)
        _refused_in_time(frame, line, started)
        assert public_relations(dev_url) == 0
    assert backends(pg_url, safety_net, active_only=True) == []


def test_the_bound_holds_when_a_large_file_loads_in_batches(
    pg_db: str,
    pg_url: str,
    safety_net: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ptah.engines.postgres import scratch

    # The bound covers the load of the 2,001 tables before the hostile statement too.
    monkeypatch.setattr(deadline, "LOAD_SECONDS", 10.0)
    tables = scratch.BATCH + 1
    sql = "".join(f"CREATE TABLE t{i} (id int);\n" for i in range(tables))
    sql += f"CREATE MATERIALIZED VIEW {safety_net} AS WITH RECURSIVE r(n) AS"
    sql += " (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) AS n FROM r;\n"
    started = time.monotonic()
    frame = plan_frame(pg_db, sql, tmp_path, "op-deadline")
    _refused_in_time(frame, tables + 1, started, bound=10.0)
    assert backends(pg_url, safety_net, active_only=True) == []
