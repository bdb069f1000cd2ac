"""A reading leaves no trace: ``ptah plan`` and ``ptah migrate status`` against an SQLite
path that does not exist plan from the empty database without creating the file (a
mistyped path used to leave an empty database behind), and against an existing file they
open it read-only. ``ptah apply`` still creates the file, as SQLite does."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ptah.engines.base import TargetUnavailable
from ptah.engines.connect import open_target

pytestmark = pytest.mark.integration

DESIRED = "CREATE TABLE a (id INTEGER PRIMARY KEY, n TEXT);\n"


def _ptah(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PTAH_DB")}
    return subprocess.run(
        [sys.executable, "-m", "ptah.cli.main", *args], env=env, capture_output=True, text=True
    )


def test_a_plan_against_a_missing_file_plans_from_empty_and_creates_nothing(
    tmp_path: Path,
) -> None:
    desired = tmp_path / "desired.sql"
    desired.write_text(DESIRED)
    db = tmp_path / "typo.db"
    proc = _ptah("plan", "--desired", str(desired), "--url", f"sqlite:///{db}")
    assert proc.returncode == 0, proc.stderr
    assert "CREATE TABLE a (id INTEGER PRIMARY KEY, n TEXT);" in proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["desired.sql"]
    # The apply, which writes, creates it; the plan after it has nothing left to do.
    proc = _ptah("apply", "--desired", str(desired), "--url", f"sqlite:///{db}", "--yes")
    assert proc.returncode == 0, proc.stderr
    proc = _ptah("plan", "--desired", str(desired), "--url", f"sqlite:///{db}")
    assert proc.returncode == 0 and proc.stdout.startswith("No changes."), proc.stdout


def test_migrate_status_against_a_missing_file_creates_nothing(tmp_path: Path) -> None:
    migrations = tmp_path / "migrations"
    migrations.mkdir()
    (migrations / "V1__a.sql").write_text(DESIRED)
    db = tmp_path / "typo.db"
    proc = _ptah("migrate", "status", "--url", f"sqlite:///{db}", "--dir", str(migrations))
    assert proc.returncode == 0, proc.stderr
    assert "1 pending" in proc.stdout, proc.stdout
    assert not db.exists()


def test_a_read_only_opening_cannot_write_the_file(tmp_path: Path) -> None:
    db = tmp_path / "app.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE a (id INTEGER)")
    conn.close()
    with open_target(f"sqlite:///{db}", read_only=True) as target:
        assert target.connection.execute("SELECT name FROM sqlite_master").fetchall() == [("a",)]
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            target.connection.execute("CREATE TABLE b (id INTEGER)")
        opened = target.identity()
    with open_target(f"sqlite:///{db}") as target:
        assert target.identity().digest == opened.digest  # the same file, the same realm


def test_a_read_only_opening_of_a_missing_file_names_its_path(tmp_path: Path) -> None:
    db = tmp_path / "later.db"
    with open_target(f"sqlite:///{db}", read_only=True) as target:
        assert target.identity().key == {"path": str(db.resolve())}
        assert target.connection.execute("SELECT count(*) FROM sqlite_master").fetchone() == (0,)
    assert not db.exists()
    with pytest.raises(TargetUnavailable, match="does not exist"):
        open_target(f"sqlite:///{tmp_path}/no/such/dir.db", read_only=True)
