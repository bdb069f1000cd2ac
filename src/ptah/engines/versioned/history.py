"""Compare the history table with the directory: the reading both History and Apply use.

Pure functions over plain rows, so the rules (what is dirty, what counts as out of
order, what a baseline covers) are tested without a database and are the same for
the read-only History operation, the refusal checks of Apply, and ``ptah migrate
status``.

Rules:

* a migration row is *dirty* when it has no finish time or an error: a
  non-transactional file (or any MariaDB file) stopped part-way. ``statement`` is
  the 1-based statement it stopped at: the one marked running, else the first not
  yet applied;
* a clean row whose version is in the directory with different bytes is
  *mismatched* (an applied file was edited);
* a row whose version is not in the directory is *missing from directory*;
* a baseline row covers every directory version at or below it;
* *out of order*: an applied row installed after a higher version, or a pending
  file below the highest applied version (applying it now would run it after
  files that were written to follow it);
* a *repeatable* (``R__``) file is pending when no clean row of its name exists,
  or when the latest one recorded another checksum (it was edited): it is run
  again, never refused for it. Its rows (kind ``repeatable``, keyed ``R:<rank>``)
  take no part in versions, order or baselines. A repeatable row whose file left
  the directory is reported, not refused (as Flyway does). Undo (``U``) files
  are reported and never run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ptah.engines.versioned.directory import Directory, Version


def _ts(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        text = value.isoformat(timespec="microseconds")
        return text.replace("+00:00", "Z") if value.tzinfo else text + "Z"
    return str(value)


def _version(text: str) -> Version | None:
    try:
        return Version.parse(text)
    except ValueError:
        return None


@dataclass
class Reading:
    """One comparison of history and directory. ``to_data`` is the frame payload."""

    applied: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    dirty: list[dict[str, Any]] = field(default_factory=list)
    mismatched: list[dict[str, Any]] = field(default_factory=list)
    out_of_order: list[dict[str, Any]] = field(default_factory=list)
    missing_from_directory: list[str] = field(default_factory=list)
    below_baseline: list[str] = field(default_factory=list)
    baseline: str | None = None
    applied_elsewhere: list[str] = field(default_factory=list)
    history_exists: bool = False
    rows: list[dict[str, Any]] = field(default_factory=list)
    repeatables: list[dict[str, Any]] = field(default_factory=list)
    repeatables_pending: list[str] = field(default_factory=list)
    repeatables_missing: list[str] = field(default_factory=list)
    undo_ignored: list[str] = field(default_factory=list)

    @property
    def settled(self) -> bool:
        return (
            not self.pending
            and not self.repeatables_pending
            and not self.dirty
            and not self.mismatched
        )

    @property
    def highest_applied(self) -> Version | None:
        versions = [v for v in (_version(s) for s in self.applied) if v is not None]
        if self.baseline is not None:
            b = _version(self.baseline)
            if b is not None:
                versions.append(b)
        return max(versions) if versions else None

    def to_data(self) -> dict[str, Any]:
        return {
            "applied": list(self.applied),
            "pending": list(self.pending),
            "dirty": list(self.dirty),
            "mismatched": list(self.mismatched),
            "outOfOrder": list(self.out_of_order),
            "missingFromDirectory": list(self.missing_from_directory),
            "belowBaseline": list(self.below_baseline),
            "baseline": self.baseline,
            "appliedElsewhere": list(self.applied_elsewhere),
            "historyExists": self.history_exists,
            "settled": self.settled,
            "repeatables": list(self.repeatables),
            "repeatablesPending": list(self.repeatables_pending),
            "repeatablesMissing": list(self.repeatables_missing),
            "undoIgnored": list(self.undo_ignored),
        }


def row_summary(row: dict[str, Any]) -> dict[str, Any]:
    """A history row as JSON-safe values, for printing and for frames."""
    return {
        "version": str(row["version"]),
        "description": str(row["description"]),
        "kind": str(row["kind"]),
        "statementsApplied": int(row["statements_applied"]),
        "statementsTotal": int(row["statements_total"]),
        "startedAt": _ts(row["started_at"]),
        "finishedAt": _ts(row["finished_at"]),
        "error": row["error"],
    }


REPEATABLE = "repeatable"


def repeatable_key(rank: int) -> str:
    """The history key of one application of a repeatable file: one row per application."""
    return f"R:{rank}"


def is_dirty(row: dict[str, Any]) -> bool:
    return row["kind"] in ("migration", REPEATABLE) and (
        row["finished_at"] is None or row["error"] is not None
    )


def dirty_entry(row: dict[str, Any]) -> dict[str, Any]:
    running = row["statement_running"]
    statement = int(running) if running is not None else int(row["statements_applied"]) + 1
    entry = {
        "version": str(row["version"]),
        "statement": statement,
        "total": int(row["statements_total"]),
        "statementsApplied": int(row["statements_applied"]),
        "error": row["error"],
        "state": "failed" if row["error"] is not None else "interrupted",
        "startedAt": _ts(row["started_at"]),
    }
    if row["kind"] == REPEATABLE:
        entry["script"] = str(row["script"])  # R:<rank> alone does not name the file
    return entry


def compare(
    directory: Directory,
    rows: list[dict[str, Any]],
    *,
    history_exists: bool = True,
    database_digest: str | None = None,
) -> Reading:
    """Classify every row and every file; ``rows`` in installed order."""
    reading = Reading(history_exists=history_exists, rows=rows)
    files = directory.by_version()
    recorded: set[Version] = set()
    highest_so_far: Version | None = None
    _compare_repeatables(directory, [r for r in rows if r["kind"] == REPEATABLE], reading)
    for row in rows:
        if row["kind"] == REPEATABLE:
            continue
        version = _version(str(row["version"]))
        if version is None:
            reading.missing_from_directory.append(str(row["version"]))
            continue
        if row["kind"] == "baseline":
            reading.baseline = str(version)
            highest_so_far = max(highest_so_far or version, version)
            continue
        recorded.add(version)
        if database_digest and row["database_digest"] != database_digest:
            reading.applied_elsewhere.append(str(version))
        if highest_so_far is not None and version < highest_so_far:
            reading.out_of_order.append(
                {"version": str(version), "state": "applied", "after": str(highest_so_far)}
            )
        highest_so_far = max(highest_so_far or version, version)
        file = files.get(version)
        if is_dirty(row):
            reading.dirty.append(dirty_entry(row))
        else:
            reading.applied.append(str(version))
        if file is None:
            reading.missing_from_directory.append(str(version))
        elif file.checksum != row["checksum"]:
            reading.mismatched.append(
                {"version": str(version), "expected": row["checksum"], "actual": file.checksum}
            )
    baseline = _version(reading.baseline) if reading.baseline else None
    top = reading.highest_applied
    for version in files:
        if version in recorded:
            continue
        if baseline is not None and version <= baseline:
            reading.below_baseline.append(str(version))
            continue
        reading.pending.append(str(version))
        if top is not None and version < top:
            reading.out_of_order.append(
                {"version": str(version), "state": "pending", "after": str(top)}
            )
    return reading


def _compare_repeatables(
    directory: Directory, rows: list[dict[str, Any]], reading: Reading
) -> None:
    """Each repeatable file against the latest row of its name (``rows`` in rank order)."""
    latest: dict[str, dict[str, Any]] = {}
    for row in rows:
        latest[str(row["script"])] = row
    reading.undo_ignored = [f.name for f in directory.undo]
    names = {f.name for f in directory.repeatables}
    reading.repeatables_missing = sorted(n for n in latest if n not in names)
    for f in directory.repeatables:
        last = latest.get(f.name)
        entry: dict[str, Any] = {"name": f.name, "checksum": f.checksum, "appliedChecksum": None}
        if last is not None and is_dirty(last):
            reading.dirty.append(dirty_entry(last))
            entry["state"] = "dirty"
        elif last is None:
            entry["state"] = "pending"
        else:
            entry["appliedChecksum"] = str(last["checksum"])
            entry["state"] = "applied" if last["checksum"] == f.checksum else "changed"
        if entry["state"] in ("pending", "changed"):
            reading.repeatables_pending.append(f.name)
        reading.repeatables.append(entry)
