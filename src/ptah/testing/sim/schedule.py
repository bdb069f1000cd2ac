"""One seeded fault schedule: a fault phase, then quiet until everything is at rest."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import timedelta

from ptah.kube import errors
from ptah.kube.kinds import EVENT, JOB, POD
from ptah.lifecycle.writes import DURABLE_WRITES
from ptah.testing.memory import (
    PROCEED,
    ApplyThenFail,
    FailBefore,
    FaultDecision,
    ReadRequest,
    WriteRequest,
)
from ptah.testing.sim.invariants import Invariants
from ptah.testing.sim.windows import WindowCounter, timing_windows
from ptah.testing.sim.world import LEASE_DURATION, World

FAULT_STEPS = 120
QUIET_STEPS = 500


@dataclass(frozen=True)
class ScheduleResult:
    seed: int
    crashes: list[str]
    violations: list[str]
    steps: int
    events: dict[str, int]
    windows: dict[str, list[str]] = field(default_factory=dict)  # window -> causes
    faults: dict[str, int] = field(default_factory=dict)


def crash_point(seed: int) -> tuple[str, str, int]:
    """Each schedule aims one stop at one durable write, round-robin, so N schedules
    cover every write both before and after it."""
    write = DURABLE_WRITES[seed % len(DURABLE_WRITES)]
    when = "after" if (seed // len(DURABLE_WRITES)) % 2 == 0 else "before"
    return write, when, 1 + (seed // (2 * len(DURABLE_WRITES))) % 2


# Durable writes that only some worlds make at all, and what a world aimed at one needs:
# an approval is consumed only for a plan that requires one.
AIMED_WORLDS = {"consume_approval": {"policy": {"approval": "Always"}}}


def run_schedule(seed: int) -> ScheduleResult:
    world = World.build(seed)
    aimed = AIMED_WORLDS.get(crash_point(seed)[0])
    if aimed is not None:
        # A stop aimed at a write the world would never make lands nowhere: the world is
        # built to make it (after building, so every other schedule is left as it was).
        for res in world.resources:
            world.cluster.system.patch(res.family.kind, res.namespace, res.name, {"spec": aimed})
    inv = Invariants(world)
    windows = WindowCounter(world, inv)
    world.watcher = windows
    rng = world.rng
    api_faults = {"on": True}

    def faults(req: WriteRequest) -> FaultDecision:
        world.lease_race(req)
        if not api_faults["on"] or rng.random() >= 0.04:
            return PROCEED
        roll = rng.random()
        if roll < 0.4:
            return ApplyThenFail()
        if roll < 0.7:
            return FailBefore(errors.Unavailable("injected", uncertain=True))
        return FailBefore(errors.Conflict("injected conflict"))

    inv.install(faults)
    # A read of the executor (its Job, its Pods) that fails: the API could not say, which
    # is never evidence that it stopped. Drawn from its own stream, so every other draw
    # of a schedule stays as it was.
    reads = random.Random(f"{seed}/reads")

    def read_faults(req: ReadRequest) -> errors.ApiError | None:
        world.job_put_back_at_release(req.kind, req.labels)
        if world.unread(req.kind, req.name, req.labels):
            return errors.Unavailable("injected: the read timed out")
        if api_faults["on"] and req.kind in (JOB, POD) and reads.random() < 0.02:
            inv.fault("read-failed", None)
            return errors.Unavailable("injected: the read timed out")
        return None

    world.cluster.read_faults = read_faults
    aim = random.Random(f"{seed}/aim")
    world.crash = crash_point(seed)
    steps = 0
    for i in range(FAULT_STEPS):
        _step(world, quiet=False)
        inv.after_step(check_secrets=i % 20 == 0)
        steps += 1
        if world.crash is None and rng.random() < 0.02:
            world.crash = crash_point(rng.randrange(10**6))
        if rng.random() < 0.02:
            world.outage()
        world.rescheduled_while_withheld()
        world.holder_goes_quiet()
        world.orphan_waiting_pod()
        world.orphan_starts_while_unread()
        world.lose_started_orphans()
        world.put_back_copies_end()
        world.secrets_return()
        _stuck_while_proof_unread(world, aim)
    world.secrets_return(every=True)
    api_faults["on"] = False
    world.faults_on = False
    world.kubelet.faults_on = False
    for i in range(QUIET_STEPS):
        _step(world, quiet=True)
        world.lose_started_orphans()
        world.put_back_copies_end()
        inv.after_step(check_secrets=i % 50 == 0)
        steps += 1
    world.crash = None
    _drain(world, inv)
    inv.after_step(check_secrets=True)
    inv.at_rest()
    events: dict[str, int] = {}
    for ev in world.cluster.system.list(EVENT, ""):
        events[ev["reason"]] = events.get(ev["reason"], 0) + 1
    faults_seen = dict(inv.faults)
    for what, n in world.kubelet.events.items():
        faults_seen[what] = faults_seen.get(what, 0) + n
    return ScheduleResult(
        seed,
        world.crashes,
        inv.violations,
        steps,
        events,
        {w: sorted(c) for w, c in windows.reached.items()},
        faults_seen,
    )


def _stuck_while_proof_unread(world: World, aim: random.Random) -> None:
    """Now and then a resource's worker gets stuck (longer than the Lease duration) while
    it owes proof no reading has read yet and its lastReadingAt, stamped by another
    clock, is not before the record: the proof must pace itself by its own record when
    the worker comes back. Drawn from its own stream, so every other draw of a schedule
    stays as it was."""
    if not world.faults_on:
        return
    for res in world.resources:
        if "record>reading" not in timing_windows(world, res) or aim.random() >= 0.2:
            continue
        seconds = aim.uniform(LEASE_DURATION + 10, 3.5 * LEASE_DURATION)
        world.starved_until[res.name] = world.clock.now() + timedelta(seconds=seconds)
        world.watcher.fault("starved", res)


def _busy(world: World) -> bool:
    if world.kubelet.runs:
        return True
    for res in world.resources:
        obj = world.cluster.system.peek(res.family.kind, res.namespace, res.name)
        status = (obj or {}).get("status") or {}
        if status.get("activeOperation") or status.get("pendingLockRelease"):
            return True
        if status.get("phase") == "Retrying" and status.get("nextReadingAfter"):
            return True  # a failed reading waits for its pause, then reads again
    return False


def _drain(world: World, inv: Invariants, rounds: int = 300) -> None:
    """Let every started operation finish: round-robin passes, the kubelet, some
    time (10 s a round, two polls: 3,000 s in all, past the longest hold a restart can
    start over, the Job's and the Pod's 900 s + 60 s); people only approve and abandon
    proofs. Reads that fail past the faults' end (World.orphan_starts_while_unread) push
    the rounds back: a hold counts again from the first look that reads."""
    ends = [until for until in world.unread_until.values() if until > world.clock.now()]
    if ends:
        rounds += int((max(ends) - world.clock.now()).total_seconds() // 10) + 1
    for _ in range(rounds):
        before = world.cluster.requests.effective_writes
        for res in world.resources:
            world.reconcile_one(res)
            inv.after_step(check_secrets=False)
        world.kubelet.step()
        world.clock.advance(10)
        inv.after_step(check_secrets=False)
        if not _busy(world) and world.cluster.requests.effective_writes == before:
            return


def _step(world: World, quiet: bool) -> None:
    roll = world.rng.random()
    if roll < 0.55:
        world.reconcile_one()
    elif roll < 0.8:
        world.kubelet.step()
    elif roll < 0.9:
        world.clock.advance(world.rng.choice([1, 5, 30, 130 if not quiet else 60]))
    else:
        world.person_acts(quiet)
