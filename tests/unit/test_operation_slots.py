"""Operation slots (ptah.operator.slots): at most ``--max-operations`` claims in flight;
one refused waits in order, says so (phase Queued), and is woken when a slot frees."""

from __future__ import annotations

from typing import Any

import pytest

from ptah.kube import kinds
from ptah.kube.watch import WatchEvent
from ptah.operator.mapping import Key
from ptah.operator.slots import OperationSlots
from ptah.testing.memory import MemoryCluster
from support.clock import FakeClock
from support.schemas import sqlite_schema

RUNNING = {"status": {"activeOperation": {"operationId": "x"}}}
DONE: dict[str, Any] = {"status": {"phase": "Ready"}}


def test_claims_past_the_limit_wait_in_order_and_are_woken_as_slots_free() -> None:
    woken: list[str] = []
    slots: OperationSlots[str] = OperationSlots(2, woken.append)
    assert slots.admit("a") and slots.admit("b")
    assert not slots.admit("c") and not slots.admit("d")
    assert slots.waiting() == 2 and slots.in_flight() == 2
    slots.saw("a", RUNNING)
    slots.saw("b", RUNNING)
    assert slots.admit("a")  # in flight: never refused
    slots.saw("a", DONE)
    assert woken == ["c"]  # one slot: the first refused
    assert not slots.admit("d")  # d is behind c
    assert slots.admit("c")
    assert slots.waiting() == 1
    slots.saw("c", RUNNING)
    slots.saw("b", None)  # deleted: its slot frees too
    assert woken == ["c", "d"]
    assert slots.admit("d")


def test_a_waiting_key_that_no_longer_claims_hands_its_turn_on() -> None:
    woken: list[str] = []
    slots: OperationSlots[str] = OperationSlots(1, woken.append)
    assert slots.admit("a")
    slots.saw("a", RUNNING)
    assert not slots.admit("b") and not slots.admit("c")
    slots.saw("a", DONE)
    assert woken == ["b"]
    slots.leave("b")  # b's pass ended without a claim (its spec moved, say)
    assert woken == ["b", "c"]
    assert slots.admit("c")


def test_an_admitted_claim_the_watch_never_shows_frees_its_slot_after_the_grace() -> None:
    clock = FakeClock()
    slots: OperationSlots[str] = OperationSlots(1, lambda _: None, grace=60.0, clock=clock)
    assert slots.admit("a")  # its claim write then failed: no watch event ever shows it
    assert not slots.admit("b")
    clock.t = 61.0
    assert slots.admit("b")


def test_unbounded_admits_everything_and_a_limit_below_one_is_refused() -> None:
    slots: OperationSlots[str] = OperationSlots(None, lambda _: None)
    assert all(slots.admit(str(i)) for i in range(100))
    with pytest.raises(ValueError, match="at least 1"):
        OperationSlots(0, lambda _: None)


def test_the_controller_queues_a_claim_past_the_limit_and_runs_it_when_a_slot_frees() -> None:
    from ptah.operator.controller import Controller, Settings
    from ptah.operator.main import families

    cluster = MemoryCluster()
    keys = [Key("PtahSchema", f"ns{i}", "s") for i in range(3)]
    for k in keys:
        sqlite_schema(cluster, namespace=k.namespace)
    c = Controller(cluster, families(), Settings(lock_namespace="sys", max_operations=2))

    def watch(key: Key, type_: str = "MODIFIED") -> None:
        obj = cluster.get(kinds.SCHEMA, key.namespace, key.name)
        assert obj is not None
        c.handle(WatchEvent(type_, kinds.SCHEMA, obj))

    def run(key: Key) -> None:
        again, known = c.process(key, chain=True)
        while again:
            again, known = c.process(key, chain=True, known=known)
        watch(key)

    for k in keys:
        run(k)
    status = [(cluster.get(kinds.SCHEMA, k.namespace, "s") or {}).get("status") or {} for k in keys]
    assert [bool(s.get("activeOperation")) for s in status] == [True, True, False]
    assert status[2]["phase"] == "Queued"
    assert status[2]["waitingFor"] == "a free operation slot"
    assert not cluster.list(kinds.JOB, "ns2")
    registry = c.metrics.registry
    assert registry.get_sample_value("ptah_operation_slots_in_flight") == 2
    assert registry.get_sample_value("ptah_operation_slots_waiting") == 1
    # The first resource goes away: its slot frees and wakes the queued one.
    first = cluster.get(kinds.SCHEMA, "ns0", "s")
    assert first is not None
    c.handle(WatchEvent("DELETED", kinds.SCHEMA, first))
    assert c.queue.get(timeout=0) == keys[2]
    c.queue.done(keys[2])
    run(keys[2])
    third = cluster.get(kinds.SCHEMA, "ns2", "s")
    assert third is not None and third["status"]["activeOperation"]
    assert cluster.list(kinds.JOB, "ns2")
    assert registry.get_sample_value("ptah_operation_slots_waiting") == 0
