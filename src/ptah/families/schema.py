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

from ptah.api.common import OperationType, UncertainRecord
from ptah.api.digest import digest
from ptah.api.resources import PlannedStatement, PlanSpec, SchemaSpec, SchemaStatus
from ptah.families.common import (
    approval_gate,
    invalid_spec,
    plan_is_stale,
    replay_stall,
)
from ptah.kube.kinds import CONFIGMAP, PLAN, SCHEMA
from ptah.lifecycle.context import Pass
from ptah.lifecycle.family import Observe, PlanDraft, Work
from ptah.runner.frame import ResultFrame
from ptah.workload.job import INPUT_MOUNT


class SchemaFamily:
    kind = SCHEMA
    reading_type: OperationType = "Plan"
    mutation_type: OperationType = "Apply"
    record_field = "pending_observation"

    def status_of(self, obj: dict[str, Any]) -> SchemaStatus:
        return SchemaStatus.model_validate(obj.get("status") or {})

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

    def reading_work(self, p: Pass, expected_database: str | None) -> Work | Observe:
        text, problem = self._source(p)
        if text is None:
            assert problem is not None
            return problem
        source = digest(text)
        epoch = p.status.execution_binding.epoch if p.status.execution_binding else 0
        return Work(
            type="Plan",
            mutating=False,
            input_fingerprint=digest([source, p.generation, epoch]),
            args=["plan", "--desired", f"{INPUT_MOUNT}/desired.sql", *self._policy_args(p)],
            inputs={"desired.sql": text},
            expected_database=expected_database,
            source=source,
        )

    @staticmethod
    def _policy_args(p: Pass) -> list[str]:
        """The spec's ownership and ignore policy, as the runner's plan options."""
        try:
            policy = SchemaSpec.model_validate(p.spec).policy
        except ValidationError:
            return []
        args = ["--ownership", policy.ownership] if policy.ownership != "ignore" else []
        for kind in policy.ignore:
            args += ["--ignore", kind]
        return args + policy.online.plan_args()

    def decide(self, p: Pass) -> Work | Observe:
        try:
            spec = SchemaSpec.model_validate(p.spec)
        except ValidationError as exc:
            return invalid_spec(exc)
        status = SchemaStatus.model_validate(p.obj.get("status") or {})
        if plan_is_stale(p, status, self.source_fingerprint(p)):
            return self.reading_work(p, None)
        plan = status.current_plan
        assert plan is not None
        if not plan.changes:
            interval = spec.drift_check_interval_seconds
            since = p.seconds_since(status.last_reading_at)
            if interval and since is not None and since >= interval:
                return self.reading_work(p, None)
            remaining = None if not interval or since is None else interval - since
            return Observe(
                "Ready", ready=True, requeue_after=remaining, applied_source=plan.source or None
            )
        stall = replay_stall(status, plan)
        if stall is not None:
            return stall
        if plan.destructive and not spec.policy.allow_destructive:
            return Observe(
                "Blocked",
                stalled_reason="DestructiveChangesNotAllowed",
                message=f"plan {plan.name} drops data; "
                "set spec.policy.allowDestructive to apply it",
                waiting_for="a spec change",
            )
        required = spec.policy.approval == "Always" or (
            spec.policy.approval == "Destructive" and plan.destructive
        )
        gate = approval_gate(p, plan, required)
        if isinstance(gate, Observe):
            return gate
        obj = p.cluster.get(PLAN, p.namespace, plan.name)
        if obj is None:
            return self.reading_work(p, None)
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
        return Work(
            type="Apply",
            mutating=True,
            input_fingerprint=plan.digest,
            args=args,
            inputs={"plan.json": json.dumps(body, sort_keys=True)},
            plan_name=plan.name,
            plan_digest=plan.digest,
            approval_name=gate,
            expected_database=plan.database,
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

    def proves_complete(self, record: UncertainRecord, frame: ResultFrame) -> bool:
        return bool(record.expected_after) and (
            frame.data.get("fingerprintBefore") == record.expected_after
        )

    def unsettled(self, p: Pass) -> str:
        plan = p.status.current_plan
        if plan is None:
            return "no reading yet"
        return f"the target still differs from the desired schema ({plan.statements} statements)"
