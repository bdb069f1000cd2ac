"""The comparison rules of history against directory, on plain rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from migsupport import write_dir

from ptah.engines.versioned.directory import read_directory
from ptah.engines.versioned.history import compare


def _row(version: str, rank: int, checksum: str, **kw: Any) -> dict[str, Any]:
    row = {
        "version": version,
        "description": "d",
        "kind": "migration",
        "checksum": checksum,
        "statements_total": 2,
        "statements_applied": 2,
        "statement_running": None,
        "installed_rank": rank,
        "started_at": "t",
        "finished_at": "t",
        "error": None,
        "database_digest": "db1",
    }
    row.update(kw)
    return row


def test_classification(tmp_path: Path) -> None:
    d = read_directory(
        [write_dir(tmp_path, {f"{n}_f.sql": f"SELECT {n};" for n in range(1, 6)}, sums=False)]
    )
    sums = {str(f.version): f.checksum for f in d.files}
    rows = [
        _row("1", 1, sums["1"]),
        _row("3", 2, sums["3"], database_digest="other"),
        _row("2", 3, "edited"),
        _row("4", 4, sums["4"], finished_at=None, statements_applied=0, statement_running=1),
        _row("9", 5, "x"),
    ]
    r = compare(d, rows, database_digest="db1")
    assert r.applied == ["1", "3", "2", "9"]
    assert r.pending == ["5"]
    assert r.dirty[0]["version"] == "4" and r.dirty[0]["statement"] == 1
    assert r.dirty[0]["state"] == "interrupted"
    assert r.mismatched == [{"version": "2", "expected": "edited", "actual": sums["2"]}]
    assert {"version": "2", "state": "applied", "after": "3"} in r.out_of_order
    assert r.missing_from_directory == ["9"]
    assert r.applied_elsewhere == ["3"]
    assert not r.settled


def test_baseline_covers_lower_versions(tmp_path: Path) -> None:
    d = read_directory(
        [write_dir(tmp_path, {f"{n}_f.sql": f"SELECT {n};" for n in range(1, 4)}, sums=False)]
    )
    rows = [_row("2", 1, "", kind="baseline", statements_total=0, statements_applied=0)]
    r = compare(d, rows)
    assert (r.baseline, r.below_baseline, r.pending, r.out_of_order) == ("2", ["1", "2"], ["3"], [])
