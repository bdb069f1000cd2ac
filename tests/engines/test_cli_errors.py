"""Errors, not tracebacks: each failure of input or environment, through ``ptah`` and
``ptah-runner``, is one line naming what and where, its class's exit code, no credential;
the runner's is also its result frame (reason: the class).

Real PostgreSQL 15 and MariaDB 10.11 for refused credentials and missing databases; a
closed loopback port for an unreachable server; real files for SQLite.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from ptah import failures
from ptah.runner.frame import parse_result_for

pytestmark = pytest.mark.integration

DOCS = Path(__file__).resolve().parents[2] / "docs" / "errors.md"
PASSWORD = "Zq-sekret-9"  # in every URL given below; must never be printed


def _with(url: str, *, password: str | None = None, database: str | None = None) -> str:
    p = urlsplit(url)
    netloc = f"{p.username}:{password or p.password}@{p.hostname}:{p.port}"
    path = "/" + database if database is not None else p.path
    return urlunsplit((p.scheme, netloc, path, p.query, p.fragment))


@dataclass(frozen=True)
class Case:
    name: str
    url: Callable[[dict[str, str], Path], str]
    failure: failures.FailureClass
    says: tuple[str, ...]  # what the one line must name
    desired: str = "desired.sql"  # relative to tmp_path
    directory: str = "migrations"


CASES = [
    Case(
        "unreachable",
        lambda u, _t: f"postgresql://ptah:{PASSWORD}@127.0.0.1:1/app",
        failures.UNREACHABLE,
        ("cannot reach the PostgreSQL server at 127.0.0.1:1", "Connection refused"),
    ),
    Case(
        "wrong-password-postgres",
        lambda u, _t: _with(u["pg"], password=PASSWORD),
        failures.AUTH_FAILED,
        ("refused the credentials of user 'ptah'", "password authentication failed"),
    ),
    Case(
        "wrong-password-mariadb",
        lambda u, _t: _with(u["mysql"], password=PASSWORD),
        failures.AUTH_FAILED,
        ("MariaDB/MySQL server at 127.0.0.1:", "refused the credentials of user 'ptah'"),
    ),
    Case(
        "no-such-database-postgres",
        lambda u, _t: _with(u["pg"], database="ptah_no_such_db"),
        failures.DATABASE_NOT_FOUND,
        ("database 'ptah_no_such_db' does not exist on the PostgreSQL server",),
    ),
    Case(
        "no-such-database-mariadb",
        lambda u, _t: _with(u["mysql"], database="ptah_no_such_db"),
        failures.DATABASE_NOT_FOUND,
        ("database 'ptah_no_such_db' does not exist on the MariaDB/MySQL server",),
    ),
    Case(
        "not-a-database-file",
        lambda _u, t: f"sqlite:///{t / 'notes.txt'}",
        failures.NOT_A_DATABASE,
        ("notes.txt is not an SQLite database", "file is not a database"),
    ),
    Case(
        "sqlite-directory-missing",
        lambda _u, t: f"sqlite:///{t / 'nowhere' / 'app.db'}",
        failures.DATABASE_NOT_FOUND,
        ("the directory of the SQLite database", "nowhere/app.db does not exist"),
    ),
    Case(
        "bad-url-scheme",
        lambda _u, _t: f"oracle://ptah:{PASSWORD}@127.0.0.1/app",
        failures.BAD_URL,
        ("bad database URL", "unsupported database URL scheme 'oracle'"),
    ),
    Case(
        "bad-url-port",
        lambda _u, _t: f"postgresql://ptah:{PASSWORD}@127.0.0.1:99999/app",
        failures.BAD_URL,
        ("bad database URL", "invalid port"),
    ),
    Case(
        "bad-url-host",  # urlsplit's own ValueError was a traceback, for both commands
        lambda _u, _t: f"mysql://ptah:{PASSWORD}@[::1/app",
        failures.BAD_URL,
        ("bad database URL", "malformed (its host part cannot be read)"),
    ),
    Case(
        "bad-url-nul",  # sqlite3's ValueError was an internal error
        lambda _u, t: f"sqlite:///{t}/app%00.db",
        failures.BAD_URL,
        ("bad database URL", "holds a NUL character"),
    ),
    Case(
        "bad-url-sqlite-query",  # created a file named "app.db?mode=ro" beside app.db
        lambda _u, t: f"sqlite:///{t}/app.db?mode=ro",
        failures.BAD_URL,
        ("bad database URL", "sqlite URL has a query or fragment", "%3F"),
    ),
    Case(
        "not-a-regular-file",  # /dev/null read as an empty database: "No changes"
        lambda _u, _t: "sqlite:////dev/null",
        failures.NOT_A_DATABASE,
        ("/dev/null is not a regular file",),
    ),
    Case(
        "missing-desired-file",
        lambda _u, t: f"sqlite:///{t / 'app.db'}",
        failures.INPUT_UNREADABLE,
        ("desired schema file", "missing.sql", "No such file or directory"),
        desired="missing.sql",
    ),
    Case(
        "missing-migration-directory",
        lambda _u, t: f"sqlite:///{t / 'app.db'}",
        failures.INPUT_UNREADABLE,
        ("migration directory", "no-such-dir: does not exist"),
        directory="no-such-dir",
    ),
    Case(
        "migration-directory-is-a-file",
        lambda _u, t: f"sqlite:///{t / 'app.db'}",
        failures.INPUT_UNREADABLE,
        ("migration directory", "notes.txt: not a directory"),
        directory="notes.txt",
    ),
]


@pytest.fixture
def urls(request: pytest.FixtureRequest) -> dict[str, str]:
    return {"pg": request.getfixturevalue("pg_url"), "mysql": request.getfixturevalue("mysql_url")}


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "notes.txt").write_text("not a database, just notes\n" * 20)
    (tmp_path / "desired.sql").write_text("CREATE TABLE a (id INTEGER PRIMARY KEY);\n")
    (tmp_path / "migrations").mkdir()
    (tmp_path / "migrations" / "1_a.sql").write_text("CREATE TABLE a (id INTEGER);\n")
    return tmp_path


def _env(url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PTAH_")}
    if url is not None:
        env["PTAH_DB_URL"] = url
    return env


def _commands(case: Case, url: str, t: Path) -> list[tuple[str, list[str]]]:
    """The ptah commands the case applies to (the runner's are in the other test)."""
    desired, directory = str(t / case.desired), str(t / case.directory)
    if case.name in ("missing-migration-directory", "migration-directory-is-a-file"):
        return [("migrate status", ["migrate", "status", "--url", url, "--dir", directory])]
    cmds = [("plan", ["plan", "--url", url, "--desired", desired])]
    if case.name != "missing-desired-file":
        cmds.append(("migrate status", ["migrate", "status", "--url", url, "--dir", directory]))
        cmds.append(("migrate apply", ["migrate", "apply", "--dir", directory]))  # URL from env
    return cmds


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line, got:\n{stderr}"
    assert "Traceback" not in stderr
    return lines[0]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_ptah_prints_one_line_and_the_class_exit_code(
    case: Case, urls: dict[str, str], workdir: Path
) -> None:
    url = case.url(urls, workdir)
    for label, args in _commands(case, url, workdir):
        proc = subprocess.run(
            [sys.executable, "-m", "ptah.cli.main", *args],
            env=_env(url),
            capture_output=True,
            text=True,
            timeout=120,
        )
        line = _one_line(proc.stderr)
        assert line.startswith(f"ptah {args[0]}: "), (label, line)
        for what in case.says:
            assert what in line, (label, what, line)
        assert f"[{case.failure.reason}, exit {case.failure.exit_code}]" in line, (label, line)
        assert proc.returncode == case.failure.exit_code, (label, proc.returncode, line)
        assert PASSWORD not in proc.stdout + proc.stderr, label


RUNNER_CASES = [c for c in CASES if c.failure is not failures.INPUT_UNREADABLE] + [
    c for c in CASES if c.name in ("missing-desired-file", "missing-migration-directory")
]


@pytest.mark.parametrize("case", RUNNER_CASES, ids=[c.name for c in RUNNER_CASES])
def test_runner_prints_the_failure_as_its_frame_and_one_line(
    case: Case, urls: dict[str, str], workdir: Path
) -> None:
    url = case.url(urls, workdir)
    op = "plan" if case.name == "missing-desired-file" else "history"
    args = ["--desired", str(workdir / case.desired)] if op == "plan" else []
    args += ["--dir", str(workdir / case.directory)] if op == "history" else []
    proc = subprocess.run(
        [sys.executable, "-m", "ptah.runner.main", op, "--operation-id", "op-err", *args],
        env=_env(url),
        capture_output=True,
        text=True,
        timeout=120,
    )
    frame = parse_result_for(proc.stdout, "op-err").frame
    assert frame is not None, proc.stdout
    assert frame.outcome in ("failed", "refused") and frame.reason == case.failure.reason, frame
    line = _one_line(proc.stderr)
    assert line.startswith(f"ptah-runner {op}: "), line
    for what in case.says:
        assert what in line and what in str(frame.data["message"]), (what, line, frame)
    assert proc.returncode == case.failure.exit_code
    assert PASSWORD not in proc.stdout + proc.stderr


def test_a_missing_url_is_a_bad_url_for_both_commands(workdir: Path) -> None:
    ptah = subprocess.run(
        [
            sys.executable,
            "-m",
            "ptah.cli.main",
            "migrate",
            "status",
            "--dir",
            str(workdir / "migrations"),
        ],
        env=_env(None),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "pass --url or set PTAH_DB_URL" in _one_line(ptah.stderr)
    assert ptah.returncode == failures.BAD_URL.exit_code
    runner = subprocess.run(
        [sys.executable, "-m", "ptah.runner.main", "identify", "--operation-id", "op-x"],
        env=_env(None),
        capture_output=True,
        text=True,
        timeout=60,
    )
    frame = parse_result_for(runner.stdout, "op-x").frame
    assert frame is not None and frame.reason == failures.BAD_URL.reason
    assert "PTAH_DB_URL is not set" in _one_line(runner.stderr)
    assert runner.returncode == failures.BAD_URL.exit_code


def test_every_class_has_a_distinct_code_and_is_documented() -> None:
    codes = [c.exit_code for c in failures.CLASSES]
    assert len(set(codes)) == len(codes)
    assert not set(codes) & {failures.OK, failures.DID_NOT_SUCCEED, failures.USAGE, 3}
    text = DOCS.read_text()
    for c in failures.CLASSES:
        assert f"| {c.exit_code} | `{c.reason}` |" in text, c
    help_text = subprocess.run(
        [sys.executable, "-m", "ptah.cli.main", "--help"], capture_output=True, text=True
    ).stdout
    for c in failures.CLASSES:
        assert f"{c.exit_code:>3}  {c.meaning}" in " ".join(help_text.split("\n")) or (
            f"[{c.reason}]" in help_text
        ), c


FP = "sha256:" + "0" * 64  # never checked: a plan that cannot be read runs nothing
FORGED_PLANS = {
    "truncated": '{"statements": [{"sql": "DROP TABLE a"}], "fingerprintBefore": "' + FP,
    "not UTF-8": b"\xff\xfe{}",
    "not an object": "[]",
    "statements not a list": '{"statements": "DROP TABLE a", "fingerprintBefore": "' + FP + '"}',
    "hazards a string": '{"statements": [{"sql": "DROP TABLE a", "hazards": "destructive"}],'
    ' "fingerprintBefore": "' + FP + '"}',
    "sql not a string": '{"statements": [{"sql": 5}], "fingerprintBefore": "' + FP + '"}',
    "statement null": '{"statements": [null], "fingerprintBefore": "' + FP + '"}',
    "fingerprint null": '{"statements": [{"sql": "DROP TABLE a"}], "fingerprintBefore": null}',
    "nested too deeply": "[" * 100_000,
}


@pytest.mark.parametrize("name", sorted(FORGED_PLANS))
def test_runner_refuses_a_plan_file_it_cannot_read_as_a_plan(tmp_path: Path, name: str) -> None:
    """Truncated, damaged or forged: InputInvalid in one line, and nothing of it runs.

    ``"hazards": "destructive"`` was read as the letters of a string: the statement lost
    its destructive mark and ran without --allow-destructive; a deeply nested file was an
    internal error with a traceback."""
    db = tmp_path / "app.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE a (id INTEGER PRIMARY KEY)")
    conn.close()
    plan = tmp_path / "plan.json"
    body = FORGED_PLANS[name]
    plan.write_bytes(body if isinstance(body, bytes) else body.encode())
    runner = [sys.executable, "-m", "ptah.runner.main", "apply", "--operation-id", "op-p"]
    proc = subprocess.run(
        [*runner, "--plan", str(plan)],
        env=_env(f"sqlite:///{db}"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    frame = parse_result_for(proc.stdout, "op-p").frame
    assert frame is not None, proc.stdout
    assert frame.reason == failures.INPUT_INVALID.reason, frame
    line = _one_line(proc.stderr)
    assert line.startswith("ptah-runner apply: the plan ") and "is not valid: " in line, line
    assert proc.returncode == failures.INPUT_INVALID.exit_code
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("a",)]
    conn.close()


EMPTY_DESIRED = {
    "empty": "",
    "blank lines": "\n  \n\t\n",
    "comments only": "-- the schema\n/* was here */\n# and here\n",
    "byte order mark": "\ufeff\n",
    "empty statements": ";\n ;\n",
}


@pytest.mark.parametrize("name", sorted(EMPTY_DESIRED))
def test_a_desired_file_without_a_statement_is_refused_not_planned(
    tmp_path: Path, name: str
) -> None:
    """Planned, it would drop every table: ``ptah apply --yes`` of an empty file emptied
    the database. InputInvalid in one line from ``ptah`` and the runner; nothing dropped."""
    db = tmp_path / "app.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE a (id INTEGER PRIMARY KEY)")
    conn.close()
    desired = tmp_path / "desired.sql"
    desired.write_text(EMPTY_DESIRED[name])
    url = f"sqlite:///{db}"
    commands = [
        ["ptah.cli.main", "apply", "--yes", "--url", url, "--desired", str(desired)],
        ["ptah.runner.main", "plan", "--operation-id", "op-e", "--desired", str(desired)],
    ]
    for command in commands:
        proc = subprocess.run(
            [sys.executable, "-m", *command], env=_env(url), capture_output=True, text=True
        )
        line = _one_line(proc.stderr)
        assert "holds no SQL statement" in line, (command, line)
        assert f"[{failures.INPUT_INVALID.reason}, exit 16]" in line, (command, line)
        assert proc.returncode == failures.INPUT_INVALID.exit_code, (command, line)
    frame = parse_result_for(proc.stdout, "op-e").frame
    assert frame is not None and frame.reason == failures.INPUT_INVALID.reason, proc.stdout
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("a",)]
    conn.close()


def test_a_desired_file_with_comments_before_its_statement_is_planned(tmp_path: Path) -> None:
    desired = tmp_path / "desired.sql"
    desired.write_text("\ufeff-- schema\n/* x */ ;\nCREATE TABLE a (id INTEGER);\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ptah.cli.main",
            "plan",
            "--desired",
            str(desired),
            "--url",
            f"sqlite:///{tmp_path}/app.db",
        ],
        env=_env(None),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert "CREATE TABLE a (id INTEGER);" in proc.stdout


def _damaged(path: Path, how: str) -> None:
    with sqlite3.connect(path) as conn:
        conn.executescript("".join(f"CREATE TABLE t{i} (a INT, b TEXT);" for i in range(50)))
    conn.close()
    data = bytearray(path.read_bytes())
    if how == "schema page overwritten":
        data[200:4000] = b"A" * 3800
    else:
        data = data[: len(data) // 2]
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["schema page overwritten", "truncated"])
def test_a_damaged_sqlite_file_is_not_a_database_for_both_commands(
    tmp_path: Path, how: str
) -> None:
    """A damaged file was InternalError with a traceback (schema page overwritten) or the
    transient TargetUnavailable (truncated), which the operator retries for ever."""
    db = tmp_path / "app.db"
    _damaged(db, how)
    desired = tmp_path / "desired.sql"
    desired.write_text("CREATE TABLE a (id INTEGER PRIMARY KEY);\n")
    url = f"sqlite:///{db}"
    for command in (
        ["ptah.cli.main", "plan", "--url", url, "--desired", str(desired)],
        ["ptah.runner.main", "plan", "--operation-id", "op-d", "--desired", str(desired)],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", *command], env=_env(url), capture_output=True, text=True
        )
        line = _one_line(proc.stderr)
        assert "is not a usable SQLite database (database disk image is malformed)" in line
        assert proc.returncode == failures.NOT_A_DATABASE.exit_code, (command, line)
