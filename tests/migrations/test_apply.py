"""Apply, re-run, refusals and failures through the real runner on every engine."""

from __future__ import annotations

from pathlib import Path

import pytest
from migsupport import engine_of, history_rows, history_table_exists, query, run, write_dir

pytestmark = pytest.mark.integration

FILES = {
    "0001_create.sql": "CREATE TABLE people (id INTEGER PRIMARY KEY, name VARCHAR(50));\n"
    "INSERT INTO people (id, name) VALUES (1, 'a;b');\n",
    "0002_more.sql": "CREATE TABLE pets (id INTEGER PRIMARY KEY, owner INTEGER);\n"
    "INSERT INTO pets (id, owner) VALUES (1, 1);\n",
    "0003_index.sql": "CREATE INDEX pets_owner ON pets (owner);\n",
}


@pytest.fixture
def mdir(tmp_path: Path) -> Path:
    return write_dir(tmp_path / "m", FILES)


def test_apply_then_rerun_is_a_noop(db_url: str, mdir: Path) -> None:
    first = run(db_url, "migrate", mdir)
    assert first.frame.outcome == "succeeded", first.data
    assert first.frame.database is not None
    assert first.data["applied"] == ["1", "2", "3"]
    assert first.data["statementsExecuted"] == 5
    assert first.data["history"]["settled"] is True

    again = run(db_url, "migrate", mdir)
    assert again.frame.outcome == "succeeded"
    assert again.data["applied"] == []
    assert again.data["statementsExecuted"] == 0
    assert query(db_url, "SELECT COUNT(*) FROM people")[0][0] == 1

    hist = run(db_url, "history", mdir)
    assert hist.frame.operation_type == "history"
    assert hist.data["applied"] == ["1", "2", "3"]
    assert hist.data["pending"] == []
    assert hist.data["settled"] is True
    assert hist.data["directoryHash"] == first.data["directoryHash"]

    rows = history_rows(db_url)
    row = rows["2"]
    assert (row["statements_applied"], row["statements_total"]) == (2, 2)
    assert row["finished_at"] is not None and row["error"] is None
    assert row["checksum"] and row["runner_version"]
    assert row["database_digest"] == first.frame.database.digest


def test_history_is_read_only_and_reports_pending(db_url: str, mdir: Path) -> None:
    hist = run(db_url, "history", mdir)
    assert hist.data["pending"] == ["1", "2", "3"]
    assert hist.data["settled"] is False
    assert not history_table_exists(db_url)


def test_to_target_stops_there(db_url: str, mdir: Path) -> None:
    r = run(db_url, "migrate", mdir, "--to", "2")
    assert r.data["applied"] == ["1", "2"]
    assert r.data["history"]["pending"] == ["3"]
    unknown = run(db_url, "migrate", mdir, "--to", "7")
    assert (unknown.frame.outcome, unknown.frame.reason) == ("refused", "UnknownTarget")


def test_edited_applied_file_is_detected_and_nothing_runs(db_url: str, mdir: Path) -> None:
    assert run(db_url, "migrate", mdir, "--to", "2").data["applied"] == ["1", "2"]
    # Edited without re-hashing: the sum file catches it before the database is read.
    (mdir / "0001_create.sql").write_text(FILES["0001_create.sql"] + "-- tweak\n")
    r = run(db_url, "migrate", mdir)
    assert (r.frame.outcome, r.frame.reason) == ("refused", "SumFileMismatch")
    assert "0001_create.sql: edited" in r.data["message"]
    # Edited and re-hashed: the history table's checksum catches it.
    write_dir(mdir, {})
    r = run(db_url, "migrate", mdir)
    assert (r.frame.outcome, r.frame.reason) == ("refused", "ChecksumMismatch")
    assert r.data["history"]["mismatched"][0]["version"] == "1"
    assert "3" not in history_rows(db_url)
    hist = run(db_url, "history", mdir)
    assert hist.data["mismatched"][0]["version"] == "1"
    assert hist.data["settled"] is False


def test_non_empty_database_needs_a_baseline(db_url: str, mdir: Path) -> None:
    query(db_url, "CREATE TABLE people (id INTEGER PRIMARY KEY, name VARCHAR(50))")
    r = run(db_url, "migrate", mdir)
    assert (r.frame.outcome, r.frame.reason) == ("refused", "NeedsBaseline")
    assert not history_table_exists(db_url)
    r = run(db_url, "migrate", mdir, "--baseline", "1")
    assert r.frame.outcome == "succeeded", r.data
    assert r.data["baselineRecorded"] == "1"
    assert r.data["applied"] == ["2", "3"]
    hist = run(db_url, "history", mdir)
    assert hist.data["belowBaseline"] == ["1"]
    assert hist.data["baseline"] == "1"
    assert hist.data["settled"] is True


def test_pending_file_older_than_applied_is_refused(db_url: str, mdir: Path) -> None:
    run(db_url, "migrate", mdir)
    write_dir(mdir, {"0002.5_late.sql": "CREATE TABLE late (id INTEGER);"})
    r = run(db_url, "migrate", mdir)
    assert (r.frame.outcome, r.frame.reason) == ("refused", "OutOfOrder")
    hist = run(db_url, "history", mdir)
    assert hist.data["outOfOrder"] == [{"version": "2.5", "state": "pending", "after": "3"}]


def test_applied_version_missing_from_directory(db_url: str, mdir: Path) -> None:
    run(db_url, "migrate", mdir)
    (mdir / "0003_index.sql").unlink()
    write_dir(mdir, {})
    hist = run(db_url, "history", mdir)
    assert hist.data["missingFromDirectory"] == ["3"]
    r = run(db_url, "migrate", mdir)
    assert (r.frame.outcome, r.frame.reason) == ("refused", "MissingFromDirectory")


def test_failing_statement(db_url: str, tmp_path: Path) -> None:
    d = write_dir(
        tmp_path / "f",
        {
            "1_ok.sql": "CREATE TABLE ok1 (id INTEGER);",
            "2_bad.sql": "CREATE TABLE half (id INTEGER);\nINSERT INTO nowhere VALUES (1);\n"
            "CREATE TABLE never (id INTEGER);",
        },
    )
    r = run(db_url, "migrate", d)
    assert (r.frame.outcome, r.frame.reason) == ("failed", "StatementFailed")
    assert r.data["applied"] == ["1"]
    failure = r.data["failure"]
    assert (failure["version"], failure["statement"], failure["total"]) == ("2", 2, 3)
    assert "nowhere" in failure["error"]
    if engine_of(db_url) == "mysql":
        # MariaDB DDL commits: the file is partially applied and says where it stopped.
        assert failure["rolledBack"] is False
        assert r.data["partial"]["statement"] == 2
        assert query(db_url, "SELECT COUNT(*) FROM half")[0][0] == 0
        again = run(db_url, "migrate", d)
        assert (again.frame.outcome, again.frame.reason) == ("refused", "Dirty")
        dirty = run(db_url, "history", d).data["dirty"]
        assert dirty[0]["statement"] == 2 and dirty[0]["state"] == "failed"
        assert "nowhere" in dirty[0]["error"]
    else:
        # One transaction: nothing of the file remains and it is simply pending again.
        assert failure["rolledBack"] is True
        assert r.data["partial"] is None
        assert "2" not in history_rows(db_url)
        assert run(db_url, "history", d).data["pending"] == ["2"]
        with pytest.raises(Exception, match="half"):
            query(db_url, "SELECT COUNT(*) FROM half")


def test_merged_directories_and_duplicates(db_url: str, tmp_path: Path) -> None:
    a = write_dir(tmp_path / "a", {"1_a.sql": "CREATE TABLE a (id INTEGER);"}, sums=False)
    b = write_dir(tmp_path / "b", {"2_b.sql": "CREATE TABLE b (id INTEGER);"}, sums=False)
    from ptah.engines.versioned import sumfile
    from ptah.engines.versioned.directory import read_directory

    sumfile.write(read_directory([a, b]))
    r = run(db_url, "migrate", [a, b])
    assert r.data["applied"] == ["1", "2"], r.data
    c = write_dir(tmp_path / "c", {"V2__dup.sql": "SELECT 1;"}, sums=False)
    r = run(db_url, "history", [a, b, c])
    assert (r.frame.outcome, r.frame.reason) == ("refused", "InputInvalid")
    assert "appears twice" in r.data["message"]


def test_missing_sum_file_is_refused(db_url: str, tmp_path: Path) -> None:
    d = write_dir(tmp_path / "n", {"1_a.sql": "CREATE TABLE a (id INTEGER);"}, sums=False)
    r = run(db_url, "migrate", d)
    assert (r.frame.outcome, r.frame.reason) == ("refused", "SumFileMissing")
    assert not history_table_exists(db_url)


def test_transaction_control_in_a_file_is_refused_before_anything_runs(
    db_url: str, tmp_path: Path
) -> None:
    d = write_dir(
        tmp_path / "t",
        {
            "1_a.sql": "CREATE TABLE a (id INTEGER);",
            "2_b.sql": "BEGIN;\nCREATE TABLE b (id INTEGER);\nCOMMIT;",
        },
    )
    r = run(db_url, "migrate", d)
    assert (r.frame.outcome, r.frame.reason) == ("refused", "InvalidMigration")
    assert "2_b.sql line 1" in r.data["message"]
    assert not history_table_exists(db_url)


def test_a_nul_character_refuses_the_file_and_nothing_runs(db_url: str, tmp_path: Path) -> None:
    # The C client libraries end a query at a NUL: on PostgreSQL the statement after it
    # ran as an empty query, and the file was recorded as applied with half its work.
    d = write_dir(
        tmp_path / "m",
        {
            "1_ok.sql": "CREATE TABLE ok (id INTEGER);\n",
            "2_nul.sql": "CREATE TABLE a (id INTEGER);\n\0CREATE TABLE b (id INTEGER);\n",
        },
    )
    r = run(db_url, "migrate", d)
    assert (r.frame.outcome, r.frame.reason) == ("refused", "InvalidMigration"), r.data
    assert "2_nul.sql: line 2: a NUL character" in r.data["message"]
    assert not history_table_exists(db_url), "refused before anything ran"
    for table in ("ok", "a", "b"):
        with pytest.raises(Exception, match=table):
            query(db_url, f"SELECT COUNT(*) FROM {table}")
