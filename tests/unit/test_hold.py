"""When a withheld release's hold starts again (ptah.lifecycle.hold.looked), look by look.

The simulation shows the holes each rule closes (tests/sim/test_world_faults.py: an
orphan seen waiting, an orphan started and lost before the first look); these pin the
rule itself: which looks restart the hold, and which leave it counting.
"""

from __future__ import annotations

from ptah.kube import kinds
from ptah.kube.clock import SimClock
from ptah.lifecycle import hold
from ptah.lifecycle.context import Env, Pass
from ptah.operator.main import families
from ptah.testing.memory import MemoryCluster
from support.releases import staged_release
from support.schemas import sqlite_schema

OP = "apply-1"
STAGED = staged_release(OP)


def _sighted() -> tuple[Pass, SimClock]:
    """A pass over one PtahSchema whose process has just sighted the run (its first
    sighting: the hold counts from now)."""
    clock = SimClock()
    cluster = MemoryCluster(clock=clock)
    sqlite_schema(cluster)
    obj = cluster.get(kinds.SCHEMA, "ns", "s")
    assert obj is not None
    p = Pass(Env(cluster), families()["PtahSchema"], obj)
    hold.saw_run(p, OP)
    return p, clock


def _look(p: Pass, clock: SimClock, seconds: float, *, waiting: bool, job_gone: bool) -> float:
    """Let ``seconds`` pass, look, and say how long the hold has left."""
    clock.advance(seconds)
    hold.looked(p, OP, waiting=waiting, job_gone=job_gone)
    return hold.seconds_left(p, STAGED)


def test_looks_at_a_standing_job_leave_the_hold_counting() -> None:
    p, clock = _sighted()
    assert _look(p, clock, 50, waiting=False, job_gone=False) == 130
    assert _look(p, clock, 50, waiting=False, job_gone=False) == 80


def test_the_first_look_without_the_job_restarts_the_hold_and_only_the_first() -> None:
    p, clock = _sighted()
    assert _look(p, clock, 50, waiting=False, job_gone=False) == 130
    assert _look(p, clock, 50, waiting=False, job_gone=True) == 180
    assert _look(p, clock, 50, waiting=False, job_gone=True) == 130


def test_a_waiting_pod_restarts_the_hold_at_each_look_and_the_look_after() -> None:
    p, clock = _sighted()
    assert _look(p, clock, 100, waiting=True, job_gone=True) == 180
    assert _look(p, clock, 100, waiting=True, job_gone=True) == 180
    assert _look(p, clock, 100, waiting=False, job_gone=True) == 180  # it started, or went
    assert _look(p, clock, 100, waiting=False, job_gone=True) == 80


def test_a_restarted_process_starts_over_and_a_forgotten_release_leaves_nothing() -> None:
    p, clock = _sighted()
    assert _look(p, clock, 50, waiting=False, job_gone=True) == 180
    hold.forget(p, STAGED)
    seen = p.env.sightings
    assert not (seen.since or seen.waiting or seen.jobless or seen.read)
    fresh = Pass(Env(p.cluster), p.family, p.obj)
    assert _look(fresh, clock, 50, waiting=False, job_gone=True) == 180


def test_a_look_that_could_not_read_changes_nothing() -> None:
    """A failed read saw no Pod: it neither restarts the hold nor clears the mark of a Pod
    seen waiting, so the first look that does read (the Pod started meanwhile) still
    restarts it."""
    p, clock = _sighted()
    assert _look(p, clock, 10, waiting=True, job_gone=True) == 180
    clock.advance(100)
    hold.looked(p, OP, waiting=False, job_gone=True, unread=True)
    assert p.env.sightings.waiting == {f"ns/s/{OP}"}
    assert _look(p, clock, 50, waiting=False, job_gone=True) == 180
    assert _look(p, clock, 50, waiting=False, job_gone=True) == 130


def test_the_hold_cannot_pass_while_a_readable_look_is_owed() -> None:
    """After a look that saw a Pod waiting, and before this process's first look that
    could read, nothing bounds when a Pod of the run starts: however long the reads fail,
    the hold keeps its whole length, and counts only from the look that reads."""
    p, clock = _sighted()
    clock.advance(500)
    hold.looked(p, OP, waiting=False, job_gone=True, unread=True)
    assert hold.seconds_left(p, STAGED) == 180  # no look has read yet
    assert _look(p, clock, 10, waiting=False, job_gone=False) == 180 - 510  # the Job stands
    p, clock = _sighted()
    assert _look(p, clock, 10, waiting=True, job_gone=True) == 180
    for _ in range(10):
        clock.advance(100)
        hold.looked(p, OP, waiting=False, job_gone=True, unread=True)
        assert hold.seconds_left(p, STAGED) == 180  # the look after the waiting one is owed
    assert _look(p, clock, 100, waiting=False, job_gone=True) == 180
    assert _look(p, clock, 100, waiting=False, job_gone=True) == 80


def test_the_hold_is_both_deadlines_and_the_margin() -> None:
    """The Job's deadline bounds the latest start, the Pod's own the run from there, and
    the margin the Job controller's lag at its deadline and the kill's grace period: 1,860 s
    with the default 900 s deadline (docs/mutation-lifecycle.md, "The hold is a bound")."""
    assert hold.hold_seconds(900) == 1860
    assert hold.hold_seconds(60) == 180
