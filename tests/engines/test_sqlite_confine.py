"""What a SQLite desired file may not do, refused in one line before anything is planned.

A temporary trigger lives only in the connection that made it, yet fires on the main
schema's tables and writes where its body says: planned, it would be dropped without a
word. A statement that
runs on past the scratch's deadline is interrupted and named, not waited for.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ptah.engines import deadline, planner
from ptah.engines.base import EngineError
from ptah.engines.connect import open_target
from ptah.engines.model import PlanError

pytestmark = pytest.mark.integration


def _refusal(tmp_path: Path, desired: str) -> str:
    """The one-line message a plan of ``desired`` fails with (it must fail)."""
    with (
        open_target(f"sqlite:///{tmp_path}/t.db") as t,
        pytest.raises((PlanError, EngineError)) as caught,
    ):
        planner.plan(t, desired)
    message = str(caught.value)
    assert "\n" not in message, message
    return message


TEMPORARY = {
    "temp trigger": "CREATE TABLE t (a INT);\n"
    "CREATE TEMP TRIGGER tt AFTER INSERT ON main.t BEGIN DELETE FROM main.t; END;",
    "temporary trigger, if not exists": "CREATE TABLE t (a INT);\n"
    "CREATE TEMPORARY TRIGGER IF NOT EXISTS tt AFTER INSERT ON t BEGIN SELECT 1; END;",
    "trigger in the temp schema": "CREATE TABLE t (a INT);\n"
    "CREATE TRIGGER temp.tt AFTER INSERT ON main.t BEGIN DELETE FROM main.t; END;",
    "quoted temp schema": "CREATE TABLE t (a INT);\n"
    'CREATE TRIGGER "temp"."tt" AFTER INSERT ON t BEGIN DELETE FROM t; END;',
}


@pytest.mark.parametrize("name", sorted(TEMPORARY))
def test_temporary_triggers_are_refused(tmp_path: Path, name: str) -> None:
    message = _refusal(tmp_path, TEMPORARY[name])
    assert "temporary" in message and "\n" not in message, message


def test_a_statement_that_runs_on_is_interrupted_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deadline, "LOAD_SECONDS", 0.5)
    desired = (
        "CREATE TABLE t (a INT);\n"
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r;\n"
    )
    message = _refusal(tmp_path, desired)
    assert "line 2" in message and "interrupted" in message and "\n" not in message, message


BULK = {
    "rows beyond the scratch's size": "CREATE TABLE t (b BLOB);\nWITH RECURSIVE r(n) AS"
    " (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 300)"
    " INSERT INTO t SELECT zeroblob(1000000) FROM r;",
    "one value beyond the value bound": "CREATE TABLE t (a INT);\n"
    "SELECT length(zeroblob(20000000));",
}


@pytest.mark.parametrize("name", sorted(BULK))
def test_a_file_that_fills_the_scratch_is_refused_at_its_line(tmp_path: Path, name: str) -> None:
    """The scratch holds a schema: 256 MB in all, 16 MB a value (ops.SCRATCH_BYTES,
    VALUE_BYTES), not the memory of the process that plans."""
    message = _refusal(tmp_path, BULK[name])
    assert "line 2" in message and "\n" not in message, message
    assert "full" in message or "too big" in message, message


QUOTED_CALLS = {
    "double-quoted, in a trigger": "CREATE TABLE t (a INT);\nCREATE TRIGGER tr AFTER INSERT"
    " ON t BEGIN SELECT \"load_extension\"('/tmp/x.so'); END;",
    "bracketed, in a view": "CREATE TABLE t (a INT);\n"
    "CREATE VIEW v AS SELECT [load_extension]('/tmp/x.so');",
    "backticked, in a default": "CREATE TABLE t (a INT);\n"
    "CREATE TABLE u (b BLOB DEFAULT (`readfile`('/etc/passwd')));",
    "upper case and quoted, in a check": "CREATE TABLE t (a INT);\n"
    'CREATE TABLE u (b TEXT CHECK ("FTS3_TOKENIZER"(b) IS NULL));',
}


@pytest.mark.parametrize("name", sorted(QUOTED_CALLS))
def test_a_function_called_by_a_quoted_name_is_refused(tmp_path: Path, name: str) -> None:
    """SQLite calls "load_extension"(...) as load_extension(...); in a trigger or a view
    nothing calls it while the scratch loads, so the authorizer never sees it: the plan
    would create it on the target, where it runs when the trigger fires."""
    message = _refusal(tmp_path, QUOTED_CALLS[name])
    assert "line 2" in message and "reaches outside the database" in message, message


OUTSIDE_TABLES = {
    "fsdir in a trigger": "CREATE TABLE t (a INT);\nCREATE TRIGGER tr AFTER INSERT ON t BEGIN"
    " INSERT INTO t SELECT length(name) FROM fsdir('/etc'); END;",
    "zipfile joined in a view": "CREATE TABLE t (a INT);\n"
    "CREATE VIEW v AS SELECT name FROM t, zipfile('/tmp/x.zip');",
    "raw pages written by a trigger": "CREATE TABLE t (a INT);\nCREATE TRIGGER tr AFTER INSERT"
    ' ON t BEGIN UPDATE "sqlite_dbpage" SET data = zeroblob(4096) WHERE pgno = 1; END;',
    "raw pages named in the main schema, in a view": "CREATE TABLE t (a INT);\n"
    "CREATE VIEW v AS SELECT t.a, p.data FROM t, main.sqlite_dbpage AS p;",
    "raw pages named in the main schema, written by a trigger": "CREATE TABLE t (a INT);\n"
    'CREATE TRIGGER tr AFTER INSERT ON t BEGIN UPDATE main . "sqlite_dbpage" SET data ='
    " zeroblob(4096) WHERE pgno = 1; END;",
    "a csv virtual table": "CREATE TABLE t (a INT);\n"
    "CREATE VIRTUAL TABLE c USING csv(filename='/etc/passwd');",
}
OWN_NAMES = (
    "CREATE TABLE csv (a INTEGER PRIMARY KEY, zipfile TEXT, fsdir INT);\n"
    "CREATE TABLE zipfile (b INT REFERENCES csv (a));\n"
    "CREATE VIEW v AS SELECT zipfile, fsdir FROM csv;\n"
    "CREATE TRIGGER tr AFTER INSERT ON csv BEGIN INSERT INTO zipfile (b) VALUES (new.a); END;\n"
)


@pytest.mark.parametrize("name", sorted(OUTSIDE_TABLES))
def test_tables_and_modules_that_reach_files_are_refused(tmp_path: Path, name: str) -> None:
    """Absent from Python's sqlite3, they load in the scratch inside a trigger or view,
    and would read files or write raw pages on a target whose build has them."""
    message = _refusal(tmp_path, OUTSIDE_TABLES[name])
    assert "line 2" in message and "reaches outside the database" in message, message


def test_the_files_own_objects_may_have_those_names(tmp_path: Path) -> None:
    with open_target(f"sqlite:///{tmp_path}/t.db") as t:
        assert len(planner.plan(t, OWN_NAMES).statements) == 4


FORGED_STATEMENTS = {
    "attach": "ATTACH DATABASE '{dir}/other.db' AS other",
    "an ordinary statement (control)": "CREATE TABLE other_copy AS SELECT 1 AS x",
    "load an extension": "SELECT load_extension('{dir}/ext.so')",
    "write a setting": "PRAGMA user_version = 7",
}


@pytest.mark.parametrize("name", sorted(FORGED_STATEMENTS))
def test_an_applied_plan_is_held_to_the_same_rules(tmp_path: Path, name: str) -> None:
    """A plan file is input: its statements run under the scratch's authorizer, so a
    forged one that matches the target's fingerprint still cannot attach another file,
    load code or write a database setting; the apply fails whole and nothing stays."""
    from ptah.engines.model import Statement

    url = f"sqlite:///{tmp_path}/t.db"
    sql = FORGED_STATEMENTS[name].format(dir=tmp_path)
    with open_target(url) as t:
        t.connection.execute("CREATE TABLE a (id INTEGER PRIMARY KEY)")
        before = planner.current_fingerprint(t)
        statements = [Statement("CREATE TABLE b (x INT)"), Statement(sql)]
        result = planner.apply(t, statements, before, True)
        version = t.connection.execute("PRAGMA user_version").fetchone()[0]
        tables = t.connection.execute("SELECT name FROM sqlite_master").fetchall()
    if name == "an ordinary statement (control)":
        assert result.outcome == "succeeded", result.message
        return
    assert result.outcome == "failed" and "not authorized" in result.message, result.message
    assert result.progress.committed == 0 and tables == [("a",)] and version == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.db", "t.db-ptah-fence"]


# -- migrations: a versioned file runs on the target file itself, and nowhere else ------

SQLITE_MIGRATIONS = {
    "attach the sentinel": "ATTACH '{sentinel}' AS s;\nDELETE FROM s.keep;\n",
    "attach, comment inside": "ATTACH/**/DATABASE '{sentinel}' AS s;\n",
    "attach a new file": "ATTACH '{dir}/new.db' AS n;\nCREATE TABLE n.t (a);\n",
    "detach": "DETACH DATABASE temp;\n",
    "another schema": "DROP TABLE s.keep;\n",
    "vacuum into": "VACUUM INTO '{dir}/copy.db';\n",
    "writable_schema": "PRAGMA writable_schema = ON;\n",
    "temp_store_directory": "PRAGMA temp_store_directory = '{dir}';\n",
    "load_extension": "SELECT load_extension('{dir}/x.so');\n",
    "writefile in a trigger": "CREATE TRIGGER w AFTER INSERT ON a BEGIN"
    " SELECT writefile('{dir}/out', 'x'); END;\n",
    "temp trigger": "CREATE TEMP TRIGGER t AFTER INSERT ON main.a BEGIN DELETE FROM main.a; END;\n",
}


def _sqlite_migration(url: str, directory: Path, op: str) -> dict[str, object]:
    from ptah.runner import operations
    from ptah.runner.emit import Run
    from ptah.runner.frame import ResultFrame

    with open_target(url) as target:
        run = Run.on(target, op, f"op-{op}")
        if op == "history":
            payload = operations.history(run, [directory])
        else:
            payload = operations.migrate(run, [directory], None, None, 0.0, None)
    frame = ResultFrame.model_validate(payload)
    return {"outcome": frame.outcome, "reason": frame.reason, **frame.data}


def _sqlite_migration_dir(tmp_path: Path, second: str) -> Path:
    from support.migration_dir import with_sum

    directory = tmp_path / "migrations"
    directory.mkdir()
    files = {"0001_a.sql": "CREATE TABLE a (id INTEGER PRIMARY KEY);\n", "0002_x.sql": second}
    for name, text in with_sum(files).items():
        (directory / name).write_text(text)
    return directory


@pytest.mark.parametrize("name", sorted(SQLITE_MIGRATIONS))
def test_sqlite_migrations_that_leave_the_file_are_refused(tmp_path: Path, name: str) -> None:
    import hashlib
    import sqlite3

    data = tmp_path / "data"
    data.mkdir()
    sentinel = data / "sentinel.db"
    with sqlite3.connect(sentinel) as conn:
        conn.execute("CREATE TABLE keep (id INTEGER PRIMARY KEY, v TEXT)")
        conn.execute("INSERT INTO keep VALUES (1, 'one')")
    conn.close()
    url = f"sqlite:///{data}/target.db"
    with open_target(url):
        pass

    def state() -> str:
        # The realm's fence file beside the target is Ptah's own (Migrate holds it).
        listing = sorted(p.name for p in data.iterdir() if not p.name.endswith("-ptah-fence"))
        return repr(listing) + hashlib.sha256(sentinel.read_bytes()).hexdigest()

    before = state()
    sql = SQLITE_MIGRATIONS[name].format(sentinel=sentinel, dir=data)
    directory = _sqlite_migration_dir(tmp_path, sql)
    for op in ("history", "migrate"):
        got = _sqlite_migration(url, directory, op)
        assert (got["outcome"], got["reason"]) == ("refused", "StatementRefused"), got
        message = str(got["message"])
        assert "0002_x.sql line 1:" in message and "\n" not in message, message
    assert state() == before, f"the data directory changed by {sql!r}"
    with open_target(url) as target:
        assert target.connection.execute("SELECT name FROM sqlite_master").fetchall() == []


def test_sqlite_migrations_may_set_their_own_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/target.db"
    sql = (
        "-- ptah:no-transaction\nPRAGMA user_version = 7;\nPRAGMA journal_mode = WAL;\n"
        "CREATE TABLE main.b (id INTEGER);\nVACUUM;\n"
    )
    got = _sqlite_migration(url, _sqlite_migration_dir(tmp_path, sql), "migrate")
    assert got["outcome"] == "succeeded" and got["applied"] == ["1", "2"], got
    with open_target(url) as target:
        assert target.connection.execute("PRAGMA user_version").fetchone()[0] == 7


def test_sqlite_a_migration_is_held_by_the_authorizer_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second line: with the reading disarmed, SQLite's authorizer still refuses the
    ATTACH while the file runs, and nothing is created beside the target."""
    from ptah.engines.versioned import confine as vconfine

    monkeypatch.setattr(vconfine, "check", lambda session, files: None)
    data = tmp_path / "data"
    data.mkdir()
    url = f"sqlite:///{data}/target.db"
    sql = f"ATTACH '{data}/new.db' AS n;\nCREATE TABLE n.t (a);\n"
    got = _sqlite_migration(url, _sqlite_migration_dir(tmp_path, sql), "migrate")
    assert got["outcome"] == "failed" and "not authorized" in str(got["failure"]), got
    assert not (data / "new.db").exists()


def test_sqlite_files_below_the_baseline_are_not_read(tmp_path: Path) -> None:
    """On a database without history, the files up to the baseline never run: neither
    History (given the baseline, as the operator gives it) nor Migrate refuses them."""
    from ptah.runner import operations
    from ptah.runner.emit import Run
    from support.migration_dir import with_sum

    directory = tmp_path / "migrations"
    directory.mkdir()
    files = {"0001_old.sql": "ATTACH 'old.db' AS o;\n", "0002_b.sql": "CREATE TABLE b (id INT);\n"}
    for name, text in with_sum(files).items():
        (directory / name).write_text(text)
    url = f"sqlite:///{tmp_path}/target.db"
    with open_target(url) as target:
        target.connection.execute("CREATE TABLE a (id INT)")  # what version 1 made
        refused = operations.history(Run.on(target, "history", "op-h"), [directory])
        read = operations.history(Run.on(target, "history", "op-h2"), [directory], "1")
        done = operations.migrate(
            Run.on(target, "migrate", "op-m"), [directory], None, "1", 0, None
        )
    assert (refused["outcome"], refused["reason"]) == ("refused", "StatementRefused"), refused
    assert read["outcome"] == "succeeded", read
    assert done["outcome"] == "succeeded" and done["data"]["applied"] == ["2"], done
