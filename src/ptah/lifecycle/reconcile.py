"""The reconcile pass: read fresh state, take one step, write it, return.

The steps run in a fixed priority, and the order is itself part of the contract:

1. a staged Lease release is retried before anything else (withheld while the
   executor may still write);
2. a finalizer with nothing owed is removed;
3. a live claim is supervised (suspension never discards a dispatched claim);
4. an uncertainty record is proved by a fresh read-only reading, before
   suspension, deletion, generation gates and anything else;
5. deletion, the execution binding, suspension, and finally the family's own
   decision, which may lead to a new claim.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ptah.kube.port import Obj
from ptah.lifecycle import writes
from ptah.lifecycle.authorize import Refusal, current_binding
from ptah.lifecycle.claim import claim_step
from ptah.lifecycle.context import ABANDON_ANNOTATION, FINALIZER, Env, Pass
from ptah.lifecycle.decide import decide, reading_work
from ptah.lifecycle.family import AnyFamily, Observe
from ptah.lifecycle.release import release_step, uncertain_run_may_write
from ptah.lifecycle.report import PassReport
from ptah.lifecycle.step import AGAIN, Result, observe, seconds_since
from ptah.lifecycle.supervise import supervise_step


def reconcile(
    env: Env,
    family: AnyFamily,
    namespace: str,
    name: str,
    report: PassReport | None = None,
    known: Obj | None = None,
) -> Result:
    """One pass over the resource; ``report`` (filled as the pass goes, so a caller
    still has it when the pass raises) comes back with the result.

    ``known``: the resource as the apiserver returned it to the write this process made
    to it last, handed on by a caller running the next pass at once (a chained pass).
    That response is the state a read would have returned the instant after the write,
    so the pass starts from it instead of reading again; a change made by anyone since
    then cannot be lost: every write of the resource carries the resourceVersion the
    pass started from, so the first one fails with a conflict, and the watch event
    queues another pass, which reads."""
    report = PassReport() if report is None else report
    obj = known if known is not None else env.cluster.get(family.kind, namespace, name)
    if obj is None:
        return Result(report=report)
    p = Pass(env, family, obj, report)
    steps: tuple[Callable[[Pass], Result | None], ...] = (
        release_step,
        _orphan_finalizer_step,
        supervise_step,
        _prove_step,
        _deletion_step,
        _binding_step,
        _suspend_step,
        _decide_step,
    )
    for step in steps:
        result = step(p)
        if result is not None:
            return replace(result, report=report)
    return Result(report=report)


# ---------------------------------------------------------------- finalizer


def _owes_nothing(p: Pass) -> bool:
    s = p.status
    record = s.record
    return s.active_operation is None and record is None and s.pending_lock_release is None


def _orphan_finalizer_step(p: Pass) -> Result | None:
    if FINALIZER in p.finalizers and _owes_nothing(p):
        writes.remove_finalizer(p)
        return Result() if p.deleting else AGAIN
    return None


# ------------------------------------------------------------------- proof


def _prove_step(p: Pass) -> Result | None:
    record = p.status.record
    if record is None:
        return None
    if p.annotations.get(ABANDON_ANNOTATION) == record.operation_id:
        # The plan read while proving is discarded with the record: the next step is a
        # fresh reading (at once, not on some unrelated event), and the plan it computes
        # folds in this abandonment, so it has its own digest and needs its own
        # authorization; the abandoned plan's digest is never dispatched again.
        writes.abandon_proof(p, record)
        writes.emit_event(
            p,
            "ProofAbandoned",
            f"proof of {record.operation_id} abandoned by annotation; what it did is unknown; "
            "reading the database afresh",
            warning=True,
        )
        return AGAIN
    writing = uncertain_run_may_write(p, record.operation_id)
    if writing is not None:
        # The run may still be writing: a reading now could catch it half way, and no
        # reading proves anything until nothing of it can write.
        return observe(
            p,
            Observe(
                "ProofOwed",
                message=f"{record.operation_id} ({record.reason}) may still be writing: "
                f"{writing}; the proof reads once it has stopped",
                waiting_for="the uncertain run to stop",
                requeue_after=p.env.poll_seconds,
            ),
        )
    waited = seconds_since(p, record.proof_read_at, "")
    if waited is not None and waited < p.env.proof_retry_seconds:
        # A reading already ran after the record and did not settle it (the record says
        # so itself: stamps of two controllers' clocks cannot order a reading and a
        # record). Another one runs after a pause; meanwhile the resource says exactly
        # what it waits for.
        return observe(
            p,
            Observe(
                "ProofNotSettled",
                stalled_reason="ProofNotSettled",
                message=(
                    f"the last reading did not settle {record.operation_id} ({record.reason}): "
                    f"{p.family.unsettled(p)}; inspect the database, or annotate "
                    f"{ABANDON_ANNOTATION}={record.operation_id} to abandon the proof"
                ),
                waiting_for="a reading that settles the uncertain run",
                requeue_after=p.env.proof_retry_seconds - waited,
            ),
        )
    work = reading_work(p, record.database)
    if isinstance(work, Observe):
        return observe(p, work)
    return claim_step(p, work)


# --------------------------------------------------------------- the rest


def _deletion_step(p: Pass) -> Result | None:
    return Result() if p.deleting else None


def _binding_step(p: Pass) -> Result | None:
    binding = current_binding(p)
    if isinstance(binding, Refusal):
        return observe(
            p,
            Observe(
                "Blocked",
                stalled_reason=binding.reason,
                message=binding.message,
                waiting_for="the connection Secret",
            ),
        )
    if binding != p.status.execution_binding:
        writes.write_execution_binding(p, binding)
        return AGAIN
    return None


def _suspend_step(p: Pass) -> Result | None:
    if p.spec.get("suspend"):
        return observe(p, Observe("Suspended", message="spec.suspend is true"))
    return None


def _decide_step(p: Pass) -> Result | None:
    decision = decide(p)
    if isinstance(decision, Observe):
        return observe(p, decision)
    return claim_step(p, decision)
