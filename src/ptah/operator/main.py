"""``ptah operator run``: wire the cluster, watches, queue, workers, leader election,
health and metrics together as runnables (``ptah.operator.runnables``), and shut down
gracefully on SIGTERM.

Shutdown order matters: stop taking keys, let the passes in flight finish (each
is one short step ending in a durable write or nothing), then hand the leader
Lease over so a standby takes over at once instead of after expiry. What is
watched is what the families and drivers declare, plus the lifecycle's own kinds.
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
from ptah.kube.events import EventEmitter
from ptah.kube.kinds import LEASE, Kind
from ptah.kube.real import RealCluster
from ptah.kube.watch import Watcher
from ptah.lifecycle.context import SUPERVISE_SECONDS
from ptah.lifecycle.family import AnyFamily, Watch
from ptah.lifecycle.watches import LIFECYCLE_WATCHES, merge_watches
from ptah.operator import health
from ptah.operator.controller import KILL_ENV, Controller, KillAt, Settings
from ptah.operator.leader import LeaderElector
from ptah.operator.mapping import Driver
from ptah.operator.metrics import Metrics
from ptah.operator.runnables import Manager, Runnable

log = structlog.get_logger("ptah.operator")

SA_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


def configure_logging(level: str = "info") -> None:
    """One JSON object per line on stdout; flushed per line (the crash tests read it)."""
    logging.basicConfig(level=level.upper(), stream=sys.stderr, format="%(message)s")
    # httpx logs every request at INFO; the operator's own lines say what matters.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpcore").setLevel(logging.WARNING)  # every byte, at DEBUG
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


def families() -> dict[str, AnyFamily]:
    """The lifecycle families, by the kind each drives."""
    found: list[AnyFamily] = [SchemaFamily(), MigrationFamily()]
    return {f.kind.kind: f for f in found}


def drivers() -> list[Driver]:
    """Kinds driven by their own pass rather than the lifecycle: they only write the
    lifecycle's resources (a rollout's children and their approvals)."""
    return [RolloutController()]


def watched(families: dict[str, AnyFamily], drivers: list[Driver]) -> tuple[Watch, ...]:
    """What the operator watches in each scoped namespace: each family's and driver's own
    kind whole (mapping reads their spec and status), the lifecycle's kinds, and what
    each family and driver declares it reads."""
    own = [Watch(f.kind, metadata_only=False) for f in families.values()]
    own += [Watch(d.kind, metadata_only=False) for d in drivers]
    declared = [w for f in families.values() for w in f.watches]
    declared += [w for d in drivers for w in d.watches]
    return merge_watches(own, LIFECYCLE_WATCHES, declared)


def supervise_seconds(args: argparse.Namespace) -> float:
    """``--supervise-seconds``, checked against the database Lease: each supervising pass
    renews it, so at least four must fall inside one Lease (one late pass, say behind a
    slow apiserver, must never let another controller see it expire under a live run).
    Unset, it is 30 s, or that quarter of a shorter Lease."""
    limit = args.lease_duration / 4
    if args.supervise_seconds is None:
        return min(SUPERVISE_SECONDS, float(limit))
    value = float(args.supervise_seconds)
    if not 0 < value <= limit:
        raise SystemExit(
            f"--supervise-seconds={value:g}: must be above 0 and at most a quarter of "
            f"--lease-duration={args.lease_duration} ({limit:g})"
        )
    return value


def max_operations(args: argparse.Namespace) -> int | None:
    """``--max-operations``: 0 means unbounded."""
    value = int(args.max_operations)
    if value < 0:
        raise SystemExit(f"--max-operations={value}: must be 0 (unbounded) or more")
    return value or None


def settings_from(args: argparse.Namespace) -> Settings:
    identity = (
        args.identity or os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"
    )
    return Settings(
        lock_namespace=args.lock_namespace,
        identity=identity,
        workers=args.workers,
        lease_duration=args.lease_duration,
        poll_seconds=args.poll_seconds,
        supervise_seconds=supervise_seconds(args),
        proof_retry_seconds=args.proof_retry_seconds,
        retry_ceiling_seconds=args.retry_ceiling_seconds,
        resync_seconds=args.resync_seconds,
        kill_at=KillAt.parse(os.environ.get(KILL_ENV, "")),
        namespaces=list(args.namespace_scope or []),
        label_selector=dict(args.label_selector or {}),
        runner_defaults=runner_defaults(os.environ.get(RUNNER_DEFAULTS_ENV, "")),
        max_operations=max_operations(args),
    )


class Process:
    """The parts of one operator process, and the runnables that start and stop them."""

    def __init__(self, args: argparse.Namespace, cluster: RealCluster, settings: Settings):
        self.args, self.cluster, self.settings = args, cluster, settings
        self.metrics = Metrics()
        cluster.observe_requests(self.metrics.count_request)
        self.stop = threading.Event()
        self.lost = threading.Event()
        self.elector = self._elector() if args.leader_elect else None
        is_leader = self.elector.is_leader if self.elector is not None else (lambda: True)
        fams, drvs = families(), drivers()
        # One writer for every Event, so no pass waits for one (ptah.kube.events).
        self.events = EventEmitter(outcome=lambda result: self.metrics.events.labels(result).inc())
        self.controller = Controller(
            cluster,
            fams,
            settings,
            metrics=self.metrics,
            is_leader=is_leader,
            drivers=drvs,
            events=self.events,
        )
        self.watch_stop = threading.Event()
        self.selector = ",".join(f"{k}={v}" for k, v in sorted(settings.label_selector.items()))
        self.watchers = self._watchers(watched(fams, drvs))

    def _elector(self) -> LeaderElector:
        def on_lost() -> None:
            log.error("leadership_lost", identity=self.settings.identity)
            self.metrics.leader.set(0)
            self.lost.set()
            self.stop.set()

        duration = self.args.leader_lease_duration
        return LeaderElector(
            self.cluster,
            namespace=self.settings.lock_namespace,
            identity=self.settings.identity,
            lease_duration=duration,
            renew_deadline=duration * 2 / 3,
            retry_period=max(0.5, duration / 7),
            on_lost=on_lost,
        )

    def _watchers(self, watches: tuple[Watch, ...]) -> list[Watcher]:
        s = self.settings
        primaries, selector = self.controller.primary_kinds, self.selector

        def watch_error(kind: Kind, exc: Exception) -> None:
            log.warning(
                "watch_error", kind=kind.kind, error=type(exc).__name__, message=str(exc)[:200]
            )

        def watcher(w: Watch, namespace: str) -> Watcher:
            return Watcher(
                self.cluster,
                w.kind,
                self.controller.handle,
                namespace=namespace,
                metadata_only=w.metadata_only,
                label_selector=selector if w.kind.kind in primaries else w.label_selector,
                stop=self.watch_stop,
                on_error=watch_error,
            )

        found = [watcher(w, ns) for w in watches for ns in s.namespaces or [""]]
        # The realm Leases (they wake the claims waiting for them) live in one namespace.
        return [*found, watcher(Watch(LEASE), s.lock_namespace)]

    # -- probes --

    def ready(self) -> tuple[bool, dict[str, object]]:
        synced = all(w.synced.is_set() for w in self.watchers)
        leader = self.controller.is_leader()
        return synced and not self.stop.is_set(), {"synced": synced, "leader": leader}

    def healthy(self) -> tuple[bool, dict[str, object]]:
        detail: dict[str, object] = {
            "queue": len(self.controller.queue),
            "busy": self.controller.busy(),
        }
        return not self.lost.is_set(), detail

    # -- the runnables, in start order --

    def runnables(self) -> list[Runnable]:
        args, metrics = self.args, self.metrics
        parts: list[Runnable] = []
        if args.metrics_port:
            parts.append(
                Runnable(
                    "metrics", lambda: metrics.serve(args.metrics_port, addr=args.bind_address)
                )
            )
        if args.health_port:
            servers: list[Any] = []

            def probes() -> None:
                servers.append(
                    health.serve(args.health_port, self.healthy, self.ready, addr=args.bind_address)
                )

            def stop_probes() -> None:
                for server in servers:
                    server.shutdown()

            parts.append(Runnable("probes", probes, stop_probes))
        parts.append(self._election())
        # Before the workers, stopped after them: the Events of the last passes are written.
        parts.append(Runnable("events", self.events.start, self.events.stop))
        parts.append(
            Runnable(
                "workers",
                self.controller.start,
                lambda: self.controller.shutdown(timeout=args.shutdown_timeout),
            )
        )
        parts.append(Runnable("watchers", self._start_watchers, self.watch_stop.set))
        return parts

    def _start_watchers(self) -> None:
        for w in self.watchers:
            w.start()

    def _election(self) -> Runnable:
        elector = self.elector
        if elector is None:

            def lead() -> None:
                self.metrics.leader.set(1)
                self.controller.resync()

            return Runnable("leader", lead)
        threads: list[threading.Thread] = []

        def campaign() -> None:
            threads.append(elector.start())
            threading.Thread(
                target=_on_elected,
                args=(elector, self.controller, self.metrics, self.stop),
                daemon=True,
            ).start()

        def step_down() -> None:
            # Its loop hands the Lease over on the way out (unless leadership was lost).
            elector.stop.set()
            for t in threads:
                t.join(10.0)

        return Runnable("leader-election", campaign, step_down)


def run(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    settings = settings_from(args)
    cluster = connect(args.kubeconfig, args.context)
    proc = Process(args, cluster, settings)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("shutdown_requested", signal=signal.Signals(signum).name)
        proc.stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log.info(
        "operator_starting",
        identity=settings.identity,
        lock_namespace=settings.lock_namespace,
        leader_elect=proc.elector is not None,
        namespaces=settings.namespaces or [""],
        label_selector=proc.selector or None,
        test_kill_at=os.environ.get(KILL_ENV),
    )
    manager = Manager(proc.runnables())
    try:
        manager.run(proc.stop)
        log.info("shutting_down", identity=settings.identity)
    finally:
        cluster.close()
    log.info("stopped", identity=settings.identity, lost_leadership=proc.lost.is_set())
    return 1 if proc.lost.is_set() else 0


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
