"""A runner killed with SIGKILL mid-file is found as partial, and a re-run refuses.

The second statement of each file sleeps; the test waits until the history row says
statement 2 is running, kills the real runner process, and reads what is left.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from migsupport import history_rows, query, run, start, write_dir

from support.wait import wait_for

pytestmark = pytest.mark.integration


def _kill_when_running(url: str, version: str, statement: int, proc: subprocess.Popen[str]) -> None:
    def running_or_exited() -> bool:
        row = history_rows(url).get(version)
        running = row is not None and row["statement_running"] == statement
        return running or proc.poll() is not None

    try:
        wait_for(f"statement {statement} of {version} running", running_or_exited, 30, 0.05)
    except AssertionError:
        proc.kill()
        pytest.fail(f"statement {statement} of {version} never started: {proc.communicate()}")
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL


def _assert_partial_then_refused(url: str, d: Path) -> None:
    hist = run(url, "history", d)
    assert hist.frame.outcome == "succeeded"
    assert hist.data["applied"] == ["1"]
    assert hist.data["dirty"] == [
        {
            "version": "2",
            "statement": 2,
            "total": 3,
            "statementsApplied": 1,
            "error": None,
            "state": "interrupted",
            "startedAt": hist.data["dirty"][0]["startedAt"],
        }
    ]
    assert hist.data["settled"] is False
    # The killed client's statement may still be running in the server (it notices the
    # lost client only when the statement ends) and its session holds the realm's fence
    # until then: the re-run waits for the fence rather than being turned away.
    again = run(url, "migrate", d, "--lock-timeout", "60")
    assert (again.frame.outcome, again.frame.reason) == ("refused", "Dirty")
    assert again.data["applied"] == [] and again.data["statementsExecuted"] == 0
    assert "statement 2 of 3" in again.data["message"]
    assert again.data["partial"]["statement"] == 2


def _resolve(url: str, version: str, how: str) -> None:
    cmd = [sys.executable, "-m", "ptah.cli.main", "migrate", "resolve", "--url", url]
    cmd += ["--version", version, "--as", how]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_mariadb_multi_statement_file_killed_mid_file(mysql_url: str, tmp_path: Path) -> None:
    d = write_dir(
        tmp_path / "m",
        {
            "1_base.sql": "CREATE TABLE base (id INTEGER);",
            "2_slow.sql": "CREATE TABLE step1 (id INTEGER);\nDO SLEEP(5);\n"
            "CREATE TABLE step3 (id INTEGER);",
            "3_after.sql": "CREATE TABLE after3 (id INTEGER);",
        },
    )
    proc, _ = start(mysql_url, "migrate", [d])
    _kill_when_running(mysql_url, "2", 2, proc)
    _assert_partial_then_refused(mysql_url, d)
    assert "step3" not in {r[0] for r in query(mysql_url, "SHOW TABLES")}
    # The operator finishes the file by hand and marks it applied; then the run goes on.
    query(mysql_url, "CREATE TABLE step3 (id INTEGER)")
    _resolve(mysql_url, "2", "applied")
    r = run(mysql_url, "migrate", d)
    assert r.data["applied"] == ["3"], r.data
    assert run(mysql_url, "history", d).data["settled"] is True


def test_postgres_non_transactional_file_killed_mid_file(pg_url: str, tmp_path: Path) -> None:
    d = write_dir(
        tmp_path / "m",
        {
            "1_base.sql": "CREATE TABLE base (id INTEGER);",
            "2_concurrently.sql": "-- ptah:no-transaction\n"
            "CREATE TABLE big (id INTEGER);\nSELECT pg_sleep(5);\n"
            "CREATE INDEX CONCURRENTLY big_id ON big (id);",
        },
    )
    proc, _ = start(pg_url, "migrate", [d])
    _kill_when_running(pg_url, "2", 2, proc)
    _assert_partial_then_refused(pg_url, d)
    # Undo by hand, mark rolled back: the whole file runs again, CONCURRENTLY included.
    query(pg_url, "DROP TABLE big")
    _resolve(pg_url, "2", "rolled-back")
    r = run(pg_url, "migrate", d)
    assert r.data["applied"] == ["2"], r.data
    idx = query(pg_url, "SELECT indisvalid FROM pg_index WHERE indexrelid = 'big_id'::regclass")
    assert idx == [(True,)]


def test_postgres_transactional_file_killed_leaves_nothing(pg_url: str, tmp_path: Path) -> None:
    d = write_dir(
        tmp_path / "m",
        {"1_slow.sql": "CREATE TABLE t1 (id INTEGER);\nSELECT pg_sleep(30);\n"},
    )
    proc, _ = start(pg_url, "migrate", [d])
    sleeping = (
        "SELECT pid FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(30)%'"
        " AND datname = current_database()"
    )

    def started() -> bool:
        assert proc.poll() is None, proc.communicate()
        return bool(query(pg_url, sleeping))

    wait_for("the file's pg_sleep running", started, 30, interval=0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=10)
    # The server notices the dead client and rolls the file's transaction back; the
    # backend is ended here rather than at the end of its sleep, and gone once it has.
    query(pg_url, f"SELECT pg_terminate_backend(pid) FROM ({sleeping}) AS s")
    wait_for("the killed run's backend gone", lambda: not query(pg_url, sleeping), 30)
    hist = run(pg_url, "history", d)
    assert hist.data["dirty"] == [] and hist.data["pending"] == ["1"]
    assert query(pg_url, "SELECT to_regclass('t1') IS NULL") == [(True,)]
