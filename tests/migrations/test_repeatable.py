"""A Flyway-style directory with versioned, repeatable and undo files, on every engine.

Repeatables run after the versioned files, in name order, whenever their checksum
changes; each application is a history row with its checksum; undo files are
reported and never run; the sum file covers all of them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from migsupport import history_rows, query, run, write_dir

from ptah.engines.versioned import sumfile
from ptah.engines.versioned.directory import read_directory

pytestmark = pytest.mark.integration

VIEWS = (
    "DROP VIEW IF EXISTS people_counts;\nDROP VIEW IF EXISTS people_names;\n"
    "CREATE VIEW people_names AS SELECT name FROM people;\n"
)
FLYWAY = {
    "V1__create_people.sql": "CREATE TABLE people (id INTEGER PRIMARY KEY, name VARCHAR(50));\n"
    "INSERT INTO people (id, name) VALUES (1, 'ann');\n",
    "V1.1__create_pets.sql": "CREATE TABLE pets (id INTEGER PRIMARY KEY, owner INTEGER);\n",
    # b depends on a: name order is the order they must run in
    "R__a_people_views.sql": VIEWS,
    "R__b_people_counts.sql": "DROP VIEW IF EXISTS people_counts;\n"
    "CREATE VIEW people_counts AS SELECT COUNT(*) AS n FROM people_names;\n",
    "U1.1__drop_pets.sql": "DROP TABLE pets;\n",
}


def _repeatable_rows(url: str) -> list[tuple[int, str, str]]:
    rows = history_rows(url).values()
    return sorted(
        (int(r["installed_rank"]), str(r["script"]), str(r["checksum"]))
        for r in rows
        if r["kind"] == "repeatable"
    )


def _rehash(d: Path) -> None:
    sumfile.write(read_directory([d]))


def test_flyway_directory_versions_then_repeatables_edit_reapplies_once(
    db_url: str, tmp_path: Path
) -> None:
    d = write_dir(tmp_path / "flyway", FLYWAY)
    first = run(db_url, "migrate", d)
    assert first.frame.outcome == "succeeded", first.data
    assert first.data["applied"] == ["1", "1.1"]
    assert first.data["repeatablesApplied"] == ["R__a_people_views.sql", "R__b_people_counts.sql"]
    history = first.data["history"]
    assert history["settled"] is True and history["undoIgnored"] == ["U1.1__drop_pets.sql"]
    assert query(db_url, "SELECT n FROM people_counts") == [(1,)]
    assert query(db_url, "SELECT COUNT(*) FROM pets") == [(0,)]  # the undo file never ran
    rows = history_rows(db_url)
    ranks = {str(r["script"]): int(r["installed_rank"]) for r in rows.values()}
    assert ranks["V1.1__create_pets.sql"] < ranks["R__a_people_views.sql"]
    assert ranks["R__a_people_views.sql"] < ranks["R__b_people_counts.sql"]
    checksums = {f.name: f.checksum for f in read_directory([d]).repeatables}
    assert [(s, c) for _, s, c in _repeatable_rows(db_url)] == sorted(checksums.items())

    again = run(db_url, "migrate", d)
    assert again.frame.outcome == "succeeded", again.data
    assert (again.data["applied"], again.data["repeatablesApplied"]) == ([], [])
    assert len(_repeatable_rows(db_url)) == 2

    # An edit without a new sum file is refused like any edited file.
    (d / "R__a_people_views.sql").write_text(
        VIEWS.replace("SELECT name", "SELECT UPPER(name) AS name")
    )
    refused = run(db_url, "migrate", d)
    assert refused.frame.outcome == "refused" and refused.frame.reason == "SumFileMismatch"
    _rehash(d)
    hist = run(db_url, "history", d)
    states = {r["name"]: r["state"] for r in hist.data["repeatables"]}
    assert states == {"R__a_people_views.sql": "changed", "R__b_people_counts.sql": "applied"}
    assert hist.data["repeatablesPending"] == ["R__a_people_views.sql"]
    assert hist.data["settled"] is False and hist.data["pending"] == []

    edited = run(db_url, "migrate", d)
    assert edited.frame.outcome == "succeeded", edited.data
    assert (edited.data["applied"], edited.data["repeatablesApplied"]) == (
        [],
        ["R__a_people_views.sql"],
    )
    assert query(db_url, "SELECT name FROM people_names") == [("ANN",)]
    scripts = [s for _, s, _ in _repeatable_rows(db_url)]
    assert scripts.count("R__a_people_views.sql") == 2 and len(scripts) == 3

    noop = run(db_url, "migrate", d)
    assert (noop.data["applied"], noop.data["repeatablesApplied"]) == ([], [])
    assert len(_repeatable_rows(db_url)) == 3
    assert noop.data["history"]["settled"] is True


def test_new_version_runs_before_a_changed_repeatable(db_url: str, tmp_path: Path) -> None:
    d = write_dir(tmp_path / "flyway", FLYWAY)
    assert run(db_url, "migrate", d).frame.outcome == "succeeded"
    (d / "V2__add_email.sql").write_text("ALTER TABLE people ADD COLUMN email VARCHAR(80);\n")
    (d / "R__a_people_views.sql").write_text(VIEWS.replace("SELECT name", "SELECT name, email"))
    _rehash(d)
    second = run(db_url, "migrate", d)
    assert second.frame.outcome == "succeeded", second.data
    assert second.data["applied"] == ["2"]
    assert second.data["repeatablesApplied"] == ["R__a_people_views.sql"]
    assert query(db_url, "SELECT name, email FROM people_names") == [("ann", None)]


def test_baseline_adopts_a_database_and_then_runs_the_repeatables(
    db_url: str, tmp_path: Path
) -> None:
    first = {k: v for k, v in FLYWAY.items() if k.startswith("V1__")}
    run(db_url, "migrate", write_dir(tmp_path / "first", first))
    history_free = query(db_url, "SELECT COUNT(*) FROM people")
    assert history_free == [(1,)]
    query(db_url, "DROP TABLE ptah_schema_history")
    d = write_dir(tmp_path / "flyway", FLYWAY)
    refused = run(db_url, "migrate", d)
    assert refused.frame.reason == "NeedsBaseline"
    adopted = run(db_url, "migrate", d, "--baseline", "1")
    assert adopted.frame.outcome == "succeeded", adopted.data
    assert adopted.data["baselineRecorded"] == "1" and adopted.data["applied"] == ["1.1"]
    assert len(adopted.data["repeatablesApplied"]) == 2


def test_cli_status_shows_repeatables_apart_from_versions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ptah.cli.main import main

    url = f"sqlite:///{tmp_path}/cli.db"
    d = write_dir(tmp_path / "flyway", FLYWAY)
    assert run(url, "migrate", d).frame.outcome == "succeeded"
    (d / "R__b_people_counts.sql").write_text(FLYWAY["R__b_people_counts.sql"] + "-- edited\n")
    _rehash(d)
    assert main(["migrate", "status", "--url", url, "--dir", str(d)]) == 0
    out = capsys.readouterr().out
    versions, repeatables = out.split("REPEATABLE", 1)
    assert "R__" not in versions and "R:" not in versions
    assert "R__a_people_views.sql" in repeatables and "applied" in repeatables
    assert "R__b_people_counts.sql" in repeatables and "changed" in repeatables
    assert "undo file U1.1__drop_pets.sql: ignored" in out
    assert "2 applied, 0 pending, 1 repeatable to run" in out
