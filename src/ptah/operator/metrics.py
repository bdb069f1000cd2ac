"""Prometheus metrics.

Counters count what passes did, as each pass's report says
(``ptah.lifecycle.report.PassReport``); the gauges that describe safety state (open
uncertainty records, proofs owed, Lease waits, approvals waiting) are computed from
each resource's standing as its pass last left it, so they can never drift from
what the API says: a restarted operator rebuilds them on its first passes.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from ptah.lifecycle.report import PassReport
from ptah.operator.mapping import Key

ROLLOUT = "rollout"
ROLLOUT_PHASES = ("ready", "applying", "waitingForApproval", "uncertain", "failed", "pending")
PROVING_PHASES = ("ProofOwed", "ProofNotSettled", "Reading")


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.reconciles = Counter(
            "ptah_reconcile_total", "Reconcile passes", ["family", "result"], registry=r
        )
        self.passes = Counter(
            "ptah_resource_passes_total",
            "Reconcile passes per resource: evidence that the operator looked at it",
            ["kind", "namespace", "name"],
            registry=r,
        )
        self.duration = Histogram(
            "ptah_reconcile_duration_seconds", "Duration of one pass", ["family"], registry=r
        )
        self.operations = Counter(
            "ptah_operations_total",
            "Operations that reached an outcome",
            ["family", "type", "outcome"],
            registry=r,
        )
        self.jobs_created = Counter(
            "ptah_jobs_created_total",
            "Jobs created (one per claim)",
            ["family", "type"],
            registry=r,
        )
        self.uncertain = Gauge(
            "ptah_uncertainty_records_open", "Open uncertainty records", ["family"], registry=r
        )
        self.proofs_owed = Gauge(
            "ptah_proofs_owed",
            "Resources owing a proof (record open, not yet settled)",
            ["family"],
            registry=r,
        )
        self.lease_waits = Gauge(
            "ptah_lease_waits", "Resources waiting for a database Lease", ["family"], registry=r
        )
        self.approvals_waiting = Gauge(
            "ptah_approvals_waiting",
            "Resources waiting for a PtahApproval",
            ["family"],
            registry=r,
        )
        self.watch_events = Counter(
            "ptah_watch_events_total",
            "Watch events by kind, and whether they queued a resource",
            ["kind", "queued"],
            registry=r,
        )
        self.api_requests = Counter(
            "ptah_api_requests_total",
            "API requests made by passes (not the watches), by the apiserver's verb and "
            "the resource",
            ["verb", "resource"],
            registry=r,
        )
        self.kube_requests = Counter(
            "ptah_kube_requests_total",
            "Every request this process sent to the apiserver (passes, watches, leader "
            "election, Events), by the apiserver's verb and the resource",
            ["verb", "resource"],
            registry=r,
        )
        self.events = Counter(
            "ptah_events_total",
            "Events recorded, by what became of them: written, refused by the apiserver, "
            "or dropped because the writer's queue was full (Events are best effort)",
            ["result"],
            registry=r,
        )
        self.slots_in_flight = Gauge(
            "ptah_operation_slots_in_flight",
            "Claimed operations counted against --max-operations",
            registry=r,
        )
        self.slots_waiting = Gauge(
            "ptah_operation_slots_waiting",
            "Resources waiting for an operation slot (phase Queued)",
            registry=r,
        )
        self.leader = Gauge("ptah_leader", "1 while this replica is the leader", registry=r)
        self.rollout_targets = Gauge(
            "ptah_rollout_targets",
            "A rollout's targets per phase (current revision)",
            ["namespace", "rollout", "phase"],
            registry=r,
        )
        self.rollout_wave = Gauge(
            "ptah_rollout_wave", "A rollout's current wave", ["namespace", "rollout"], registry=r
        )
        self.rollout_stopped = Gauge(
            "ptah_rollout_stopped",
            "1 while a rollout is stopped (a failed or uncertain target)",
            ["namespace", "rollout"],
            registry=r,
        )
        self._lock = threading.Lock()
        self._state: dict[Key, tuple[str, tuple[bool, bool, bool, bool]]] = {}
        self._labels: set[str] = set()
        self._local = threading.local()

    def serve(self, port: int, addr: str = "0.0.0.0") -> None:
        start_http_server(port, addr=addr, registry=self.registry)

    def count_request(self, verb: str, resource: str) -> None:
        """Every request the process sends; those a pass sends count for passes too."""
        self.kube_requests.labels(verb, resource).inc()
        if getattr(self._local, "in_pass", False):
            self.api_requests.labels(verb, resource).inc()
            self._local.sent.append(f"{verb} {resource}")

    def pass_requests(self) -> list[str]:
        """The requests this thread's current (or last) pass sent, in order."""
        return list(getattr(self._local, "sent", []))

    @contextlib.contextmanager
    def in_pass(self) -> Iterator[None]:
        """Requests this thread sends meanwhile are a pass's."""
        self._local.in_pass = True
        self._local.sent = []
        try:
            yield
        finally:
            self._local.in_pass = False

    def observe_job(self, label: str, op_type: str) -> None:
        self.jobs_created.labels(label, op_type).inc()

    def forget(self, key: Key, label: str) -> None:
        """The resource is gone: its gauges and its pass count go with it."""
        if label == ROLLOUT:
            self._observe_rollout(key, None)
            return
        with self._lock:
            self._state.pop(key, None)
            with contextlib.suppress(KeyError):
                self.passes.remove(key.kind, key.namespace, key.name)
            self._publish()

    def observe_standing(self, key: Key, label: str, report: PassReport) -> None:
        """Recompute the safety gauges from where the pass left the resource."""
        if report.last is None:
            self.forget(key, label)
            return
        if label == ROLLOUT:
            self._observe_rollout(key, report.last)
            return
        phase, record = report.phase, report.record_open
        with self._lock:
            self._labels.add(label)
            self._state[key] = (
                label,
                (
                    record,
                    record and phase in PROVING_PHASES,
                    phase == "WaitingForTarget",
                    phase == "WaitingForApproval",
                ),
            )
            self._publish()

    def _publish(self) -> None:
        for label in self._labels:
            rows = [v for lab, v in self._state.values() if lab == label]
            self.uncertain.labels(label).set(sum(r[0] for r in rows))
            self.proofs_owed.labels(label).set(sum(r[1] for r in rows))
            self.lease_waits.labels(label).set(sum(r[2] for r in rows))
            self.approvals_waiting.labels(label).set(sum(r[3] for r in rows))

    def _observe_rollout(self, key: Key, obj: dict[str, Any] | None) -> None:
        labels = (key.namespace, key.name)
        if obj is None:
            for phase in ROLLOUT_PHASES:
                with contextlib.suppress(KeyError):
                    self.rollout_targets.remove(*labels, phase)
            for gauge in (self.rollout_wave, self.rollout_stopped):
                with contextlib.suppress(KeyError):
                    gauge.remove(*labels)
            return
        status = obj.get("status") or {}
        counts = status.get("counts") or {}
        for phase in ROLLOUT_PHASES:
            self.rollout_targets.labels(*labels, phase).set(int(counts.get(phase) or 0))
        self.rollout_wave.labels(*labels).set(int(status.get("currentWave") or 0))
        self.rollout_stopped.labels(*labels).set(1 if status.get("stopped") else 0)

    def observe_pass(
        self, key: Key, label: str, report: PassReport, seconds: float, result: str
    ) -> None:
        self.reconciles.labels(label, result).inc()
        self.passes.labels(key.kind, key.namespace, key.name).inc()
        self.duration.labels(label).observe(seconds)
        if report.ended is not None:
            ended = report.ended
            self.operations.labels(label, str(ended.operation.type), ended.outcome).inc()
        self.observe_standing(key, label, report)
