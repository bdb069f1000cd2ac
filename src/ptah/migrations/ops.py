"""Runner subcommands ``history`` and ``migrate``: one result frame per run, always.

The contract with the operator is the runner's (:func:`ptah.runner.emit.run_operation`
prints the frame, reports failures of input or environment, and sets the exit code):
the connection comes from ``PTAH_DB_URL``, the operation id from ``--operation-id`` or
``PTAH_OPERATION_ID``; stdout carries exactly one frame line and nothing else; every
other line goes to stderr escaped. Error text passes through the target's ``scrub``.

``ptah-runner``'s main imports this module and calls :func:`register`; ``python -m
ptah.migrations.ops`` runs the same two subcommands on their own. Registering costs
only argparse: the migration machinery is imported by the two subcommands, so every
other runner operation reaches its database without it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ptah.engines.fence import REALM_ENV
from ptah.runner import failures
from ptah.runner.emit import Output, run_operation

if TYPE_CHECKING:
    from ptah.engines.base import Target
    from ptah.runner.wire import Payload

OPERATION_ENV = "PTAH_OPERATION_ID"


def _operation_id(args: argparse.Namespace) -> str | None:
    value = args.operation_id or os.environ.get(OPERATION_ENV, "")
    return value.strip() or None


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--operation-id", help=f"operation id (default: ${OPERATION_ENV})")
    p.add_argument(
        "--dir",
        dest="dirs",
        action="append",
        required=True,
        type=Path,
        help="migration directory; repeat to merge several (one per ConfigMap)",
    )


def register(subparsers: Any) -> None:
    """Add ``history`` and ``migrate`` to the runner's sub-parsers."""
    h = subparsers.add_parser("history", help="read migration history (read-only)")
    _add_common(h)
    h.set_defaults(func=run_history)
    m = subparsers.add_parser("migrate", help="apply pending migrations")
    _add_common(m)
    m.add_argument("--to", help="apply pending versions up to and including this one")
    m.add_argument("--baseline", help="version a non-empty database without history matches")
    m.add_argument(
        "--lock-timeout",
        type=float,
        default=0.0,
        help="seconds to wait for the realm's fence (default 0: refuse at once, outcome fenced)",
    )
    m.set_defaults(func=run_migrate)


def _directory_refusal(exc: Exception) -> tuple[str, str]:
    """The frame reason and message for a directory that cannot be used."""
    from ptah.migrations.directory import DirectoryUnreadable

    if isinstance(exc, OSError):
        where = f" {exc.filename}" if exc.filename else ""
        return (
            failures.INPUT_UNREADABLE.reason,
            f"migration directory: cannot read{where}: {exc.strerror}",
        )
    if isinstance(exc, DirectoryUnreadable):
        return failures.INPUT_UNREADABLE.reason, f"migration directory: {exc}"
    return "InvalidDirectory", str(exc)


def run_history(args: argparse.Namespace) -> int:
    """Read the history table in a read-only transaction and compare it with the directory."""
    from ptah.migrations import sumfile
    from ptah.migrations.dialects import Session
    from ptah.migrations.directory import DirectoryError, read_directory
    from ptah.migrations.history import compare
    from ptah.runner.operations import make_frame

    def body(target: Target, _dev: Any, out: Output) -> Payload:
        assert opid is not None
        identity = target.identity()
        try:
            directory = read_directory(args.dirs)
        except (DirectoryError, OSError) as exc:
            reason, message = _directory_refusal(exc)
            return make_frame(opid, "history", identity, "refused", reason, {"message": message})
        session = Session(target.connection, target.engine)
        session.begin(read_only=True)
        try:
            exists = session.history_exists()
            rows = session.read_history() if exists else []
        finally:
            session.rollback()
        reading = compare(directory, rows, history_exists=exists, database_digest=identity.digest)
        data = reading.to_data()
        problems = sumfile.problems(directory)
        data.update(
            directoryHash=sumfile.compute(directory.summed).header,
            sumFileOk=not problems,
            sumFileProblems=problems,
        )
        out.log(
            f"history: {len(reading.applied)} applied, {len(reading.pending)} pending, "
            f"{len(reading.dirty)} dirty, {len(reading.mismatched)} mismatched"
        )
        return make_frame(opid, "history", identity, "succeeded", "", data)

    opid = _operation_id(args)
    return run_operation(opid, "history", body)


def run_migrate(args: argparse.Namespace) -> int:
    """Apply pending files; refusals and SQL failures are frames, not exit codes."""

    from ptah.migrations.apply import MigrateOptions, migrate
    from ptah.migrations.dialects import Session
    from ptah.migrations.directory import DirectoryError, Version, read_directory
    from ptah.runner.operations import make_frame

    def body(target: Target, _dev: Any, out: Output) -> Payload:
        assert opid is not None
        identity = target.identity()
        try:
            directory = read_directory(args.dirs)
            to = Version.parse(args.to) if args.to else None
            baseline = Version.parse(args.baseline) if args.baseline else None
        except (DirectoryError, OSError, ValueError) as exc:
            reason, message = _directory_refusal(exc)
            return make_frame(opid, "migrate", identity, "refused", reason, {"message": message})
        opts = MigrateOptions(
            operation_id=opid,
            to=to,
            baseline=baseline,
            lock_timeout=args.lock_timeout,
            realm=os.environ.get(REALM_ENV) or None,
        )
        session = Session(target.connection, target.engine)
        result = migrate(session, directory, identity, opts, out.log, target.scrub)
        if result.outcome != "succeeded":
            out.log(f"migrate {result.outcome}: {result.reason}: {result.message}")
        else:
            out.log(f"migrate succeeded: applied {', '.join(result.applied) or 'nothing'}")
        data = result.to_data(opts)
        return make_frame(opid, "migrate", identity, result.outcome, result.reason, data)

    opid = _operation_id(args)
    return run_operation(opid, "migrate", body)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ptah-migrations", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
