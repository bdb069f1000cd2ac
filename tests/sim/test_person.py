"""The simulated person: what they do must never crash a schedule (a crash ends the
whole run of schedules, not just one)."""

from __future__ import annotations

from ptah.kube.kinds import APPROVAL
from ptah.testing.sim.kubelet import NS
from ptah.testing.sim.world import SCHEMA_FAMILY
from support.simworld import hand_world


def test_two_approvals_drawing_the_same_name_both_exist() -> None:
    """A long schedule can draw the same approval number twice (seed 5052030 did, and
    the run of schedules ended in AlreadyExists); the second approval gets another
    name, with no extra draw from the schedule's random stream."""
    world, _ = hand_world([(SCHEMA_FAMILY, "s", "sim://u:{pw}@db1", "db1")])
    res = world.resources[0]
    world.rng.randint = lambda a, b: 7  # type: ignore[method-assign]
    world._approve(res, "digest-1")
    world._approve(res, "digest-2")
    names = sorted(a["metadata"]["name"] for a in world.cluster.system.list(APPROVAL, NS))
    assert names == ["s-approval-7", "s-approval-7-again"]
    digests = {a["spec"]["planDigest"] for a in world.cluster.system.list(APPROVAL, NS)}
    assert digests == {"digest-1", "digest-2"}
