"""Authorize the exact work and target.

A claim is permitted only when every binding its plan was computed under still
holds. Everything here re-reads uncached: the plan object, the verification
policy ConfigMap, the Secret's metadata and the approval. Any one having moved
discards the plan rather than narrowing the claim. Nothing here writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ptah.api.common import ExecutionBinding
from ptah.api.digest import digest
from ptah.api.resources import PlanSpec, PtahApproval, approval_consumed
from ptah.kube.kinds import APPROVAL, CONFIGMAP, PLAN
from ptah.lifecycle.context import Pass


@dataclass(frozen=True)
class Refusal:
    """Why the plan does not authorize. ``standing`` is a refusal by the policy in force
    (nothing moved): the same plan would be refused again until something changes."""

    reason: str
    message: str
    standing: bool = False


@dataclass(frozen=True)
class VerificationPolicy:
    """The verification policy ConfigMap, as read now."""

    fingerprint: str
    require_pinned_source: bool
    allow_destructive: bool
    allowed_engines: frozenset[str]


DEFAULT_POLICY = "ptah-verification-policy"


def policy_name(spec: dict[str, Any]) -> str:
    """The verification-policy ConfigMap a spec names (spec.policy.verificationPolicy)."""
    return str((spec.get("policy") or {}).get("verificationPolicy") or DEFAULT_POLICY)


def _truthy(value: str | None, default: bool) -> bool:
    return default if value is None else value.strip().lower() in {"1", "true", "yes"}


def verification_policy(p: Pass, name: str) -> VerificationPolicy:
    cm = p.cluster.get(CONFIGMAP, p.namespace, name)
    if cm is None:
        return VerificationPolicy("absent", False, True, frozenset({"postgres", "mysql", "sqlite"}))
    data: dict[str, str] = cm.get("data") or {}
    engines = data.get("allowedEngines", "postgres,mysql,sqlite")
    return VerificationPolicy(
        fingerprint=digest([cm["metadata"]["uid"], cm["metadata"]["resourceVersion"]], 24),
        require_pinned_source=_truthy(data.get("requirePinnedSource"), False),
        allow_destructive=_truthy(data.get("allowDestructive"), True),
        allowed_engines=frozenset(e.strip() for e in engines.split(",") if e.strip()),
    )


def current_binding(p: Pass) -> ExecutionBinding | Refusal:
    """The execution binding as the Secret's metadata says now. Only the metadata is
    fetched: the credentials never reach the operator."""
    ref = p.spec["target"]["secretRef"]
    secret = p.secret_metadata(ref["name"])
    if secret is None:
        return Refusal("SecretMissing", f"Secret {ref['name']!r} does not exist")
    meta = secret["metadata"]
    known = p.status.execution_binding
    if (
        known
        and known.secret_uid == meta["uid"]
        and (known.secret_resource_version == meta["resourceVersion"])
    ):
        return known
    return ExecutionBinding(
        epoch=(known.epoch + 1) if known else 1,
        secret_uid=meta["uid"],
        secret_resource_version=meta["resourceVersion"],
    )


def plan_digest(spec: PlanSpec) -> str:
    return digest(spec.wire(), 40)


def read_plan(p: Pass, name: str, expected_digest: str) -> PlanSpec | Refusal:
    obj = p.cluster.get(PLAN, p.namespace, name)
    if obj is None:
        return Refusal("PlanGone", f"PtahPlan {name} no longer exists")
    spec = PlanSpec.model_validate(obj.get("spec") or {})
    if spec.owner_uid != p.uid:
        return Refusal("PlanForeign", f"PtahPlan {name} belongs to another resource")
    if plan_digest(spec) != expected_digest:
        return Refusal("PlanAltered", f"PtahPlan {name} does not match digest {expected_digest}")
    return spec


def find_approval(p: Pass, plan_digest_: str) -> dict[str, Any] | None:
    """An unconsumed approval of exactly this plan digest for exactly this resource.
    A consumed approval is skipped: it cannot authorize a second dispatch."""
    for obj in sorted(p.cluster.list(APPROVAL, p.namespace), key=lambda o: o["metadata"]["name"]):
        try:
            approval = PtahApproval.model_validate(obj)
        except ValueError:
            continue
        ref = approval.spec.resource_ref
        if ref.kind != p.family.kind.kind or ref.name != p.name:
            continue
        if approval.spec.plan_digest != plan_digest_ or approval_consumed(approval):
            continue
        return obj
    return None


def authorize(
    p: Pass,
    *,
    plan_name: str,
    expected_digest: str,
    approval_name: str | None,
    policy_name: str,
) -> tuple[PlanSpec, dict[str, Any] | None] | Refusal:
    """Re-read everything the plan was computed under. Returns the plan and the
    approval object to consume (when one is required), or why the plan is discarded."""
    plan = read_plan(p, plan_name, expected_digest)
    if isinstance(plan, Refusal):
        return plan
    under = plan.computed_under
    policy = verification_policy(p, policy_name)
    if under.policy != policy.fingerprint:
        return Refusal("PolicyChanged", "the verification policy changed since the plan")
    binding = current_binding(p)
    if isinstance(binding, Refusal):
        return binding
    if binding.epoch != under.binding_epoch or p.status.execution_binding != binding:
        return Refusal("BindingChanged", "the connection Secret changed since the plan")
    if under.generation != p.generation:
        return Refusal("SpecChanged", "the spec changed since the plan")
    source = p.family.source_fingerprint(p)
    if source is None or source != under.source:
        return Refusal("SourceChanged", "the desired source changed since the plan")
    if plan.engine not in policy.allowed_engines:
        return Refusal(
            "EngineNotAllowed", f"the verification policy does not allow {plan.engine}", True
        )
    if plan.destructive and not policy.allow_destructive:
        return Refusal(
            "DestructiveNotAllowed", "the verification policy forbids destructive plans", True
        )
    if approval_name is None:
        return plan, None
    approval = p.cluster.get(APPROVAL, p.namespace, approval_name)
    if approval is None:
        return Refusal("ApprovalGone", f"PtahApproval {approval_name} no longer exists")
    parsed = PtahApproval.model_validate(approval)
    if (
        approval_consumed(parsed)
        or parsed.spec.plan_digest != expected_digest
        or parsed.spec.resource_ref.kind != p.family.kind.kind
        or parsed.spec.resource_ref.name != p.name
    ):
        return Refusal("ApprovalNotValid", f"PtahApproval {approval_name} no longer authorizes")
    return plan, approval
