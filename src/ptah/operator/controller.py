"""Workers that turn queued keys into lifecycle passes.

A pass is ``ptah.lifecycle.reconcile.reconcile``: it reads fresh state, takes one
step and returns when to look again, with a report of what it did
(``ptah.lifecycle.report.PassReport``). This module adds only what a running process
needs around it: which family a key belongs to, back-off on API errors, leadership
checked before every pass and before every durable write, and, read from the
report alone, metrics and logs per pass and an Event whenever the published phase
changes (so a person sees every transition and the next step they can take).

A pass whose step ended in a durable write and asks to run again at once runs again
at once, in the same worker, up to ``CHAIN`` passes: a resource goes through its
contiguous steps (claim, Lease, envelope, dispatch; outcome, release, the next claim)
without going to the back of the queue behind every other resource's steps. Each pass
is still one step ending in its own write; what changes is only who waits: with 200
resources created at once, the first Jobs run while the later resources are claimed,
instead of after all 200 have crept through each step in turn. A chained pass starts
from the resource as the previous pass's last write of it returned it (``known`` of
``reconcile``), not from one more read of it. A chain of new work yields to work in
flight (a Job or Pod moved) waiting for a worker, between two of its passes.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import structlog

from ptah.kube import errors
from ptah.kube.events import EventSink, record_event
from ptah.kube.kinds import CONFIGMAP, JOB, PLAN, POD, Kind
from ptah.kube.port import Cluster, Obj, ObjList, Subresource
from ptah.kube.watch import WatchEvent
from ptah.lifecycle.context import SUPERVISE_SECONDS, Env
from ptah.lifecycle.family import AnyFamily
from ptah.lifecycle.reconcile import reconcile
from ptah.lifecycle.report import PassReport
from ptah.lifecycle.sighting import Sightings
from ptah.operator.mapping import (
    Driver,
    Index,
    Key,
    Motions,
    driver_keys,
    keys_for,
    only_status_changed,
)
from ptah.operator.metrics import Metrics
from ptah.operator.queue import ShutDown, WorkQueue
from ptah.operator.slots import OperationSlots
from ptah.targetlock import ExpiryObserver

log = structlog.get_logger("ptah.operator")

KILL_ENV = "PTAH_TEST_KILL_AT"
# Passes one worker runs back to back for a key that asks to run again at once.
CHAIN = 16
# Kinds whose events are about work in flight (their owner's queue key goes first).
IN_FLIGHT_KINDS = frozenset({JOB.kind, POD.kind})


class LeadershipLost(Exception):
    """Raised before a durable write once this replica is no longer the leader."""


# ------------------------------------------------------------ the test hook


def die_now() -> None:
    """End this process at once, as SIGKILL would: no cleanup, no flush, no more writes.

    A process that is PID 1 of its namespace (the operator in a container) cannot
    SIGKILL itself: the kernel drops signals to a namespace's init from inside it
    unless a handler is installed, and SIGKILL can have none. It then leaves through
    ``_exit`` with SIGKILL's exit status (137), which the kubelet treats the same way.
    """
    if os.getpid() != 1:
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(128 + signal.SIGKILL)


@dataclass(frozen=True)
class KillAt:
    """``PTAH_TEST_KILL_AT=<before|after>:<durable write>[:<operation type>]``.

    TEST HOOK ONLY: the process SIGKILLs itself at that point of the lifecycle (the
    first time it is reached), so the end-to-end tests can stop the operator exactly
    between two durable writes and start a fresh one on what was left.
    """

    when: str
    write: str
    op_type: str | None = None

    @classmethod
    def parse(cls, text: str) -> KillAt | None:
        parts = [p for p in text.strip().split(":") if p]
        if len(parts) not in (2, 3) or parts[0] not in ("before", "after"):
            return None
        return cls(parts[0], parts[1], parts[2] if len(parts) == 3 else None)

    def matches(self, when: str, write: str, op_type: str | None) -> bool:
        return (
            when == self.when
            and write == self.write
            and (self.op_type is None or self.op_type == op_type)
        )


# ------------------------------------------------------------ the controller


@dataclass
class Settings:
    lock_namespace: str = "ptah-system"
    identity: str = "ptah-operator"
    workers: int = 8
    lease_duration: int = 120
    poll_seconds: float = 5.0
    supervise_seconds: float = SUPERVISE_SECONDS
    proof_retry_seconds: float = 300.0
    retry_ceiling_seconds: float = 300.0
    resync_seconds: float = 300.0
    kill_at: KillAt | None = None
    namespaces: list[str] = field(default_factory=list)
    label_selector: dict[str, str] = field(default_factory=dict)
    runner_defaults: dict[str, Any] = field(default_factory=dict)
    # Operations in flight at once (None: unbounded); see ptah.operator.slots.
    max_operations: int | None = None


class Controller:
    def __init__(
        self,
        cluster: Cluster,
        families: Mapping[str, AnyFamily],
        settings: Settings,
        *,
        metrics: Metrics | None = None,
        is_leader: Callable[[], bool] = lambda: True,
        drivers: Sequence[Driver] = (),
        events: EventSink = record_event,
    ) -> None:
        self.cluster = cluster
        # Every Event of every pass, the phase changes' included (see ptah.kube.events).
        self.events = events
        self.families = dict(families)
        self.drivers = {d.kind.kind: d for d in drivers}
        self.primary_kinds = frozenset((*self.families, *self.drivers))
        self.settings = settings
        self.metrics = metrics or Metrics()
        self.is_leader = is_leader
        self.queue: WorkQueue[Key] = WorkQueue()
        self.index = Index()
        self.slots: OperationSlots[Key] = OperationSlots(settings.max_operations, self.queue.add)
        self.metrics.slots_in_flight.set_function(self.slots.in_flight)
        self.metrics.slots_waiting.set_function(self.slots.waiting)
        self.motions = Motions()
        # The objects this process's passes wrote, as each write left them: a watch event
        # carrying exactly that version is the echo of the pass's own write.
        self.own = OwnWrites(cluster)
        self.observer = ExpiryObserver()
        # This process's sightings of dispatched runs, kept across passes like the
        # observer and shared by every pass: each run's hold is measured from them
        # (ptah.lifecycle.hold).
        self.sightings = Sightings()
        self.stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._busy = 0
        self._busy_lock = threading.Lock()
        self.last_pass = time.monotonic()
        # key -> the resourceVersion its last pass left it at, while that pass left it at
        # rest (see ``at_rest``): what the periodic resync need not read again.
        self._rested: dict[Key, str] = {}

    def label(self, kind: str) -> str:
        """The family (or driver) name metrics carry for resources of ``kind``."""
        owner = self.families.get(kind) or self.drivers.get(kind)
        return owner.label if owner is not None else kind.lower()

    # -- events in --

    def handle(self, event: WatchEvent) -> None:
        kind, obj = event.kind.kind, event.obj
        if self.settings.namespaces:
            # Out of scope, except the Leases of the lock namespace (they wake waiters).
            ns = (obj.get("metadata") or {}).get("namespace")
            lease = kind == "Lease" and ns == self.settings.lock_namespace
            if ns not in self.settings.namespaces and not lease:
                return
        if kind in self.primary_kinds and not self.selects(obj):
            # Label scoping: a primary without the labels is another operator's (the
            # server filters the watch too; this also covers a relabelled object).
            self.index.remove(obj)
            return
        echo = False
        if kind in self.primary_kinds:
            if event.type == "DELETED":
                key = self.index.remove(obj)
                self._rested.pop(key, None)
                self.metrics.forget(key, self.label(key.kind))
                self.slots.saw(key, None)
            else:
                key, previous = self.index.upsert(obj)
                echo = event.type == "MODIFIED" and only_status_changed(previous, obj)
                self.slots.saw(key, obj)
        # The version a pass's own write returned wakes not the resource whose pass wrote
        # it: that pass already took what follows (a finalizer it added, a plan or input
        # ConfigMap it created), as it does for its status.
        writer = self.own.writer(event.type, kind, obj)
        if kind in IN_FLIGHT_KINDS and not self.motions.moved(event.type, kind, obj):
            # A Job or Pod that changed nothing a waiting step reads (see ``motion``).
            echo = True
        # The echo of a status write wakes nobody but a driver watching it (a rollout
        # follows its children's status).
        keys = (
            set()
            if echo
            else keys_for(kind, obj, self.index, self.settings.lock_namespace, self.families)
        )
        if kind in self.drivers and not echo:
            meta = obj.get("metadata") or {}
            keys.add(Key(kind, str(meta.get("namespace") or ""), str(meta.get("name") or "")))
        if writer is not None:
            keys.discard(writer)
        keys |= driver_keys(kind, obj, self.index, list(self.drivers.values()))
        if self.settings.label_selector:
            keys = {k for k in keys if self.index.has(k)}
        if kind in IN_FLIGHT_KINDS and _being_deleted(event):
            # The TTL controller collects the Jobs (and Pods) of finished operations: that
            # concerns only an owner with work in flight. One at rest as last watched waits
            # on no Job or Pod (a claim it made since is supervised by its own poll).
            keys = {k for k in keys if not at_rest(self.index.get(k) or {})}
        self.metrics.watch_events.labels(kind, str(bool(keys)).lower()).inc()
        # A Job or Pod that moved is work in flight: its owner's next step (supervise,
        # account the outcome, release the Lease) goes ahead of new claims.
        urgent = kind in IN_FLIGHT_KINDS
        if urgent or keys:
            log.debug(
                "wake",
                kind=kind,
                name=(obj.get("metadata") or {}).get("name"),
                type=event.type,
                keys=[str(k) for k in keys],
            )
        for key in keys:
            self.queue.add(key, urgent=urgent)

    def selects(self, obj: dict[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(labels.get(k) == v for k, v in self.settings.label_selector.items())

    def resync(self, periodic: bool = False) -> None:
        """Every known resource once more: covers anything a watch gap lost.

        The ``periodic`` resync leaves out a resource its last pass left at rest when
        the watch still holds that same version of it: nothing it waits on can have
        been lost (a change to the resource itself arrives by its watch, and a relist
        re-delivers it), and its drift check is already timed by that pass. So a
        converged fleet is read at its drift interval, not at every resync.
        """
        for key in self.index.all_keys():
            rested = self._rested.get(key)
            if periodic and rested is not None and rested == self.index.version(key):
                continue
            self.queue.add(key)

    # -- workers --

    def start(self) -> None:
        for i in range(self.settings.workers):
            t = threading.Thread(target=self._work, args=(i,), name=f"worker-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        t = threading.Thread(target=self._resync_loop, name="resync", daemon=True)
        t.start()

    def _resync_loop(self) -> None:
        while not self.stop.wait(self.settings.resync_seconds):
            self.resync(periodic=True)

    def shutdown(self, timeout: float = 30.0) -> None:
        """Stop taking keys; let passes in flight finish (each is one short step)."""
        self.stop.set()
        self.queue.shutdown()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def busy(self) -> int:
        with self._busy_lock:
            return self._busy

    def _work(self, _: int) -> None:
        while True:
            try:
                key = self.queue.get()
            except ShutDown:
                return
            if key is None:
                continue
            with self._busy_lock:
                self._busy += 1
            try:
                self.serve(key)
            finally:
                with self._busy_lock:
                    self._busy -= 1
                self.queue.done(key)

    def serve(self, key: Key) -> int:
        """The passes of one key taken from the queue (marked processing): the first, and
        each next one a pass asks for at once, up to ``CHAIN``. A chain of new work (a
        key not taken as urgent) yields between two passes to work in flight waiting
        for a worker, and resumes first among the keys in order. Returns the passes run."""
        passes = 0
        known: Obj | None = None
        urgent = self.queue.taken_urgent(key)
        while self.is_leader() and not self.stop.is_set():
            passes += 1
            again, known = self.process(key, chain=passes < CHAIN, known=known)
            if not again:
                break
            if not urgent and self.queue.urgent_waiting():
                self.queue.resume(key)
                break
        return passes

    def process(
        self, key: Key, *, chain: bool = False, known: Obj | None = None
    ) -> tuple[bool, Obj | None]:
        """One pass over ``key``; a family's starts from ``known`` when given (see
        ``reconcile``). With ``chain``, a pass asking to run again at once is not queued:
        ``(True, obj)`` tells the caller to run the next pass itself, from ``obj`` (the
        resource as this pass left it; None for a driver, whose pass reads its own)."""
        family = self.families.get(key.kind)
        driver = self.drivers.get(key.kind)
        if family is None and driver is None:
            return False, None
        if self.settings.label_selector and not self.index.has(key):
            return False, None
        report = PassReport()
        jobs = _JobLog(self, key)
        env = self._pass_env(report, jobs, self.own.of(key) if family is not None else None)
        env.admit_claim = lambda: self.slots.admit(key)
        started = time.monotonic()
        outcome = "ok"
        again = False
        requeue: float | None = None
        try:
            with self.metrics.in_pass():
                if family is not None:
                    result = reconcile(env, family, key.namespace, key.name, report, known=known)
                else:
                    assert driver is not None
                    result = driver.reconcile(env, key.namespace, key.name, report)
        except LeadershipLost as exc:
            log.warning("leadership_lost_mid_pass", resource=str(key), before=str(exc))
            outcome = "lost"
            return False, None
        except errors.ApiError as exc:
            outcome = "conflict" if isinstance(exc, errors.Conflict) else "api_error"
            delay = self.queue.add_rate_limited(key)
            log.info(
                "pass_retry",
                resource=str(key),
                operation=report.operation_id,
                reason=exc.reason,
                message=str(exc)[:300],
                retry_in=round(delay, 2),
            )
        except Exception as exc:  # a bug must not stop the other resources
            outcome = "error"
            delay = self.queue.add_rate_limited(key)
            log.exception(
                "pass_failed",
                resource=str(key),
                operation=report.operation_id,
                error=type(exc).__name__,
                retry_in=round(delay, 2),
            )
        else:
            self.queue.forget(key)
            requeue = result.requeue_after
            rested = self._note_rest(key, report.last, result.requeue_after)
            if chain and result.requeue_after == 0:
                again = True
            elif rested:
                # At rest, the drift timer this pass returned is the only one owed: a poll
                # timer an earlier pass set while its Job ran would only read it again.
                self.queue.reschedule(key, result.requeue_after)
            elif result.requeue_after is not None:
                self.queue.add_after(key, result.requeue_after)
        finally:
            self.last_pass = time.monotonic()
            if not report.queued:
                self.slots.leave(key)
            jobs.flush(report)
            label = self.label(key.kind)
            seconds = time.monotonic() - started
            self.metrics.observe_pass(key, label, report, seconds, outcome)
            log.debug(
                "pass",
                resource=str(key),
                chained=known is not None,
                urgent=self.queue.taken_urgent(key),
                waited=round(self.queue.waited(key), 3),
                seconds=round(seconds, 3),
                outcome=outcome,
                phase=report.phase,
                requeue_after=requeue,
                requests=self.metrics.pass_requests(),
            )
            if outcome in ("ok", "conflict", "api_error"):
                self._announce(key, report)
        return again, (report.last if again and family is not None else None)

    def _note_rest(self, key: Key, obj: Obj | None, requeue_after: float | None) -> bool:
        """Remember whether the pass left ``key`` at rest (and at which version); True
        when it did."""
        rv = ((obj or {}).get("metadata") or {}).get("resourceVersion")
        if rv and requeue_after != 0 and at_rest(obj or {}):
            self._rested[key] = str(rv)
            return True
        self._rested.pop(key, None)
        return False

    def _pass_env(self, report: PassReport, jobs: _JobLog, cluster: Cluster | None = None) -> Env:
        """The environment of one pass: its write hook checks leadership before every
        durable write, logs each Job create as soon as it is made (before the hook after
        it, where a test may kill the process), and runs the test kill hook, matched
        against the operation the pass's report names."""
        s = self.settings

        def hook(when: str, write: str) -> None:
            if when == "before" and not self.is_leader():
                raise LeadershipLost(write)
            if when == "after" and write == "create_job":
                jobs.flush(report)
            if s.kill_at is not None and s.kill_at.matches(when, write, report.operation_type):
                log.warning("test_kill", at=f"{when}:{write}", operation=report.operation_id)
                die_now()

        return Env(
            cluster=cluster or self.cluster,
            lock_namespace=s.lock_namespace,
            controller=s.identity,
            observer=self.observer,
            hook=hook,
            lease_duration=s.lease_duration,
            poll_seconds=s.poll_seconds,
            supervise_seconds=s.supervise_seconds,
            proof_retry_seconds=s.proof_retry_seconds,
            retry_ceiling_seconds=s.retry_ceiling_seconds,
            sightings=self.sightings,
            runner_defaults=s.runner_defaults,
            events=self.events,
        )

    # -- telemetry --

    def _announce(self, key: Key, report: PassReport) -> None:
        """Log the pass; on a phase change, an Event naming the next step."""
        change = report.phase_change()
        if change is None or report.last is None:
            return
        log.info(
            "transition",
            resource=str(key),
            phase=change.phase,
            previous=change.previous,
            operation=change.operation,
            plan=change.plan,
            waiting_for=change.waiting_for,
        )
        self.events(
            self.cluster,
            report.last,
            str(change.phase or "Unknown"),
            change.message,
            warning=change.warning,
            component=self.settings.identity,
        )


class OwnWrites:
    """What a lifecycle pass's own writes returned: the resourceVersion of its resource,
    and of each plan and input ConfigMap it created for it (owned by it), as each create
    or patch left them, so that a watch event of exactly that version is known as the
    echo of that resource's own write: it need not wake that resource (the pass that
    wrote it took what follows), while it still wakes any other it concerns. Leases,
    Jobs and Pods are not remembered (a released Lease wakes other resources; Jobs and
    Pods have ``Motions``), and neither is anything a rollout's pass writes."""

    KINDS = frozenset({PLAN.kind, CONFIGMAP.kind})  # besides the resource itself

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._lock = threading.Lock()
        self._versions: dict[tuple[str, str, str], tuple[str, Key]] = {}

    def of(self, key: Key) -> _OwnPort:
        """The cluster port for one pass over ``key``."""
        return _OwnPort(self, key)

    def saw(self, key: Key, kind: Kind, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
        mine = (kind.kind, namespace, name) == tuple(key)
        if not mine and kind.kind in self.KINDS and namespace == key.namespace:
            mine = any(
                r.get("kind") == key.kind and r.get("name") == key.name
                for r in meta.get("ownerReferences") or []
            )
        rv = meta.get("resourceVersion")
        if mine and rv:
            with self._lock:
                self._versions[(kind.kind, namespace, name)] = (str(rv), key)

    def writer(self, event_type: str, kind: str, obj: Obj) -> Key | None:
        """The resource whose pass wrote exactly the version the event carries, if one
        did. A deletion forgets the object."""
        meta = obj.get("metadata") or {}
        at = (kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        with self._lock:
            if event_type == "DELETED":
                self._versions.pop(at, None)
                return None
            written = self._versions.get(at)
        rv = meta.get("resourceVersion")
        if event_type not in ("ADDED", "MODIFIED") or not rv or written is None:
            return None
        return written[1] if written[0] == str(rv) else None

    def __len__(self) -> int:
        with self._lock:
            return len(self._versions)


class _OwnPort:
    """The cluster port of one pass, telling :class:`OwnWrites` what its writes returned."""

    def __init__(self, own: OwnWrites, key: Key) -> None:
        self.own = own
        self.key = key
        self.cluster = own.cluster

    def get(self, kind: Kind, namespace: str, name: str) -> Obj | None:
        return self.cluster.get(kind, namespace, name)

    def get_metadata(self, kind: Kind, namespace: str, name: str) -> Obj | None:
        return self.cluster.get_metadata(kind, namespace, name)

    def list(self, kind: Kind, namespace: str, labels: dict[str, str] | None = None) -> ObjList:
        return self.cluster.list(kind, namespace, labels)

    def list_metadata(
        self, kind: Kind, namespace: str, labels: dict[str, str] | None = None
    ) -> ObjList:
        return self.cluster.list_metadata(kind, namespace, labels)

    def create(self, kind: Kind, obj: Obj) -> Obj:
        created = self.cluster.create(kind, obj)
        self.own.saw(self.key, kind, created)
        return created

    def patch(
        self, kind: Kind, namespace: str, name: str, patch: Obj, subresource: Subresource = None
    ) -> Obj:
        patched = self.cluster.patch(kind, namespace, name, patch, subresource)
        self.own.saw(self.key, kind, patched)
        return patched

    def delete(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        propagation: Literal["Background", "Foreground", "Orphan"] = "Background",
    ) -> None:
        self.cluster.delete(kind, namespace, name, uid=uid, propagation=propagation)

    def read_log(self, namespace: str, pod: str, container: str) -> str:
        return self.cluster.read_log(namespace, pod, container)

    def now(self) -> datetime:
        return self.cluster.now()


def _being_deleted(event: WatchEvent) -> bool:
    """The object is gone, or on its way (its deletion has begun)."""
    meta = event.obj.get("metadata") or {}
    return event.type == "DELETED" or bool(meta.get("deletionTimestamp"))


def at_rest(obj: Obj) -> bool:
    """Ready with nothing in flight: no claimed operation, no staged release. Such a
    resource waits only on its own spec (and its drift timer), never on a Job or Pod
    event a watch gap could have lost."""
    status = obj.get("status") or {}
    return (
        status.get("phase") == "Ready"
        and not status.get("activeOperation")
        and not status.get("pendingLockRelease")
    )


@dataclass
class _JobLog:
    """Logs and counts the Job creates a pass's report lists, each once."""

    controller: Controller
    key: Key
    done: int = 0

    def flush(self, report: PassReport) -> None:
        for job in report.jobs[self.done :]:
            fields = {
                "job": job.name,
                "namespace": job.namespace,
                "operation": job.operation_id,
                "type": job.type,
            }
            if job.error is not None:
                log.warning("job_create_failed", reason=job.error, **fields)
            else:
                log.info("job_created", uid=job.uid, **fields)
                self.controller.metrics.observe_job(self.controller.label(self.key.kind), job.type)
        self.done = len(report.jobs)
