"""The command line for fleets and gates: ``ptah approve rollout/NAME`` (one decision per
distinct plan), ``ptah status rollout/NAME`` (the per-target table), and ``ptah wait
KIND/NAME --source-digest D`` (the GitOps gate, for an init container or a CI step).

A rollout approval names a statements digest, so a person must see exactly the
statements that digest names: each group is shown from a PtahPlan of one of its
targets, whose plan digest and statements digest are both recomputed here before it
is shown or approved.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from ptah.cli.approve import current_plan, parse_resource, render_plan, who
from ptah.cli.status import CliError, add_cluster_args, explain, format_columns, run_cli
from ptah.kube.errors import AlreadyExists, ApiError
from ptah.kube.kinds import APPROVAL, MIGRATION, ROLLOUT, SCHEMA, Kind
from ptah.kube.port import Cluster, Obj

ROLLOUT_ALIASES = ("rollout", "rollouts", "ptahrollout", "ptahrollouts", "prollout")


def parse_any(text: str) -> tuple[Kind, str]:
    """schema/NAME, migration/NAME or rollout/NAME."""
    kind_text, _, name = text.partition("/")
    if kind_text.lower() in ROLLOUT_ALIASES and name:
        return ROLLOUT, name
    try:
        return parse_resource(text)
    except CliError:
        raise CliError(
            f"cannot read {text!r} as a resource: write schema/NAME, migration/NAME or "
            "rollout/NAME (`ptah status` lists them)"
        ) from None


def is_rollout(text: str) -> bool:
    return text.partition("/")[0].lower() in ROLLOUT_ALIASES


def _rollout(cluster: Cluster, namespace: str, name: str) -> Obj:
    try:
        obj = cluster.get(ROLLOUT, namespace, name)
    except ApiError as exc:
        raise explain(exc, f"reading PtahRollout {name}") from exc
    if obj is None:
        raise CliError(f"no PtahRollout {name!r} in namespace {namespace}")
    return obj


# ------------------------------------------------------------------ approve


def approve_rollout(
    cluster: Cluster,
    namespace: str,
    name: str,
    *,
    yes: bool,
    out: TextIO,
    ask: Callable[[str], str] | None,
    group: str | None = None,
    reason: str = "",
) -> int:
    """Show every distinct plan the rollout's targets wait on, grouped by statements,
    ask once, and create one rollout approval per group."""
    from ptah.api.resources import statements_digest

    obj = _rollout(cluster, namespace, name)
    decisions = list((obj.get("status") or {}).get("decisions") or [])
    if group:
        decisions = [d for d in decisions if str(d["statementsDigest"]).startswith(group)]
        if not decisions:
            raise CliError(f"no group with statements {group} waits in rollout {name}")
    if not decisions:
        counts = (obj.get("status") or {}).get("counts") or {}
        raise CliError(
            f"no target of rollout {name} waits for a decision (phase "
            f"{(obj.get('status') or {}).get('phase') or 'Pending'}, "
            f"{counts.get('waitingForApproval', 0)} waiting, all covered); "
            "targets of later waves plan when their wave starts"
        )
    shown = []
    for d in decisions:
        child = str(d["example"])
        kind_name = (obj.get("status") or {}).get("childKind") or "PtahSchema"
        kind = SCHEMA if kind_name == SCHEMA.kind else MIGRATION
        child_obj, spec = current_plan(cluster, kind, namespace, child)
        digest = str(child_obj["status"]["currentPlan"]["digest"])
        if statements_digest(spec.statements) != d["statementsDigest"]:
            raise CliError(
                f"the plan of {child} no longer has the statements the rollout grouped "
                f"({str(d['statementsDigest'])[:12]}); retry once the rollout has looked again"
            )
        n = int(d["targets"])
        out.write(
            f"{n} target{'s' if n != 1 else ''}: these {len(spec.statements)} statement(s) "
            f"(statements {str(d['statementsDigest'])[:12]}; shown from {child}):\n"
        )
        out.write(render_plan(kind, child, digest, spec, color=False))
        out.write("\n")
        shown.append(d)
    out.write(
        "Each target spends this decision once, through its own approval of its own plan; a "
        "target whose statements differ waits for its own decision.\n"
    )
    if not yes:
        if ask is None:
            raise CliError("not a terminal to ask on: pass --yes to approve from a script")
        answer = ask(f"\nApprove {len(shown)} group(s) for rollout {name}? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            out.write("Not approved.\n")
            return 1
    try:
        existing = {str(a["metadata"]["name"]) for a in cluster.list(APPROVAL, namespace)}
    except ApiError as exc:
        raise explain(exc, "listing ptahapprovals") from exc
    for d in shown:
        s = str(d["statementsDigest"])
        base = f"rollout-{name}"[:220].rstrip("-.") + f"-{s[:12]}"
        new = next(f"{base}-{i}" for i in range(1, 10000) if f"{base}-{i}" not in existing)
        body: Obj = {
            "apiVersion": APPROVAL.api_version,
            "kind": APPROVAL.kind,
            "metadata": {"name": new, "namespace": namespace},
            "spec": {
                "resourceRef": {"kind": ROLLOUT.kind, "name": name},
                "planDigest": s,
                "approvedBy": who(),
                **({"reason": reason} if reason else {}),
            },
        }
        try:
            cluster.create(APPROVAL, body)
        except AlreadyExists as exc:
            raise CliError(f"PtahApproval {new} appeared meanwhile; run again") from exc
        except ApiError as exc:
            raise explain(exc, "creating the PtahApproval") from exc
        out.write(f"Approved: PtahApproval {new} (statements {s[:12]}, {d['targets']} now).\n")
    return 0


# ------------------------------------------------------------------ status


def rollout_status(
    cluster: Cluster, namespace: str, name: str, out: TextIO, phase: str | None = None
) -> int:
    obj = _rollout(cluster, namespace, name)
    s = obj.get("status") or {}
    counts = s.get("counts") or {}
    out.write(
        f"rollout/{name}: {s.get('phase') or 'Pending'}, wave {s.get('currentWave', '-')} "
        f"of {s.get('waves', '-')}, {s.get('childKind') or '-'} children, "
        f"revision {s.get('revision') or '-'}\n"
    )
    keys = ("ready", "applying", "waitingForApproval", "uncertain", "failed", "pending")
    out.write(
        f"  {counts.get('total', 0)} targets: "
        + ", ".join(f"{counts.get(k, 0)} {k}" for k in keys)
        + "\n"
    )
    stopped = s.get("stopped")
    if stopped:
        out.write(f"  STOPPED by {stopped.get('target')}: {stopped.get('message')}\n")
    for d in s.get("decisions") or []:
        out.write(
            f"  decision needed: {d['targets']} target(s) wait on statements "
            f"{str(d['statementsDigest'])[:12]} ({d['statements']} statement(s)): "
            f"ptah approve rollout/{name} -n {namespace}\n"
        )
    if s.get("appliedSource"):
        out.write(f"  applied source {s['appliedSource']}\n")
    rows = s.get("targets") or []
    if phase:
        rows = [r for r in rows if str(r.get("phase", "")).lower() == phase.lower()]
    table = [["TARGET", "CHILD", "WAVE", "PHASE", "REASON"]]
    for r in rows:
        wave = int(r.get("wave", -1))
        table.append(
            [
                str(r.get("name")),
                str(r.get("child")),
                str(wave) if wave >= 0 else "-",
                str(r.get("phase")),
                str(r.get("reason") or "-"),
            ]
        )
    out.write("\n" + format_columns(table) if rows else f"\nno target is {phase}\n")
    return 0


# ------------------------------------------------------------------ wait


def _normalise(d: str) -> str:
    """``h1:...`` (ptah migrate hash) and ``sha256:...`` mean the bare hex."""
    return d.split(":", 1)[1] if ":" in d else d


def holds(obj: Obj, want: str) -> bool:
    """The source digest is the one applied and the resource is Ready for its spec."""
    status = obj.get("status") or {}
    conditions: list[dict[str, Any]] = status.get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), {})
    current = status.get("observedGeneration") == obj["metadata"].get("generation")
    applied = _normalise(str(status.get("appliedSource") or ""))
    return (
        bool(applied)
        and applied == _normalise(want)
        and ready.get("status") == "True"
        and current
        and not status.get("activeOperation")
    )


def wait(
    cluster: Cluster,
    namespace: str,
    resource: str,
    digest: str,
    out: TextIO,
    *,
    timeout: float,
    interval: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Exit 0 once ``digest`` is applied (and the resource Ready), 1 on timeout, 2 when the
    resource does not exist."""
    kind, name = parse_any(resource)
    deadline = clock() + timeout
    shown: tuple[Any, ...] | None = None
    while True:
        try:
            obj = cluster.get(kind, namespace, name)
        except ApiError as exc:
            raise explain(exc, f"reading {kind.kind} {name}") from exc
        if obj is None:
            out.write(f"no {kind.kind} {name!r} in namespace {namespace}\n")
            return 2
        if holds(obj, digest):
            out.write(f"{kind.kind} {name}: source {_normalise(digest)[:16]} applied\n")
            return 0
        status = obj.get("status") or {}
        now = (status.get("phase"), status.get("appliedSource"))
        if now != shown:
            out.write(
                f"  {kind.kind} {name}: {now[0] or 'Pending'}, applied "
                f"{str(now[1] or '-')[:16]}, waiting for {_normalise(digest)[:16]}\n"
            )
            out.flush()
            shown = now
        if clock() >= deadline:
            out.write(f"timed out after {timeout:g}s: {kind.kind} {name} is {now[0]}\n")
            return 1
        sleep(interval)


def _wait_cmd(args: argparse.Namespace) -> int:
    def body(cluster: Cluster, namespace: str) -> int:
        return wait(
            cluster,
            namespace,
            args.resource,
            args.source_digest,
            sys.stdout,
            timeout=args.timeout,
            interval=args.interval,
        )

    return run_cli(args, body)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "wait",
        help="wait until a resource has applied a source digest (the GitOps gate)",
    )
    p.add_argument(
        "resource", metavar="RESOURCE", help="schema/NAME, migration/NAME or rollout/NAME"
    )
    add_cluster_args(p)
    p.add_argument(
        "--source-digest",
        required=True,
        help="sha256 of the schema text, or the h1: hash `ptah migrate hash` prints",
    )
    p.add_argument("--timeout", type=float, default=600.0, help="seconds (default 600)")
    p.add_argument("--interval", type=float, default=2.0, help=argparse.SUPPRESS)
    p.set_defaults(func=_wait_cmd)
