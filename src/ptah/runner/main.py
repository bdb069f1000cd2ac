"""`ptah-runner`: what a Job's Pod executes. Opens the target, does one operation, prints one frame.

Inputs come from files and the environment the Job provides (``PTAH_DB_URL``,
``PTAH_DEV_URL``, ``PTAH_OPERATION_ID``, ``PTAH_REALM``, ``PTAH_CACHE_DIR``). Every run
prints one result frame, the evidence the operator reads. The exit code is 0 when the
operation ran to its own outcome (succeeded, refused, failed by its SQL); a failure of
input or environment also prints one line on stderr and exits with its class's code:
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from ptah.engines.deferred import Deferred

# Standard-library modules that the runner's start-up imports (through dataclasses,
# inspect, logging, traceback, subprocess and argparse's use of shutil, in the runner
# and in its driver) but that nothing reads before the first database round trip: each
# runs on the first read of one of its names (ptah.engines.deferred), if ever. Installed
# before the imports below, which bring them. tests/unit/test_startup_imports.py checks
# that none of them has run by the time the target is open, on every engine.
STARTUP_DEFERRED = ("copy", "linecache", "tokenize", "textwrap", "signal", "bz2", "lzma")
Deferred({name: {} for name in STARTUP_DEFERRED}).install()

from ptah import failures  # noqa: E402
from ptah.runner import operations  # noqa: E402
from ptah.runner.emit import Output, run_operation  # noqa: E402

# Every Job pays the runner's start-up before its first database round trip, so nothing
# imported before the connection may load these (the frame's models, the planner, the
# operator's libraries); they load once connected, if the operation needs them.
# tests/unit/test_startup_imports.py checks it, bench/startup.py times it.
LATE_PACKAGES = (
    "pydantic",
    "pydantic_core",
    "sqlglot",
    "structlog",
    "lightkube",
    "httpx",
    "yaml",
    "cryptography",
    "prometheus_client",
)

# Nor, before the driver loads, these: the realm's fence, the hashing that only the
# fence and the frame use, and the identity record the opened database fills in wait
# until the target is open (the connect path is the parser, the URL and the engine's
# open). tests/unit/test_startup_imports.py checks this too.
AFTER_CONNECT = ("ptah.engines.fence", "hashlib", "ptah.engines.report")


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--operation-id",
        default=os.environ.get("PTAH_OPERATION_ID", ""),
        help="operation ID the frame carries (default: $PTAH_OPERATION_ID)",
    )


def _add_offline(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--offline",
        action="append",
        default=[],
        choices=("indexes", "constraints", "not-null", "algorithm", "all"),
        help="an online technique the plan does not use (repeatable; all: none)",
    )


def add_lock_options(parser: argparse.ArgumentParser) -> None:
    """Apply's lock settings: each statement's lock_timeout, retries, lock-heavy refusal."""
    parser.add_argument(
        "--lock-timeout-seconds",
        type=float,
        default=None,
        help="each statement's lock_timeout (default: $PTAH_LOCK_TIMEOUT_SECONDS or 10)",
    )
    parser.add_argument(
        "--lock-retries",
        type=int,
        default=None,
        help="tries again after a lock timeout, with back-off (default: $PTAH_LOCK_RETRIES or 3)",
    )
    parser.add_argument(
        "--refuse-lock-heavy",
        action="store_true",
        help="refuse a plan that holds a lock-heavy statement",
    )


def add_migrate_options(parser: argparse.ArgumentParser) -> None:
    """A versioned run's options, one home for the runner's ``migrate`` and ``ptah
    migrate apply``: how far to go, the baseline, how long to wait for the fence."""
    parser.add_argument("--to", help="apply pending versions up to and including this one")
    parser.add_argument("--baseline", help="version a non-empty database without history matches")
    parser.add_argument(
        "--lock-timeout",
        type=float,
        default=0.0,
        help="seconds to wait while another run holds the realm's fence "
        "(default 0: refuse at once)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ptah-runner",
        description=__doc__,
        epilog="exit codes:\n" + failures.table(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("identify", help="report the identity of the database opened")
    _add_common(p)
    p.set_defaults(func=run_identify)
    p = sub.add_parser("plan", help="plan the desired schema against the target (read-only)")
    _add_common(p)
    p.add_argument("--desired", required=True, help="file holding the desired SQL DDL")
    p.add_argument(
        "--cache-dir",
        default=os.environ.get("PTAH_CACHE_DIR") or None,
        help="re-plan cache: the normalised desired schema and the target's last inspection"
        " (default: $PTAH_CACHE_DIR, which a Plan Job sets when its runner settings name a"
        " cacheVolume)",
    )
    p.add_argument(
        "--ownership",
        choices=("ignore", "manage"),
        default="ignore",
        help="PostgreSQL: leave OWNER TO out of the load (ignore) or plan owners (manage)",
    )
    p.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="ENTRY",
        help="spec.policy.ignore: a kind (and a name, '*' any characters) of objects the plan"
        " leaves alone (an unmanaged kind: let through the desired source; a managed one:"
        " never changed on the target, refused in the desired source)",
    )
    _add_offline(p)
    p.set_defaults(func=run_plan)
    p = sub.add_parser("apply", help="apply a plan if the target has not drifted")
    _add_common(p)
    p.add_argument("--plan", required=True, help="plan JSON: statements and fingerprintBefore")
    p.add_argument("--allow-destructive", action="store_true")
    add_lock_options(p)
    p.set_defaults(func=run_apply)
    p = sub.add_parser("history", help="read the migration history (read-only)")
    _add_dirs(p)
    p.add_argument(
        "--baseline",
        help="the version Migrate would record on a database without history: the files"
        " up to it are not read for the refusals a run would meet",
    )
    p.set_defaults(func=run_history)
    p = sub.add_parser("migrate", help="apply pending migrations")
    _add_dirs(p)
    add_migrate_options(p)
    p.set_defaults(func=run_migrate)
    return parser


def _add_dirs(parser: argparse.ArgumentParser) -> None:
    _add_common(parser)
    parser.add_argument(
        "--dir",
        dest="dirs",
        action="append",
        required=True,
        type=Path,
        help="migration directory; repeat to merge several (one per ConfigMap)",
    )


def _realm() -> str | None:
    """The claim's realm, when the Job names it (the opened database's otherwise)."""
    from ptah.engines import fence

    return os.environ.get(fence.REALM_ENV) or None


def run_identify(args: argparse.Namespace) -> int:
    return run_operation(args.operation_id, "identify", operations.identify)


def run_plan(args: argparse.Namespace) -> int:
    return run_operation(
        args.operation_id,
        "plan",
        lambda run: operations.plan(
            run, args.desired, args.cache_dir, args.ownership, args.ignore, args.offline
        ),
    )


def run_apply(args: argparse.Namespace) -> int:
    return run_operation(
        args.operation_id,
        "apply",
        lambda run: operations.apply(
            run,
            args.plan,
            args.allow_destructive,
            _realm(),
            lock_seconds=args.lock_timeout_seconds,
            lock_retries=args.lock_retries,
            allow_lock_heavy=not args.refuse_lock_heavy,
        ),
    )


def run_history(args: argparse.Namespace) -> int:
    return run_operation(
        args.operation_id,
        "history",
        lambda run: operations.history(run, args.dirs, args.baseline),
    )


def run_migrate(args: argparse.Namespace) -> int:
    return run_operation(
        args.operation_id,
        "migrate",
        lambda run: operations.migrate(
            run, args.dirs, args.to, args.baseline, args.lock_timeout, _realm()
        ),
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except Exception:
        # No frame could be produced: say so on stderr (escaped, scrubbed), exit non-zero.
        Output(secrets=[]).log("ptah-runner: could not produce a result frame")
        return failures.INTERNAL.exit_code


if __name__ == "__main__":
    sys.exit(main())
