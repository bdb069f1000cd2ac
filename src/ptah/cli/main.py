"""The `ptah` command: one entry that hands each subcommand to its own module.

A failure caused by input or environment (an unreachable database, refused
credentials, a file that is not a database, a missing or unreadable file or
directory, a bad URL) is one line on stderr naming what and where, never a
traceback and never a credential, and exits with its class's code
(``PTAH_DEBUG=1`` shows the traceback of an unexpected error):
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ptah import failures
from ptah.cli import approve, dev, local, migrate, operate, rollout, status

# Each module exposes register(subparsers) and sets a `func` default on its parsers.
SUBCOMMAND_MODULES = (dev, local, migrate, operate, status, approve, rollout)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ptah",
        description=__doc__,
        epilog="exit codes:\n" + failures.table(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for module in SUBCOMMAND_MODULES:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if os.environ.get("PTAH_DEBUG"):
            raise
        reason, code, message = explain(exc)
        line = " ".join(_scrub(message, args).split())
        sys.stderr.write(f"ptah {args.command}: {line} [{reason}, exit {code}]\n")
        return code


def explain(exc: BaseException) -> tuple[str, int, str]:
    """The reason, exit code and message of a failure that reached the top."""
    from ptah.engines.base import EngineError
    from ptah.engines.urls import UrlError

    if isinstance(exc, failures.Failure):
        return exc.failure.reason, exc.failure.exit_code, str(exc)
    if isinstance(exc, UrlError):
        return failures.BAD_URL.reason, failures.BAD_URL.exit_code, f"bad database URL: {exc}"
    reason = str(getattr(exc, "reason", ""))
    if isinstance(exc, EngineError) or reason:
        found = failures.by_reason(reason)
        code = found.exit_code if found else failures.DID_NOT_SUCCEED
        return reason or type(exc).__name__, code, str(exc)
    if isinstance(exc, OSError):
        where = f" {exc.filename}" if exc.filename else ""
        cls = failures.INPUT_UNREADABLE
        return cls.reason, cls.exit_code, f"cannot read{where}: {exc.strerror or exc}"
    cls = failures.INTERNAL
    text = f"internal error: {type(exc).__name__}: {exc} (PTAH_DEBUG=1 shows the traceback)"
    return cls.reason, cls.exit_code, text


def _scrub(text: str, args: argparse.Namespace) -> str:
    """No password of any URL the command was given, nor URL userinfo, in ``text``."""
    from ptah.engines.urls import UrlError, parse_url, scrub

    secrets: list[str] = []
    for raw in (getattr(args, "url", None), getattr(args, "dev_url", None)):
        for candidate in (raw, os.environ.get("PTAH_DB_URL"), os.environ.get("PTAH_DEV_URL")):
            try:
                secrets += parse_url(candidate).secrets if candidate else []
            except UrlError:
                continue
    return scrub(text, *secrets)


if __name__ == "__main__":
    sys.exit(main())
