"""Helpers for the migration tests: write directories, run the real runner process."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from inotify_simple import INotify, flags

from ptah import failures
from ptah.engines import fence
from ptah.engines.connect import open_target
from ptah.engines.versioned import sumfile
from ptah.engines.versioned.dialects import Session
from ptah.engines.versioned.directory import read_directory
from ptah.runner.frame import ResultFrame, parse_result_for


def write_dir(path: Path, files: dict[str, str], *, sums: bool = True) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (path / name).write_text(text)
    if sums:
        sumfile.write(read_directory([path]))
    return path


def engine_of(url: str) -> str:
    scheme = url.split("://", 1)[0]
    return {"postgresql": "postgres", "mysql": "mysql", "sqlite": "sqlite"}[scheme]


@dataclass
class Run:
    proc: subprocess.CompletedProcess[str]
    operation_id: str

    @property
    def frame(self) -> ResultFrame:
        verdict = parse_result_for(self.proc.stdout, self.operation_id)
        assert verdict.frame is not None, (verdict, self.proc.stdout, self.proc.stderr)
        return verdict.frame

    @property
    def data(self) -> dict[str, Any]:
        return self.frame.data


def runner_cmd(op: str, dirs: list[Path], *extra: str, operation_id: str) -> list[str]:
    cmd = [sys.executable, "-m", "ptah.runner.main", op, "--operation-id", operation_id]
    for d in dirs:
        cmd += ["--dir", str(d)]
    return cmd + list(extra)


def runner_env(url: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PTAH_DB_URL"] = url
    env.pop("PTAH_OPERATION_ID", None)
    return env


def run(url: str, op: str, dirs: list[Path] | Path, *extra: str, timeout: float = 120) -> Run:
    """Run ``ptah-runner OP`` as a real process and check the one-frame contract."""
    dirs = [dirs] if isinstance(dirs, Path) else dirs
    opid = f"op-{uuid.uuid4().hex[:8]}"
    proc = subprocess.run(
        runner_cmd(op, dirs, *extra, operation_id=opid),
        env=runner_env(url),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout
    result = Run(proc, opid)
    assert proc.returncode == expected_exit(result.frame), proc.stderr
    return result


def expected_exit(frame: ResultFrame) -> int:
    """The runner's exit code for ``frame``: its failure class's, else 0."""
    code = failures.exit_code_for(frame.reason) if frame.outcome != "succeeded" else None
    return code or 0


def start(url: str, op: str, dirs: list[Path], *extra: str) -> tuple[subprocess.Popen[str], str]:
    opid = f"op-{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen(
        runner_cmd(op, dirs, *extra, operation_id=opid),
        env=runner_env(url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, opid


def history_rows(url: str) -> dict[str, dict[str, Any]]:
    with open_target(url) as target:
        s = Session(target.connection, target.engine, print)
        if not s.history_exists():
            return {}
        return {str(r["version"]): r for r in s.read_history()}


def query(url: str, sql: str) -> list[tuple[Any, ...]]:
    with open_target(url) as target:
        return Session(target.connection, target.engine, print).query(sql)


def history_table_exists(url: str) -> bool:
    with open_target(url) as target:
        return Session(target.connection, target.engine, print).history_exists()


@contextlib.contextmanager
def fence_attempts(url: str) -> Iterator[Callable[[], int]]:
    """For a test that holds ``url``'s realm fence: a function counting the attempts that
    other runs made to take it from now on (each refused while the test holds it), read
    off the database server's own session list or, for SQLite, the fence file's opens.

    * PostgreSQL: each attempt is a ``pg_try_advisory_lock`` with its own
      ``query_start`` in ``pg_stat_activity`` (the holder's own attempt predates this).
    * MariaDB: ``GET_LOCK(name, 0)`` leaves no trace once answered, so each statement a
      new session sends (its ``QUERY_ID`` advancing) counts; a run that is waiting sends
      only its attempts.
    * SQLite: each attempt opens ``<database>-ptah-fence`` (inotify ``IN_OPEN``).
    """
    engine = engine_of(url)
    if engine == "sqlite":
        path = fence.sqlite_fence_path(urlsplit(url).path)
        with INotify() as watch:
            watch.add_watch(path, flags.OPEN)
            opened = [0]

            def opens() -> int:
                opened[0] += len(watch.read(timeout=0))
                return opened[0]

            yield opens
        return
    with open_target(url) as observer:
        conn = observer.connection
        if engine == "postgres":
            sql = (
                "SELECT pid, query_start FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                " AND query LIKE 'SELECT pg_try_advisory_lock(%%'"
            )
        else:
            sql = (
                "SELECT ID, QUERY_ID FROM information_schema.PROCESSLIST"
                " WHERE DB = DATABASE() AND ID <> CONNECTION_ID()"
            )

        def rows() -> set[tuple[Any, Any]]:
            with contextlib.closing(conn.cursor()) as cur:
                cur.execute(sql)
                return {(r[0], r[1]) for r in cur.fetchall()}

        before = rows()
        seen: set[tuple[Any, Any]] = set()

        def attempts() -> int:
            seen.update(rows() - before)
            if engine == "postgres":
                return len(seen)
            first: dict[Any, int] = {}
            last: dict[Any, int] = {}
            for session, query_id in seen:
                first[session] = min(first.get(session, query_id), query_id)
                last[session] = max(last.get(session, query_id), query_id)
            return max((last[s] - first[s] for s in first), default=0)

        yield attempts
