"""`ptah-runner`: what a Job's Pod executes. Opens the target, does one operation, prints one frame.

Inputs come from files and the environment the Job provides (``PTAH_DB_URL``,
``PTAH_DEV_URL``, ``PTAH_OPERATION_ID``). The exit code is 0 whenever a frame
was printed, whatever its outcome: the frame, not the exit code, is the
evidence. Non-zero means no frame could be produced at all.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ptah.engines import fence
from ptah.engines.base import EngineError, Target
from ptah.engines.connect import open_url
from ptah.engines.urls import DbUrl, UrlError, parse_url
from ptah.runner import operations
from ptah.runner.emit import Output

if TYPE_CHECKING:
    from ptah.runner.frame import OperationType
    from ptah.runner.wire import Payload

# Another engineer's subcommands (history, migrate) live here.
EXTRA_MODULES = ("ptah.migrations.ops",)

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


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--operation-id",
        default=os.environ.get("PTAH_OPERATION_ID", ""),
        help="operation ID the frame carries (default: $PTAH_OPERATION_ID)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ptah-runner", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("identify", help="report the identity of the database opened")
    _add_common(p)
    p.set_defaults(func=run_identify)
    p = sub.add_parser("plan", help="plan the desired schema against the target (read-only)")
    _add_common(p)
    p.add_argument("--desired", required=True, help="file holding the desired SQL DDL")
    p.add_argument("--cache-dir", default=None, help="cache for the normalised desired schema")
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
        metavar="KIND",
        help="a kind of unmanaged object the plan leaves alone instead of refusing",
    )
    p.set_defaults(func=run_plan)
    p = sub.add_parser("apply", help="apply a plan if the target has not drifted")
    _add_common(p)
    p.add_argument("--plan", required=True, help="plan JSON: statements and fingerprintBefore")
    p.add_argument("--allow-destructive", action="store_true")
    p.set_defaults(func=run_apply)
    for name in EXTRA_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(sub)
    return parser


def _urls(out: Output) -> tuple[DbUrl, DbUrl | None]:
    raw = os.environ.get("PTAH_DB_URL", "")
    if not raw:
        raise UrlError("PTAH_DB_URL is not set")
    url = parse_url(raw)
    out.secrets += url.secrets
    dev_raw = os.environ.get("PTAH_DEV_URL", "")
    dev = parse_url(dev_raw) if dev_raw else None
    if dev is not None:
        out.secrets += dev.secrets
    return url, dev


def _run(
    args: argparse.Namespace,
    operation_type: OperationType,
    body: Callable[[Target, DbUrl | None], Payload],
) -> int:
    out = Output()
    operation_id: str = args.operation_id
    if not operation_id:
        out.log("ptah-runner: no operation id (--operation-id or PTAH_OPERATION_ID)")
        return 2
    try:
        url, dev = _urls(out)
    except UrlError as exc:
        out.frame(
            operations.make_frame(
                operation_id,
                operation_type,
                None,
                "failed",
                "TargetUnavailable",
                {"message": str(exc)},
            )
        )
        return 0
    try:
        target = open_url(url)
    except EngineError as exc:
        out.log(str(exc))
        out.frame(
            operations.make_frame(
                operation_id,
                operation_type,
                None,
                "failed",
                exc.reason,
                {"message": str(exc)[:2000]},
            )
        )
        return 0
    with target:
        try:
            frame = body(target, dev)
        except Exception as exc:
            import traceback

            out.log(target.scrub(traceback.format_exc()))
            message = target.scrub(f"{type(exc).__name__}: {exc}")[:2000]
            reason = exc.reason if isinstance(exc, EngineError) else "InternalError"
            try:
                identity = target.identity()
            except Exception:
                identity = None
            frame = operations.make_frame(
                operation_id, operation_type, identity, "failed", reason, {"message": message}
            )
        out.frame(frame)
    return 0


def run_identify(args: argparse.Namespace) -> int:
    return _run(args, "identify", lambda t, _dev: operations.identify(t, args.operation_id))


def run_plan(args: argparse.Namespace) -> int:
    return _run(
        args,
        "plan",
        lambda t, dev: operations.plan(
            t, args.operation_id, args.desired, dev, args.cache_dir, args.ownership, args.ignore
        ),
    )


def run_apply(args: argparse.Namespace) -> int:
    return _run(
        args,
        "apply",
        lambda t, _dev: operations.apply(
            t,
            args.operation_id,
            args.plan,
            args.allow_destructive,
            os.environ.get(fence.REALM_ENV) or None,
        ),
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except Exception:
        # No frame could be produced: say so on stderr (escaped, scrubbed), exit non-zero.
        Output(secrets=[]).log("ptah-runner: could not produce a result frame")
        return 1


if __name__ == "__main__":
    sys.exit(main())
