"""A desired file that writes data into its temporary scratch is stopped at the size bound.

Without a dev database the scratch is a database on the target's own server. Before the
bound, a file's ``CREATE TABLE ... AS SELECT`` of a billion rows (or an INSERT ...
SELECT, a materialized view, a routine or a trigger of the file that inserts in a loop)
wrote into it for as long as the load's time bound let it: gigabytes on the production
server's disk. Each case plans such a file with the size bound lowered to 24 MB (an
empty scratch takes some 8 MB) and the time bound to 4 s (so that the code before the
size bound fails here on the time bound's message, without filling the disk), and
expects the plan refused naming the size and the line, the scratch dropped and no
backend left running the file's statement.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from ptah.engines import deadline
from ptah.engines.postgres import scratch
from support.databases import fresh_database
from support.plans import backends, plan_frame, public_relations

pytestmark = pytest.mark.integration

CAP_MB = 24
SAFETY_NET = 40.0
SEED = "CREATE TABLE kept (id int PRIMARY KEY, name text);\n"
MANY = "generate_series(1, 1000000000) g"

# name -> (the file, with {m} a marker in the writing statement; its line, None where
# the session may have had to be ended: a routine that catches the cancels and writes
# on. A cancel that lands between two of its blocks still ends the statement, and the
# line is then named: its last line, the call)
HOSTILE: dict[str, tuple[str, int | None]] = {
    "create-table-as": (
        SEED + "CREATE TABLE {m} AS SELECT g, md5(g::text) FROM " + MANY + ";\n",
        2,
    ),
    "insert-select": (
        SEED + "CREATE TABLE big (g int);\n"
        "INSERT INTO big SELECT g FROM " + MANY + " WHERE '{m}' <> '';\n",
        3,
    ),
    "materialized-view": (
        SEED + "CREATE MATERIALIZED VIEW {m} AS SELECT g, md5(g::text) FROM " + MANY + ";\n",
        2,
    ),
    "routine-in-a-loop": (
        SEED + "CREATE TABLE big (t text);\n"
        "CREATE FUNCTION {m}() RETURNS int LANGUAGE plpgsql AS $$\n"
        "BEGIN\n  LOOP INSERT INTO big SELECT repeat('x', 1000) FROM generate_series(1, 1000);"
        " END LOOP;\nEND $$;\n"
        "SELECT {m}();\n",
        7,
    ),
    "routine-catching-the-cancel": (
        SEED + "CREATE TABLE big (t text);\n"
        "CREATE FUNCTION {m}() RETURNS int LANGUAGE plpgsql AS $$\n"
        "BEGIN\n  LOOP\n    BEGIN\n"
        "      INSERT INTO big SELECT repeat('x', 1000) FROM generate_series(1, 1000);\n"
        "    EXCEPTION WHEN query_canceled THEN NULL;\n    END;\n  END LOOP;\nEND $$;\n"
        "SELECT {m}();\n",
        None,
    ),
    "trigger": (
        SEED + "CREATE TABLE big (t text);\n"
        "CREATE FUNCTION {m}() RETURNS trigger LANGUAGE plpgsql AS $$\n"
        "BEGIN\n  INSERT INTO big SELECT md5(g::text) FROM " + MANY + ";\n  RETURN NEW;\nEND $$;\n"
        "CREATE TRIGGER fill AFTER INSERT ON kept FOR EACH ROW EXECUTE FUNCTION {m}();\n"
        "INSERT INTO kept VALUES (1, 'seed');\n",
        9,
    ),
}


def _exists(url: str, name: str) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_database WHERE datname = %s", (name,))
        return row.fetchone() == (1,)


@pytest.fixture
def scratches(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The size bound lowered; the names of the scratches the plans make (their size
    reader is made for each)."""
    monkeypatch.setattr(deadline, "SCRATCH_BYTES", CAP_MB * 1024 * 1024)
    monkeypatch.setitem(deadline.STATEMENT_BYTES, "postgres", 0)  # the cap alone, as named
    monkeypatch.setattr(deadline, "LOAD_SECONDS", 4.0)
    names: list[str] = []
    made = scratch._grown

    def spy(admin: object, name: str, pid: int, limit: int) -> Callable[[], bool]:
        names.append(name)
        return made(admin, name, pid, limit)

    monkeypatch.setattr(scratch, "_grown", spy)
    return names


@pytest.fixture
def marker(pg_url: str) -> Iterator[str]:
    """A marker to put in the writing statement; after SAFETY_NET seconds the backends
    running it are ended (so code without the bound fails the test, not hangs it)."""
    name = "ptah_fill_" + uuid.uuid4().hex[:8]
    done = threading.Event()

    def net() -> None:
        while not done.wait(SAFETY_NET):
            with psycopg.connect(pg_url, autocommit=True) as conn:
                for pid in backends(pg_url, name):
                    conn.execute("SELECT pg_terminate_backend(%s)", (pid,))

    thread = threading.Thread(target=net, daemon=True)
    thread.start()
    yield name
    done.set()
    thread.join()


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_file_that_writes_data_is_stopped_at_the_size_bound(
    case: str, pg_db: str, pg_url: str, scratches: list[str], tmp_path: Path, marker: str
) -> None:
    sql, line = HOSTILE[case]
    started = time.monotonic()
    frame = plan_frame(pg_db, sql.format(m=marker), tmp_path, "op-scratch-size")
    elapsed = time.monotonic() - started
    message = str(frame.data.get("message", ""))
    assert frame.outcome == "failed", frame
    assert frame.reason == "DesiredSchemaInvalid", frame
    last = sql.count("\n")
    wheres = (
        [f" (line {line} of the desired file)"]
        if line
        else ["", f" (line {last} of the desired file)"]
    )
    expected = [
        f"desired schema grew its scratch past {CAP_MB} MB{where}:"
        " a desired file holds definitions, not data"
        for where in wheres
    ]
    assert any(e in message for e in expected), message
    assert elapsed < 30, f"refused after {elapsed:.1f} s"
    scratch.settle()
    assert scratches and not any(_exists(pg_url, name) for name in scratches)
    assert backends(pg_url, marker) == []


def test_the_bound_holds_when_a_large_file_loads_in_batches(
    pg_db: str, pg_url: str, scratches: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past :data:`scratch.BATCH` statements each part commits: the part that grew the
    scratch is replayed alone, and its line named."""
    monkeypatch.setattr(deadline, "LOAD_SECONDS", 20.0)
    marker = "ptah_fill_" + uuid.uuid4().hex[:8]
    tables = scratch.BATCH + 1
    sql = "".join(f"CREATE TABLE t{i} (id int);\n" for i in range(tables))
    sql += f"CREATE TABLE {marker} AS SELECT g FROM {MANY};\n"
    frame = plan_frame(pg_db, sql, tmp_path, "op-scratch-size")
    message = str(frame.data.get("message", ""))
    assert frame.reason == "DesiredSchemaInvalid", frame
    assert f"past {CAP_MB} MB (line {tables + 1} of the desired file)" in message, message
    scratch.settle()
    assert scratches and not any(_exists(pg_url, name) for name in scratches)
    assert backends(pg_url, marker) == []


def test_a_schema_with_a_few_seed_rows_still_plans(
    pg_db: str, scratches: list[str], tmp_path: Path
) -> None:
    sql = (
        SEED + "CREATE TABLE status (code text PRIMARY KEY);\n"
        "INSERT INTO status VALUES ('new'), ('done');\n"
        "INSERT INTO kept SELECT g, 'row ' || g FROM generate_series(1, 100) g;\n"
        "CREATE INDEX kept_name ON kept (name);\n"
    )
    frame = plan_frame(pg_db, sql, tmp_path, "op-scratch-size")
    assert frame.outcome != "failed", frame
    assert any("status" in str(s) for s in frame.data.get("statements", [])), frame


def test_the_bound_holds_in_a_dev_database_which_is_left_empty(
    pg_db: str, pg_url: str, scratches: list[str], tmp_path: Path
) -> None:
    marker = "ptah_fill_" + uuid.uuid4().hex[:8]
    sql, line = HOSTILE["insert-select"]
    with fresh_database(pg_url, "ptah_dev_") as dev_url:
        frame = plan_frame(pg_db, sql.format(m=marker), tmp_path, "op-scratch-size", dev_url)
        message = str(frame.data.get("message", ""))
        assert frame.reason == "DesiredSchemaInvalid", frame
        assert f"past {CAP_MB} MB (line {line} of the desired file)" in message, message
        assert public_relations(dev_url) == 0
    assert backends(pg_url, marker) == []


def test_a_large_schema_gets_room_by_its_statements(
    pg_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each statement's empty objects take room (a table with its sequence, key, TOAST
    table and indexes: some 60 KB): a schema of many tables is not data. With the base
    lowered below what 300 such tables take, the file is refused when statements bring
    no room, and plans with the room each brings (:func:`deadline.scratch_limit`)."""
    monkeypatch.setattr(deadline, "SCRATCH_BYTES", 12 * 1024 * 1024)
    sql = "".join(
        f"CREATE TABLE t{i} (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, name text);\n"
        f"CREATE INDEX t{i}_name ON t{i} (name);\n"
        f"CREATE INDEX t{i}_lower ON t{i} (lower(name));\n"
        for i in range(300)
    )
    assert deadline.scratch_limit("postgres", 900) == 12 * 1024 * 1024 + 900 * 64 * 1024
    monkeypatch.setitem(deadline.STATEMENT_BYTES, "postgres", 0)
    refused = plan_frame(pg_db, sql, tmp_path, "op-scratch-size")
    assert refused.reason == "DesiredSchemaInvalid", refused
    assert "grew its scratch past 12 MB" in str(refused.data.get("message", "")), refused
    monkeypatch.setitem(deadline.STATEMENT_BYTES, "postgres", 64 * 1024)
    planned = plan_frame(pg_db, sql, tmp_path, "op-scratch-size")
    assert planned.outcome == "succeeded", planned
    made = [s for s in planned.data.get("statements", []) if "CREATE TABLE" in str(s)]
    assert len(made) == 300
