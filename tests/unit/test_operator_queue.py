"""The work queue: dedup, one worker per key, re-run after done, delays, back-off."""

from __future__ import annotations

import threading

import pytest

from ptah.operator.queue import RateLimiter, ShutDown, WorkQueue
from support.clock import FakeClock


def test_dedup_while_waiting() -> None:
    q: WorkQueue[str] = WorkQueue()
    for _ in range(5):
        q.add("a")
    q.add("b")
    assert q.get(0) == "a"
    assert q.get(0) == "b"
    assert q.get(0) is None


def test_key_added_while_processing_runs_again_after_done_and_never_twice_at_once() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    assert q.get(0) == "a"
    q.add("a")  # an event during the pass
    assert q.get(0) is None  # not handed to a second worker meanwhile
    q.done("a")
    assert q.get(0) == "a"
    q.done("a")
    assert q.get(0) is None


def test_add_after_waits_and_earliest_time_wins() -> None:
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(clock=clock)
    q.add_after("a", 10)
    q.add_after("a", 5)
    q.add_after("a", 20)
    assert q.get(0) is None
    clock.t = 5.0
    assert q.get(0) == "a"
    q.done("a")
    clock.t = 30.0
    assert q.get(0) is None  # the superseded entries do not fire


def test_rate_limited_backoff_grows_per_key_and_forget_resets() -> None:
    limiter: RateLimiter[str] = RateLimiter(base=1.0, cap=8.0, qps=1000, burst=1000)
    assert [limiter.when("a") for _ in range(5)] == [1.0, 2.0, 4.0, 8.0, 8.0]
    assert limiter.when("b") == 1.0
    limiter.forget("a")
    assert limiter.when("a") == 1.0


def test_global_bucket_spreads_a_storm() -> None:
    clock = FakeClock()
    limiter: RateLimiter[int] = RateLimiter(base=0.0, qps=10, burst=2, clock=clock)
    delays = [limiter.when(i) for i in range(4)]
    assert delays[:2] == [0.0, 0.0]
    assert delays[2] == pytest.approx(0.1) and delays[3] == pytest.approx(0.2)


def test_shutdown_wakes_blocked_workers() -> None:
    q: WorkQueue[str] = WorkQueue()
    raised = threading.Event()

    def worker() -> None:
        try:
            q.get()
        except ShutDown:
            raised.set()

    t = threading.Thread(target=worker)
    t.start()
    q.shutdown()
    t.join(5)
    assert raised.is_set()


def test_urgent_keys_go_ahead_and_are_still_deduplicated() -> None:
    """Work in flight (a moved Job) goes ahead of keys waiting in order, once."""
    q: WorkQueue[str] = WorkQueue()
    for key in ("a", "b", "c"):
        q.add(key)
    q.add("d", urgent=True)
    q.add("c", urgent=True)  # already waiting: moved ahead, not added twice
    assert [q.get(0) for _ in range(4)] == ["d", "c", "a", "b"]
    assert q.get(0) is None
    for key in "dcab":
        q.done(key)
    assert len(q) == 0


def test_urgent_add_during_a_pass_runs_next_after_done_never_twice_at_once() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    assert q.get(0) == "a"
    q.add("b")
    q.add("c")
    q.add("a", urgent=True)  # its Job completed during the pass
    assert q.get(0) == "b"  # "a" is still being processed: not handed out twice
    q.done("a")
    assert q.get(0) == "a"  # ahead of "c", which waited in order
    assert q.get(0) == "c"
    for key in "abc":
        q.done(key)
    assert q.get(0) is None


def test_reschedule_replaces_a_sooner_pending_time() -> None:
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(clock=clock)
    q.add_after("a", 5)  # a poll timer set while a Job ran
    q.reschedule("a", 100)  # the resource came to rest: only its drift timer is owed
    clock.t = 6
    assert q.get(0) is None
    clock.t = 100
    assert q.get(0) == "a"
    q.done("a")
    q.add_after("b", 5)
    q.reschedule("b", None)
    clock.t = 200
    assert q.get(0) is None and len(q) == 0


def test_a_chain_cut_short_for_urgent_work_resumes_first_among_the_keys_in_order() -> None:
    q: WorkQueue[str] = WorkQueue()
    for k in ("a", "b", "c"):
        q.add(k)
    assert q.get(0) == "a" and not q.taken_urgent("a")
    assert not q.urgent_waiting()
    q.add("job-owner", urgent=True)  # a Job moved while "a" chains its passes
    assert q.urgent_waiting()
    q.resume("a")  # the chain yields between two passes
    q.resume("a")  # once is enough: never queued twice
    q.done("a")
    assert q.get(0) == "job-owner" and q.taken_urgent("job-owner")
    assert not q.urgent_waiting()
    q.done("job-owner")
    assert not q.taken_urgent("job-owner")
    assert [q.get(0), q.get(0), q.get(0), q.get(0)] == ["a", "b", "c", None]


def test_resume_of_a_key_already_due_again_keeps_its_place() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("b")
    assert q.get(0) == "a"
    q.add("a", urgent=True)  # its own Job moved during the pass
    q.resume("a")
    q.done("a")
    assert [q.get(0), q.get(0), q.get(0)] == ["a", "b", None]
    assert q.taken_urgent("a")
