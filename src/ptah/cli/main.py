"""The `ptah` command: one entry that hands each subcommand to its own module."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Each module exposes register(subparsers) and sets a `func` default on its parsers.
SUBCOMMAND_MODULES = (
    "ptah.cli.dev",
    "ptah.cli.local",
    "ptah.cli.migrate",
    "ptah.cli.operate",
    "ptah.cli.status",
    "ptah.cli.approve",
    "ptah.cli.rollout",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ptah", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    result = args.func(args)
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
