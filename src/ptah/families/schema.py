"""PtahSchema: a desired schema, a computed plan, an approved apply.

Only what differs from PtahMigration lives here: where the desired SQL comes
from, which runner subcommands read and apply, and which reading settles an
uncertain Apply (a Plan of the same target that shows no changes, or whose
target fingerprint is exactly what the uncertain plan expected after).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from ptah.api.common import OperationType, PlanSummary, UncertainRecord
from ptah.api.digest import digest
from ptah.api.parsed import parse
from ptah.api.resources import PlannedStatement, PlanSpec, SchemaSpec, SchemaStatus
from ptah.kube.kinds import CONFIGMAP, PLAN, SCHEMA
from ptah.lifecycle.context import Pass
from ptah.lifecycle.family import (
    READ_AGAIN,
    MutationInputs,
    Observe,
    PlanDraft,
    ReadAgain,
    ReadingInputs,
    References,
    Watch,
)
from ptah.runner.frame import ResultFrame
from ptah.workload.job import INPUT_MOUNT


class SchemaFamily:
    kind = SCHEMA
    label = "schema"
    reading_type: OperationType = "Plan"
    mutation_type: OperationType = "Apply"
    watches: tuple[Watch, ...] = (Watch(CONFIGMAP),)  # the desired source's ConfigMap

    def spec_of(self, p: Pass) -> SchemaSpec:
        return parse(SchemaSpec, p.spec)

    def status_of(self, obj: dict[str, Any]) -> SchemaStatus:
        return parse(SchemaStatus, obj.get("status") or {})

    def references(self, spec: dict[str, Any]) -> References:
        ref = (spec.get("source") or {}).get("configMapKeyRef") or {}
        return References(frozenset({str(ref["name"])} if ref.get("name") else ()))

    # ----------------------------------------------------------- source

    def _source(self, p: Pass) -> tuple[str | None, Observe | None]:
        src = p.spec.get("source") or {}
        if "inline" in src and src["inline"] is not None:
            text = str(src["inline"])
        else:
            ref = src.get("configMapKeyRef") or {}
            cm = p.cluster.get(CONFIGMAP, p.namespace, ref.get("name", ""))
            if cm is None or ref.get("key") not in (cm.get("data") or {}):
                return None, Observe(
                    "Blocked",
                    stalled_reason="SourceMissing",
                    message=f"ConfigMap {ref.get('name')!r} key {ref.get('key')!r} not found",
                    waiting_for="the desired schema source",
                )
            text = str(cm["data"][ref["key"]])
        pinned = src.get("sha256")
        if pinned and digest(text) != pinned:
            return None, Observe(
                "Blocked",
                stalled_reason="SourceDigestMismatch",
                message="the desired schema does not match source.sha256",
                waiting_for="a source matching its pin",
            )
        return text, None

    def source_fingerprint(self, p: Pass) -> str | None:
        text, _ = self._source(p)
        return None if text is None else digest(text)

    # ----------------------------------------------------------- decisions

    def reading_inputs(self, p: Pass) -> ReadingInputs | Observe:
        text, problem = self._source(p)
        if text is None:
            assert problem is not None
            return problem
        return ReadingInputs(
            source=digest(text),
            args=["plan", "--desired", f"{INPUT_MOUNT}/desired.sql", *self._policy_args(p)],
            inputs={"desired.sql": text},
        )

    @staticmethod
    def _policy_args(p: Pass) -> list[str]:
        """The spec's ownership and ignore policy, as the runner's plan options."""
        try:
            policy = parse(SchemaSpec, p.spec).policy
        except ValidationError:
            return []
        args = ["--ownership", policy.ownership] if policy.ownership != "ignore" else []
        for kind in policy.ignore:
            args += ["--ignore", kind]
        return args + policy.online.plan_args()

    def has_reading(self, status: SchemaStatus) -> bool:
        return True  # the plan summary is the reading

    def blocked(
        self, p: Pass, spec: SchemaSpec, status: SchemaStatus, plan: PlanSummary
    ) -> Observe | ReadAgain | None:
        if plan.destructive and not spec.policy.allow_destructive:
            return Observe(
                "Blocked",
                stalled_reason="DestructiveChangesNotAllowed",
                message=f"plan {plan.name} has destructive statements (it drops data, or"
                " a publication's stream); set spec.policy.allowDestructive to apply it, or"
                " list what another tool owns in spec.policy.ignore",
                waiting_for="a spec change",
            )
        return None

    def ready(
        self, p: Pass, spec: SchemaSpec, status: SchemaStatus, plan: PlanSummary
    ) -> Observe | ReadAgain:
        interval = spec.drift_check_interval_seconds
        since = p.seconds_since(status.last_reading_at)
        if interval and since is not None and since >= interval:
            return READ_AGAIN  # a drift reading is due
        remaining = None if not interval or since is None else interval - since
        return Observe(
            "Ready", ready=True, requeue_after=remaining, applied_source=plan.source or None
        )

    def approval_required(self, spec: SchemaSpec, plan: PlanSummary) -> bool:
        return spec.policy.approval == "Always" or (
            spec.policy.approval == "Destructive" and plan.destructive
        )

    def mutation_inputs(
        self, p: Pass, spec: SchemaSpec, plan: PlanSummary
    ) -> MutationInputs | Observe | ReadAgain:
        obj = p.cluster.get(PLAN, p.namespace, plan.name)
        if obj is None:
            return READ_AGAIN
        planned = PlanSpec.model_validate(obj["spec"])
        online = spec.policy.online
        heavy = planned.lock_heavy()
        if heavy and online.lock_heavy == "Refuse":
            return Observe(
                "Blocked",
                stalled_reason="LockHeavyNotAllowed",
                message=f"plan {plan.name} has lock-heavy statements ({', '.join(heavy[:5])});"
                " set spec.policy.online.lockHeavy to Allow to apply it",
                waiting_for="a spec change",
            )
        args = ["apply", "--plan", f"{INPUT_MOUNT}/plan.json", *online.apply_args()]
        if online.lock_heavy == "Refuse":
            args.append("--refuse-lock-heavy")
        if planned.destructive:
            args.append("--allow-destructive")
        body = {
            "statements": [s.wire() for s in planned.statements],
            "fingerprintBefore": planned.computed_under.target_schema,
        }
        return MutationInputs(
            args=args,
            inputs={"plan.json": json.dumps(body, sort_keys=True)},
            expected_after=planned.computed_under.expected_after,
            source=planned.computed_under.source,
        )

    # ----------------------------------------------------------- readings

    def plan_from_reading(self, p: Pass, frame: ResultFrame) -> PlanDraft:
        data = frame.data
        statements = [PlannedStatement.model_validate(s) for s in data.get("statements", [])]
        return PlanDraft(
            statements=statements,
            changes=bool(data.get("changes", bool(statements))),
            destructive=bool(data.get("destructive", False)),
            target_schema=str(data.get("fingerprintBefore", "")),
            expected_after=str(data.get("fingerprintAfter", "")),
            warnings=_warnings(data.get("warnings")),
        )

    def reading_status(self, p: Pass, frame: ResultFrame) -> dict[str, Any]:
        return {}

    def settles(self, record: UncertainRecord, frame: ResultFrame) -> bool:
        data = frame.data
        if data.get("changes") is False:
            return True
        return (
            bool(record.expected_after) and data.get("fingerprintBefore") == record.expected_after
        )

    def unsettled(self, p: Pass) -> str:
        plan = p.status.current_plan
        if plan is None:
            return "no reading yet"
        return f"the target still differs from the desired schema ({plan.statements} statements)"


def _warnings(said: Any) -> tuple[str, ...]:
    """A reading frame's warnings: a list of strings; anything else in a (forged or
    older) frame is no warning rather than a failed reading."""
    return tuple(str(w) for w in said) if isinstance(said, list) else ()
