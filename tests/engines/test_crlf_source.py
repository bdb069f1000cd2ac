"""A desired file saved with CRLF line endings plans what psql loads from it, byte for byte.

The CLI and the runner read the desired file with universal newlines, so a string
literal or a routine body spanning lines lost its ``\\r``: the default Ptah applied was
not the file's, and against a database loaded from the same file by a client that keeps
the bytes (psql, a driver) the plan was never empty.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ptah.engines import planner
from ptah.engines.connect import open_target
from ptah.engines.splitter import read_sql
from ptah.runner.frame import parse_result_for
from support.databases import fresh_database

pytestmark = pytest.mark.integration

PG = (
    "CREATE TABLE t (\r\n  id integer PRIMARY KEY,\r\n  note text DEFAULT 'a\r\nb'\r\n);\r\n"
    "CREATE FUNCTION f() RETURNS integer LANGUAGE plpgsql AS $$\r\nBEGIN\r\n"
    "  RETURN 1;\r\nEND\r\n$$;\r\n"
)
MY = "CREATE TABLE t (\r\n  id integer PRIMARY KEY,\r\n  note varchar(9) DEFAULT 'a\r\nb'\r\n);\r\n"
SQLITE = "CREATE TABLE t (\r\n  id integer PRIMARY KEY,\r\n  note text DEFAULT 'a\r\nb'\r\n);\r\n"


def _default(url: str) -> str:
    sql = {
        "postgresql": "SELECT column_default FROM information_schema.columns"
        " WHERE table_name = 't' AND column_name = 'note'",
        "mysql": "SELECT column_default FROM information_schema.columns"
        " WHERE table_schema = DATABASE() AND table_name = 't' AND column_name = 'note'",
        "sqlite": "SELECT dflt_value FROM pragma_table_info('t') WHERE name = 'note'",
    }[url.split(":", 1)[0]]
    with open_target(url) as t:
        cur = t.connection.cursor()
        cur.execute(sql)
        return str(cur.fetchone()[0])


@pytest.mark.parametrize(
    ("source", "admin"),
    [(PG, "pg_url"), (MY, "mysql_url"), (SQLITE, None)],
    ids=["postgres", "mysql", "sqlite"],
)
def test_crlf_literals_and_bodies_apply_as_written_and_converge_with_a_direct_load(
    source: str, admin: str | None, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    desired = tmp_path / "desired.sql"
    desired.write_bytes(source.encode())
    assert read_sql(desired) == source
    if admin is None:
        urls = [f"sqlite:///{tmp_path}/cli.db", f"sqlite:///{tmp_path}/direct.db"]
        _apply_and_compare(desired, source, *urls)
        return
    base = request.getfixturevalue(admin)
    with fresh_database(base) as by_cli, fresh_database(base) as direct:
        _apply_and_compare(desired, source, by_cli, direct)


def _apply_and_compare(desired: Path, source: str, by_cli: str, direct: str) -> None:
    cli = [sys.executable, "-m", "ptah.cli.main", "apply", "--yes", "--url", by_cli]
    done = subprocess.run([*cli, "--desired", str(desired)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    with open_target(direct) as t:  # as a driver (or psql) loads the file: bytes kept
        if direct.startswith("sqlite"):
            t.connection.executescript(source)
        else:
            t.connection.cursor().execute(source.encode())  # one simple-query round trip
            t.connection.commit()
    kept = _default(direct)
    assert "\r" in kept or "\\r" in kept, kept  # MariaDB shows it escaped
    assert _default(by_cli) == _default(direct)
    with open_target(direct) as t:
        assert planner.plan(t, read_sql(desired)).statements == []
    runner = [sys.executable, "-m", "ptah.runner.main", "plan", "--operation-id", "op-crlf"]
    proc = subprocess.run(
        [*runner, "--desired", str(desired)],
        env={**os.environ, "PTAH_DB_URL": direct},
        capture_output=True,
        text=True,
        timeout=120,
    )
    frame = parse_result_for(proc.stdout, "op-crlf").frame
    assert frame is not None and frame.outcome == "succeeded", proc.stdout + proc.stderr
    assert frame.data["statements"] == [], "the runner reads the file as written too"
