"""``ptah status`` and ``ptah approve`` on the in-memory API (the commands take a Cluster)."""

from __future__ import annotations

import io
from typing import Any

import pytest

from ptah.api.resources import PlanSpec
from ptah.cli import approve as approve_cli
from ptah.cli import main as cli_main
from ptah.cli import status as status_cli
from ptah.cli.status import CliError
from ptah.kube.kinds import APPROVAL, MIGRATION, PLAN, SCHEMA, Kind
from ptah.kube.port import Obj
from ptah.lifecycle.authorize import plan_digest
from ptah.testing.memory import MemoryCluster

NS = "team-a"


def _resource(c: MemoryCluster, kind: Kind, name: str, ns: str = NS, **status: Any) -> Obj:
    spec: dict[str, Any] = {"target": {"engine": "postgres", "secretRef": {"name": "db"}}}
    spec.update({"source": {"inline": "create table t (id int);"}} if kind is SCHEMA else {})
    spec.update({"directory": {"configMaps": ["m"]}} if kind is MIGRATION else {})
    obj = c.create(
        kind,
        {
            "apiVersion": kind.api_version,
            "kind": kind.kind,
            "metadata": {"name": name, "namespace": ns},
            "spec": spec,
        },
    )
    if status:
        obj = c.patch(kind, ns, name, {"status": status}, "status")
    return obj


def _plan(c: MemoryCluster, owner: Obj, *, destructive: bool = True) -> dict[str, Any]:
    """A PtahPlan owned by ``owner`` and the currentPlan summary naming it."""
    spec = PlanSpec.model_validate(
        {
            "ownerKind": owner["kind"],
            "ownerName": owner["metadata"]["name"],
            "ownerUid": owner["metadata"]["uid"],
            "engine": "postgres",
            "statements": [
                {"sql": "ALTER TABLE t ADD COLUMN note text", "hazards": []},
                {"sql": "DROP TABLE legacy", "hazards": ["destructive"]},
            ],
            "destructive": destructive,
            "changes": True,
            "computedUnder": {
                "source": "s",
                "targetSchema": "a",
                "expectedAfter": "b",
                "policy": "p",
                "bindingEpoch": 1,
                "database": "d" * 24,
                "generation": 1,
            },
        }
    )
    digest = plan_digest(spec)
    name = f"{owner['metadata']['name']}-{digest[:10]}"
    c.create(
        PLAN,
        {
            "apiVersion": PLAN.api_version,
            "kind": PLAN.kind,
            "metadata": {"name": name, "namespace": owner["metadata"]["namespace"]},
            "spec": spec.wire(),
        },
    )
    return {
        "name": name,
        "digest": digest,
        "changes": True,
        "destructive": destructive,
        "statements": 2,
        "generation": 1,
        "bindingEpoch": 1,
        "database": "d" * 24,
    }


def _waiting(c: MemoryCluster, name: str = "app") -> tuple[Obj, dict[str, Any]]:
    obj = _resource(c, SCHEMA, name)
    summary = _plan(c, obj)
    obj = c.patch(
        SCHEMA,
        NS,
        name,
        {
            "status": {
                "phase": "WaitingForApproval",
                "waitingFor": f"approval of plan {summary['digest'][:12]}",
                "currentPlan": summary,
            }
        },
        "status",
    )
    return obj, summary


def _approve(c: MemoryCluster, resource: str, **kw: Any) -> tuple[int, str]:
    out = io.StringIO()
    kw.setdefault("yes", True)
    kw.setdefault("ask", None)
    code = approve_cli.approve(c, NS, resource, out=out, **kw)
    return code, out.getvalue()


# ------------------------------------------------------------------- status


def test_status_table_shows_phase_plan_waiting_and_uncertainty() -> None:
    c = MemoryCluster()
    _, summary = _waiting(c)
    record = {
        "operationId": "op-123",
        "type": "Migrate",
        "jobName": "j",
        "reason": "LogLost",
        "recordedAt": "2026-11-30T00:00:00Z",
    }
    _resource(
        c,
        MIGRATION,
        "orders",
        phase="Proving",
        waitingFor="a reading that settles the uncertain run",
        unresolvedRun=record,
        pendingVersions=["3", "4"],
        pendingRepeatables=["R__views.sql"],
        conditions=[
            {
                "type": "Ready",
                "status": "False",
                "reason": "Proving",
                "lastTransitionTime": "2026-11-30T00:00:00Z",
            }
        ],
    )
    _resource(c, SCHEMA, "elsewhere", ns="team-b", phase="Ready")
    out = io.StringIO()
    assert status_cli.status(c, NS, out) == 0
    text = out.getvalue()
    lines = text.splitlines()
    header = ["RESOURCE", "PHASE", "READY", "PLAN", "WAITING", "FOR", "UNCERTAIN", "RUN"]
    assert lines[0].split() == header
    migration_line = next(line for line in lines if line.startswith("migration/orders"))
    assert "Proving" in migration_line and "False" in migration_line
    assert "2 pending, 1 repeatable" in migration_line and "op-123 (LogLost)" in migration_line
    schema_line = next(line for line in lines if line.startswith("schema/app"))
    assert "WaitingForApproval" in schema_line
    assert f"{summary['digest'][:12]} (2 stmts, destructive)" in schema_line
    assert "approval of plan" in schema_line
    assert "elsewhere" not in text
    assert "owes proof of an uncertain run op-123" in text
    assert "docs/operations.md" in text


class AllNamespaces(MemoryCluster):
    """The in-memory API answering a list in namespace "" as the real one does (every
    namespace), which the port's in-memory implementation refuses."""

    def list(self, kind: Kind, namespace: str, labels: dict[str, str] | None = None) -> list[Obj]:
        if namespace:
            return super().list(kind, namespace, labels)
        spaces = sorted({o["metadata"]["namespace"] for k, o in self.objects() if k == kind})
        found: list[Obj] = []
        for ns in spaces:
            found += super().list(kind, ns, labels)
        return found


def test_status_all_namespaces_adds_the_column() -> None:
    c = AllNamespaces()
    _resource(c, SCHEMA, "a", ns="one", phase="Ready")
    _resource(c, SCHEMA, "b", ns="two", phase="Suspended")
    out = io.StringIO()
    status_cli.status(c, None, out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("NAMESPACE")
    assert lines[1].split()[:3] == ["one", "schema/a", "Ready"]
    assert lines[2].split()[:3] == ["two", "schema/b", "Suspended"]


def test_status_empty_namespace_says_so() -> None:
    out = io.StringIO()
    assert status_cli.status(MemoryCluster(), "nothing-here", out) == 0
    assert out.getvalue() == "No PtahSchema or PtahMigration in namespace nothing-here.\n"


def test_status_names_a_running_operation_and_suspension() -> None:
    c = MemoryCluster()
    _resource(
        c,
        SCHEMA,
        "busy",
        phase="Applying",
        activeOperation={
            "operationId": "o",
            "type": "Apply",
            "mutating": True,
            "jobName": "ptah-busy-apply",
            "inputFingerprint": "f",
            "bindingEpoch": 1,
            "claimedAt": "2026-11-30T00:00:00Z",
        },
    )
    obj = _resource(c, SCHEMA, "paused")
    c.patch(SCHEMA, NS, "paused", {"spec": {"suspend": True}})
    assert obj
    out = io.StringIO()
    status_cli.status(c, NS, out)
    text = out.getvalue()
    assert "Apply Job ptah-busy-apply" in text
    assert "resume (spec.suspend)" in text


def test_status_missing_crds_say_how_to_install() -> None:
    class NoCrds(MemoryCluster):
        def list(self, kind: Kind, namespace: str, labels: Any = None) -> list[Obj]:
            from ptah.kube.errors import NotFound

            raise NotFound("the server could not find the requested resource")

    with pytest.raises(CliError, match=r"CRDs installed.*deploy/crds"):
        status_cli.status(NoCrds(), NS, io.StringIO())


def test_unreachable_cluster_says_what_to_do() -> None:
    from ptah.kube.errors import Unavailable

    err = status_cli.explain(Unavailable("connection refused"), "listing ptahschemas")
    assert "ptah dev up" in str(err)


def test_missing_kubeconfig_is_one_line_with_advice(tmp_path: Any, capsys: Any) -> None:
    code = cli_main.main(["status", "--kubeconfig", str(tmp_path / "nope")])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("ptah status: no kubeconfig at") and "ptah dev up" in err


# ------------------------------------------------------------------ approve


def test_approve_shows_statements_and_hazards_then_creates_the_approval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PTAH_APPROVER", "alice")
    c = MemoryCluster()
    _, summary = _waiting(c)
    asked: list[str] = []

    def ask(prompt: str) -> str:
        asked.append(prompt)
        return "y"

    code, text = _approve(c, "schema/app", yes=False, ask=ask, reason="ticket 42")
    assert code == 0
    assert "ALTER TABLE t ADD COLUMN note text;" in text
    assert "-- [2] !! DESTRUCTIVE" in text and "DROP TABLE legacy;" in text
    assert "This plan is DESTRUCTIVE" in text
    assert asked and summary["digest"][:12] in asked[0]
    # the prompt comes after the plan was shown
    (approval,) = c.list(APPROVAL, NS)
    assert approval["spec"] == {
        "resourceRef": {"kind": "PtahSchema", "name": "app"},
        "planDigest": summary["digest"],
        "approvedBy": "alice",
        "reason": "ticket 42",
    }
    assert "Approved: PtahApproval" in text


def test_approve_declined_creates_nothing() -> None:
    c = MemoryCluster()
    _waiting(c)
    code, text = _approve(c, "ptahschema/app", yes=False, ask=lambda _: "")
    assert code == 1 and "Not approved." in text
    assert c.list(APPROVAL, NS) == []


def test_approve_without_terminal_needs_yes() -> None:
    c = MemoryCluster()
    _waiting(c)
    with pytest.raises(CliError, match="pass --yes"):
        _approve(c, "schema/app", yes=False, ask=None)
    assert c.list(APPROVAL, NS) == []


def test_approve_twice_is_a_no_op() -> None:
    c = MemoryCluster()
    _waiting(c)
    assert _approve(c, "schema/app")[0] == 0
    code, text = _approve(c, "schema/app")
    assert code == 0 and "Already approved" in text
    assert len(c.list(APPROVAL, NS)) == 1


def test_approve_refuses_a_digest_that_is_not_current() -> None:
    c = MemoryCluster()
    _, summary = _waiting(c)
    with pytest.raises(CliError, match=r"not the current plan.*" + summary["digest"][:12]):
        _approve(c, "schema/app", expected_digest="0000000")
    assert _approve(c, "schema/app", expected_digest=summary["digest"][:8])[0] == 0


def test_approve_refuses_without_a_plan() -> None:
    c = MemoryCluster()
    _resource(c, MIGRATION, "orders", phase="Reading", waitingFor="the History Job")
    with pytest.raises(CliError, match=r"no plan waiting.*Reading.*History Job"):
        _approve(c, "migration/orders")


def test_approve_refuses_a_plan_for_an_older_generation() -> None:
    c = MemoryCluster()
    _waiting(c)
    c.patch(SCHEMA, NS, "app", {"spec": {"suspend": True}})  # generation 2
    with pytest.raises(CliError, match="generation 1, the spec is at 2"):
        _approve(c, "schema/app")


def test_approve_refuses_a_plan_already_dispatched() -> None:
    c = MemoryCluster()
    _, summary = _waiting(c)
    c.patch(
        SCHEMA,
        NS,
        "app",
        {
            "status": {
                "lastMutation": {
                    "operationId": "o",
                    "planDigest": summary["digest"],
                    "outcome": "Succeeded",
                    "at": "2026-11-30T00:00:00Z",
                }
            }
        },
        "status",
    )
    with pytest.raises(CliError, match="dispatched already"):
        _approve(c, "schema/app")


def test_approve_refuses_an_altered_plan() -> None:
    c = MemoryCluster()
    _, summary = _waiting(c)
    c.patch(
        SCHEMA,
        NS,
        "app",
        {"status": {"currentPlan": {**summary, "digest": "f" * 40}}},
        "status",
    )
    with pytest.raises(CliError, match="does not match the digest"):
        _approve(c, "schema/app")


def test_approve_no_changes_and_unknown_resource() -> None:
    c = MemoryCluster()
    _, summary = _waiting(c)
    c.patch(SCHEMA, NS, "app", {"status": {"currentPlan": {**summary, "changes": False}}}, "status")
    with pytest.raises(CliError, match="no changes"):
        _approve(c, "schema/app")
    with pytest.raises(CliError, match="no PtahSchema 'ghost'"):
        _approve(c, "schema/ghost")
    with pytest.raises(CliError, match="schema/NAME or migration/NAME"):
        _approve(c, "deployment/app")


def test_approval_names_are_valid_and_deterministic() -> None:
    name = approve_cli.approval_name(SCHEMA, "x" * 253, "a" * 40)
    assert len(name) <= 253 and name.endswith("-aaaaaaaaaaaa")
    assert name == approve_cli.approval_name(SCHEMA, "x" * 253, "a" * 40)


def test_subcommands_are_registered() -> None:
    parser = cli_main.build_parser()
    args = parser.parse_args(["approve", "schema/app", "-n", "x", "--yes"])
    assert args.resource == "schema/app" and args.yes and args.namespace == "x"
    args = parser.parse_args(["status", "-A"])
    assert args.all_namespaces


def _ready_status(generation: int = 1) -> dict[str, Any]:
    return {
        "phase": "Ready",
        "waitingFor": None,
        "observedGeneration": generation,
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "Ready", "lastTransitionTime": "t"}
        ],
    }


def test_approve_wait_shows_progress_until_ready() -> None:
    c = MemoryCluster()
    _waiting(c)
    steps = iter(
        [
            {"phase": "Applying", "waitingFor": "Job ptah-app-apply"},
            {"phase": "Applying", "waitingFor": "Job ptah-app-apply"},  # no new line
            {"phase": "Verifying", "waitingFor": "a read-only reading of the target"},
            _ready_status(),
        ]
    )

    def operator_moves(_: float) -> None:
        c.patch(SCHEMA, NS, "app", {"status": next(steps)}, "status")

    code, text = _approve(c, "schema/app", wait=60.0, sleep=operator_moves)
    assert code == 0
    progress = [line.strip() for line in text.splitlines() if line.startswith("  schema/app")]
    assert progress == [
        "schema/app: WaitingForApproval (waiting for approval of plan "
        + c.get(SCHEMA, NS, "app")["status"]["currentPlan"]["digest"][:12]
        + ")",
        "schema/app: Applying (waiting for Job ptah-app-apply)",
        "schema/app: Verifying (waiting for a read-only reading of the target)",
        "schema/app: Ready",
    ]


def test_follow_reports_a_stall_and_a_timeout() -> None:
    c = MemoryCluster()
    _waiting(c)
    stalled = {
        "phase": "ProofNotSettled",
        "conditions": [
            {
                "type": "Stalled",
                "status": "True",
                "reason": "ProofNotSettled",
                "message": "annotate ptah.io/abandon-proof=op-1",
                "lastTransitionTime": "t",
            }
        ],
    }
    c.patch(SCHEMA, NS, "app", {"status": stalled}, "status")
    out = io.StringIO()
    assert status_cli.follow(c, SCHEMA, NS, "app", out, timeout=5, sleep=lambda _: None) == 1
    assert "Stalled (ProofNotSettled): annotate ptah.io/abandon-proof=op-1" in out.getvalue()

    c.patch(SCHEMA, NS, "app", {"status": {"phase": "Applying", "conditions": []}}, "status")
    ticks = iter(range(100))
    out = io.StringIO()
    code = status_cli.follow(
        c, SCHEMA, NS, "app", out, timeout=3, sleep=lambda _: None, clock=lambda: next(ticks)
    )
    assert code == 3 and "Still Applying after 3s" in out.getvalue()
