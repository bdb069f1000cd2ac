"""Every durable write of the mutation lifecycle, one function each, through one choke point.

The order of these writes is the contract (docs/mutation-lifecycle.md, "Every
durable write, and what follows it"). Each function passes through
:func:`_commit`, which calls the environment's hook before and after the write:
the simulation and the crash tests raise there to stop the controller exactly
between two writes and start a fresh one on what was left.

Status writes carry the resourceVersion the pass last saw, so two controllers
(or a stale pass) can never both believe they wrote.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ptah.api.common import (
    ActiveOperation,
    AdmissionSnapshot,
    ExecutionBinding,
    LastMutation,
    LeaseClaim,
    LockRelease,
    UncertainRecord,
)
from ptah.kube import errors
from ptah.kube.kinds import APPROVAL, CONFIGMAP, JOB, PLAN, Kind
from ptah.lifecycle import hold, takeover
from ptah.lifecycle.conditions import in_flight, observation
from ptah.lifecycle.context import FINALIZER, Pass
from ptah.lifecycle.report import Ended, JobCreation, OperationRef
from ptah.targetlock import Outcome, acquire, release, renew
from ptah.workload.job import LABEL_OPERATION, LABEL_OPERATION_TYPE

T = TypeVar("T")

# The durable writes, in lifecycle order. The simulation reports coverage against this.
DURABLE_WRITES = (
    "add_finalizer",
    "write_claim",
    "write_lease_expectation",
    "acquire_lease",
    "write_lease_epoch",
    "renew_lease",
    "create_inputs",
    "write_admission_snapshot",
    "consume_approval",
    "write_dispatch_started",
    "create_job",
    "write_job_uid",
    "write_job_ttl",
    "create_plan",
    "write_outcome",
    "release_lease",
    "clear_lock_release",
    "remove_finalizer",
    "write_execution_binding",
    "write_observation",
    "abandon_proof",
    "write_release_evidence",
)


def _commit(p: Pass, name: str, write: Callable[[], T]) -> T:
    return p.commit(name, write)


def _commit_obj(p: Pass, name: str, write: Callable[[], dict[str, Any]]) -> None:
    """A write of the resource itself: the pass's copy (and its report) follow the write
    before the hook after it runs."""
    _commit(p, name, lambda: p.saw(write()))


def _status(p: Pass, name: str, fields: dict[str, Any]) -> None:
    """A status patch with the resourceVersion precondition; updates the pass's copy."""
    patch = {
        "metadata": {"resourceVersion": p.obj["metadata"]["resourceVersion"]},
        "status": fields,
    }
    _commit_obj(
        p, name, lambda: p.cluster.patch(p.family.kind, p.namespace, p.name, patch, "status")
    )


def _claim_fields(op: ActiveOperation) -> dict[str, Any]:
    # A merge patch replaces nothing it does not name; the whole claim is sent each time
    # so a field the claim no longer carries cannot survive from an earlier write.
    return {"activeOperation": op.replacing()}


def add_finalizer(p: Pass) -> None:
    if FINALIZER in p.finalizers:
        return
    patch = {
        "metadata": {
            "resourceVersion": p.obj["metadata"]["resourceVersion"],
            "finalizers": [*p.finalizers, FINALIZER],
        }
    }
    _commit_obj(
        p, "add_finalizer", lambda: p.cluster.patch(p.family.kind, p.namespace, p.name, patch)
    )


def remove_finalizer(p: Pass) -> None:
    if FINALIZER not in p.finalizers:
        return
    patch = {
        "metadata": {
            "resourceVersion": p.obj["metadata"]["resourceVersion"],
            "finalizers": [f for f in p.finalizers if f != FINALIZER] or None,
        }
    }
    _commit_obj(
        p, "remove_finalizer", lambda: p.cluster.patch(p.family.kind, p.namespace, p.name, patch)
    )


def write_claim(p: Pass, op: ActiveOperation) -> None:
    """The claim, and the phase of the operation it claims (conditions.in_flight)."""
    _status(p, "write_claim", {**_claim_fields(op), **observation(p, in_flight(op))})


def write_lease_expectation(p: Pass, op: ActiveOperation, lease: LeaseClaim) -> None:
    _status(p, "write_lease_expectation", _claim_fields(op.model_copy(update={"lease": lease})))


def acquire_lease(p: Pass, lease: LeaseClaim, job_name: str) -> Outcome:
    """Take the realm's Lease for the claim whose Job is ``job_name``; an expired foreign
    Lease only when its holder's executor is known stopped (ptah.lifecycle.takeover)."""
    return _commit(
        p,
        "acquire_lease",
        lambda: acquire(
            p.cluster,
            p.env.observer,
            namespace=p.env.lock_namespace,
            name=lease.lease_name,
            holder=lease.holder,
            expected=lease.expected_epoch,
            duration=p.env.lease_duration,
            describe=takeover.describe(p, job_name),
            holder_stopped=takeover.holder_check(p),
        ),
    )


def renew_lease(p: Pass, lease_name: str, holder: str, epoch: int) -> bool:
    """Keep our tenure; False when the Lease is no longer ours at ``epoch``."""
    return _commit(
        p,
        "renew_lease",
        lambda: renew(
            p.cluster, namespace=p.env.lock_namespace, name=lease_name, holder=holder, epoch=epoch
        ),
    )


def write_lease_epoch(p: Pass, op: ActiveOperation, epoch: int) -> None:
    assert op.lease is not None
    lease = op.lease.model_copy(update={"epoch": epoch})
    _status(p, "write_lease_epoch", _claim_fields(op.model_copy(update={"lease": lease})))


def create_inputs(p: Pass, name: str, data: dict[str, str]) -> None:
    """The runner's inputs, immutable, owned by the resource and named by it and the content
    (ptah.workload.names.input_configmap_name). An existing ConfigMap of that name is this
    resource's earlier create; any other content there is an error, never overwritten."""
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": p.namespace,
            "labels": {"app.kubernetes.io/managed-by": "ptah"},
            "ownerReferences": [_owner_ref(p)],
        },
        "immutable": True,
        "data": data,
    }

    def create() -> None:
        try:
            p.cluster.create(CONFIGMAP, body)
        except errors.AlreadyExists:
            existing = p.cluster.get(CONFIGMAP, p.namespace, name)
            if existing is None or existing.get("data") != data:
                raise

    _commit(p, "create_inputs", create)


def write_admission_snapshot(p: Pass, op: ActiveOperation, snap: AdmissionSnapshot) -> None:
    _status(
        p,
        "write_admission_snapshot",
        _claim_fields(op.model_copy(update={"admission_snapshot": snap})),
    )


def consume_approval(p: Pass, approval: dict[str, Any], operation_id: str) -> None:
    """Spend the approval. Consumption is evidence that a decision was spent, not
    permission: a consumed approval is skipped by every later search."""
    conditions = [
        c
        for c in (approval.get("status") or {}).get("conditions", [])
        if c.get("type") != "Consumed"
    ]
    conditions.append(
        {
            "type": "Consumed",
            "status": "True",
            "reason": "Dispatched",
            "message": f"spent by operation {operation_id}",
            "lastTransitionTime": p.now_iso(),
        }
    )
    patch = {
        "metadata": {"resourceVersion": approval["metadata"]["resourceVersion"]},
        "status": {"conditions": conditions, "consumedByOperation": operation_id},
    }
    name = approval["metadata"]["name"]
    _commit(
        p, "consume_approval", lambda: p.cluster.patch(APPROVAL, p.namespace, name, patch, "status")
    )


def write_dispatch_started(p: Pass, op: ActiveOperation) -> ActiveOperation:
    op = op.model_copy(update={"dispatch_started": p.now_iso()})
    _status(p, "write_dispatch_started", _claim_fields(op))
    if op.lease is not None and op.dispatch_started:
        # The run's hold counts from this stamp on this process's clock
        # (ptah.lifecycle.hold); only once it is written, since only then can it dispatch.
        hold.saw_dispatch(p, op.operation_id, op.dispatch_started)
    return op


def create_job(p: Pass, job: dict[str, Any]) -> dict[str, Any]:
    """The one create a claim is allowed. Its caller treats any error as uncertain. The
    pass's report notes the create (the operator logs each one before the hook after it
    runs, so an audit of the log shows one create per claim across restarts)."""
    meta = job["metadata"]
    labels = meta.get("labels") or {}

    def noted(uid: str | None = None, error: str | None = None) -> JobCreation:
        return JobCreation(
            name=str(meta["name"]),
            namespace=str(meta["namespace"]),
            operation_id=str(labels.get(LABEL_OPERATION)),
            type=str(labels.get(LABEL_OPERATION_TYPE)),
            uid=uid,
            error=error,
        )

    def create() -> dict[str, Any]:
        try:
            created = p.cluster.create(JOB, job)
        except errors.ApiError as exc:
            p.report.jobs.append(noted(error=exc.reason))
            raise
        p.report.jobs.append(noted(uid=str(created["metadata"]["uid"])))
        return created

    return _commit(p, "create_job", create)


def write_job_uid(p: Pass, op: ActiveOperation, uid: str) -> ActiveOperation:
    op = op.model_copy(update={"job_uid": uid})
    _status(p, "write_job_uid", _claim_fields(op))
    return op


def write_job_ttl(p: Pass, job: dict[str, Any], ttl: int) -> None:
    if job.get("spec", {}).get("ttlSecondsAfterFinished") is not None:
        return
    patch = {
        "metadata": {"uid": job["metadata"]["uid"]},
        "spec": {"ttlSecondsAfterFinished": ttl},
    }
    name = job["metadata"]["name"]
    _commit(p, "write_job_ttl", lambda: p.cluster.patch(JOB, p.namespace, name, patch))


def create_plan(p: Pass, plan: dict[str, Any]) -> None:
    """A PtahPlan is immutable and named by digest: finding it already there is success.
    An object under that name with another content (deleted and recreated by someone) is
    not this plan: it is replaced, so the name keeps meaning its digest (a claim re-reads
    the plan and recomputes the digest before it runs anything)."""
    name = plan["metadata"]["name"]

    def create() -> None:
        try:
            p.cluster.create(PLAN, plan)
        except errors.AlreadyExists:
            existing = p.cluster.get(PLAN, p.namespace, name)
            if existing is not None and existing.get("spec") == plan["spec"]:
                return
            if existing is not None:
                uid = existing["metadata"]["uid"]
                p.cluster.delete(PLAN, p.namespace, name, uid=uid, propagation="Background")
            p.cluster.create(PLAN, plan)

    _commit(p, "create_plan", create)


@dataclass(frozen=True)
class OutcomePatch:
    """What the outcome patch says, typed: how the operation ended (``ended``, for the
    pass's report), the uncertainty record written (``record``) or cleared
    (``clears_record``, a settling reading), the Lease release staged, the last
    mutation, and the status fields the ending publishes besides (the observation, the
    plan, the reading's bookkeeping). Only :func:`write_outcome` turns it into a patch."""

    ended: str
    record: UncertainRecord | None = None
    clears_record: bool = False
    release: LockRelease | None = None
    last_mutation: LastMutation | None = None
    fields: dict[str, Any] = field(default_factory=dict)


def write_outcome(p: Pass, op: ActiveOperation, outcome: OutcomePatch) -> None:
    """The claim cleared, the uncertainty record written (or, for a settling
    reading, cleared) and the Lease release staged: one status patch, so a crash
    on either side leaves a live claim or a retained record, never both or neither."""
    fields: dict[str, Any] = {"activeOperation": None, **outcome.fields}
    if outcome.last_mutation is not None:
        fields["lastMutation"] = outcome.last_mutation.replacing()
    if outcome.record is not None:
        fields.update(p.status.record_patch(outcome.record))
    elif outcome.clears_record:
        fields.update(p.status.record_patch(None))
    if outcome.release is not None:
        fields["pendingLockRelease"] = outcome.release.replacing()
    p.report.ended = Ended(OperationRef(op.operation_id, op.type), outcome.ended)
    _status(p, "write_outcome", fields)


def write_release_evidence(p: Pass, staged: LockRelease) -> None:
    """What a pass saw of a withheld release's executor (its Pods, whether each was seen
    to stop, the Job's count, why it is withheld): kept, because a Pod seen to stop and
    then collected must still count, and the record must name why."""
    _status(p, "write_release_evidence", {"pendingLockRelease": staged.replacing()})


def release_lease(p: Pass, staged: LockRelease) -> None:
    _commit(
        p,
        "release_lease",
        lambda: release(
            p.cluster, namespace=p.env.lock_namespace, name=staged.lease_name, holder=staged.holder
        ),
    )


def clear_lock_release(p: Pass) -> None:
    _status(p, "clear_lock_release", {"pendingLockRelease": None})


def write_execution_binding(p: Pass, binding: ExecutionBinding) -> None:
    _status(p, "write_execution_binding", {"executionBinding": binding.replacing()})


def write_observation(p: Pass, fields: dict[str, Any]) -> None:
    """Phase, conditions and what the resource waits for: never safety state."""
    _status(p, "write_observation", fields)


def abandon_proof(p: Pass, record: UncertainRecord) -> None:
    """The audited escape hatch: a person chose to stop proving ``record``. The plan of
    the last (unsettling) reading goes with it, so a fresh reading follows at once."""
    abandoned = [*p.status.abandoned_proofs, record.operation_id][-20:]
    _status(
        p,
        "abandon_proof",
        {
            **p.status.record_patch(None),
            "abandonedProofs": abandoned,
            "currentPlan": None,
            "nextReadingAfter": None,
            "readingFailures": None,
        },
    )


def emit_event(p: Pass, reason: str, message: str, warning: bool = False) -> None:
    """Best effort: an Event is telemetry, not a durable record. Every caller records it
    after the write it reports; the environment's sink may create it later, in the
    background (``ptah.kube.events.EventEmitter``), never before that write."""
    p.env.events(p.cluster, p.obj, reason, message, warning=warning, component=p.env.controller)


def _owner_ref(p: Pass) -> dict[str, Any]:
    return {
        "apiVersion": p.obj.get("apiVersion", p.family.kind.api_version),
        "kind": p.family.kind.kind,
        "name": p.name,
        "uid": p.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def owner_ref(p: Pass) -> dict[str, Any]:
    return _owner_ref(p)


def kind_of(p: Pass) -> Kind:
    return p.family.kind
