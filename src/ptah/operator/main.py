"""``ptah operator run``: wire the cluster, watches, queue, workers, leader election,
health and metrics together, and shut down gracefully on SIGTERM.

Shutdown order matters: stop taking keys, let the passes in flight finish (each
is one short step ending in a durable write or nothing), then hand the leader
Lease over so a standby takes over at once instead of after expiry.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

import structlog

from ptah.api.common import RunnerSpec
from ptah.families.migration import MigrationFamily
from ptah.families.rollout import RolloutController
from ptah.families.schema import SchemaFamily
from ptah.kube.kinds import (
    APPROVAL,
    CONFIGMAP,
    JOB,
    LEASE,
    MIGRATION,
    PLAN,
    POD,
    ROLLOUT,
    SCHEMA,
    SECRET,
    Kind,
)
from ptah.kube.real import RealCluster
from ptah.kube.watch import Watcher
from ptah.lifecycle.family import Family
from ptah.operator import health
from ptah.operator.controller import KILL_ENV, Controller, KillAt, Settings
from ptah.operator.leader import LeaderElector
from ptah.operator.mapping import Driver
from ptah.operator.metrics import Metrics

log = structlog.get_logger("ptah.operator")

SA_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")

# (kind, metadata only): the primaries and approvals are read whole (mapping needs
# their spec and status); everything else only for its name, labels and owners.
WATCHED: tuple[tuple[Kind, bool], ...] = (
    (SCHEMA, False),
    (MIGRATION, False),
    (ROLLOUT, False),
    (APPROVAL, False),
    (PLAN, True),
    (JOB, True),
    (POD, True),
    (CONFIGMAP, True),
    (SECRET, True),
)


def configure_logging(level: str = "info") -> None:
    """One JSON object per line on stdout; flushed per line (the crash tests read it)."""
    logging.basicConfig(level=level.upper(), stream=sys.stderr, format="%(message)s")
    # httpx logs every request at INFO; the operator's own lines say what matters.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(sort_keys=True),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(sys.stdout),
        cache_logger_on_first_use=True,
    )


def connect(kubeconfig: str | None, context: str | None) -> RealCluster:
    """The given kubeconfig; else in-cluster when running in a Pod; else the current one."""
    if kubeconfig:
        return RealCluster.from_kubeconfig(kubeconfig, context=context)
    if os.environ.get("KUBERNETES_SERVICE_HOST") and SA_TOKEN.exists():
        return RealCluster.in_cluster()
    return RealCluster.from_kubeconfig(None, context=context)


RUNNER_DEFAULTS_ENV = "PTAH_RUNNER_DEFAULTS"


def runner_defaults(path: str) -> dict[str, Any]:
    """The installation's runner defaults (the Helm chart's ConfigMap, mounted as JSON),
    checked against the RunnerSpec model so a bad file stops the operator at start, with
    its path, instead of failing every Job later."""
    if not path:
        return {}
    try:
        data = json.loads(Path(path).read_text())
        RunnerSpec.model_validate(data)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"{RUNNER_DEFAULTS_ENV}={path}: not valid runner defaults: {exc}") from exc
    if not isinstance(data, dict):
        raise SystemExit(f"{RUNNER_DEFAULTS_ENV}={path}: expected a JSON object")
    return {k: v for k, v in data.items() if v not in (None, {}, [])}


def families() -> dict[str, Family]:
    return {SCHEMA.kind: SchemaFamily(), MIGRATION.kind: MigrationFamily()}


def drivers() -> list[Driver]:
    """Kinds driven by their own pass rather than the lifecycle: they only write the
    lifecycle's resources (a rollout's children and their approvals)."""
    return [RolloutController()]


def run(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    identity = (
        args.identity or os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"
    )
    kill_at = KillAt.parse(os.environ.get(KILL_ENV, ""))
    settings = Settings(
        lock_namespace=args.lock_namespace,
        identity=identity,
        workers=args.workers,
        lease_duration=args.lease_duration,
        poll_seconds=args.poll_seconds,
        proof_retry_seconds=args.proof_retry_seconds,
        retry_ceiling_seconds=args.retry_ceiling_seconds,
        resync_seconds=args.resync_seconds,
        kill_at=kill_at,
        namespaces=list(args.namespace_scope or []),
        label_selector=dict(args.label_selector or {}),
        runner_defaults=runner_defaults(os.environ.get(RUNNER_DEFAULTS_ENV, "")),
    )
    cluster = connect(args.kubeconfig, args.context)
    metrics = Metrics()
    cluster.observe_requests(lambda v, r: metrics.kube_requests.labels(v, r).inc())
    stop = threading.Event()
    lost = threading.Event()

    elector: LeaderElector | None = None
    if args.leader_elect:

        def on_lost() -> None:
            log.error("leadership_lost", identity=identity)
            metrics.leader.set(0)
            lost.set()
            stop.set()

        elector = LeaderElector(
            cluster,
            namespace=settings.lock_namespace,
            identity=identity,
            lease_duration=args.leader_lease_duration,
            renew_deadline=args.leader_lease_duration * 2 / 3,
            retry_period=max(0.5, args.leader_lease_duration / 7),
            on_lost=on_lost,
        )
    is_leader = elector.is_leader if elector is not None else (lambda: True)
    controller = Controller(
        cluster, families(), settings, metrics=metrics, is_leader=is_leader, drivers=drivers()
    )

    watch_stop = threading.Event()

    def watch_error(kind: Kind, exc: Exception) -> None:
        log.warning("watch_error", kind=kind.kind, error=type(exc).__name__, message=str(exc)[:200])

    scopes = settings.namespaces or [""]
    selector = ",".join(f"{k}={v}" for k, v in sorted(settings.label_selector.items()))
    watchers = [
        Watcher(
            cluster,
            kind,
            controller.handle,
            namespace=ns,
            metadata_only=meta,
            label_selector=selector if kind in (SCHEMA, MIGRATION, ROLLOUT) else "",
            stop=watch_stop,
            on_error=watch_error,
        )
        for kind, meta in WATCHED
        for ns in scopes
    ]
    watchers.append(
        Watcher(
            cluster,
            LEASE,
            controller.handle,
            namespace=settings.lock_namespace,
            metadata_only=True,
            stop=watch_stop,
            on_error=watch_error,
        )
    )

    def ready() -> tuple[bool, dict[str, object]]:
        synced = all(w.synced.is_set() for w in watchers)
        return synced and not stop.is_set(), {"synced": synced, "leader": is_leader()}

    def healthy() -> tuple[bool, dict[str, object]]:
        return not lost.is_set(), {"queue": len(controller.queue), "busy": controller.busy()}

    servers = []
    if args.health_port:
        servers.append(health.serve(args.health_port, healthy, ready, addr=args.bind_address))
    if args.metrics_port:
        metrics.serve(args.metrics_port, addr=args.bind_address)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("shutdown_requested", signal=signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    log.info(
        "operator_starting",
        identity=identity,
        lock_namespace=settings.lock_namespace,
        leader_elect=bool(elector),
        namespaces=scopes,
        label_selector=selector or None,
        test_kill_at=os.environ.get(KILL_ENV),
    )
    for w in watchers:
        w.start()
    controller.start()
    if elector is not None:
        elector_thread = elector.start()
        threading.Thread(
            target=_on_elected, args=(elector, controller, metrics, stop), daemon=True
        ).start()
    else:
        metrics.leader.set(1)
        controller.resync()

    while not stop.wait(1.0):
        pass

    log.info("shutting_down", identity=identity)
    watch_stop.set()
    controller.shutdown(timeout=args.shutdown_timeout)
    if elector is not None:
        # Its loop hands the Lease over on the way out (unless leadership was lost).
        elector.stop.set()
        elector_thread.join(10.0)
    for server in servers:
        server.shutdown()
    cluster.close()
    log.info("stopped", identity=identity, lost_leadership=lost.is_set())
    return 1 if lost.is_set() else 0


def _on_elected(
    elector: LeaderElector, controller: Controller, metrics: Metrics, stop: threading.Event
) -> None:
    while not elector.elected.wait(1.0):
        if stop.is_set():
            return
    log.info("elected", identity=elector.identity)
    metrics.leader.set(1)
    # Keys delivered while standing by were dropped; take every resource once now.
    time.sleep(0.1)
    controller.resync()
