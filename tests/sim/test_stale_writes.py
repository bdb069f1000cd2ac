"""A write is judged as written unless the API refused it on its resourceVersion.

The invariants skip a preconditioned patch only when the in-memory API itself
compared its resourceVersion with the version stored before the write and refused it
(409 Conflict). A patch that was applied is judged, whatever version it leaves behind:
a Lease taken over a live writer with the right precondition is exactly such a write,
and hiding it hid the takeovers three mutants break (takeover-ignores-*).
"""

from __future__ import annotations

import pytest

from ptah.kube import errors
from ptah.kube.kinds import LEASE
from ptah.testing.sim.invariants import Invariants
from ptah.testing.sim.world import MIGRATION_FAMILY, SCHEMA_FAMILY, World
from ptah.workload.names import lease_name
from support.simworld import hand_world

LOCK_NS = "ptah-system"


def _held_realm() -> tuple[World, Invariants, str, str]:
    world, inv = hand_world(
        [
            (SCHEMA_FAMILY, "r0", "sim://u:{pw}@db1", "db1"),
            (MIGRATION_FAMILY, "r1", "sim://u:{pw}@DB1:5432/", "db1"),
        ]
    )
    db = world.dbs.by_name["db1"]
    name = lease_name(db.identity.digest)
    world.cluster.system.create(
        LEASE,
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": LOCK_NS},
            "spec": {"holderIdentity": "uid-r0/apply-1", "leaseTransitions": 1},
        },
    )
    db.writers.add("apply-1")  # the holder's executor writes on
    return world, inv, name, "uid-r1/migrate-1"


def _take(world: World, name: str, taker: str, version: str) -> None:
    patch = {
        "metadata": {"resourceVersion": version},
        "spec": {"holderIdentity": taker, "leaseTransitions": 2},
    }
    world.cluster.patch(LEASE, LOCK_NS, name, patch)


def test_an_applied_takeover_is_judged_though_its_version_is_gone_after() -> None:
    world, inv, name, taker = _held_realm()
    stored = world.cluster.system.peek(LEASE, LOCK_NS, name)
    assert stored is not None
    _take(world, name, taker, stored["metadata"]["resourceVersion"])
    after = world.cluster.system.peek(LEASE, LOCK_NS, name)
    assert after is not None and after["spec"]["holderIdentity"] == taker
    assert after["metadata"]["resourceVersion"] != stored["metadata"]["resourceVersion"]
    assert any(v.startswith("release-under-writer:") for v in inv.violations), inv.violations


def test_a_takeover_refused_on_its_version_writes_nothing_and_is_not_judged() -> None:
    world, inv, name, taker = _held_realm()
    stored = world.cluster.system.peek(LEASE, LOCK_NS, name)
    assert stored is not None
    world.cluster.system.patch(LEASE, LOCK_NS, name, {"spec": {"renewTime": "now"}})
    with pytest.raises(errors.Conflict):
        _take(world, name, taker, stored["metadata"]["resourceVersion"])
    assert inv.violations == []
