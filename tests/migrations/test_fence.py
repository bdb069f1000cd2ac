"""The realm fence, on every engine: a second mutating runner on one database is refused.

Each test holds a *gate* the first runner's SQL waits on (a PostgreSQL advisory lock,
a MariaDB named lock, an SQLite reader whose old snapshot a full WAL checkpoint waits
out: a migration may not attach another file, and a reader does not block writes), so
the first runner is provably mid-run, with its fence held, for as long as the test
needs; then a second runner is started and must come back ``fenced`` having written
nothing. Releasing the gate lets the first finish; a third run then takes the fence.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from migsupport import engine_of, history_rows, query, runner_cmd, write_dir

from ptah import failures
from ptah.engines import fence
from ptah.engines.connect import open_target
from ptah.engines.planner import current_fingerprint
from ptah.runner.frame import ResultFrame, parse_result_for
from support.wait import wait_for

pytestmark = pytest.mark.integration

DEADLINE = 90.0


class Gate:
    """Something the test holds and the runner's SQL waits for."""

    def __init__(self, url: str, tmp: Path) -> None:
        self.engine = engine_of(url)
        self.url = url
        self.name = f"ptah-test-gate-{uuid.uuid4().hex[:10]}"
        self.key = int(uuid.uuid4().int % (1 << 62))
        self.conn: Any = None

    def hold(self) -> None:
        if self.engine == "sqlite":
            # The target in WAL mode, and a read transaction on it: the runner's writes
            # (history rows, file 1) go on, but a TRUNCATE checkpoint waits in SQLite's
            # busy handler until every reader has left the log.
            self.conn = sqlite3.connect(self.url.removeprefix("sqlite:///"), isolation_level=None)
            assert self.conn.execute("PRAGMA journal_mode = WAL").fetchone() == ("wal",)
            self.conn.execute("BEGIN")
            self.conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            return
        self.conn = open_target(self.url)
        with self.conn.connection.cursor() as cur:
            if self.engine == "postgres":
                cur.execute("SELECT pg_advisory_lock(%s)", (self.key,))
            else:
                cur.execute("SELECT GET_LOCK(%s, 0)", (self.name,))
                assert cur.fetchone()[0] == 1

    def release(self) -> None:
        if self.engine == "sqlite":
            self.conn.execute("ROLLBACK")
        self.conn.close()

    def wait_statements(self) -> list[str]:
        """SQL that blocks until the gate is released (the migration's form)."""
        if self.engine == "postgres":
            key = self.key
            return [f"SELECT pg_advisory_lock({key})", f"SELECT pg_advisory_unlock({key})"]
        if self.engine == "mysql":
            return [f"DO GET_LOCK('{self.name}', 300)", f"DO RELEASE_LOCK('{self.name}')"]
        return ["PRAGMA wal_checkpoint(TRUNCATE)"]


@contextmanager
def held(gate: Gate) -> Iterator[Gate]:
    gate.hold()
    try:
        yield gate
    finally:
        gate.release()


def _env(url: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PTAH_DB_URL"] = url
    env["PTAH_LOCK_TIMEOUT_SECONDS"] = "300"  # SQLite: wait on the gate, do not time out
    env.pop("PTAH_OPERATION_ID", None)
    env.pop("PTAH_REALM", None)
    return env


def _spawn(cmd: list[str], url: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        cmd,
        env=env or _env(url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _migrate(url: str, d: Path) -> tuple[subprocess.Popen[str], str]:
    opid = f"op-{uuid.uuid4().hex[:8]}"
    return _spawn(runner_cmd("migrate", [d], operation_id=opid), url), opid


def _frame(proc: subprocess.Popen[str], opid: str) -> ResultFrame:
    out, err = proc.communicate(timeout=DEADLINE)
    verdict = parse_result_for(out, opid)
    assert verdict.frame is not None, (verdict, out, err)
    return verdict.frame


def _until(what: str, check: Any) -> None:
    wait_for(what, check, DEADLINE, interval=0.1)


Run = tuple[subprocess.Popen[str], str]


def _one_fenced(runs: list[Run]) -> tuple[ResultFrame, Run]:
    """Of two runners started at once while the first to take the fence is held mid-run:
    the one that ended (it must be fenced) and the one still running."""
    _until("one of the two runners to end", lambda: any(p.poll() is not None for p, _ in runs))
    ended = [r for r in runs if r[0].poll() is not None]
    assert len(ended) == 1, "both runners ended while the first was held mid-run"
    refused = _frame(*ended[0])
    assert (refused.outcome, refused.reason) == ("fenced", "RealmBusy"), refused
    assert ended[0][0].returncode == failures.REALM_BUSY.exit_code
    (running,) = [r for r in runs if r is not ended[0]]
    return refused, running


def _gated_dir(tmp: Path, gate: Gate) -> Path:
    body = "-- ptah:no-transaction\n" + "".join(s + ";\n" for s in gate.wait_statements())
    return write_dir(
        tmp / "m",
        {
            "1_log.sql": "CREATE TABLE fence_log (n INTEGER NOT NULL);",
            "2_gate.sql": body,
            "3_after.sql": "INSERT INTO fence_log (n) VALUES (3);",
        },
    )


def _mid_file_2(url: str) -> bool:
    row = history_rows(url).get("2")
    return row is not None and row["finished_at"] is None


def test_second_migrate_started_mid_run_is_fenced(db_url: str, tmp_path: Path) -> None:
    gate = Gate(db_url, tmp_path)
    d = _gated_dir(tmp_path, gate)
    with held(gate):
        first, first_id = _migrate(db_url, d)
        # Evidence the first runner is mid-run: file 2's row is written and unfinished.
        _until("the first runner to block inside file 2", lambda: _mid_file_2(db_url))
        before = history_rows(db_url)
        second, second_id = _migrate(db_url, d)
        refused = _frame(second, second_id)
        assert (refused.outcome, refused.reason) == ("fenced", "RealmBusy"), refused
        assert refused.data["applied"] == [] and refused.data["statementsExecuted"] == 0
        assert second.returncode == failures.REALM_BUSY.exit_code
        assert history_rows(db_url) == before, "the fenced runner wrote history"
        assert first.poll() is None, "the first runner stopped while its gate was held"
    done = _frame(first, first_id)
    assert (done.outcome, done.data["applied"]) == ("succeeded", ["1", "2", "3"]), done
    assert query(db_url, "SELECT n FROM fence_log") == [(3,)]
    rows = history_rows(db_url)
    assert {r["operation_id"] for r in rows.values()} == {first_id}
    third, third_id = _migrate(db_url, d)
    again = _frame(third, third_id)
    assert (again.outcome, again.data["applied"]) == ("succeeded", []), again


def test_two_migrate_runners_started_at_once_one_is_fenced(db_url: str, tmp_path: Path) -> None:
    gate = Gate(db_url, tmp_path)
    d = _gated_dir(tmp_path, gate)
    with held(gate):
        refused, winner = _one_fenced([_migrate(db_url, d) for _ in range(2)])
        assert refused.data["applied"] == []
    done = _frame(*winner)
    assert (done.outcome, done.data["applied"]) == ("succeeded", ["1", "2", "3"]), done
    assert query(db_url, "SELECT n, COUNT(*) FROM fence_log GROUP BY n") == [(3, 1)]
    assert {r["operation_id"] for r in history_rows(db_url).values()} == {winner[1]}


# ------------------------------------------------------------------ schema Apply


def _plan_file(url: str, path: Path, statements: list[str]) -> Path:
    with open_target(url) as target:
        before = current_fingerprint(target)
    body = {"statements": [{"sql": s} for s in statements], "fingerprintBefore": before}
    path.write_text(json.dumps(body))
    return path


def _apply(url: str, plan: Path, env: dict[str, str] | None = None) -> tuple[Any, str]:
    opid = f"op-{uuid.uuid4().hex[:8]}"
    cmd = [sys.executable, "-m", "ptah.runner.main", "apply", "--plan", str(plan)]
    return _spawn([*cmd, "--operation-id", opid], url, env), opid


# SQLite runs an Apply in one write transaction, so nothing outside can gate it: the
# first runner spins in SQL until the test kills it.
_SPIN = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c"


def _fence_taken(url: str) -> bool:
    """Whether some run holds the realm's fence now (tried, and given back at once)."""
    with open_target(url) as target:
        realm = target.identity().digest
        try:
            with fence.held(target.engine, target.connection, realm):
                return False
        except fence.RealmBusy:
            return True


def test_two_apply_runners_started_at_once_one_is_fenced(db_url: str, tmp_path: Path) -> None:
    engine = engine_of(db_url)
    gate = Gate(db_url, tmp_path)
    blocker = [_SPIN] if engine == "sqlite" else gate.wait_statements()
    plan = _plan_file(
        db_url, tmp_path / "plan.json", ["CREATE TABLE fenced_a (id INTEGER)", *blocker]
    )
    with held(gate):
        refused, winner = _one_fenced([_apply(db_url, plan) for _ in range(2)])
        assert refused.data["executed"] == 0 and refused.data["committed"] == 0
        assert _fence_taken(db_url), "the running Apply does not hold the fence"
        if engine == "sqlite":
            winner[0].send_signal(signal.SIGKILL)
            winner[0].communicate(timeout=DEADLINE)
    if engine != "sqlite":
        done = _frame(*winner)
        assert (done.outcome, done.data["executed"]) == ("succeeded", 1 + len(blocker)), done
    # Whatever ended the first run (its end, or its death), the fence is free again.
    assert not _fence_taken(db_url)
    plan = _plan_file(db_url, tmp_path / "plan2.json", ["CREATE TABLE fenced_b (id INTEGER)"])
    proc, opid = _apply(db_url, plan)
    assert _frame(proc, opid).outcome == "succeeded"


def test_apply_refuses_a_database_other_than_the_claims_realm(db_url: str, tmp_path: Path) -> None:
    plan = _plan_file(db_url, tmp_path / "plan.json", ["CREATE TABLE never (id INTEGER)"])
    env = _env(db_url)
    env["PTAH_REALM"] = "0" * 32
    proc, opid = _apply(db_url, plan, env)
    frame = _frame(proc, opid)
    assert (frame.outcome, frame.reason) == ("refused", "WrongDatabase"), frame
    with open_target(db_url) as target:
        assert frame.database == target.identity()
    assert "never" not in str(query(db_url, _TABLES[engine_of(db_url)]))


_TABLES = {
    "postgres": "SELECT tablename FROM pg_tables WHERE schemaname = 'public'",
    "mysql": "SHOW TABLES",
    "sqlite": "SELECT name FROM sqlite_master WHERE type = 'table'",
}


def test_sqlite_fence_is_a_lock_beside_the_file_and_refuses_a_writer_in_progress(
    tmp_path: Path,
) -> None:
    """Two processes' view: the fence file's flock, and SQLite's own write lock."""
    url = f"sqlite:///{tmp_path / 'target.db'}"
    d = write_dir(tmp_path / "m", {"1_a.sql": "CREATE TABLE a (id INTEGER);"})
    with open(fence.sqlite_fence_path(str(tmp_path / "target.db")), "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        proc, opid = _migrate(url, d)
        assert _frame(proc, opid).outcome == "fenced"
    writer = sqlite3.connect(tmp_path / "target.db", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    proc, opid = _migrate(url, d)
    assert (_frame(proc, opid).outcome, history_rows_count(url)) == ("fenced", 0)
    writer.execute("ROLLBACK")
    writer.close()
    proc, opid = _migrate(url, d)
    assert _frame(proc, opid).data["applied"] == ["1"]


def history_rows_count(url: str) -> int:
    return len(history_rows(url))


def test_two_spellings_of_one_database_meet_at_one_fence(db_url: str, tmp_path: Path) -> None:
    engine = engine_of(db_url)
    if engine == "sqlite":
        (tmp_path / "alias").symlink_to(tmp_path)
        other = f"sqlite:///{tmp_path / 'alias' / 'target.db'}"
        open_target(db_url).close()  # create the file, so both resolve to it
    else:
        other = db_url.replace("127.0.0.1", "localhost")
        assert other != db_url
    with open_target(db_url) as a, open_target(other) as b:
        realm = a.identity().digest
        assert b.identity().digest == realm
        second = fence.held(b.engine, b.connection, b.identity().digest)
        with fence.held(a.engine, a.connection, realm), pytest.raises(fence.RealmBusy), second:
            pass
        with fence.held(b.engine, b.connection, realm):
            pass
