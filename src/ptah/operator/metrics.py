"""Prometheus metrics.

Counters count what passes did; the gauges that describe safety state (open
uncertainty records, proofs owed, Lease waits, approvals waiting) are computed
from each resource's status as its pass last left it, so they can never drift
from what the API says: a restarted operator rebuilds them on its first passes.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from ptah.operator.mapping import Key

# status fields -> the gauge they feed
RECORD_FIELDS = ("pendingObservation", "unresolvedRun")


FAMILY_LABELS = {"PtahSchema": "schema", "PtahMigration": "migration", "PtahRollout": "rollout"}
ROLLOUT_PHASES = ("ready", "applying", "waitingForApproval", "uncertain", "failed", "pending")


def _family(kind: str) -> str:
    return FAMILY_LABELS.get(kind, kind.lower())


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
            "API requests made by passes (not the watches), by verb and kind",
            ["verb", "kind"],
            registry=r,
        )
        self.kube_requests = Counter(
            "ptah_kube_requests_total",
            "Every request this process sent to the apiserver (passes, watches, leader "
            "election, Events), by the apiserver's verb and the resource",
            ["verb", "resource"],
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
        self._state: dict[Key, tuple[bool, bool, bool, bool]] = {}

    def serve(self, port: int, addr: str = "0.0.0.0") -> None:
        start_http_server(port, addr=addr, registry=self.registry)

    def observe_status(self, key: Key, obj: dict[str, Any] | None) -> None:
        """Recompute the safety gauges from ``obj`` (None: the resource is gone)."""
        if key.kind == "PtahRollout":
            self._observe_rollout(key, obj)
            return
        with self._lock:
            if obj is None:
                self._state.pop(key, None)
                with contextlib.suppress(KeyError):
                    self.passes.remove(key.kind, key.namespace, key.name)
            else:
                status = obj.get("status") or {}
                phase = status.get("phase")
                record = any(status.get(f) for f in RECORD_FIELDS)
                self._state[key] = (
                    record,
                    record and phase in ("ProofOwed", "ProofNotSettled", "Reading"),
                    phase == "WaitingForTarget",
                    phase == "WaitingForApproval",
                )
            for family in ("schema", "migration"):
                rows = [v for k, v in self._state.items() if _family(k.kind) == family]
                self.uncertain.labels(family).set(sum(r[0] for r in rows))
                self.proofs_owed.labels(family).set(sum(r[1] for r in rows))
                self.lease_waits.labels(family).set(sum(r[2] for r in rows))
                self.approvals_waiting.labels(family).set(sum(r[3] for r in rows))

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
        self,
        key: Key,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        seconds: float,
        result: str,
    ) -> None:
        family = _family(key.kind)
        self.reconciles.labels(family, result).inc()
        self.passes.labels(key.kind, key.namespace, key.name).inc()
        self.duration.labels(family).observe(seconds)
        outcome = operation_outcome(before, after)
        if outcome is not None:
            self.operations.labels(family, outcome[0], outcome[1]).inc()
        self.observe_status(key, after)


def operation_outcome(
    before: dict[str, Any] | None, after: dict[str, Any] | None
) -> tuple[str, str] | None:
    """(type, outcome) when a pass ended the operation ``before`` held, else None."""
    if before is None or after is None:
        return None
    s0, s1 = before.get("status") or {}, after.get("status") or {}
    op = s0.get("activeOperation")
    if not op or s1.get("activeOperation"):
        return None
    type_ = str(op.get("type"))
    if op.get("mutating"):
        last = s1.get("lastMutation") or {}
        if last.get("operationId") == op.get("operationId"):
            return type_, str(last.get("outcome"))
        return type_, "Dropped"
    failures0 = int(s0.get("readingFailures") or 0)
    failures1 = int(s1.get("readingFailures") or 0)
    return type_, "Failed" if failures1 > failures0 else "Succeeded"
