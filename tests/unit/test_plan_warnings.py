"""A plan reading's warnings as a PtahPlan keeps them: bounded, and a frame that carries
something other than a list of strings is read as no warnings, not a failed reading."""

from __future__ import annotations

from typing import Any

from ptah.api.resources import PLAN_WARNING_CHARS, PLAN_WARNINGS, plan_warnings
from ptah.families.schema import SchemaFamily
from ptah.lifecycle.authorize import plan_digest
from ptah.runner.frame import ResultFrame
from support.plans import plan_spec


def _frame(data: dict[str, Any]) -> ResultFrame:
    return ResultFrame.model_validate(
        {
            "operationId": "plan-1",
            "operationType": "plan",
            "database": {"engine": "postgres", "key": {"server": "s", "database": "app"}},
            "outcome": "succeeded",
            "data": data,
        }
    )


def test_a_reading_says_nothing_and_the_plan_keeps_nothing() -> None:
    assert plan_warnings([]) is None
    # A plan without warnings has the digest it had before plans kept them: approvals
    # of plans published by an earlier operator still match.
    assert "warnings" not in plan_spec().wire()
    assert plan_digest(plan_spec()) == plan_digest(plan_spec(warnings=None))
    assert plan_digest(plan_spec()) != plan_digest(plan_spec(warnings=["x"]))


def test_warnings_are_bounded_in_count_and_length() -> None:
    said = [f"w{i} " + "x" * (PLAN_WARNING_CHARS * 2 if i == 0 else 10) for i in range(120)]
    kept = plan_warnings(said)
    assert kept is not None and len(kept) == PLAN_WARNINGS
    assert len(kept[0]) == PLAN_WARNING_CHARS and kept[0].endswith("...")
    assert kept[1] == said[1]
    assert kept[-1] == f"... and {120 - PLAN_WARNINGS + 1} more warnings"
    assert plan_warnings(said[:PLAN_WARNINGS])[-1] == said[PLAN_WARNINGS - 1]  # type: ignore[index]


def test_the_schema_family_reads_warnings_and_survives_forged_ones() -> None:
    family = SchemaFamily()
    read = family.plan_from_reading(None, _frame({"statements": [], "warnings": ["a", 1]}))  # type: ignore[arg-type]
    assert read.warnings == ("a", "1")
    for forged in ("a string", {"a": 1}, None, 7):
        read = family.plan_from_reading(None, _frame({"statements": [], "warnings": forged}))  # type: ignore[arg-type]
        assert read.warnings == ()


def test_approve_prints_the_warnings_and_status_counts_them() -> None:
    from ptah.cli.approve import render_plan
    from ptah.cli.status import _plan
    from ptah.kube.kinds import SCHEMA

    said = ["ignored by spec.policy.ignore, left as it is on the target: table public.t"]
    shown = render_plan(SCHEMA, "s", "d" * 12, plan_spec(warnings=said), color=False)
    assert f"-- warning: {said[0]}" in shown
    assert "warning" not in render_plan(SCHEMA, "s", "d" * 12, plan_spec(), color=False)
    summary = {"digest": "a" * 40, "changes": True, "statements": 2, "warnings": 1}
    assert _plan(SCHEMA, {"currentPlan": summary}) == "aaaaaaaaaaaa (2 stmts, 1 warning(s))"
