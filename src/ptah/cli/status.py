"""``ptah status``: where every PtahSchema and PtahMigration stands, as one table.

A person asking "what is Ptah doing?" needs, per resource, the phase, the plan it acts
on, what it waits for (an approval, a Lease, a reading...) and whether it owes proof of
an uncertain run, because that last one is what blocks everything else. The printer
columns of ``kubectl get`` show some of this, but not the uncertainty record and not
both kinds at once.

The command takes a ``Cluster`` (the port), so its tests run on the in-memory API.
Shared with ``ptah approve``: how to reach the cluster and which namespace is meant,
with errors that say what to do next.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ptah.kube.errors import ApiError, Forbidden, NotFound, Unavailable
from ptah.kube.kinds import MIGRATION, ROLLOUT, SCHEMA, Kind
from ptah.kube.port import Cluster, Obj

PRIMARY = (SCHEMA, MIGRATION)
SHORT = {SCHEMA.kind: "schema", MIGRATION.kind: "migration"}


class CliError(Exception):
    """A failure to report as one line that says what to do next (exit code 2)."""


# ------------------------------------------------------------- reaching the cluster


def kubeconfig_path(explicit: str | None) -> Path:
    return Path(explicit or os.environ.get("KUBECONFIG") or "~/.kube/config").expanduser()


def open_cluster(kubeconfig: str | None) -> tuple[Cluster, str]:
    """The real cluster and the kubeconfig context's namespace (``default`` if unset)."""
    from lightkube.config.kubeconfig import KubeConfig

    from ptah.kube.real import KubeconfigError, RealCluster

    path = kubeconfig_path(kubeconfig)
    if not path.exists():
        raise CliError(
            f"no kubeconfig at {path}: pass --kubeconfig or set KUBECONFIG "
            "(for the local control plane: `ptah dev up` prints it)"
        )
    try:
        config = KubeConfig.from_file(str(path)).get()
        cluster = RealCluster.from_kubeconfig(path)
    except (KubeconfigError, OSError, ValueError) as exc:
        raise CliError(f"cannot use kubeconfig {path}: {exc}") from exc
    namespace = (config.namespace if config is not None else None) or "default"
    return cluster, namespace


def explain(exc: ApiError, what: str) -> CliError:
    """Turn a port error into advice."""
    if isinstance(exc, Unavailable):
        return CliError(
            f"cannot reach the API server while {what}: {exc}. Is the cluster up? "
            "(local: `ptah dev up`)"
        )
    if isinstance(exc, Forbidden):
        return CliError(
            f"forbidden while {what}: {exc}. Your user needs get/list on ptah.io resources "
            "(and create on ptahapprovals to approve); see docs/rbac.md"
        )
    if isinstance(exc, NotFound):
        return CliError(
            f"not found while {what}: {exc}. Are the Ptah CRDs installed? "
            "(`kubectl apply -f deploy/crds` or `helm install ptah deploy/helm/ptah`)"
        )
    return CliError(f"API error while {what}: {exc}")


def add_cluster_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", default=None, help="kubeconfig (default: $KUBECONFIG)")
    p.add_argument("-n", "--namespace", default=None, help="namespace (default: the context's)")


def run_cli(
    args: argparse.Namespace, body: Callable[[Cluster, str], int], err: TextIO | None = None
) -> int:
    """Open the cluster named by ``args`` and run ``body``; report a CliError on one line."""
    err = err or sys.stderr
    try:
        cluster, ns = open_cluster(args.kubeconfig)
        try:
            return body(cluster, args.namespace or ns)
        finally:
            close = getattr(cluster, "close", None)
            if close is not None:
                close()
    except CliError as exc:
        err.write(f"ptah {args.command}: {exc}\n")
        return 2


# ------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Row:
    namespace: str
    kind: str
    name: str
    phase: str
    ready: str
    plan: str
    waiting_for: str
    uncertain: str


def _ready(status: dict[str, Any]) -> str:
    for c in status.get("conditions") or []:
        if c.get("type") == "Ready":
            return str(c.get("status", "Unknown"))
    return "Unknown"


def _plan(kind: Kind, status: dict[str, Any]) -> str:
    plan = status.get("currentPlan") or {}
    if kind is MIGRATION and not plan:
        pending = status.get("pendingVersions") or []
        repeatables = status.get("pendingRepeatables") or []
        parts = [f"{len(pending)} pending"] if pending else []
        parts += [f"{len(repeatables)} repeatable"] if repeatables else []
        return ", ".join(parts) or "-"
    if not plan:
        return "-"
    if not plan.get("changes"):
        return f"{str(plan.get('digest', ''))[:12]} (no changes)"
    marks = ", destructive" if plan.get("destructive") else ""
    marks += f", {plan['warnings']} warning(s)" if plan.get("warnings") else ""
    return f"{str(plan.get('digest', ''))[:12]} ({plan.get('statements', 0)} stmts{marks})"


def _uncertain(kind: Kind, status: dict[str, Any]) -> str:
    record = status.get("pendingObservation" if kind is SCHEMA else "unresolvedRun")
    if not record:
        return "-"
    return f"{record.get('operationId', '?')} ({record.get('reason', '?')})"


def _waiting(obj: Obj) -> str:
    status = obj.get("status") or {}
    if obj.get("spec", {}).get("suspend") and not status.get("waitingFor"):
        return "resume (spec.suspend)"
    op = status.get("activeOperation")
    if op and not status.get("waitingFor"):
        return f"{op.get('type')} Job {op.get('jobName')}"
    return str(status.get("waitingFor") or "-")


def row(kind: Kind, obj: Obj) -> Row:
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    phase = str(status.get("phase") or "Pending")
    if meta.get("deletionTimestamp"):
        phase += " (deleting)"
    return Row(
        namespace=str(meta.get("namespace", "")),
        kind=SHORT[kind.kind],
        name=str(meta.get("name", "")),
        phase=phase,
        ready=_ready(status),
        plan=_plan(kind, status),
        waiting_for=_waiting(obj),
        uncertain=_uncertain(kind, status),
    )


def collect(cluster: Cluster, namespace: str | None) -> list[Row]:
    """Rows for both kinds in ``namespace`` (None: every namespace), sorted."""
    rows: list[Row] = []
    for kind in PRIMARY:
        try:
            objs = cluster.list(kind, namespace or "")
        except ApiError as exc:
            raise explain(exc, f"listing {kind.plural}") from exc
        rows.extend(row(kind, o) for o in objs)
    return sorted(rows, key=lambda r: (r.namespace, r.kind, r.name))


def render(rows: Sequence[Row], all_namespaces: bool) -> str:
    header = ["RESOURCE", "PHASE", "READY", "PLAN", "WAITING FOR", "UNCERTAIN RUN"]
    if all_namespaces:
        header.insert(0, "NAMESPACE")
    table: list[list[str]] = [header]
    for r in rows:
        cells = [f"{r.kind}/{r.name}", r.phase, r.ready, r.plan, r.waiting_for, r.uncertain]
        if all_namespaces:
            cells.insert(0, r.namespace)
        table.append(cells)
    return format_columns(table)


def format_columns(table: Iterable[list[str]]) -> str:
    table = list(table)
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table]
    return "\n".join(lines) + "\n"


def rollout_lines(cluster: Cluster, namespace: str | None) -> list[str]:
    """One line per PtahRollout (its children are rows of the table); none when the
    rollout CRD is not installed."""
    try:
        objs = cluster.list(ROLLOUT, namespace or "")
    except ApiError:
        return []
    lines = []
    for o in sorted(
        objs, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"])
    ):
        s = o.get("status") or {}
        counts = s.get("counts") or {}
        where = f"{o['metadata'].get('namespace')}/" if namespace is None else ""
        line = (
            f"rollout/{where}{o['metadata']['name']}: {s.get('phase') or 'Pending'}, wave "
            f"{s.get('currentWave', '-')} of {s.get('waves', '-')}, "
            f"{counts.get('ready', 0)}/{counts.get('total', 0)} Ready"
        )
        stopped = s.get("stopped")
        if stopped:
            line += f", stopped by {stopped.get('target')} ({stopped.get('reason')})"
        lines.append(line + f" (ptah status rollout/{o['metadata']['name']})\n")
    return lines


def status(cluster: Cluster, namespace: str | None, out: TextIO) -> int:
    """Print the table (exit 0: the command reports, it does not judge), then a line for
    every resource owing proof, since that blocks everything else it would do."""
    rows = collect(cluster, namespace)
    fleets = rollout_lines(cluster, namespace)
    if not rows:
        where = "any namespace" if namespace is None else f"namespace {namespace}"
        out.write(f"No PtahSchema or PtahMigration in {where}.\n")
        out.writelines(fleets)
        return 0
    out.write(render(rows, namespace is None))
    if fleets:
        out.write("\n")
        out.writelines(fleets)
    attention = [r for r in rows if r.uncertain != "-"]
    for r in attention:
        out.write(
            f"\n{r.kind}/{r.name} owes proof of an uncertain run {r.uncertain}: Ptah reads "
            "the database before anything else; see docs/operations.md"
            " (Recovering from an uncertain outcome)."
        )
    if attention:
        out.write("\n")
    return 0


def _condition(obj: Obj, type_: str) -> dict[str, Any]:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return dict(c)
    return {}


def follow(
    cluster: Cluster,
    kind: Kind,
    namespace: str,
    name: str,
    out: TextIO,
    *,
    timeout: float,
    interval: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Print each change of phase, waiting-for and uncertainty until the resource is Ready
    (0), Stalled (1), gone (2) or ``timeout`` passes (3): progress for long work, since an
    Apply can take as long as the slowest statement."""
    deadline = clock() + timeout
    shown: tuple[str, str, str] | None = None
    while True:
        try:
            obj = cluster.get(kind, namespace, name)
        except ApiError as exc:
            raise explain(exc, f"reading {kind.kind} {name}") from exc
        if obj is None:
            out.write(f"{kind.kind} {name} is gone.\n")
            return 2
        r = row(kind, obj)
        now = (r.phase, r.waiting_for, r.uncertain)
        if now != shown:
            line = f"  {r.kind}/{r.name}: {r.phase}"
            line += f" (waiting for {r.waiting_for})" if r.waiting_for != "-" else ""
            line += f"; uncertain run {r.uncertain}" if r.uncertain != "-" else ""
            out.write(line + "\n")
            out.flush()
            shown = now
        status = obj.get("status") or {}
        ready = _condition(obj, "Ready")
        current = status.get("observedGeneration") == obj["metadata"].get("generation")
        if ready.get("status") == "True" and current and not status.get("activeOperation"):
            return 0
        stalled = _condition(obj, "Stalled")
        if stalled.get("status") == "True":
            out.write(f"Stalled ({stalled.get('reason')}): {stalled.get('message')}\n")
            return 1
        if clock() >= deadline:
            out.write(
                f"Still {r.phase} after {timeout:g}s; check again with "
                f"`ptah status -n {namespace}`.\n"
            )
            return 3
        sleep(interval)


def _cmd(args: argparse.Namespace) -> int:
    def body(cluster: Cluster, namespace: str) -> int:
        if args.resource:
            from ptah.cli import rollout

            kind, name = rollout.parse_any(args.resource)
            if kind.kind != "PtahRollout":
                raise CliError("a resource argument is a rollout: write rollout/NAME")
            return rollout.rollout_status(cluster, namespace, name, sys.stdout, args.phase)
        return status(cluster, None if args.all_namespaces else namespace, sys.stdout)

    return run_cli(args, body)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "status", help="a table of PtahSchemas and PtahMigrations: phase, plan, waiting for"
    )
    p.add_argument(
        "resource",
        nargs="?",
        metavar="rollout/NAME",
        help="a PtahRollout: its counts, stop, decisions and a per-target table",
    )
    add_cluster_args(p)
    p.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    p.add_argument("--phase", default=None, help="with rollout/NAME: only targets in this phase")
    p.set_defaults(func=_cmd)
