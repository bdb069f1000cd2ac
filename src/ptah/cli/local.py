"""`ptah plan` and `ptah apply` for people: the runner's engine code, without Kubernetes."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from ptah import failures
from ptah.engines.model import TECHNIQUES
from ptah.engines.urls import parse_url
from ptah.runner.main import add_lock_options

if TYPE_CHECKING:  # the planner (sqlglot) loads when a plan is made: `ptah --help` stays light
    from ptah.engines.model import Plan

_MARK = {
    "destructive": "!! DESTRUCTIVE",
    "data-dependent": "! data-dependent",
    "lock-heavy": "! lock-heavy",
}
# Where apply runs a statement, when not in the plan's current transaction.
_STEP = {"new": ["in a new transaction"], "none": ["outside a transaction"]}


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("plan", help="plan a desired schema against a database")
    p.add_argument(
        "--url", required=True, help="database URL (postgresql://, mysql://, sqlite:///)"
    )
    p.add_argument("--desired", required=True, help="file with the desired SQL DDL")
    p.add_argument("--dev-url", default=None, help="empty scratch/dev database URL")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.add_argument("--cache-dir", default=None)
    _add_offline(p)
    _add_ignore(p)
    p.set_defaults(func=cmd_plan)
    a = subparsers.add_parser("apply", help="plan, show, and apply (fingerprint-checked)")
    a.add_argument("--url", required=True)
    a.add_argument("--desired", required=True)
    a.add_argument("--dev-url", default=None)
    a.add_argument("--yes", action="store_true", help="apply without asking (allows destructive)")
    _add_offline(a)
    _add_ignore(a)
    add_lock_options(a)
    a.set_defaults(func=cmd_apply)


def _add_ignore(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="ENTRY",
        help="as spec.policy.ignore (repeatable): objects the plan leaves alone, a kind"
        " optionally followed by a name, '*' any characters ('publication dbz_*')",
    )


def _add_offline(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--offline",
        action="append",
        default=[],
        choices=(*TECHNIQUES, "all"),
        help="an online technique not to use (repeatable; all: plan every change the plain"
        " way); see docs/online.md",
    )


def _plan(args: argparse.Namespace, *, read_only: bool = False) -> tuple[Any, Plan]:
    """Read the desired file, then open the target (``read_only`` for a plan that only
    shows: it leaves no trace, not even a new empty SQLite file) and plan. A failure of
    input or environment propagates to ``ptah``'s one-line report
    (:func:`ptah.cli.main.explain`)."""
    from ptah.engines import planner
    from ptah.engines.connect import open_target
    from ptah.engines.model import Online, SchemaPolicy
    from ptah.runner.operations import read_desired

    desired = read_desired(args.desired)
    dev = parse_url(args.dev_url) if args.dev_url else None
    target = open_target(args.url, read_only=read_only)
    try:
        policy = SchemaPolicy(
            ignore=tuple(args.ignore), online=Online.from_off(tuple(args.offline))
        )
        return target, planner.plan(
            target, desired, dev_url=dev, cache_dir=getattr(args, "cache_dir", None), policy=policy
        )
    except BaseException:
        target.close()
        raise


def render(plan: Plan) -> str:
    if not plan.statements:
        return f"No changes. Schema fingerprint {plan.fingerprint_before}\n"
    lines = [f"-- from {plan.fingerprint_before}", f"-- to   {plan.fingerprint_after}"]
    for i, stmt in enumerate(plan.statements, 1):
        marks = ", ".join(
            [_MARK.get(h, h) for h in stmt.hazards] + _STEP.get(stmt.transaction or "", [])
        )
        lines.append(f"\n-- [{i}] {marks}" if marks else f"\n-- [{i}]")
        lines.append(stmt.sql + ";")
    lines += [f"-- warning: {w}" for w in plan.warnings]
    return "\n".join(lines) + "\n"


def cmd_plan(args: argparse.Namespace) -> int:
    target, plan = _plan(args, read_only=True)
    target.close()
    sys.stdout.write(json.dumps(plan.to_json(), indent=2) + "\n" if args.json else render(plan))
    return 0


def cmd_apply(args: argparse.Namespace) -> int:
    from ptah.engines import planner
    from ptah.engines.ops import timeouts_from_env

    target, plan = _plan(args)
    with target:
        sys.stdout.write(render(plan))
        if not plan.statements:
            return 0
        if not args.yes:
            if not sys.stdin.isatty():
                sys.stderr.write("ptah: not a terminal; pass --yes to apply\n")
                return 2
            if input("Apply these statements? [y/N] ").strip().lower() != "y":
                return 1
        result = planner.apply(
            target,
            plan.statements,
            plan.fingerprint_before,
            allow_destructive=True,  # the person has just seen and confirmed the plan
            expected_after=plan.fingerprint_after,
            timeouts=timeouts_from_env(args.lock_timeout_seconds, args.lock_retries),
            allow_lock_heavy=not args.refuse_lock_heavy,
        )
        sys.stdout.write(
            json.dumps(
                {"outcome": result.outcome, "reason": result.reason, **result.to_json()}, indent=2
            )
            + "\n"
        )
        if result.reason == "ExpectedSchemaNotReached":
            _name_the_difference(args, target)
        if result.outcome == "succeeded":
            return failures.OK
        found = failures.by_reason(result.reason)  # a fenced apply: RealmBusy
        return found.exit_code if found else failures.DID_NOT_SUCCEED


def _name_the_difference(args: argparse.Namespace, target: Any) -> None:
    """After an apply that missed its expected schema: what a plan would still change."""
    from ptah.engines import planner
    from ptah.engines.base import EngineError
    from ptah.engines.model import PlanError
    from ptah.engines.splitter import read_sql

    try:
        again = planner.plan(target, read_sql(args.desired))
    except (EngineError, PlanError, OSError) as exc:
        sys.stderr.write(f"ptah: the difference could not be read again: {exc}\n")
        return
    sys.stderr.write(
        f"ptah: the schema is not the plan's expected one; {len(again.statements)}"
        " statement(s) would still change it:\n"
    )
    for stmt in again.statements[:20]:
        sys.stderr.write("  " + " ".join(stmt.sql.split())[:200] + "\n")
