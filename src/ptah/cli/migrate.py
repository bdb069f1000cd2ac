"""``ptah migrate``: versioned migrations for people, without Kubernetes.

Same code as the runner's ``history``/``migrate`` operations, printed as tables and
progress lines instead of a result frame:

* ``ptah migrate hash DIR... [--check]`` writes or checks ``ptah.sum``;
* ``ptah migrate status --url URL --dir DIR`` reads history (read-only);
* ``ptah migrate apply --url URL --dir DIR [--to V] [--baseline V]`` applies;
* ``ptah migrate resolve --url URL --version V --as applied|rolled-back`` clears a
  dirty row once a person has finished or undone the partial file by hand; a
  plain re-run refuses until then, because only a person can know what a
  half-applied non-transactional file left behind.

``--url`` defaults to ``$PTAH_DB_URL`` so a password need not sit in shell history.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from ptah import failures
from ptah.engines import fence
from ptah.engines.versioned import sumfile
from ptah.engines.versioned.apply import MigrateOptions, migrate
from ptah.engines.versioned.dialects import Session
from ptah.engines.versioned.directory import (
    DirectoryError,
    DirectoryUnreadable,
    Version,
    read_directory,
)
from ptah.engines.versioned.history import REPEATABLE, Reading, compare, is_dirty, row_summary
from ptah.runner.main import add_migrate_options


def register(subparsers: Any) -> None:
    """Add ``ptah migrate ...`` to the ``ptah`` command."""
    top = subparsers.add_parser("migrate", help="versioned migrations without Kubernetes")
    sub = top.add_subparsers(dest="migrate_command", required=True)

    h = sub.add_parser("hash", help="write or check ptah.sum")
    h.add_argument("dirs", nargs="+", type=Path, metavar="DIR")
    h.add_argument("--check", action="store_true", help="only check; exit 1 on a mismatch")
    h.set_defaults(func=cmd_hash)

    s = sub.add_parser("status", help="show history against the directory (read-only)")
    _conn_args(s)
    s.set_defaults(func=cmd_status)

    a = sub.add_parser("apply", help="apply pending migrations")
    _conn_args(a)
    add_migrate_options(a)
    a.set_defaults(func=cmd_apply)

    r = sub.add_parser("resolve", help="mark a dirty (partially applied) version resolved")
    r.add_argument("--url", default=None, help="database URL (default: $PTAH_DB_URL)")
    r.add_argument("--version", required=True, dest="resolve_version")
    r.add_argument("--as", required=True, dest="resolution", choices=["applied", "rolled-back"])
    r.set_defaults(func=cmd_resolve)


def _conn_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default=None, help="database URL (default: $PTAH_DB_URL)")
    p.add_argument("--dir", dest="dirs", action="append", required=True, type=Path)


def _unusable(exc: Exception) -> failures.Failure:
    """A migration directory (or version) that cannot be used, in its failure class."""
    unreadable = isinstance(exc, DirectoryUnreadable)
    cls = failures.INPUT_UNREADABLE if unreadable else failures.INPUT_INVALID
    return failures.Failure(cls, f"migration directory: {exc}")


def _code(reason: str) -> int:
    """The exit code of a refused or failed run: its failure class's, else 1."""
    found = failures.by_reason(reason)
    return found.exit_code if found else failures.DID_NOT_SUCCEED


def _err(text: str) -> None:
    print(f"ptah migrate: {text}", file=sys.stderr)


def _open(url: str | None, *, read_only: bool = False) -> Any:
    from ptah.engines.connect import open_target

    url = url or os.environ.get("PTAH_DB_URL", "")
    if not url:
        raise failures.Failure(failures.BAD_URL, "no database URL: pass --url or set PTAH_DB_URL")
    return open_target(url, read_only=read_only)


def cmd_hash(args: argparse.Namespace) -> int:
    try:
        directory = read_directory(args.dirs)
    except DirectoryError as exc:
        raise _unusable(exc) from None
    if args.check:
        problems = sumfile.problems(directory)
        for p in problems:
            _err(p)
        if not problems:
            print(f"ptah.sum ok: {len(directory.summed)} files")
        return 1 if problems else 0
    sumfile.write(directory)
    header = sumfile.compute(directory.summed).header
    print(f"wrote ptah.sum: {len(directory.summed)} files, h1:{header}")
    return 0


def _repeatable_table(reading: Reading) -> list[str]:
    """Repeatable files apart from versions: their state against the latest application."""
    if not reading.repeatables and not reading.repeatables_missing:
        return []
    out = [f"{'REPEATABLE':<40} {'STATE':<10} CHECKSUM"]
    for entry in reading.repeatables:
        out.append(f"{entry['name'][:40]:<40} {entry['state']:<10} {entry['checksum'][:12]}")
    out += [f"{name[:40]:<40} {'NOT IN DIR':<10}" for name in reading.repeatables_missing]
    return out


def _table(reading: Reading, directory_files: dict[Version, Any]) -> list[str]:
    rows = {str(r["version"]): r for r in reading.rows if r["kind"] != REPEATABLE}
    dirty = {d["version"]: d for d in reading.dirty}
    mismatched = {m["version"] for m in reading.mismatched}
    late = {o["version"] for o in reading.out_of_order}
    versions: list[str] = sorted(
        set(rows) | {str(v) for v in directory_files},
        key=lambda t: Version.parse(t).parts if t.replace(".", "").isdigit() else (1 << 62,),
    )
    out = [f"{'VERSION':<10} {'STATE':<22} {'DESCRIPTION':<30} DETAIL"]
    for v in versions:
        row = rows.get(v)
        f = directory_files.get(Version.parse(v)) if v.replace(".", "").isdigit() else None
        desc = f.description if f else (row["description"] if row else "")
        detail = ""
        if row is not None and row["kind"] == "baseline":
            state = "baseline"
        elif v in dirty:
            d = dirty[v]
            state = f"DIRTY ({d['state']})"
            detail = f"stopped at statement {d['statement']}/{d['total']}"
            if d["error"]:
                detail += f": {str(d['error']).splitlines()[0][:80]}"
        elif row is not None:
            summary = row_summary(row)
            state = "applied"
            detail = f"{summary['finishedAt']} ({summary['statementsTotal']} statements)"
        elif v in reading.below_baseline:
            state = "below baseline"
        else:
            state = "pending"
        if v in mismatched:
            state += ", EDITED"
        if v in late:
            state += ", out of order"
        if v in reading.missing_from_directory:
            state += ", NOT IN DIR"
        out.append(f"{v:<10} {state:<22} {desc[:30]:<30} {detail}")
    return out


def cmd_status(args: argparse.Namespace) -> int:
    try:
        directory = read_directory(args.dirs)
    except DirectoryError as exc:
        raise _unusable(exc) from None
    with _open(args.url, read_only=True) as target:
        identity = target.identity()
        session = Session(target.connection, target.engine, _err)
        session.begin(read_only=True)
        try:
            exists = session.history_exists()
            rows = session.read_history() if exists else []
        finally:
            session.rollback()
        reading = compare(directory, rows, history_exists=exists, database_digest=identity.digest)
        from ptah.engines.versioned.apply import pending_refusal

        refused = pending_refusal(session, directory, reading)
    print(f"database: {identity.engine} {identity.digest[:12]}")
    for line in _table(reading, directory.by_version()) + _repeatable_table(reading):
        print(line)
    for name in reading.undo_ignored:
        print(f"undo file {name}: ignored (Ptah does not run undo migrations)")
    problems = sumfile.problems(directory)
    print(f"ptah.sum: {'ok' if not problems else '; '.join(problems)}")
    if refused is not None:
        print(f"apply would be refused ({refused[0]}): {refused[1]}")
    print(
        f"{len(reading.applied)} applied, {len(reading.pending)} pending, "
        f"{len(reading.repeatables_pending)} repeatable to run, "
        f"{len(reading.dirty)} dirty, {len(reading.mismatched)} edited: "
        f"{'settled' if reading.settled else 'NOT settled'}"
    )
    return 0


def cmd_apply(args: argparse.Namespace) -> int:
    try:
        directory = read_directory(args.dirs)
        to = Version.parse(args.to) if args.to else None
        baseline = Version.parse(args.baseline) if args.baseline else None
    except (DirectoryError, ValueError) as exc:
        raise _unusable(exc) from None
    with _open(args.url) as target:
        identity = target.identity()
        session = Session(target.connection, target.engine, _err)
        opts = MigrateOptions(
            operation_id="cli", to=to, baseline=baseline, lock_timeout=args.lock_timeout
        )
        result = migrate(session, directory, identity, opts, print, target.scrub)
    if result.outcome in ("refused", "fenced"):
        _err(f"{result.outcome} ({result.reason}): {result.message}")
        for d in result.details[1:]:
            _err(f"  {d}")
        return _code(result.reason)
    if result.outcome == "failed":
        _err(f"failed ({result.reason}): {result.message}")
        if result.failure:
            _err(str(result.failure["error"]))
        return _code(result.reason)
    applied = ", ".join(result.applied) or "nothing (up to date)"
    print(f"applied {applied}; {result.statements_executed} statements")
    return 0


def cmd_resolve(args: argparse.Namespace) -> int:
    try:
        key = args.resolve_version.strip()
        # a repeatable's application is keyed R:<rank>, as status and the frames show it
        version = key if key.startswith("R:") else str(Version.parse(key))
    except ValueError as exc:
        _err(str(exc))
        return 1
    with _open(args.url) as target:
        session = Session(target.connection, target.engine, _err)
        realm = target.identity().digest
        try:
            with fence.held(target.engine, target.connection, realm, wait=10.0):
                return _resolve(session, version, args.resolution)
        except fence.RealmBusy as exc:
            _err(str(exc))
            return failures.REALM_BUSY.exit_code


def _resolve(session: Session, version: str, resolution: str) -> int:
    """Clear one dirty row, under the realm's fence (no run may be mid-file meanwhile)."""
    rows = {str(r["version"]): r for r in session.read_history()}
    row = rows.get(version)
    if row is None or not is_dirty(row):
        _err(f"version {version} is not a dirty history row; nothing to resolve")
        return 1
    if resolution == "rolled-back":
        session.delete_history(version)
        print(f"version {version}: row removed; it is pending again")
    else:
        session.update_history(
            version,
            statements_applied=int(row["statements_total"]),
            statement_running=None,
            error=None,
            finished_at=session.now(),
        )
        print(f"version {version}: marked applied")
    return 0
