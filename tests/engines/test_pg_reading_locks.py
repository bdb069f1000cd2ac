"""A reading of the target does not wait without end behind another session's lock.

Some catalog functions the inspection calls lock the relation they describe
(``pg_get_indexdef``), so a plan against a database where a long transaction or a
running ``ALTER`` holds a table's ACCESS EXCLUSIVE lock waited for as long as that
session did, holding the locks it had already taken (an ``ALTER`` queued behind those
stops the application's queries too). Now the reading gives up after its own lock
timeout with the transient reason ``LockBusy`` (the operator reads again after a
back-off), having changed nothing; once the lock is gone the same plan succeeds.
A safety net of the test's own ends the holder's transaction after 30 s, so code
without the bound fails the test (the plan then succeeds late) instead of hanging.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psycopg
import pytest

from ptah.engines.connect import open_target
from ptah.engines.postgres import ops as pgops
from ptah.runner import operations
from ptah.runner.emit import Run
from ptah.runner.frame import ResultFrame

pytestmark = pytest.mark.integration

SCHEMA = (
    "CREATE TABLE orders (id int PRIMARY KEY, note text);\n"
    "CREATE INDEX orders_note ON orders (note);\n"
    "CREATE VIEW recent AS SELECT id FROM orders;\n"
)


def _plan(url: str, sql: str, tmp_path: Path) -> ResultFrame:
    desired = tmp_path / "desired.sql"
    desired.write_text(sql)
    with open_target(url) as target:
        run = Run.on(target, "plan", "op-locks")
        return ResultFrame.model_validate(operations.plan(run, str(desired), None))


def test_a_reading_behind_a_held_lock_ends_as_lock_busy_and_succeeds_after(
    pg_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pgops, "READ_LOCK_SECONDS", 1.0)
    with psycopg.connect(pg_db, autocommit=True) as conn:
        conn.execute(SCHEMA)
    holder = psycopg.connect(pg_db)
    net = threading.Timer(30.0, holder.rollback)  # the safety net: the lock ends at 30 s
    try:
        holder.execute("LOCK TABLE orders IN ACCESS EXCLUSIVE MODE")
        net.start()
        started = time.monotonic()
        frame = _plan(pg_db, SCHEMA.replace("note text", "note text, placed date"), tmp_path)
        elapsed = time.monotonic() - started
        assert frame.outcome == "failed", frame
        assert frame.reason == "LockBusy", frame
        assert "waited 1 s for a lock another session holds" in str(frame.data["message"])
        assert elapsed < 20, elapsed
    finally:
        net.cancel()
        holder.rollback()
        holder.close()
    frame = _plan(pg_db, SCHEMA.replace("note text", "note text, placed date"), tmp_path)
    assert frame.outcome == "succeeded", frame
    assert frame.data["statements"], frame
