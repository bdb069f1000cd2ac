"""The runner's operations: identify, plan, apply. Each returns the frame to print.

Nothing here prints; :mod:`ptah.runner.main` owns the output. Every failure
becomes a frame with outcome ``failed`` (or ``refused``) and a scrubbed
message, so the operator always has evidence of what happened.

The planner (sqlglot) is imported inside the operations that plan or apply, not here:
``ptah-runner`` imports this module before it connects, and its start-up reaches the
database first. Frames are built as plain JSON (``wire.payload``): no pydantic at all.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ptah.engines import fence
from ptah.engines.base import EngineError, Target
from ptah.engines.urls import DbUrl
from ptah.runner.wire import DatabaseIdentity, Payload, payload

if TYPE_CHECKING:
    from ptah.engines.model import Statement
    from ptah.runner.frame import OperationType


def make_frame(
    operation_id: str,
    operation_type: OperationType,
    database: DatabaseIdentity | None,
    outcome: str,
    reason: str = "",
    data: dict[str, Any] | None = None,
) -> Payload:
    """The payload of the operation's one frame (see ``wire.payload``)."""
    return payload(operation_id, operation_type, database, outcome, reason, data)


def identify(target: Target, operation_id: str) -> Payload:
    identity = target.identity()
    return make_frame(operation_id, "identify", identity, "succeeded", data={})


def plan(
    target: Target,
    operation_id: str,
    desired_file: str,
    dev_url: DbUrl | None,
    cache_dir: str | None,
    ownership: str = "ignore",
    ignore: Sequence[str] = (),
    offline: Sequence[str] = (),
) -> Payload:
    identity = target.identity()
    try:
        desired_sql = Path(desired_file).read_text()
    except OSError as exc:
        return make_frame(
            operation_id,
            "plan",
            identity,
            "failed",
            "InputUnreadable",
            {"message": f"cannot read the desired schema file {desired_file}: {exc.strerror}"},
        )
    from ptah.engines import planner
    from ptah.engines.model import Online, PlanError, SchemaPolicy

    try:
        policy = SchemaPolicy(
            ownership=ownership, ignore=tuple(ignore), online=Online.from_off(tuple(offline))
        )
        result = planner.plan(
            target, desired_sql, dev_url=dev_url, cache_dir=cache_dir, policy=policy
        )
    except (EngineError, PlanError) as exc:
        return make_frame(
            operation_id,
            "plan",
            identity,
            "failed",
            exc.reason,
            {"message": target.scrub(str(exc))[:2000]},
        )
    return make_frame(operation_id, "plan", identity, "succeeded", data=result.to_json())


def _read_plan(plan_file: str) -> tuple[list[Statement], str, str]:
    from ptah.engines.model import Statement

    raw = json.loads(Path(plan_file).read_text())
    statements = [Statement.from_json(s) for s in raw["statements"]]
    return statements, str(raw["fingerprintBefore"]), str(raw.get("fingerprintAfter", ""))


def apply(
    target: Target,
    operation_id: str,
    plan_file: str,
    allow_destructive: bool,
    realm: str | None = None,
    lock_seconds: float | None = None,
    lock_retries: int | None = None,
    allow_lock_heavy: bool = True,
) -> Payload:
    """Apply the plan under the realm's fence (``realm``: the claim's, when given), each
    statement under its lock timeout and retries (the environment's, unless given)."""
    identity = target.identity()
    try:
        key = fence.realm_of(identity.digest, realm)
    except fence.WrongRealm as exc:
        return make_frame(
            operation_id, "apply", identity, "refused", exc.reason, {"message": str(exc)}
        )
    try:
        statements, before, expected_after = _read_plan(plan_file)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return make_frame(
            operation_id,
            "apply",
            identity,
            "failed",
            "InputUnreadable" if isinstance(exc, OSError) else "InputInvalid",
            {"message": f"cannot read the plan {plan_file}: {exc.strerror or exc}"}
            if isinstance(exc, OSError)
            else {"message": f"the plan {plan_file} is not valid: {type(exc).__name__}"},
        )
    from ptah.engines import planner
    from ptah.engines.ops import timeouts_from_env

    result = planner.apply(
        target,
        statements,
        before,
        allow_destructive=allow_destructive,
        expected_after=expected_after,
        timeouts=timeouts_from_env(lock_seconds, lock_retries),
        realm=key,
        allow_lock_heavy=allow_lock_heavy,
    )
    return make_frame(
        operation_id, "apply", identity, result.outcome, result.reason, result.to_json()
    )
