"""What people get wrong while a resource waits for them: an approval of the right plan
and the right name for a resource of another kind, a migration the database already ran
edited in place while the proof of an uncertain run is owed, and a ConfigMap put under a
claim's reserved input name with other content. None of them authorizes, settles or runs
anything."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from ptah.kube.kinds import CONFIGMAP, JOB, MIGRATION, SCHEMA
from ptah.testing.memory import PROCEED, FaultDecision, WriteRequest
from ptah.testing.sim.kubelet import NS
from ptah.testing.sim.world import MIGRATION_FAMILY, SCHEMA_FAMILY
from support.simworld import drive, hand_world, one_pass, status


def test_an_approval_naming_another_kind_under_the_same_name_authorizes_nothing() -> None:
    """A PtahApproval of the schema's current plan whose resourceRef names a PtahMigration
    called like the schema: the schema keeps waiting for its approval, no Apply runs, and
    its own approval then authorizes it (the mutant approval-ignores-kind)."""
    world, inv = hand_world([(SCHEMA_FAMILY, "s", "sim://u:{pw}@db1", "db1")])
    world.cluster.system.patch(SCHEMA, NS, "s", {"spec": {"policy": {"approval": "Always"}}})
    res = world.resources[0]
    waiting = drive(world, inv, 0, lambda s: s.get("phase") == "WaitingForApproval", "never waited")
    digest = waiting["currentPlan"]["digest"]
    world._approve(res, digest, MIGRATION.kind)
    for _ in range(5):
        one_pass(world, inv, 0)
        world.kubelet.step()
        world.clock.advance(5)
    assert status(world)["phase"] == "WaitingForApproval", status(world)
    assert not [
        j
        for j in world.cluster.system.list(JOB, NS)
        if j["metadata"]["labels"]["ptah.io/operation-type"] == "Apply"
    ]
    world._approve(res, digest)
    drive(world, inv, 0, lambda s: s.get("appliedPlanDigest") == digest, "never applied")
    assert inv.violations == []


def test_an_applied_migration_edited_while_proof_is_owed_settles_nothing() -> None:
    """The Migrate ran every version and its log was lost: an uncertain run, proof owed.
    Meanwhile a person edits a migration the database already ran. The History reading
    finds nothing pending and that file mismatched: not settled, and the migration says
    so (the mutant migration-settles-when-edited)."""
    world, inv = hand_world([(MIGRATION_FAMILY, "m", "sim://u:{pw}@db1", "db1")])
    claim, run = _migrate_run(world, inv)
    run.fault = "log-lost"
    owed = drive(
        world,
        inv,
        0,
        lambda s: bool(s.get("unresolvedRun")),
        "no uncertain Migrate",
    )
    assert owed["unresolvedRun"]["operationId"] == claim["operationId"]
    db = world.dbs.by_name["db1"]
    assert db.history and db.dirty is None
    first = db.history[0]
    cm = world.cluster.system.get(CONFIGMAP, NS, "m-dir")
    assert cm is not None
    name = next(n for n in cm["data"] if n.split("_", 1)[0] == first)
    world.cluster.system.patch(
        CONFIGMAP, NS, "m-dir", {"data": {name: f"CREATE TABLE m{first} (id bigint);"}}
    )
    drive(
        world,
        inv,
        0,
        lambda s: s.get("phase") == "ProofNotSettled",
        "the proof never read",
    )
    current = status(world)
    assert current["unresolvedRun"]["operationId"] == claim["operationId"]
    assert current["history"]["mismatched"][0]["version"] == first
    assert not current["history"]["pending"]
    assert inv.violations == []


def test_inputs_found_under_the_reserved_name_with_other_content_are_never_mounted() -> None:
    """As the Apply's claim creates its input ConfigMap, one stands under that name already,
    owned like it, holding the plan with a DROP more. The claim is not written while it
    stands (its create is an error, never overwritten, never adopted); once its maker takes
    it away the Apply runs the plan it was approved for (the mutant inputs-conflict-accepted
    mounts the other content)."""
    world, inv = hand_world([(SCHEMA_FAMILY, "s", "sim://u:{pw}@db1", "db1")])
    squatted: list[str] = []

    def squat(req: WriteRequest) -> FaultDecision:
        data = (req.body or {}).get("data") or {}
        if req.kind == CONFIGMAP and req.verb == "create" and "plan.json" in data and not squatted:
            world.squat_inputs(req, timedelta(seconds=100))
            squatted.append(req.name)
        return PROCEED

    inv.install(squat)
    for _ in range(15):
        one_pass(world, inv, 0)
        world.kubelet.step()
        world.clock.advance(5)
    assert squatted
    assert not [
        j
        for j in world.cluster.system.list(JOB, NS)
        if j["metadata"]["labels"]["ptah.io/operation-type"] == "Apply"
    ]
    assert (status(world).get("activeOperation") or {}).get("type") != "Apply"
    world.clock.advance(100)
    applied = drive(world, inv, 0, lambda s: bool(s.get("appliedPlanDigest")), "never applied")
    assert "DROP TABLE t0" not in world.dbs.by_name["db1"].tables
    assert applied["appliedPlanDigest"]
    assert inv.violations == []


def test_a_repeatable_file_still_to_run_keeps_the_proof_owed() -> None:
    """The Migrate's runner is killed after its last version and before its repeatable
    file: an uncertain run. The History reading finds no version pending and the
    repeatable file still to run: not settled (the mutant
    migration-settles-repeatables-pending settles it)."""
    world, inv = hand_world([(MIGRATION_FAMILY, "m", "sim://u:{pw}@db1", "db1")])
    world.cluster.system.patch(
        CONFIGMAP, NS, "m-dir", {"data": {"R__views.sql": "CREATE OR REPLACE VIEW v AS SELECT 1;"}}
    )
    claim, run = _migrate_run(world, inv)
    run.fault = "killed-late"
    world.kubelet.rng.random = lambda: 0.9  # type: ignore[method-assign]  # every version ran
    owed = drive(world, inv, 0, lambda s: bool(s.get("unresolvedRun")), "no uncertain Migrate")
    assert owed["unresolvedRun"]["operationId"] == claim["operationId"]
    db = world.dbs.by_name["db1"]
    assert db.history and db.dirty is None and not db.repeatables
    drive(world, inv, 0, lambda s: s.get("phase") == "ProofNotSettled", "the proof never read")
    current = status(world)
    assert current["unresolvedRun"]["operationId"] == claim["operationId"]
    assert not current["history"]["pending"]
    assert current["history"]["repeatablesPending"] == ["views"]
    assert inv.violations == []


def _migrate_run(world: Any, inv: Any) -> tuple[dict[str, Any], Any]:
    """The migration's first dispatched Migrate claim and the kubelet's run of it, once
    started."""
    claim = drive(
        world,
        inv,
        0,
        lambda s: (
            (s.get("activeOperation") or {}).get("type") == "Migrate"
            and bool(s["activeOperation"].get("dispatchStarted"))
        ),
        "no Migrate dispatched",
    )["activeOperation"]
    world.kubelet.step()
    (run,) = [r for r in world.kubelet.runs.values() if r.operation_id == claim["operationId"]]
    return claim, run
