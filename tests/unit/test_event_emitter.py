"""The operator's one Event writer (ptah.kube.events.EventEmitter): a pass never waits
for an Event, the Events still come in the order they were recorded and after the
writes they report, and a full queue or a refused create loses an Event, never a
status write and never a pass."""

from __future__ import annotations

import threading
from typing import Any

from ptah.kube import errors, kinds
from ptah.kube.events import EventEmitter, EventSink, record_event
from ptah.kube.port import Obj
from ptah.operator.mapping import Key
from ptah.testing.memory import MemoryCluster
from support.schemas import sqlite_schema


class Gated(MemoryCluster):
    """Every Event create waits until the gate opens (at most 10 s, so a pass that does
    wait makes the test fail rather than hang)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.created_in: list[str] = []  # the thread of each Event create

    def create(self, kind: kinds.Kind, obj: Obj) -> Obj:
        if kind == kinds.EVENT:
            self.gate.wait(10)
            self.created_in.append(threading.current_thread().name)
        return super().create(kind, obj)


def _dispatch(cluster: MemoryCluster, events: EventSink) -> None:
    """Chained passes of one schema until its Job is dispatched and adopted."""
    from ptah.operator.controller import Controller, Settings
    from ptah.operator.main import families

    c = Controller(cluster, families(), Settings(lock_namespace="sys"), events=events)
    key = Key("PtahSchema", "ns", "s")
    again, known = c.process(key, chain=True)
    while again:
        again, known = c.process(key, chain=True, known=known)


def _events(cluster: MemoryCluster) -> list[tuple[str, str]]:
    found = cluster.list(kinds.EVENT, "ns")
    found.sort(key=lambda e: int(e["metadata"]["resourceVersion"]))
    return [(e["reason"], e["involvedObject"]["resourceVersion"]) for e in found]


def test_a_pass_does_not_wait_for_its_events_and_they_follow_its_writes_in_order() -> None:
    reference = MemoryCluster()
    sqlite_schema(reference)
    _dispatch(reference, record_event)  # written at once, in the pass
    expected = [reason for reason, _ in _events(reference)]
    assert "Dispatched" in expected

    cluster = Gated()
    sqlite_schema(cluster)
    outcomes: list[str] = []
    emitter = EventEmitter(outcome=outcomes.append)
    emitter.start()
    _dispatch(cluster, emitter)
    # Every pass ran to its end while no Event could be written: none waited for one.
    live = cluster.get(kinds.SCHEMA, "ns", "s")
    assert live is not None and live["status"]["activeOperation"]["jobUid"]
    assert cluster.list(kinds.EVENT, "ns") == [] and emitter.pending() > 0
    cluster.gate.set()
    emitter.stop()
    assert outcomes == ["written"] * len(expected)
    assert set(cluster.created_in) == {"events"}  # one writer, not the workers
    seen = _events(cluster)
    assert [reason for reason, _ in seen] == expected  # the order they were recorded in
    # Each Event names the resource as the write it reports left it: the Job's UID is
    # written before "Dispatched" is recorded.
    dispatched = next(rv for reason, rv in seen if reason == "Dispatched")
    assert dispatched == live["metadata"]["resourceVersion"]


def test_a_full_queue_drops_the_event_and_never_blocks() -> None:
    cluster = MemoryCluster()
    sqlite_schema(cluster)
    obj = cluster.get(kinds.SCHEMA, "ns", "s")
    assert obj is not None
    outcomes: list[str] = []
    emitter = EventEmitter(capacity=1, outcome=outcomes.append)  # not started: nothing drains
    for reason in ("First", "Second", "Third"):
        emitter(cluster, obj, reason, "m", warning=False, component="c")
    assert outcomes == ["dropped", "dropped"] and emitter.pending() == 1
    emitter.start()
    emitter.stop()
    assert outcomes[-1] == "written"
    assert [e["reason"] for e in cluster.list(kinds.EVENT, "ns")] == ["First"]


def test_a_refused_event_is_counted_and_the_writer_goes_on() -> None:
    class Refusing(MemoryCluster):
        refused = False

        def create(self, kind: kinds.Kind, obj: Obj) -> Obj:
            if kind == kinds.EVENT and not self.refused:
                self.refused = True
                raise errors.Forbidden("events are forbidden")
            return super().create(kind, obj)

    class Broken(MemoryCluster):
        def create(self, kind: kinds.Kind, obj: Obj) -> Any:
            if kind == kinds.EVENT:
                raise RuntimeError("a bug")
            return super().create(kind, obj)

    cluster, broken = Refusing(), Broken()
    sqlite_schema(cluster)
    sqlite_schema(broken)
    obj, other = cluster.get(kinds.SCHEMA, "ns", "s"), broken.get(kinds.SCHEMA, "ns", "s")
    assert obj is not None and other is not None
    outcomes: list[str] = []
    emitter = EventEmitter(outcome=outcomes.append)
    emitter.start()
    emitter(cluster, obj, "Refused", "m", warning=True, component="c")
    emitter(broken, other, "Bug", "m", warning=True, component="c")
    emitter(cluster, obj, "Kept", "m", warning=False, component="c")
    emitter.stop()
    assert outcomes == ["refused", "refused", "written"]
    assert [e["reason"] for e in cluster.list(kinds.EVENT, "ns")] == ["Kept"]
