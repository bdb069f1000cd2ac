"""``ptah operator run``: the operator process (see ``ptah.operator.main``)."""

from __future__ import annotations

import argparse
import os
from typing import Any


def _run(args: argparse.Namespace) -> int:
    from ptah.operator.main import run  # imported late: `ptah --help` stays light

    return run(args)


def _namespaces(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


def _labels(text: str) -> dict[str, str]:
    """``key=value[,key=value]``: equality only, as the chart passes it."""
    out: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or "!" in key or "=" in value:
            raise argparse.ArgumentTypeError(
                f"{part!r}: use key=value pairs separated by commas (equality only)"
            )
        out[key.strip()] = value.strip()
    return out


def register(subparsers: Any) -> None:
    op = subparsers.add_parser("operator", help="run the Ptah operator")
    sub = op.add_subparsers(dest="operator_command", required=True)
    p = sub.add_parser("run", help="watch and reconcile PtahSchemas and PtahMigrations")
    p.add_argument("--kubeconfig", default=None, help="default: in-cluster, else $KUBECONFIG")
    p.add_argument("--context", default=None, help="kubeconfig context")
    p.add_argument(
        "--namespace-scope",
        type=_namespaces,
        default=None,
        help="comma-separated namespaces to watch (default: all)",
    )
    p.add_argument(
        "--label-selector",
        type=_labels,
        default=None,
        help="only PtahSchemas/PtahMigrations carrying these labels (key=value,...)",
    )
    p.add_argument(
        "--lock-namespace",
        default=os.environ.get("POD_NAMESPACE", "ptah-system"),
        help="namespace of the leader Lease and the per-database Leases",
    )
    p.add_argument("--metrics-port", type=int, default=8080, help="0 disables")
    p.add_argument("--health-port", type=int, default=8081, help="0 disables")
    p.add_argument("--bind-address", default="0.0.0.0")
    p.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="coordinate replicas through a Lease (default: on)",
    )
    p.add_argument("--leader-lease-duration", type=float, default=15.0)
    p.add_argument("--identity", default=None, help="default: $POD_NAME, else host-pid")
    p.add_argument(
        "--workers",
        type=int,
        default=8,
        help="concurrent passes (a pass mostly waits on the apiserver; one key never runs twice)",
    )
    p.add_argument(
        "--poll-seconds",
        type=float,
        default=5.0,
        help="interval of a step that waits on the API (a Job just created, a frame owed)",
    )
    p.add_argument(
        "--supervise-seconds",
        type=float,
        default=None,
        help="interval between passes over a running Job when no watch event wakes one "
        "(each renews the database Lease): at most a quarter of --lease-duration; "
        "default 30, or that quarter when it is shorter",
    )
    p.add_argument(
        "--max-operations",
        type=int,
        default=16,
        help="claimed operations (runner Jobs) in flight at once; more claims wait their "
        "turn in order (0: unbounded)",
    )
    p.add_argument(
        "--proof-retry-seconds",
        type=float,
        default=300.0,
        help="pause before re-reading when a reading did not settle an uncertain run",
    )
    p.add_argument(
        "--retry-ceiling-seconds",
        type=float,
        default=300.0,
        help="longest pause between retries of a reading that failed transiently",
    )
    p.add_argument("--lease-duration", type=int, default=120, help="per-database Lease, s")
    p.add_argument("--resync-seconds", type=float, default=300.0)
    p.add_argument("--shutdown-timeout", type=float, default=30.0)
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.set_defaults(func=_run)
