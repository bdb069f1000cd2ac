"""Online plans against real PostgreSQL 15 and MariaDB 10.11: a table of a million rows,
a writer in another connection counting its own stalls, each change applied online and
(where the engine has a plain form that blocks) with online off.

What shows a change blocked the writer is robust to a loaded machine: a statement that
holds a lock the writer needs makes the writer's next operation wait for about as long
as the statement runs, so "blocked" is a stall of at least half the blocking
statement's own (recorded) time; "online" is a longest stall under 1 s while the change
took its time.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ptah.api.common import UncertainRecord
from ptah.engines import planner
from ptah.engines.connect import open_target
from ptah.engines.model import LOCK_HEAVY, NONE, Online, SchemaPolicy
from ptah.engines.ops import Timeouts
from ptah.families.schema import SchemaFamily
from ptah.runner import operations
from ptah.runner.emit import Run
from ptah.runner.frame import ResultFrame
from support import stall
from support.wait import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def busy_pg(pg_url: str) -> Iterator[str]:
    """A database with the base schema and a million rows, built once for the module."""
    name = "ptah_online_" + uuid.uuid4().hex[:10]
    with open_target(pg_url) as admin:
        admin.connection.execute(f'CREATE DATABASE "{name}"')
    url = pg_url.rsplit("/", 1)[0] + "/" + name
    try:
        stall.fill_postgres(url)
        yield url
    finally:
        with open_target(pg_url) as admin:
            admin.connection.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def busy_my(mysql_url: str) -> Iterator[str]:
    name = "ptah_online_" + uuid.uuid4().hex[:10]
    with open_target(mysql_url) as admin, admin.connection.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}`")
    url = mysql_url.rsplit("/", 1)[0] + "/" + name
    try:
        stall.fill_mysql(url)
        yield url
    finally:
        with open_target(mysql_url) as admin, admin.connection.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")


def _heavy_seconds(run: stall.Run) -> float:
    """The longest a lock-heavy statement of the run took."""
    seconds = run.result.to_json()["statementSeconds"]
    heavy = [seconds[i] for i, s in enumerate(run.statements) if LOCK_HEAVY in s.hazards]
    assert heavy, [s.hazards for s in run.statements]
    return float(max(heavy))


@pytest.mark.parametrize("change", ["create index", "foreign key", "check", "set not null"])
def test_pg_online_change_keeps_writer_writing_offline_stalls_it(busy_pg: str, change: str) -> None:
    desired = stall.PG_CHANGES[change]
    on = stall.change(busy_pg, desired, Online())
    assert on.result.outcome == "succeeded", on.result.message
    assert not any(LOCK_HEAVY in s.hazards for s in on.statements)
    assert all(s.lock for s in on.statements), [s.sql for s in on.statements if not s.lock]
    assert on.writer.longest < 1.0, (change, on.writer.longest, on.result.to_json())
    assert len(on.writer.latencies) > 20  # it wrote all along
    stall.converge(busy_pg, stall.PG_BASE)

    off = stall.change(busy_pg, desired, Online.off())
    assert off.result.outcome == "succeeded", off.result.message
    blocked = _heavy_seconds(off)
    assert off.writer.longest >= 0.5 * blocked, (change, off.writer.longest, blocked)
    assert off.writer.longest > on.writer.longest, (off.writer.longest, on.writer.longest)
    stall.converge(busy_pg, stall.PG_BASE)


def test_pg_changed_index_is_swapped_while_the_writer_writes(busy_pg: str) -> None:
    run = stall.change(busy_pg, stall.PG_CHANGES["changed index"], Online())
    assert run.result.outcome == "succeeded", run.result.message
    sqls = [s.sql for s in run.statements]
    assert sqls[0].startswith("CREATE INDEX CONCURRENTLY big_a_ptah_swap ON public.big")
    assert sqls[1:] == [
        "DROP INDEX CONCURRENTLY public.big_a",
        "ALTER INDEX public.big_a_ptah_swap RENAME TO big_a",
    ]
    assert run.writer.longest < 1.0, run.writer.longest
    with open_target(busy_pg) as t:
        assert planner.plan(t, stall.PG_CHANGES["changed index"]).statements == []
    stall.converge(busy_pg, stall.PG_BASE)


def _frame(url: str, desired: Path) -> ResultFrame:
    with open_target(url) as t:
        payload = operations.plan(Run.on(t, "plan", "op-proof"), str(desired), None)
    return ResultFrame.model_validate(payload)


def _index_valid(url: str, name: str) -> bool | None:
    with open_target(url) as t:
        row = t.connection.execute(
            "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", (name,)
        ).fetchone()
    return None if row is None else bool(row[0])


def test_pg_killed_concurrent_build_leaves_invalid_index_the_next_plan_repairs(
    busy_pg: str, tmp_path: Path
) -> None:
    desired = stall.PG_BASE + "CREATE INDEX big_killed ON big (b, ref, a);"
    path = tmp_path / "desired.sql"
    path.write_text(desired)
    with open_target(busy_pg) as t:
        plan = planner.plan(t, desired)
    assert [s.transaction for s in plan.statements] == [NONE]
    record = UncertainRecord(
        operation_id="op-apply",
        type="Apply",
        job_name="job",
        expected_after=plan.fingerprint_after,
        reason="ExecutorStopped",
        recorded_at="2026-01-01T00:00:00Z",
    )
    outcome: dict[str, Any] = {}

    def run() -> None:
        with open_target(busy_pg) as t:
            outcome["result"] = planner.apply(
                t, plan.statements, plan.fingerprint_before, False, plan.fingerprint_after
            )

    worker = threading.Thread(target=run)
    worker.start()
    with open_target(busy_pg) as watcher:
        conn = watcher.connection

        def building() -> Any:
            row = conn.execute(
                "SELECT p.pid FROM pg_stat_progress_create_index p"
                " WHERE p.datname = current_database() AND p.phase LIKE 'building index%'"
            ).fetchone()
            return row[0] if row else None

        pid = wait_for("the concurrent build seen building", building, timeout=60, interval=0.02)
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
    worker.join(60)
    assert outcome["result"].outcome == "failed"

    # The reading knows the index is there but invalid: the target is not the plan's
    # expected schema, so the uncertain Apply is not settled by it.
    assert _index_valid(busy_pg, "public.big_killed") is False
    frame = _frame(busy_pg, path)
    family = SchemaFamily()
    assert frame.data["changes"] is True
    assert any("index public.big_killed is INVALID" in w for w in frame.data["warnings"])
    assert not family.settles(record, frame)
    repair = [s["sql"] for s in frame.data["statements"]]
    assert repair == [
        "DROP INDEX CONCURRENTLY public.big_killed",
        "CREATE INDEX CONCURRENTLY big_killed ON public.big USING btree (b, ref, a)",
    ]

    with open_target(busy_pg) as t:
        again = planner.plan(t, desired)
        result = planner.apply(
            t, again.statements, again.fingerprint_before, False, again.fingerprint_after
        )
    assert result.outcome == "succeeded", result.message
    assert _index_valid(busy_pg, "public.big_killed") is True
    frame = _frame(busy_pg, path)
    assert frame.data["changes"] is False
    assert family.settles(record, frame)
    stall.converge(busy_pg, stall.PG_BASE)


def test_pg_constraint_left_not_valid_is_validated_in_place(pg_db: str) -> None:
    """An online add stopped between its two steps leaves the constraint NOT VALID: the
    next plan validates it (no drop, no second add); online off drops and adds it."""
    desired = (
        "CREATE TABLE p (id int PRIMARY KEY);"
        "CREATE TABLE c (id int PRIMARY KEY, p int REFERENCES p (id), CHECK (id > 0));"
    )
    with open_target(pg_db) as t:
        t.connection.execute(
            "CREATE TABLE p (id int PRIMARY KEY); CREATE TABLE c (id int PRIMARY KEY, p int);"
            "ALTER TABLE c ADD CONSTRAINT c_p_fkey FOREIGN KEY (p) REFERENCES p (id) NOT VALID;"
            "ALTER TABLE c ADD CONSTRAINT c_id_check CHECK (id > 0) NOT VALID"
        )
        plan = planner.plan(t, desired)
        assert [(s.sql, s.transaction) for s in plan.statements] == [
            ("ALTER TABLE public.c VALIDATE CONSTRAINT c_id_check", "new"),
            ("ALTER TABLE public.c VALIDATE CONSTRAINT c_p_fkey", "new"),
        ]
        off = planner.plan(t, desired, policy=SchemaPolicy(online=Online.off()))
        assert len(off.statements) == 4 and "DROP CONSTRAINT" in off.statements[0].sql
        result = planner.apply(
            t, plan.statements, plan.fingerprint_before, False, plan.fingerprint_after
        )
        assert result.outcome == "succeeded", result.message
        assert planner.plan(t, desired).statements == []


def test_pg_new_unique_constraint_adopts_an_index_built_concurrently(pg_db: str) -> None:
    with open_target(pg_db) as t:
        t.connection.execute(
            "CREATE TABLE u (id int PRIMARY KEY, b text);"
            "INSERT INTO u SELECT g, g::text FROM generate_series(1, 1000) g"
        )
        desired = "CREATE TABLE u (id int PRIMARY KEY, b text UNIQUE);"
        plan = planner.plan(t, desired)
        assert [(s.sql, s.transaction) for s in plan.statements] == [
            ("CREATE UNIQUE INDEX CONCURRENTLY u_b_key ON public.u USING btree (b)", "none"),
            ("ALTER TABLE public.u ADD CONSTRAINT u_b_key UNIQUE USING INDEX u_b_key", "shared"),
        ]
        assert not any(LOCK_HEAVY in s.hazards for s in plan.statements)
        result = planner.apply(
            t, plan.statements, plan.fingerprint_before, False, plan.fingerprint_after
        )
        assert result.outcome == "succeeded", result.message
        assert planner.plan(t, desired).statements == []


def _hold_until_tries(
    url: str, tries: int, held: threading.Event, done: threading.Event, seen: list[int]
) -> None:
    """Hold an ACCESS EXCLUSIVE lock on ``locked`` until the apply's session has waited on
    it in ``tries`` separate tries (each try runs the statement again: a new
    query_start, read on a connection of its own), then release it; ``tries`` 0: hold
    it until the apply has returned (``done``)."""
    with open_target(url) as holder, open_target(url) as looker:
        conn = holder.connection
        with conn.transaction():
            conn.execute("LOCK TABLE locked IN ACCESS EXCLUSIVE MODE")
            held.set()
            starts: set[Any] = set()

            def waited() -> bool:
                rows = looker.connection.execute(
                    "SELECT query_start FROM pg_stat_activity WHERE datname = current_database()"
                    " AND wait_event_type = 'Lock' AND query LIKE 'ALTER TABLE public.locked%%'"
                ).fetchall()
                starts.update(r[0] for r in rows)
                return done.is_set() if tries == 0 else len(starts) >= tries

            wait_for(f"the apply seen waiting in {tries} tries", waited, timeout=60, interval=0.02)
            seen.append(len(starts))


def _locked_apply(url: str, retries: int, release_after: int) -> tuple[Any, list[int]]:
    with open_target(url) as t:
        t.connection.execute("CREATE TABLE locked (id int PRIMARY KEY)")
        plan = planner.plan(t, "CREATE TABLE locked (id int PRIMARY KEY, note text);")
        held, done, seen = threading.Event(), threading.Event(), []
        holder = threading.Thread(
            target=_hold_until_tries, args=(url, release_after, held, done, seen)
        )
        holder.start()
        assert held.wait(30)
        try:
            result = planner.apply(
                t,
                plan.statements,
                plan.fingerprint_before,
                expected_after=plan.fingerprint_after,
                timeouts=Timeouts(lock_seconds=1, lock_retries=retries, backoff_seconds=0.2),
            )
        finally:
            done.set()
        holder.join(90)
    return result, seen


def test_pg_lock_timeout_retried_until_the_held_lock_is_released(pg_db: str) -> None:
    result, seen = _locked_apply(pg_db, retries=3, release_after=3)
    assert seen == [3]
    assert result.outcome == "succeeded", result.message
    data = result.to_json()
    assert [(r["statement"], r["attempt"]) for r in data["lockRetries"]] == [(0, 1), (0, 2)]
    assert all("lock timeout" in r["error"] for r in data["lockRetries"])
    assert data["lockRetries"][1]["backoffSeconds"] == 2 * data["lockRetries"][0]["backoffSeconds"]
    assert data["executed"] == data["committed"] == 1


def test_pg_lock_timeout_retries_are_bounded(pg_db: str) -> None:
    result, _ = _locked_apply(pg_db, retries=1, release_after=0)
    assert result.outcome == "failed"
    assert "lock timeout" in result.message
    data = result.to_json()
    assert len(data["lockRetries"]) == 1
    assert data["committed"] == 0
    with open_target(pg_db) as t:  # nothing of it ran
        cols = t.connection.execute(
            "SELECT count(*) FROM information_schema.columns WHERE table_name = 'locked'"
        ).fetchone()
    assert cols == (1,)


# ----------------------------------------------------------------------------- MariaDB


def test_mysql_index_built_inplace_without_lock_while_the_writer_writes(busy_my: str) -> None:
    run = stall.change(busy_my, stall.MY_CHANGES["create index"], Online())
    assert run.result.outcome == "succeeded", run.result.message
    (stmt,) = run.statements
    assert stmt.sql.endswith("ALGORITHM=INPLACE, LOCK=NONE")
    assert "allows reads and writes: builds index" in stmt.hazards
    assert LOCK_HEAVY not in stmt.hazards
    assert run.writer.longest < 1.0, run.writer.longest
    stall.converge(busy_my, stall.MY_BASE)


def test_mysql_instant_column(busy_my: str) -> None:
    with open_target(busy_my) as t:
        plan = planner.plan(t, stall.MY_CHANGES["add column"])
        off = planner.plan(
            t, stall.MY_CHANGES["add column"], policy=SchemaPolicy(online=Online.off())
        )
    (stmt,) = plan.statements
    assert stmt.sql.endswith("ALGORITHM=INSTANT") and stmt.lock == "INSTANT"
    assert "ALGORITHM" not in off.statements[0].sql  # off: the server's own choice


def test_mysql_copy_change_is_lock_heavy_with_reason_refusable_and_stalls(busy_my: str) -> None:
    desired = stall.MY_CHANGES["change column type"]
    with open_target(busy_my) as t:
        plan = planner.plan(t, desired)
        (stmt,) = plan.statements
        assert "ALGORITHM" not in stmt.sql
        assert LOCK_HEAVY in stmt.hazards and "locks writes: copies table" in stmt.hazards
        assert any(h.startswith("needs a table copy: ") for h in stmt.hazards), stmt.hazards
        refused = planner.apply(
            t,
            plan.statements,
            plan.fingerprint_before,
            True,
            plan.fingerprint_after,
            allow_lock_heavy=False,
        )
        assert (refused.outcome, refused.reason) == ("refused", "LockHeavyNotAllowed")
        assert planner.plan(t, desired).fingerprint_before == plan.fingerprint_before
    run = stall.change(busy_my, desired, Online())
    assert run.result.outcome == "succeeded", run.result.message
    assert run.writer.longest >= 0.5 * _heavy_seconds(run), run.writer.longest
    stall.converge(busy_my, stall.MY_BASE)


def test_plan_json_carries_transaction_and_lock(busy_pg: str, tmp_path: Path) -> None:
    path = tmp_path / "desired.sql"
    path.write_text(stall.PG_CHANGES["foreign key"])
    frame = _frame(busy_pg, path)
    statements = frame.data["statements"]
    assert [s.get("transaction") for s in statements] == [None, "new"]
    assert [s["lock"] for s in statements] == ["SHARE ROW EXCLUSIVE", "SHARE UPDATE EXCLUSIVE"]
    assert json.loads(json.dumps(statements)) == statements


def test_runner_apply_refuses_lock_heavy_plans_when_told(sqlite_db: str, tmp_path: Path) -> None:
    """``ptah-runner apply --refuse-lock-heavy`` (what lockHeavy: Refuse dispatches) runs
    nothing of a plan that holds a lock-heavy statement."""
    with open_target(sqlite_db) as t:
        t.connection.execute("CREATE TABLE t (id integer PRIMARY KEY, a text)")
        plan = planner.plan(t, "CREATE TABLE t (id integer PRIMARY KEY, a integer);")
    assert any(LOCK_HEAVY in s.hazards for s in plan.statements)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan.to_json()))
    with open_target(sqlite_db) as t:
        refused = operations.apply(
            Run.on(t, "apply", "op-1"), str(path), True, allow_lock_heavy=False
        )
        assert (refused["outcome"], refused["reason"]) == ("refused", "LockHeavyNotAllowed")
        assert planner.plan(t, "").fingerprint_before == plan.fingerprint_before
        applied = operations.apply(Run.on(t, "apply", "op-2"), str(path), True)
    assert applied["outcome"] == "succeeded", applied
