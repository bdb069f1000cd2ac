"""The Argo CD health check (deploy/argocd/health.lua) run under Lua 5.1, as Argo CD's
gopher-lua runs it, against sample PtahSchema, PtahMigration and PtahRollout objects."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

try:
    import lupa.lua51 as lua51
except ImportError:  # pragma: no cover - depends on the environment
    MESSAGE = "lupa is not installed: pip install -e '.[dev]' (pins lupa==2.8)"
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        raise ImportError(MESSAGE) from None
    pytest.skip(MESSAGE, allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = (ROOT / "deploy" / "argocd" / "health.lua").read_text()
T0 = "2026-11-30T00:00:00Z"


def health(obj: dict[str, Any]) -> tuple[str, str]:
    lua = lua51.LuaRuntime(unpack_returned_tuples=True)
    check = lua.eval("function(obj)\n" + SCRIPT + "\nend")
    result = check(lua.table_from(obj, recursive=True))
    return str(result["status"]), str(result["message"] or "")


def cond(type_: str, status: str, reason: str = "R", message: str = "", gen: int = 1) -> Any:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": gen,
        "lastTransitionTime": T0,
    }


def resource(kind: str = "PtahSchema", gen: int = 1, suspend: bool = False, **status: Any) -> Any:
    return {
        "apiVersion": "ptah.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": "shop", "namespace": "team-a", "generation": gen},
        "spec": {"suspend": suspend},
        "status": status,
    }


KINDS = ["PtahSchema", "PtahMigration", "PtahRollout"]


@pytest.mark.parametrize("kind", KINDS)
def test_ready_is_healthy(kind: str) -> None:
    obj = resource(
        kind,
        phase="Ready",
        observedGeneration=1,
        conditions=[cond("Ready", "True", message="up to date"), cond("Stalled", "False")],
    )
    assert health(obj) == ("Healthy", "up to date")


@pytest.mark.parametrize("kind", KINDS)
def test_stalled_is_degraded_with_the_reason(kind: str) -> None:
    obj = resource(
        kind,
        phase="ProofNotSettled",
        observedGeneration=1,
        conditions=[
            cond("Ready", "False"),
            cond("Stalled", "True", "ProofNotSettled", "annotate ptah.io/abandon-proof=op-1"),
        ],
    )
    status, message = health(obj)
    assert status == "Degraded"
    assert message == "ProofNotSettled: annotate ptah.io/abandon-proof=op-1"


@pytest.mark.parametrize("kind", KINDS)
def test_suspend_wins(kind: str) -> None:
    obj = resource(kind, suspend=True, phase="Suspended", conditions=[cond("Ready", "True")])
    assert health(obj)[0] == "Suspended"


@pytest.mark.parametrize(
    ("kind", "short"),
    [("PtahSchema", "schema"), ("PtahMigration", "migration"), ("PtahRollout", "rollout")],
)
def test_waiting_for_approval_is_suspended_and_says_how_to_approve(kind: str, short: str) -> None:
    obj = resource(
        kind,
        phase="WaitingForApproval",
        waitingFor="approval of plan 0123456789ab",
        conditions=[cond("Ready", "False"), cond("Reconciling", "True")],
    )
    status, message = health(obj)
    assert status == "Suspended"
    assert f"ptah approve {short}/shop -n team-a" in message
    assert "0123456789ab" in message


@pytest.mark.parametrize("kind", KINDS)
def test_everything_else_progresses(kind: str) -> None:
    assert health(resource(kind)) == (
        "Progressing",
        "waiting for the Ptah operator to observe this generation",
    )
    applying = resource(
        kind, phase="Applying", waitingFor="Job ptah-x", conditions=[cond("Ready", "False")]
    )
    assert health(applying) == ("Progressing", "Applying: waiting for Job ptah-x")


def test_ready_for_an_older_generation_is_not_healthy() -> None:
    obj = resource(
        gen=2, phase="Ready", observedGeneration=1, conditions=[cond("Ready", "True", gen=1)]
    )
    assert health(obj)[0] == "Progressing"


def test_no_status_at_all_progresses() -> None:
    obj = resource()
    del obj["status"]
    assert health(obj)[0] == "Progressing"


def test_argocd_cm_carries_the_script_for_both_kinds() -> None:
    cm = yaml.safe_load((ROOT / "deploy" / "argocd" / "argocd-cm.yaml").read_text())
    assert cm["metadata"]["name"] == "argocd-cm"
    for kind in KINDS:
        assert cm["data"][f"resource.customizations.health.ptah.io_{kind}"] == SCRIPT


def test_a_stopped_rollout_is_degraded_naming_the_target() -> None:
    obj = resource(
        "PtahRollout",
        phase="Stopped",
        observedGeneration=1,
        stopped={"target": "tenant-7", "reason": "ApplyFailed"},
        conditions=[
            cond("Ready", "False", "Stopped"),
            cond("Stalled", "True", "Stopped", "stopped on a failed canary: tenant-7 Failed"),
        ],
    )
    assert health(obj) == ("Degraded", "Stopped: stopped on a failed canary: tenant-7 Failed")


def test_a_paused_rollout_is_suspended_and_a_moving_one_progresses() -> None:
    paused = resource("PtahRollout", phase="Paused")
    paused["spec"] = {"paused": True}
    assert health(paused) == ("Suspended", "spec.paused is true")
    moving = resource(
        "PtahRollout",
        phase="Progressing",
        observedGeneration=1,
        conditions=[cond("Ready", "False", "Progressing", "wave 2: 7/25 Ready")],
    )
    assert health(moving) == ("Progressing", "Progressing: wave 2: 7/25 Ready")
