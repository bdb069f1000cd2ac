"""Two acquirers race for one Lease (fault lease-acquire-race).

Two resources address one database, so they serialize through one Lease. Both read it
expired (its holder's resource is gone) and both write: the acquisition is a patch
carrying the version it read, so the API takes the first and refuses the second (409).
Without that precondition both would believe they hold the same epoch, and both would
dispatch a writer to the database.
"""

from __future__ import annotations

import random

from ptah.kube.kinds import LEASE
from ptah.targetlock import HOLDER_JOB, HOLDER_KIND, HOLDER_NAME, HOLDER_NAMESPACE
from ptah.testing.memory import PROCEED, FaultDecision, WriteFaults, WriteRequest
from ptah.testing.sim.kubelet import NS
from ptah.testing.sim.world import LOCK_NS, MIGRATION_FAMILY, SCHEMA_FAMILY, World
from ptah.workload.names import lease_name
from support.simworld import drive, hand_world, one_pass, status

SCHEMA, MIGRATION = 0, 1
GONE = "gone-uid/apply-0003"


class _AlwaysRaces(random.Random):
    """The race's own stream, drawn so that it always races, for as long as it may."""

    def random(self) -> float:
        return 0.0

    def randint(self, a: int, b: int) -> int:
        return b


def _lease_race(world: World) -> WriteFaults:
    """The simulation's race of two acquirers, without the schedule's other faults."""

    def faults(req: WriteRequest) -> FaultDecision:
        world._acquirers_race(req)
        return PROCEED

    return faults


def _lease(world: World) -> dict[str, object]:
    name = lease_name(world.dbs.by_name["db1"].identity.digest)
    lease = world.cluster.system.get(LEASE, LOCK_NS, name)
    assert lease is not None
    return dict(lease["spec"])


def test_two_acquirers_of_an_expired_lease_one_is_refused() -> None:
    world, inv = hand_world(
        [
            (SCHEMA_FAMILY, "apply", "sim://u:{pw}@db1", "db1"),
            (MIGRATION_FAMILY, "migrate", "sim://u:{pw}@DB1:5432/", "db1"),
        ]
    )
    # The Lease an earlier deployment left: held at epoch 3 by a resource that is gone.
    world.gone_holders.add(GONE)
    world.cluster.system.create(
        LEASE,
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": lease_name(world.dbs.by_name["db1"].identity.digest),
                "namespace": LOCK_NS,
                "annotations": {
                    HOLDER_NAMESPACE: NS,
                    HOLDER_KIND: "PtahSchema",
                    HOLDER_NAME: "gone",
                    HOLDER_JOB: "gone-apply-3",
                },
            },
            "spec": {"holderIdentity": GONE, "leaseDurationSeconds": 120, "leaseTransitions": 3},
        },
    )
    # Both claim their mutation and wait: the Lease is not expired yet by their clock.
    for index in (SCHEMA, MIGRATION):
        drive(
            world,
            inv,
            index,
            lambda s: s.get("phase") == "WaitingForTarget",
            "never waited for the Lease",
        )
    world.clock.advance(130)
    # The schema's takeover is delayed on its way; the migration reads the Lease expired
    # too, and takes it first.
    world.faults_on = True
    world.acquirers = _AlwaysRaces()
    inv.install(_lease_race(world))
    one_pass(world, inv, SCHEMA)
    world.faults_on = False
    assert inv.faults["lease-acquire-race"] == 1
    assert inv.faults["lease-acquire-contended"] == 1
    assert inv.faults["lease-acquire-refused"] == 1, inv.faults
    held = _lease(world)
    migrate = status(world, MIGRATION)["activeOperation"]
    assert held["holderIdentity"] == migrate["lease"]["holder"]
    assert held["leaseTransitions"] == migrate["lease"]["epoch"] == 4
    # The refused one waits for the holder it lost to, and the invariants saw nothing.
    one_pass(world, inv, SCHEMA)
    assert status(world, SCHEMA)["phase"] == "WaitingForTarget"
    assert _lease(world)["holderIdentity"] == migrate["lease"]["holder"]
    assert inv.violations == []
