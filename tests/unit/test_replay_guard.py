"""The replay guard: a plan whose run failed, or was refused for a reason the same plan
would meet again, is not dispatched again by itself (status.lastMutation.blocks)."""

from __future__ import annotations

import pytest

from ptah.api.common import NON_BLOCKING_REFUSALS, LastMutation, LifecycleStatus, PlanSummary
from ptah.lifecycle.decide import replay_stall

DIGEST = "a" * 40


def last(outcome: str, reason: str | None = None, digest: str = DIGEST) -> LastMutation:
    return LastMutation(
        operation_id="migrate-1", plan_digest=digest, outcome=outcome, reason=reason, at="t"
    )


@pytest.mark.parametrize(
    ("outcome", "reason", "blocked"),
    [
        ("Failed", "ApplyFailed", True),
        ("Refused", "NeedsBaseline", True),
        ("Refused", "DestructiveNotAllowed", True),
        ("Refused", "InvalidMigration", True),
        ("Refused", None, True),
        ("Refused", "TargetDrifted", False),
        ("Refused", "LockBusy", False),
        ("Refused", "Dirty", False),
        ("Fenced", "RealmBusy", False),
        ("Succeeded", None, False),
        ("Uncertain", None, True),  # held by its record; after an abandon, by this
        ("Converged", None, False),
    ],
)
def test_blocks_the_same_plan(outcome: str, reason: str | None, blocked: bool) -> None:
    assert last(outcome, reason).blocks(DIGEST) is blocked


@pytest.mark.parametrize("outcome", ["Failed", "Refused"])
def test_another_plan_is_never_blocked(outcome: str) -> None:
    assert not last(outcome, "NeedsBaseline").blocks("b" * 40)


def test_non_blocking_refusals_are_the_documented_ones() -> None:
    assert frozenset({"TargetDrifted", "LockBusy", "Dirty"}) == NON_BLOCKING_REFUSALS


def test_stall_names_the_refusal() -> None:
    status = LifecycleStatus.model_validate(
        {"lastMutation": last("Refused", "NeedsBaseline").model_dump(by_alias=True)}
    )
    plan = PlanSummary.model_validate(
        {
            "name": "p",
            "digest": DIGEST,
            "changes": True,
            "destructive": False,
            "statements": 1,
            "generation": 1,
            "bindingEpoch": 0,
            "database": "d",
        }
    )
    stall = replay_stall(status, plan)
    assert stall is not None
    assert stall.stalled_reason == "RefusedPlan"
    assert "refused (NeedsBaseline)" in stall.message
    other = plan.model_copy(update={"digest": "b" * 40})
    assert replay_stall(status, other) is None
