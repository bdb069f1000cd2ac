"""Plan publishing: a successful reading becomes an immutable PtahPlan named by its
digest, and the summary the resource acts on."""

from __future__ import annotations

from ptah.api.common import ActiveOperation, PlanSummary
from ptah.api.resources import PlanFingerprints, PlanSpec, PtahPlan, plan_warnings
from ptah.lifecycle import writes
from ptah.lifecycle.authorize import plan_digest, policy_name, verification_policy
from ptah.lifecycle.context import Pass
from ptah.lifecycle.family import PlanDraft
from ptah.runner.frame import ResultFrame
from ptah.workload import names
from ptah.workload.job import LABEL_MANAGED_BY, LABEL_OWNER_UID

PLAN_DIGEST_ANNOTATION = "ptah.io/plan-digest"
COMPUTED_BY_ANNOTATION = "ptah.io/computed-by"


def publish_plan(p: Pass, op: ActiveOperation, frame: ResultFrame, draft: PlanDraft) -> PlanSummary:
    """Create the PtahPlan of ``draft`` under everything the reading ``op`` was computed
    under (an abandoned proof it follows included, so its digest is its own), and return
    the summary the resource's status carries."""
    assert frame.database is not None
    policy = verification_policy(p, policy_name(p.spec))
    spec = PlanSpec(
        owner_kind=p.family.kind.kind,
        owner_name=p.name,
        owner_uid=p.uid,
        engine=frame.database.engine,
        statements=draft.statements,
        destructive=draft.destructive,
        changes=draft.changes,
        computed_under=PlanFingerprints(
            source=op.source or "",
            target_schema=draft.target_schema,
            expected_after=draft.expected_after,
            policy=policy.fingerprint,
            binding_epoch=op.binding_epoch,
            database=frame.database.digest,
            generation=op.generation,
            after_abandoned=p.status.abandoned_proofs[-1] if p.status.abandoned_proofs else None,
        ),
        warnings=plan_warnings(list(draft.warnings)),
    )
    digest_ = plan_digest(spec)
    plan_name = names.plan_name(p.name, digest_)
    metadata = {
        "name": plan_name,
        "namespace": p.namespace,
        "labels": {LABEL_OWNER_UID: p.uid, LABEL_MANAGED_BY: "ptah"},
        "annotations": {PLAN_DIGEST_ANNOTATION: digest_, COMPUTED_BY_ANNOTATION: op.operation_id},
        "ownerReferences": [writes.owner_ref(p)],
    }
    writes.create_plan(p, PtahPlan(metadata=metadata, spec=spec).wire())
    return PlanSummary(
        name=plan_name,
        digest=digest_,
        changes=draft.changes,
        destructive=draft.destructive,
        statements=len(draft.statements),
        generation=op.generation,
        binding_epoch=spec.computed_under.binding_epoch,
        database=frame.database.digest,
        expected_after=draft.expected_after,
        source=op.source or "",
        warnings=len(spec.warnings) if spec.warnings else None,
    )
