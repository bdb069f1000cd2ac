"""The runner's History payload, as ``ptah.engines.versioned.history.compare`` produces it, is
read by ``MigrationFamily`` without failing: a partially applied (interrupted) file and
an out-of-order file are reported, and never settle an uncertain run.

Regression: the family validated the runner's dirty entries (which carry ``state``,
``startedAt``, ``statementsApplied`` and ``error: null``) and out-of-order entries
(objects) straight into the status model, which forbids both; every reading of a
partial MariaDB file failed its pass, so the proof could never report it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ptah.api.common import UncertainRecord
from ptah.engines.versioned.directory import read_directory
from ptah.engines.versioned.history import compare
from ptah.families.migration import MigrationFamily
from ptah.runner.frame import ResultFrame


def _row(version: str, checksum: str, **over: Any) -> dict[str, Any]:
    row = {
        "version": version,
        "description": "x",
        "kind": "migration",
        "checksum": checksum,
        "statements_total": 3,
        "statements_applied": 3,
        "statement_running": None,
        "started_at": datetime(2026, 11, 30, tzinfo=UTC),
        "finished_at": datetime(2026, 11, 30, tzinfo=UTC),
        "error": None,
        "database_digest": "d",
        "installed_rank": 1,
    }
    row.update(over)
    return row


def _record() -> UncertainRecord:
    return UncertainRecord.model_validate(
        {
            "operationId": "migrate-1",
            "type": "Migrate",
            "jobName": "j",
            "reason": "NoPod",
            "expectedAfter": "x",
            "recordedAt": "2026-11-30T00:00:00Z",
        }
    )


def _frame(data: dict[str, Any]) -> ResultFrame:
    return ResultFrame.model_validate(
        {
            "operationId": "history-1",
            "operationType": "history",
            "database": {"engine": "mysql", "key": {"server": "s", "schema": "app"}},
            "outcome": "succeeded",
            "data": data,
        }
    )


def test_interrupted_and_out_of_order_entries_are_read(tmp_path: Path) -> None:
    for name in ("0001_a.sql", "0002_b.sql", "0003_c.sql"):
        (tmp_path / name).write_text("SELECT 1;\n")
    directory = read_directory([tmp_path])
    sums = {str(f.version): f.checksum for f in directory.files}
    rows = [
        _row("1", sums["1"]),
        _row("3", sums["3"], installed_rank=2),
        _row(
            "2",
            sums["2"],
            installed_rank=3,
            statements_applied=1,
            statement_running=2,
            finished_at=None,
        ),
    ]
    data = compare(directory, rows).to_data()
    assert data["dirty"][0]["error"] is None and data["outOfOrder"]

    family = MigrationFamily()
    frame = _frame(data)
    reading = family._reading(frame)
    assert [(d.version, d.statement, d.total, d.error) for d in reading.dirty] == [
        ("2", 2, 3, "interrupted")
    ]
    assert reading.out_of_order == ["2"]
    record = _record()
    assert family.settles(record, frame) is False


def test_repeatables_are_planned_apart_from_versions_and_settle_by_checksum(
    tmp_path: Path,
) -> None:
    (tmp_path / "V1__a.sql").write_text("SELECT 1;\n")
    (tmp_path / "R__views.sql").write_text("SELECT 2;\n")
    (tmp_path / "U1__a.sql").write_text("SELECT 3;\n")
    directory = read_directory([tmp_path])
    v1 = directory.files[0].checksum
    family = MigrationFamily()
    rows = [_row("1", v1), _row("R:2", "old", kind="repeatable", installed_rank=2)]
    rows[1]["script"] = "R__views.sql"
    reading = family._reading(_frame(compare(directory, rows).to_data()))
    assert reading.pending == [] and reading.repeatables_pending == ["R__views.sql"]
    assert [(r.name, r.state, r.applied_checksum) for r in reading.repeatables] == [
        ("R__views.sql", "changed", "old")
    ]
    assert reading.undo_ignored == ["U1__a.sql"]
    record = _record()
    assert family.settles(record, _frame(compare(directory, rows).to_data())) is False
    rows[1]["checksum"] = directory.repeatables[0].checksum
    settled = _frame(compare(directory, rows).to_data())
    assert family._reading(settled).repeatables_pending == []
    assert family.settles(record, settled) is True
