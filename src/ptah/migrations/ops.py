"""Runner subcommands ``history`` and ``migrate``: one result frame per run, always.

The contract with the operator: the connection comes from ``PTAH_DB_URL``, the
operation id from ``--operation-id`` or ``PTAH_OPERATION_ID``; stdout carries
exactly one frame line and nothing else; every other line goes to stderr through
:func:`ptah.runner.frame.escape_line`; the exit code is 0 whenever a frame was
printed (the frame, not the exit code, says what happened). Error text passes
through the target's ``scrub`` and the frame through ``assert_no_secret``.

``ptah-runner``'s main imports this module and calls :func:`register`; ``python -m
ptah.migrations.ops`` runs the same two subcommands on their own. Registering costs
only argparse: the migration machinery is imported by the two subcommands, so every
other runner operation reaches its database without it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ptah.engines.fence import REALM_ENV
from ptah.runner.wire import (
    DatabaseIdentity,
    assert_no_secret,
    escape_line,
    payload,
    render_payload,
)

if TYPE_CHECKING:
    from ptah.runner.frame import OperationType, Outcome

URL_ENV = "PTAH_DB_URL"
OPERATION_ENV = "PTAH_OPERATION_ID"


def log(text: str) -> None:
    """Anything but the frame: stderr, escaped so it can never parse as a frame."""
    print(escape_line(text), file=sys.stderr, flush=True)


class _Emitter:
    """Prints the run's one frame; knows the secrets it must never carry."""

    def __init__(self, operation_id: str, op: OperationType) -> None:
        self.operation_id = operation_id
        self.op: OperationType = op
        self.secrets: tuple[str, ...] = ()
        self.scrub: Callable[[str], str] = _scrub_urls

    def emit(
        self,
        outcome: Outcome,
        reason: str = "",
        data: dict[str, Any] | None = None,
        database: DatabaseIdentity | None = None,
    ) -> int:
        frame = payload(self.operation_id, self.op, database, outcome, reason, data)
        line = render_payload(frame)
        assert_no_secret(line, self.secrets)
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        return 0


def _scrub_urls(text: str) -> str:
    from ptah.engines.urls import scrub

    return scrub(text)


def _secrets_of(url: str) -> tuple[str, ...]:
    from ptah.engines.urls import UrlError, parse_url

    try:
        return parse_url(url).secrets
    except UrlError:
        return ()


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


def _with_target(
    args: argparse.Namespace,
    op: OperationType,
    body: Callable[[Any, _Emitter, DatabaseIdentity], int],
) -> int:
    operation_id = _operation_id(args)
    if operation_id is None:
        log(f"no operation id: pass --operation-id or set {OPERATION_ENV}")
        return 2
    em = _Emitter(operation_id, op)
    url = os.environ.get(URL_ENV, "")
    if not url:
        return em.emit("failed", "NoDatabaseUrl", {"message": f"{URL_ENV} is not set"})
    em.secrets = _secrets_of(url)
    from ptah.engines.base import EngineError
    from ptah.engines.connect import open_target

    try:
        target = open_target(url)
    except EngineError as exc:
        message = em.scrub(str(exc))
        log(f"cannot open the database: {message}")
        return em.emit("failed", exc.reason, {"message": message})
    with target:
        em.scrub = target.scrub
        try:
            identity = target.identity()
        except Exception as exc:
            message = target.scrub(f"{type(exc).__name__}: {exc}")
            log(f"cannot identify the database: {message}")
            return em.emit("failed", "IdentifyFailed", {"message": message})
        try:
            return body(target, em, identity)
        except Exception as exc:
            message = target.scrub(f"{type(exc).__name__}: {exc}")[:4000]
            log(f"{op} failed: {message}")
            return em.emit("failed", "EngineError", {"message": message}, identity)


def run_history(args: argparse.Namespace) -> int:
    """Read the history table in a read-only transaction and compare it with the directory."""
    from ptah.migrations import sumfile
    from ptah.migrations.dialects import Session
    from ptah.migrations.directory import DirectoryError, read_directory
    from ptah.migrations.history import compare

    def body(target: Any, em: _Emitter, identity: DatabaseIdentity) -> int:
        try:
            directory = read_directory(args.dirs)
        except DirectoryError as exc:
            return em.emit("refused", "InvalidDirectory", {"message": str(exc)}, identity)
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
        log(
            f"history: {len(reading.applied)} applied, {len(reading.pending)} pending, "
            f"{len(reading.dirty)} dirty, {len(reading.mismatched)} mismatched"
        )
        return em.emit("succeeded", "", data, identity)

    return _with_target(args, "history", body)


def run_migrate(args: argparse.Namespace) -> int:
    """Apply pending files; refusals and SQL failures are frames, not exit codes."""

    from ptah.migrations.apply import MigrateOptions, migrate
    from ptah.migrations.dialects import Session
    from ptah.migrations.directory import DirectoryError, Version, read_directory

    def body(target: Any, em: _Emitter, identity: DatabaseIdentity) -> int:
        try:
            directory = read_directory(args.dirs)
            to = Version.parse(args.to) if args.to else None
            baseline = Version.parse(args.baseline) if args.baseline else None
        except (DirectoryError, ValueError) as exc:
            return em.emit("refused", "InvalidDirectory", {"message": str(exc)}, identity)
        opts = MigrateOptions(
            operation_id=em.operation_id,
            to=to,
            baseline=baseline,
            lock_timeout=args.lock_timeout,
            realm=os.environ.get(REALM_ENV) or None,
        )
        session = Session(target.connection, target.engine)
        result = migrate(session, directory, identity, opts, log, target.scrub)
        if result.outcome != "succeeded":
            log(f"migrate {result.outcome}: {result.reason}: {result.message}")
        else:
            log(f"migrate succeeded: applied {', '.join(result.applied) or 'nothing'}")
        data = result.to_data(opts)
        return em.emit(result.outcome, result.reason, data, identity)

    return _with_target(args, "migrate", body)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ptah-migrations", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
