"""A deterministic reading failure holds on the inputs the reading was claimed under
(issue 11's 100,000-schedule run, seeds 1000987, 1001418, 1002203, 1002450).

The verification policy is one of a reading's inputs, and the simulation edits it: a
ConfigMap created and deleted again is back to "absent", the very inputs the reading
failed under. Two ways that let the same inputs run again:

- the policy moved after the claim and moved back before the dispatch: the stall was
  checked at the claim only (now it is checked again at the dispatch boundary);
- the policy moved while the reading ran: the failure recorded the inputs at the
  failure, not those the reading was claimed under, so moving the policy back looked
  like a change (now the claim carries its inputs).

The invariant ``no-retry-deterministic`` listens to every write in both schedules.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ptah.kube.kinds import CONFIGMAP
from ptah.testing.sim.invariants import POLICY, Invariants
from ptah.testing.sim.kubelet import BROKEN, NS
from ptah.testing.sim.world import SCHEMA_FAMILY, World, _policy_cm
from support.simworld import hand_world, one_pass, status


def _broken_schema() -> tuple[World, Invariants]:
    world, inv = hand_world([(SCHEMA_FAMILY, "s", "sim://u:{pw}@db1", "db1")])
    world.cluster.system.patch(
        SCHEMA_FAMILY.kind, NS, "s", {"spec": {"source": {"inline": f"CREATE TABLE t0\n{BROKEN}"}}}
    )
    assert world.cluster.system.get(CONFIGMAP, NS, POLICY) is None
    return world, inv


def _readings(inv: Invariants) -> int:
    """Plan Jobs created so far (finished ones are collected by their TTL)."""
    return sum(n for name, n in inv.creates.items() if name.startswith("ptah-plan-"))


def _until(world: World, inv: Invariants, done: Callable[[dict[str, Any]], bool]) -> None:
    for _ in range(100):
        if done(status(world)):
            return
        one_pass(world, inv)
        world.kubelet.step()
        world.clock.advance(5)
    raise AssertionError(f"never reached: {status(world)}")


def _stalled(s: dict[str, Any]) -> bool:
    failure = s.get("readingFailure") or {}
    return failure.get("retry") is False and not s.get("activeOperation")


def _blocked_without_reading(world: World, inv: Invariants, readings: int) -> None:
    """Many passes and kubelet steps later: Blocked, no other reading dispatched."""
    for _ in range(30):
        one_pass(world, inv)
        world.kubelet.step()
        world.clock.advance(30)
    s = status(world)
    assert s["phase"] == "Blocked", s
    assert not s.get("activeOperation"), s
    assert s["readingFailure"]["reason"] == "DesiredSchemaInvalid"
    assert _readings(inv) == readings
    assert inv.violations == []


def test_inputs_moved_back_before_the_dispatch_stop_the_reading() -> None:
    world, inv = _broken_schema()
    _until(world, inv, _stalled)
    assert _readings(inv) == 1
    # The policy appears: the inputs changed, so a new reading is claimed...
    world.cluster.system.create(CONFIGMAP, _policy_cm({"allowDestructive": "true"}))
    _until(world, inv, lambda s: bool(s.get("activeOperation")))
    claim = status(world)["activeOperation"]
    assert claim["type"] == "Plan" and not claim.get("dispatchStarted")
    # ...and the policy goes again before it is dispatched: the inputs it failed under.
    world.cluster.system.delete(CONFIGMAP, NS, POLICY)
    _blocked_without_reading(world, inv, readings=1)


def test_inputs_moved_while_the_reading_ran_are_not_the_failures() -> None:
    world, inv = _broken_schema()
    _until(world, inv, lambda s: bool((s.get("activeOperation") or {}).get("jobUid")))
    # The reading runs; the policy appears meanwhile.
    world.cluster.system.create(CONFIGMAP, _policy_cm({"allowDestructive": "true"}))
    for _ in range(100):
        if _stalled(status(world)):
            break
        world.kubelet.step()
        one_pass(world, inv)
    else:
        raise AssertionError(f"the reading never failed: {status(world)}")
    assert _readings(inv) == 1
    # The policy goes again: the inputs the failed reading was claimed under.
    world.cluster.system.delete(CONFIGMAP, NS, POLICY)
    _blocked_without_reading(world, inv, readings=1)


def test_an_input_that_changes_for_good_reads_again() -> None:
    """The stall is not forever: a policy that appears (and stays) is new input."""
    world, inv = _broken_schema()
    _until(world, inv, _stalled)
    world.cluster.system.create(CONFIGMAP, _policy_cm({"allowDestructive": "true"}))
    _until(world, inv, lambda s: _stalled(s) and _readings(inv) == 2)
    assert inv.violations == []
