"""``ptah approve RESOURCE``: show the plan a resource waits on, ask, then approve it.

An approval is a ``PtahApproval`` naming one resource and one plan digest; the operator
spends it once, at the dispatch boundary, and only if the plan is still the one every
binding was computed under. So approving is cheap to get right and hard to get wrong,
provided the person sees what they approve: this command prints the plan's statements
with their hazards *from the PtahPlan object itself* (recomputing its digest, so what is
shown is what the digest names), and only then asks.

Refusals say what to do next: no plan yet (wait for the reading), no changes, a plan
computed for an older spec, ``--plan`` naming a digest that is not the current one, a
plan that was dispatched already, an approval that already exists.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from ptah.cli.status import CliError, add_cluster_args, explain, follow, run_cli
from ptah.kube.errors import AlreadyExists, ApiError
from ptah.kube.kinds import APPROVAL, MIGRATION, PLAN, SCHEMA, Kind
from ptah.kube.port import Cluster, Obj

if TYPE_CHECKING:  # the models (pydantic) load when used: `ptah --help` stays light
    from ptah.api.resources import PlanSpec

_KINDS: dict[str, Kind] = {
    alias: kind
    for kind, aliases in (
        (SCHEMA, ("schema", "schemas", "ptahschema", "ptahschemas")),
        (MIGRATION, ("migration", "migrations", "ptahmigration", "ptahmigrations")),
    )
    for alias in aliases
}
_MARK = {
    "destructive": "!! DESTRUCTIVE",
    "data-dependent": "! data-dependent",
    "lock-heavy": "! lock-heavy",
}
# Where apply runs a statement, when not in the plan's current transaction.
_STEP = {"new": ["in a new transaction"], "none": ["outside a transaction"]}


def parse_resource(text: str) -> tuple[Kind, str]:
    kind_text, _, name = text.partition("/")
    kind = _KINDS.get(kind_text.lower())
    if kind is None or not name:
        raise CliError(
            f"cannot read {text!r} as a resource: write schema/NAME or migration/NAME "
            "(`ptah status` lists them)"
        )
    return kind, name


def _get(cluster: Cluster, kind: Kind, namespace: str, name: str) -> Obj | None:
    try:
        return cluster.get(kind, namespace, name)
    except ApiError as exc:
        raise explain(exc, f"reading {kind.kind} {name}") from exc


def current_plan(cluster: Cluster, kind: Kind, namespace: str, name: str) -> tuple[Obj, PlanSpec]:
    """The resource and the PtahPlan it acts on, or why there is nothing to approve."""
    from pydantic import ValidationError

    from ptah.api.resources import PlanSpec
    from ptah.lifecycle.authorize import plan_digest

    obj = _get(cluster, kind, namespace, name)
    if obj is None:
        raise CliError(
            f"no {kind.kind} {name!r} in namespace {namespace} "
            "(`ptah status -A` lists every resource)"
        )
    status = obj.get("status") or {}
    summary = status.get("currentPlan")
    if not summary:
        raise CliError(
            f"{kind.kind} {name} has no plan waiting (phase "
            f"{status.get('phase') or 'Pending'}, waiting for {status.get('waitingFor') or '-'}); "
            "the operator computes one from a read-only reading: retry once `ptah status` shows it"
        )
    if not summary.get("changes"):
        raise CliError(f"the plan of {kind.kind} {name} has no changes: nothing to approve")
    generation = obj["metadata"].get("generation")
    if generation is not None and summary.get("generation") != generation:
        raise CliError(
            f"the plan of {kind.kind} {name} was computed for generation "
            f"{summary.get('generation')}, the spec is at {generation}: wait for the new plan"
        )
    digest = str(summary["digest"])
    last = status.get("lastMutation") or {}
    if last.get("planDigest") == digest or status.get("appliedPlanDigest") == digest:
        raise CliError(
            f"plan {digest[:12]} of {kind.kind} {name} was dispatched already; "
            "a plan runs at most once: change the spec to plan again"
        )
    plan_obj = _get(cluster, PLAN, namespace, str(summary["name"]))
    if plan_obj is None:
        raise CliError(
            f"PtahPlan {summary['name']} is gone (the operator discarded it); "
            "a new plan follows the next reading: retry then"
        )
    try:
        spec = PlanSpec.model_validate(plan_obj.get("spec") or {})
    except ValidationError as exc:
        raise CliError(f"PtahPlan {summary['name']} is not readable: {exc}") from exc
    if spec.owner_uid != obj["metadata"].get("uid") or plan_digest(spec) != digest:
        raise CliError(
            f"PtahPlan {summary['name']} does not match the digest {digest[:12]} that "
            f"{kind.kind} {name} names; refusing to show or approve it"
        )
    return obj, spec


def render_plan(kind: Kind, name: str, digest: str, spec: PlanSpec, color: bool) -> str:
    def hi(text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if color else text

    lines = [
        f"{kind.kind} {name}: plan {digest[:12]} ({spec.engine}, "
        f"{len(spec.statements)} statement(s))",
    ]
    if spec.destructive:
        lines.append(hi("This plan is DESTRUCTIVE: it can lose data.", "1;31"))
    for i, stmt in enumerate(spec.statements, 1):
        marks = ", ".join(
            [_MARK.get(h, h) for h in stmt.hazards] + _STEP.get(stmt.transaction or "", [])
        )
        head = f"-- [{i}] {marks}" if marks else f"-- [{i}]"
        code = "1;31" if "destructive" in stmt.hazards else "33"
        lines += ["", hi(head, code) if marks else head, stmt.sql.rstrip().rstrip(";") + ";"]
    if spec.warnings:  # what the reading said beside the statements: part of the decision
        lines += ["", *(hi(f"-- warning: {w}", "33") for w in spec.warnings)]
    return "\n".join(lines) + "\n"


def existing_approval(
    cluster: Cluster, kind: Kind, namespace: str, name: str, digest: str
) -> str | None:
    """The name of an unconsumed approval of this digest for this resource, if any."""
    from pydantic import ValidationError

    from ptah.api.resources import PtahApproval, approval_consumed

    try:
        objs = cluster.list(APPROVAL, namespace)
    except ApiError as exc:
        raise explain(exc, "listing ptahapprovals") from exc
    for o in objs:
        try:
            a = PtahApproval.model_validate(o)
        except ValidationError:
            continue
        ref = a.spec.resource_ref
        mine = ref.kind == kind.kind and ref.name == name and a.spec.plan_digest == digest
        if mine and not approval_consumed(a):
            return str(o["metadata"]["name"])
    return None


def approval_name(kind: Kind, name: str, digest: str) -> str:
    """Deterministic, so a retried approve finds its own earlier create."""
    short = "schema" if kind is SCHEMA else "migration"
    return f"{short}-{name}"[:240].rstrip("-.") + f"-{digest[:12]}"


def who() -> str:
    for var in ("PTAH_APPROVER", "USER", "LOGNAME"):
        if os.environ.get(var):
            return os.environ[var]
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def approve(
    cluster: Cluster,
    namespace: str,
    resource: str,
    *,
    yes: bool,
    out: TextIO,
    ask: Callable[[str], str] | None,
    expected_digest: str | None = None,
    reason: str = "",
    color: bool = False,
    wait: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Show, ask, approve, and with ``wait`` follow the resource until it is Ready,
    Stalled or ``wait`` seconds passed. ``ask`` is None when there is no terminal.
    ``rollout/NAME`` approves the rollout's distinct plans, one decision per group."""
    from ptah.cli import rollout

    if rollout.is_rollout(resource):
        return rollout.approve_rollout(
            cluster,
            namespace,
            resource.partition("/")[2],
            yes=yes,
            out=out,
            ask=ask,
            group=expected_digest,
            reason=reason,
        )
    kind, name = parse_resource(resource)
    obj, spec = current_plan(cluster, kind, namespace, name)
    digest = str(obj["status"]["currentPlan"]["digest"])
    if expected_digest and not digest.startswith(expected_digest):
        raise CliError(
            f"--plan {expected_digest} is not the current plan of {kind.kind} {name} "
            f"(that is {digest[:12]}); review the current one and approve it instead"
        )
    out.write(render_plan(kind, name, digest, spec, color))
    found = existing_approval(cluster, kind, namespace, name, digest)
    if found:
        out.write(f"\nAlready approved by PtahApproval {found}; nothing to do.\n")
        return 0
    if not yes:
        if ask is None:
            raise CliError("not a terminal to ask on: pass --yes to approve from a script")
        answer = ask(f"\nApprove plan {digest[:12]} for {kind.kind} {name}? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            out.write("Not approved.\n")
            return 1
    new_name = approval_name(kind, name, digest)
    body: Obj = {
        "apiVersion": APPROVAL.api_version,
        "kind": APPROVAL.kind,
        "metadata": {"name": new_name, "namespace": namespace},
        "spec": {
            "resourceRef": {"kind": kind.kind, "name": name},
            "planDigest": digest,
            "approvedBy": who(),
            **({"reason": reason} if reason else {}),
        },
    }
    try:
        created = cluster.create(APPROVAL, body)
    except AlreadyExists as exc:
        raise CliError(
            f"PtahApproval {new_name} exists already and has been spent; "
            "the plan was dispatched or discarded: check `ptah status`"
        ) from exc
    except ApiError as exc:
        raise explain(exc, "creating the PtahApproval") from exc
    out.write(f"\nApproved: PtahApproval {created['metadata']['name']}.\n")
    if wait is None:
        out.write(
            f"The operator dispatches on its next pass; follow it with "
            f"`ptah status -n {namespace}` (or approve with --wait).\n"
        )
        return 0
    return follow(cluster, kind, namespace, name, out, timeout=wait, sleep=sleep)


def _cmd(args: argparse.Namespace) -> int:
    tty = sys.stdin.isatty()

    def body(cluster: Cluster, namespace: str) -> int:
        return approve(
            cluster,
            namespace,
            args.resource,
            yes=args.yes,
            out=sys.stdout,
            ask=input if tty else None,
            expected_digest=args.plan,
            reason=args.reason,
            color=sys.stdout.isatty() and not os.environ.get("NO_COLOR"),
            wait=args.wait,
        )

    return run_cli(args, body)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "approve", help="show a resource's waiting plan and approve it (PtahApproval)"
    )
    p.add_argument(
        "resource",
        metavar="RESOURCE",
        help="schema/NAME, migration/NAME, or rollout/NAME (its distinct plans, grouped)",
    )
    add_cluster_args(p)
    p.add_argument("--yes", action="store_true", help="approve without asking (for scripts)")
    p.add_argument(
        "--plan",
        default=None,
        help="refuse unless the current plan digest starts so (rollout: only that group)",
    )
    p.add_argument("--reason", default="", help="recorded in the approval's spec.reason")
    p.add_argument(
        "--wait",
        type=float,
        nargs="?",
        const=1800.0,
        default=None,
        metavar="SECONDS",
        help="follow the resource until Ready or Stalled (default 1800 s); exit 0 Ready, "
        "1 Stalled, 3 timed out",
    )
    p.set_defaults(func=_cmd)
