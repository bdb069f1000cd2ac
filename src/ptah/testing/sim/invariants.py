"""The invariants the simulation checks, on every write and after every step.

Each invariant is stated against the world itself (the simulated databases' own
writer counts, the kubelet's truth about each Pod, the API's write stream), not
against what the controller says about itself, and each names the rule of
docs/mutation-lifecycle.md it enforces (:data:`RULES`). A violation message
starts with the invariant's name.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ptah.api.digest import digest
from ptah.kube.kinds import APPROVAL, CONFIGMAP, JOB, LEASE, PLAN, POD, SECRET, Kind
from ptah.lifecycle.context import ABANDON_ANNOTATION, FINALIZER
from ptah.lifecycle.sighting import run_key
from ptah.testing.memory import PROCEED, FaultDecision, WriteRequest
from ptah.testing.sim.database import SimDatabase
from ptah.testing.sim.kubelet import PodTruth, never_bound_and_deleting
from ptah.testing.sim.world import LOCK_NS, SCHEMA_FAMILY, SimResource, Watcher, World
from ptah.workload.job import (
    ANNOTATION_ADMISSION,
    LABEL_OPERATION,
    LABEL_OPERATION_TYPE,
    LABEL_OWNER_UID,
)
from ptah.workload.names import input_configmap_name, lease_name

MUTATING = {"Apply", "Migrate"}
ACCOUNTED = {"Succeeded", "Failed", "Refused", "Fenced"}
# What a frame's outcome is accounted as (the contract's, not the controller's mapping).
FRAME_ACCOUNTS = {
    "succeeded": "Succeeded",
    "failed": "Failed",
    "refused": "Refused",
    "fenced": "Fenced",
}
READINGS = {"Plan", "History"}
POLICY = "ptah-verification-policy"

# invariant name -> the contract rule it enforces (docs/mutation-lifecycle.md)
RULES: dict[str, str] = {
    "one-writer": "Bind the realm: at most one mutating executor writes a database at any "
    "instant (the database's own count)",
    "lease-while-executor": "Release coordination only when owed: a Lease is never free, or "
    "held by another, while a mutating executor that may still write exists",
    "release-under-writer": "Release coordination on evidence: a Lease is never released, "
    "nor taken by another, while the database itself still counts its holder's executor as "
    "a writer (a force-deleted Pod on a node cut off from the API still writes)",
    "release-on-evidence": "Release coordination on evidence: a Lease is released only once "
    "every Pod its operation ran reported its container terminated; without that evidence "
    "(a Pod deleted unseen, a Job never seen), past the hold, it is left to expire, never "
    "released",
    "release-after-outcome": "Release coordination: release follows the durable outcome "
    "patch, never leads it (no release while the claim is live)",
    "hold-outlives-run": "Release coordination: the hold (the Job's deadline + the Pod's "
    "deadline + the margin for the Job controller's lag and the kill's grace) is a bound: a "
    "withheld release is given up to expiry only once no process of its run is still alive "
    "that the API no longer shows, nor was one alive after the hold it measured ended",
    "release-first": "pendingLockRelease: the next pass releases it before anything else "
    "(no new mutating claim while a release is staged, and no new claim at all but the "
    "reading that proves an owed record)",
    "finalizer-with-claim": "The finalizer, through a metadata patch: a finalizer exists "
    "whenever a claim does",
    "deleted-while-owed": "Deletion: the finalizer stays while a claim, a record or a staged "
    "release is owed",
    "claim-names-job": "Persist the claim / dispatchStarted: every Job created is named by a "
    "durable claim that already carries its dispatch marker (and Lease epoch)",
    "one-create": "Create, confirm, record: one create per claim and per Job name, in the "
    "pass that wrote the dispatch marker; an operation is dispatched at most once",
    "lease-live-holder": "Bind the realm: a Lease its holder renewed within the Lease "
    "duration (by the world's clock) is never taken by another, whatever the clocks say",
    "own-inputs": "Persist the claim: the runner-input ConfigMap a Job mounts is owned by "
    "that Job's resource, so deleting another resource (whose garbage collection takes what "
    "it owns) never removes a dispatched Job's inputs, and holds the content its name was "
    "made from (another content found under the name is never mounted)",
    "snapshot-pass-returns": "admissionSnapshot: the pass that writes the snapshot returns "
    "without creating anything",
    "job-carries-snapshot": "Resolve the admission envelope: a Job carries the admission "
    "digest its claim persisted, and its Pod template is the one that digest is of",
    "epoch-one-tenure": "Bind the realm: each acquisition raises the Lease's epoch by one, so "
    "an epoch names one tenure: no two holders ever record the same epoch of one Lease",
    "dispatch-under-lease": "Bind the realm: a mutation is dispatched only while its claim "
    "holds the realm's Lease at its epoch",
    "bindings-hold": "Authorize: a policy, plan, Secret, spec or source that moved between "
    "plan and dispatch never authorizes",
    "policy-permits": "Authorize: the verification policy in force permits the dispatched "
    "plan (destructive statements, engine)",
    "approval-once": "The approval's Consumed condition / consume_approval: an approval is "
    "spent at most once across all operations (a stop after spending it authorizes no second "
    "attempt, not even of the same operation)",
    "approval-before-marker": "The approval's Consumed condition, then dispatchStarted: a "
    "mutation's dispatch marker is written only once the approval it names was spent by it "
    "(a stop between the two leaves an approval spent with nothing dispatched, never a "
    "dispatch no spent approval accounts for)",
    "approval-authorizes": "Authorize: a required approval names this resource and plan and "
    "was spent by this operation before its create",
    "no-replay-while-owed": "Prove or refuse: no mutation is dispatched while its resource "
    "owes proof of an earlier one",
    "failed-not-replayed": "Claim: a plan whose run failed is not dispatched again",
    "abandoned-not-replayed": "Abandon never replays: a plan whose uncertain run's proof was "
    "abandoned is never dispatched again; a new plan comes from a fresh reading (no plan "
    "computed before the abandon is dispatched after it)",
    "adopt-own-job": "Create, confirm, record / Supervise: a claim adopts and accounts only a "
    "Job owned by exactly its resource, carrying its operation, whose spec is the intent its "
    "claim created (a Job recreated under the reserved name with another spec is not it), and "
    "accounts only the Job whose UID it adopted: every pass rebinds by UID, so a pass never "
    "goes on supervising a claim whose adopted Job no longer stands under its name",
    "renew-every-pass": "Supervise: every pass over a dispatched mutating claim renews its "
    "Lease (or ends the claim)",
    "renew-withheld": "Release coordination: while withheld, the Lease is renewed until the "
    "hold has passed: a pass that leaves a withheld release staged, its Lease still held by "
    "the release's holder, renewed that Lease",
    "account-evidence": "Account for the outcome: an account comes only from the frame of "
    "exactly one admitted Pod, from a terminated container, naming the claim's operation "
    "and the claim's database",
    "account-says-frame": "Account for the outcome: the account is what the run's one frame "
    "says (a failed run is accounted Failed, a reading whose frame did not succeed publishes "
    "no plan), as the world's log holds it",
    "account-under-lease": "Supervise: an account is accepted only while the claim still "
    "holds its Lease at its epoch (otherwise continuity is lost)",
    "account-or-record": "The outcome patch: a dispatched claim leaves exactly one of an "
    "account and an uncertainty record, never both and never neither",
    "claim-beside-record": "Retain uncertainty: never a mutating claim beside an uncertainty "
    "record",
    "record-cleared-by-reading": "Prove or refuse: a record is cleared only by a settling "
    "reading, or by an abandon annotation naming it",
    "executed-once": "Record the dispatch boundary: an operation's work is done at most once",
    "proof-settles": "Retain uncertainty: the record is cleared at exactly one place, by the "
    "reading that settles it (a reading that saw the run settled clears the record)",
    "converged-not-attributed": "Prove or refuse: convergence is not attribution; an outcome "
    "is credited to a run (lastMutation, appliedPlanDigest) only by the account of its own "
    "claim, and a settling reading credits none",
    "proof-prioritised": "Prove or refuse: the proof runs before suspension, deletion, the "
    "execution binding and generation gates (a resource owing proof never rests at one of "
    "them, and a record owed at rest, or said not settled, has been read since it was "
    "written)",
    "proof-evidence": "Prove an uncertain run (the evidence rule of Release coordination): "
    "the proof waits only while the run may still write; a Pod never bound to a node and "
    "being deleted provably never ran, and holds no proof back",
    "finalizer-removed": "The finalizer, through a metadata patch: a finalizer with no claim "
    "is removed by the next pass (at rest, a finalizer stays only while something is owed, "
    "so a deleted resource that owes nothing is gone)",
    "lease-accounted": "pendingLockRelease / release_lease, then clear_lock_release: the "
    "realm is never left claimed with no record saying so (at rest, a held Lease is named by "
    "a claim or a staged release, or was left to expire on purpose)",
    "no-credentials": "The operator never writes credentials into a status, an Event or a log",
    "at-rest": "Every resource ends terminal or explicitly uncertain once faults stop",
    "no-retry-deterministic": "Failures say why, and only transient ones retry: a reading "
    "that failed deterministically is not dispatched again until its inputs change",
}


@dataclass
class Bindings:
    """What a plan is computed under, as the world has it."""

    generation: int
    source: str
    secret: str
    policy: str

    def moved(self, now: Bindings) -> list[str]:
        return [
            k
            for k in ("generation", "source", "secret", "policy")
            if getattr(self, k) != getattr(now, k)
        ]


@dataclass
class PassRecord:
    res: SimResource
    start: dict[str, Any]
    renewed: bool = False
    snapshot_written: bool = False
    marker_written: str | None = None  # the operation whose dispatch marker this pass wrote
    # The UID of the Job under the claim's name as the pass started ("" for none), when the
    # claim had adopted one.
    job_at_start: str | None = None
    # As the pass started, the resource's proof waited on its run's Pods, and every one of
    # them listed was never bound to a node and being deleted.
    waits_on_never_run: bool = False


@dataclass
class Invariants(Watcher):
    world: World
    violations: list[str] = field(default_factory=list)
    creates: Counter[str] = field(default_factory=Counter)
    dispatches: Counter[tuple[str, str]] = field(default_factory=Counter)
    previous: dict[str, dict[str, Any]] = field(default_factory=dict)
    plans: dict[str, tuple[dict[str, Any], Bindings]] = field(default_factory=dict)
    readings: dict[str, Bindings] = field(default_factory=dict)
    failed: set[tuple[str, str]] = field(default_factory=set)
    abandoned: set[tuple[str, str]] = field(default_factory=set)  # (owner uid, plan digest)
    passes: list[PassRecord] = field(default_factory=list)
    faults: Counter[str] = field(default_factory=Counter)
    reported: set[str] = field(default_factory=set)
    stripped: set[str] = field(default_factory=set)  # resources a person unfinalized
    lease_touched: dict[str, Any] = field(default_factory=dict)  # world time of last write
    # resource -> (operation that failed deterministically, the inputs it failed under)
    stalls: dict[str, tuple[str, tuple[Any, ...]]] = field(default_factory=dict)
    claimed: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    _clean: dict[int, Any] = field(default_factory=dict)  # objects with no credential
    # Readings dispatched per resource, and per resource the record it owes with the count
    # of readings when the record first appeared (a proof must read after its record).
    readings_of: Counter[str] = field(default_factory=Counter)
    owed: dict[str, tuple[str, int]] = field(default_factory=dict)
    # Passes in a row that left a resource's proof waiting on Pods that never ran.
    never_ran_waits: Counter[str] = field(default_factory=Counter)
    # Holders whose withheld release was given up with the Lease still held (left to
    # expire past the hold, never released).
    left_to_expire: set[str] = field(default_factory=set)
    # (Lease name, epoch) -> the holder whose claim first recorded that tenure.
    tenures: dict[tuple[str, int], str] = field(default_factory=dict)
    # Every reading operation, by the order its Job was created in; per resource UID, how
    # many readings had been created when its latest proof was abandoned.
    reading_order: dict[str, int] = field(default_factory=dict)
    abandoned_at: dict[str, int] = field(default_factory=dict)
    # The spec each Job create asked for, by Job name (the intent a claim created).
    job_intents: dict[str, Any] = field(default_factory=dict)

    def fail(self, rule: str, message: str) -> None:
        assert rule in RULES, rule
        self.violations.append(f"{rule}: {message}")

    # --- the world's view of one resource

    def _obj(self, res: SimResource) -> dict[str, Any] | None:
        obj: dict[str, Any] | None = self.world.cluster.system.peek(
            res.family.kind, res.namespace, res.name
        )
        return obj

    def _by_uid(self, uid: str) -> tuple[SimResource, dict[str, Any]] | None:
        for res in self.world.resources:
            obj = self._obj(res)
            if obj is not None and obj["metadata"]["uid"] == uid:
                return res, obj
        return None

    def _by_name(
        self, kind: Kind, namespace: str, name: str
    ) -> tuple[SimResource, dict[str, Any]] | None:
        for res in self.world.resources:
            if res.family.kind == kind and res.namespace == namespace and res.name == name:
                obj = self._obj(res)
                return (res, obj) if obj is not None else None
        return None

    def _bindings(self, res: SimResource, obj: dict[str, Any]) -> Bindings:
        api = self.world.cluster.system
        if res.family is SCHEMA_FAMILY:
            source = digest(obj["spec"]["source"])
        else:
            cms = [
                api.peek(CONFIGMAP, res.namespace, n)
                for n in obj["spec"]["directory"]["configMaps"]
            ]
            source = digest([(cm or {}).get("data") for cm in cms])
        secret = api.peek(SECRET, res.namespace, res.secret)
        policy = api.peek(CONFIGMAP, res.namespace, POLICY)
        return Bindings(
            generation=int(obj["metadata"].get("generation") or 1),
            source=source,
            secret=secret["metadata"]["resourceVersion"] if secret else "",
            policy=(
                f"{policy['metadata']['uid']}/{policy['metadata']['resourceVersion']}"
                if policy
                else ""
            ),
        )

    def _db_of_digest(self, coordination: str | None) -> SimDatabase | None:
        for db in self.world.dbs.by_name.values():
            if db.identity.digest == coordination:
                return db
        return None

    def _lease_holder(self, name: str) -> tuple[str | None, int]:
        obj = self.world.cluster.system.peek(LEASE, LOCK_NS, name)
        spec = (obj or {}).get("spec") or {}
        return spec.get("holderIdentity") or None, int(spec.get("leaseTransitions") or 0)

    # --- passes

    def pass_started(self, res: SimResource, depth: int) -> None:
        obj = self._obj(res)
        start = dict((obj or {}).get("status") or {})
        claim = start.get("activeOperation") or {}
        job_uid = None
        if claim.get("jobUid"):
            job = self.world.cluster.system.peek(JOB, res.namespace, str(claim.get("jobName")))
            job_uid = str(job["metadata"]["uid"]) if job is not None else ""
        self.passes.append(
            PassRecord(
                res, start, job_at_start=job_uid, waits_on_never_run=self._waits_on_never_run(start)
            )
        )

    def pass_ended(self, res: SimResource, ok: bool) -> None:
        record = self.passes.pop()
        self._check(res)
        if ok:
            self._proof_evidence(res, record)
            self._renewed_withheld(res, record)
            self._rebound_by_uid(res, record)
        claim = record.start.get("activeOperation") or {}
        if not ok or not claim.get("mutating") or not claim.get("jobUid"):
            return
        obj = self._obj(res)
        now = ((obj or {}).get("status") or {}).get("activeOperation") or {}
        if now.get("operationId") == claim["operationId"] and not record.renewed:
            self.fail(
                "renew-every-pass",
                f"{res.name}: a pass over dispatched {claim['operationId']} renewed no Lease "
                f"(phase {((obj or {}).get('status') or {}).get('phase')})",
            )

    def _rebound_by_uid(self, res: SimResource, record: PassRecord) -> None:
        """A pass over an adopted claim whose Job under the reserved name was not the
        adopted one as it started (gone, or another UID there) ends the claim: a Job found
        by its name alone is not the Job the claim named."""
        claim = record.start.get("activeOperation") or {}
        if record.job_at_start in (None, claim.get("jobUid")) or record.start.get(
            "pendingLockRelease"
        ):
            return
        now = ((self._obj(res) or {}).get("status") or {}).get("activeOperation") or {}
        if now.get("operationId") == claim["operationId"] and now.get("jobUid") == claim["jobUid"]:
            found = f"Job {record.job_at_start}" if record.job_at_start else "no Job"
            self.fail(
                "adopt-own-job",
                f"{res.name}: a pass went on supervising {claim['operationId']}, adopted as Job "
                f"{claim['jobUid']}, with {found} under {claim.get('jobName')}",
            )

    def _renewed_withheld(self, res: SimResource, record: PassRecord) -> None:
        """A release staged before the pass and still staged after it was withheld by it
        (a release owed no longer is cleared; one past its hold is cleared and left to
        expire): while this process still holds its Lease, the pass must renew it."""
        before = record.start.get("pendingLockRelease") or {}
        after = ((self._obj(res) or {}).get("status") or {}).get("pendingLockRelease") or {}
        operation = before.get("operationId")
        if not operation or after.get("operationId") != operation or record.renewed:
            return
        holder, _ = self._lease_holder(str(after.get("leaseName") or ""))
        if holder is not None and holder == after.get("holder"):
            self.fail(
                "renew-withheld",
                f"{res.name}: the release of {operation} stays withheld, its Lease "
                f"{after.get('leaseName')} held, and the pass renewed nothing",
            )

    def fault(self, what: str, res: SimResource | None) -> None:
        self.faults[what] += 1
        if what == "holder-finalizer-stripped" and res is not None:
            # A person removed Ptah's finalizer: what the resource owed went with it, by
            # that person's hand, not Ptah's.
            self.stripped.add(res.name)

    # --- the write stream

    def on_write(self, req: WriteRequest) -> None:
        """A write request as sent (judged before the store changes)."""
        if req.kind == JOB and req.verb == "create":
            self._job_created(dict(req.body or {}))
        elif req.kind == LEASE and req.verb == "patch":
            spec = dict(req.body or {}).get("spec", {})
            if "holderIdentity" in spec and spec["holderIdentity"] is None:
                self._lease_released(req.name)
            elif spec.get("holderIdentity"):
                self._lease_taken(req.name, spec["holderIdentity"])
            elif "renewTime" in spec and self.passes:
                self.passes[-1].renewed = True
            self._touch(req.name)
        elif req.kind == LEASE and req.verb == "create":
            self._touch(req.name)
        elif req.kind == APPROVAL and req.verb == "patch" and req.subresource == "status":
            self._approval_spent(req.namespace, req.name, dict(req.body or {}))
        elif req.kind == PLAN and req.verb == "create":
            self._plan_created(dict(req.body or {}))
        elif req.subresource == "status" and req.verb == "patch":
            found = self._by_name(req.kind, req.namespace, req.name)
            if found is not None:
                self._status_patched(found[0], found[1], dict(req.body or {}).get("status") or {})

    def _status_patched(
        self, res: SimResource, obj: dict[str, Any], fields: dict[str, Any]
    ) -> None:
        staged = (obj.get("status") or {}).get("pendingLockRelease") or {}
        if "pendingLockRelease" in fields and fields["pendingLockRelease"] is None and staged:
            holder, _ = self._lease_holder(str(staged.get("leaseName")))
            if holder == staged.get("holder") and staged.get("withheld"):
                # A withheld release given up with its Lease still held: left to expire.
                self.left_to_expire.add(str(holder))
                self._hold_outlived(res, staged)
        claim = fields.get("activeOperation")
        if not claim:
            return
        self._one_tenure(res, claim)
        if FINALIZER not in (obj["metadata"].get("finalizers") or []):
            self.fail(
                "finalizer-with-claim",
                f"{res.name}: claim {claim['operationId']} written without the finalizer",
            )
        before = (obj.get("status") or {}).get("activeOperation") or {}
        snapshot = (claim.get("admissionSnapshot") or {}).get("digest")
        if (
            snapshot
            and snapshot != (before.get("admissionSnapshot") or {}).get("digest")
            and (self.passes)
        ):
            # Written (first, or again with another value): this pass returns now.
            self.passes[-1].snapshot_written = True
        if claim.get("dispatchStarted") and not before.get("dispatchStarted"):
            if self.passes:
                self.passes[-1].marker_written = claim.get("operationId")
            self._spent_before_marker(res, claim)

    def _hold_outlived(self, res: SimResource, staged: dict[str, Any]) -> None:
        """A release given up to expiry past its hold: by then no process of the run may
        still be alive unseen (its Pod gone from the API), or a taker finding the Lease
        expired and no Pod of the holder has nothing to stop it."""
        api = self.world.cluster.system
        op = staged.get("operationId")
        ended = self._hold_ended(res, staged)
        for truth in self.world.kubelet.truth.values():
            if truth.operation_id != op or not truth.mutating:
                continue
            pod = api.peek(POD, truth.namespace, truth.pod)
            if not truth.alive:
                alive_at = truth.seen_alive_at
                if pod is None and ended and alive_at and alive_at > ended:
                    # Gone before the give-up, but it ran past the hold's end: a pass
                    # then (a controller polls every few seconds) had given it up early.
                    self.fail(
                        "hold-outlives-run",
                        f"{res.name}: the release of {op} given up past a hold that ended at"
                        f" {ended:%H:%M:%S} while {truth.pod}, gone from the API, was alive"
                        f" at {alive_at:%H:%M:%S}",
                    )
                    return
                continue
            run = self.world.kubelet.runs.get(truth.pod)
            job = api.peek(JOB, truth.namespace, truth.job)
            own_job = job is not None and job["metadata"]["uid"] == truth.job_uid
            if pod is None:
                why = "gone from the API, still runs"
            elif run is not None and not run.started and own_job:
                # Its Job stands: only the Job's deadline bounds when its Pod may start.
                why = "not started yet, may still start"
            elif (
                run is not None and not run.started and not pod["metadata"].get("deletionTimestamp")
            ):
                # Orphaned from its Job: no deadline bounds when it may start.
                why = "orphaned before it started, may still start"
            else:
                continue
            self.fail(
                "hold-outlives-run",
                f"{res.name}: the release of {op} given up to expiry while {truth.pod} is {why}",
            )
            return

    def _hold_ended(self, res: SimResource, staged: dict[str, Any]) -> datetime | None:
        """When, by the world's clock, the hold of ``staged`` that the giving-up process
        measured ended: its own sighting of the run (read before it forgets it) plus the
        hold's length, less its clock's offset. The world's clock moves in jumps of up to
        minutes between passes, so the give-up itself can come after a process that
        outlived the hold has ended."""
        replica = self.world.pass_replica
        length = staged.get("holdSeconds")
        if replica is None or not length:
            return None
        since = replica.env.sightings.since.get(
            run_key(res.namespace, res.name, str(staged.get("operationId")))
        )
        if since is None:
            return None
        return since + timedelta(seconds=float(length) - replica.skew)

    def _spent_before_marker(self, res: SimResource, claim: dict[str, Any]) -> None:
        name = claim.get("approvalName")
        if not claim.get("mutating") or not name:
            return
        approval = self.world.cluster.system.peek(APPROVAL, res.namespace, str(name))
        spent = ((approval or {}).get("status") or {}).get("consumedByOperation")
        if approval is not None and spent != claim.get("operationId"):
            self.fail(
                "approval-before-marker",
                f"{res.name}: dispatch marker of {claim.get('operationId')} written while its "
                f"approval {name} is spent by {spent}",
            )

    def _one_tenure(self, res: SimResource, claim: dict[str, Any]) -> None:
        """A claim records the epoch it took the Lease at; that epoch is its tenure alone
        (two takers that both wrote over one version of the Lease would share it)."""
        lease = claim.get("lease") or {}
        if lease.get("epoch") is None:
            return
        key = (str(lease.get("leaseName")), int(lease["epoch"]))
        holder = str(lease.get("holder"))
        first = self.tenures.setdefault(key, holder)
        if first != holder:
            self.fail(
                "epoch-one-tenure",
                f"{res.name}: claim {claim.get('operationId')} records epoch {key[1]} of Lease "
                f"{key[0]}, which {first} recorded as its own",
            )

    def _plan_created(self, body: dict[str, Any]) -> None:
        name = body["metadata"]["name"]
        if name in self.plans:
            return
        found = self._by_uid(body["spec"].get("ownerUid", ""))
        if found is None:
            return
        self.plans[name] = (json.loads(json.dumps(body["spec"])), self._bindings(*found))

    def _approval_spent(self, namespace: str, name: str, body: dict[str, Any]) -> None:
        spender = (body.get("status") or {}).get("consumedByOperation")
        stored = self.world.cluster.system.peek(APPROVAL, namespace, name)
        earlier = ((stored or {}).get("status") or {}).get("consumedByOperation")
        if spender and earlier:
            # By another operation, or by the same one again: an approval spent with
            # nothing dispatched (a stop after consume_approval) authorizes no second attempt.
            self.fail("approval-once", f"approval {name} spent by {earlier} and again by {spender}")

    def _job_created(self, body: dict[str, Any]) -> None:
        meta = body.get("metadata", {})
        name = meta.get("name", "")
        labels = meta.get("labels", {})
        self.creates[name] += 1
        self.job_intents.setdefault(name, json.loads(json.dumps(body.get("spec") or {})))
        if self.creates[name] > 1:
            self.fail("one-create", f"second create of Job {name}")
        op = labels.get(LABEL_OPERATION, "")
        op_type = labels.get(LABEL_OPERATION_TYPE)
        found = self._by_uid(labels.get(LABEL_OWNER_UID, ""))
        if found is None:
            self.fail("claim-names-job", f"Job {name} created for no live resource")
            return
        res, obj = found
        status = obj.get("status") or {}
        claim = status.get("activeOperation") or {}
        if FINALIZER not in (obj["metadata"].get("finalizers") or []):
            self.fail(
                "finalizer-with-claim", f"{res.name}: Job {name} created without the finalizer"
            )
        if claim.get("jobName") != name or claim.get("operationId") != op:
            self.fail(
                "claim-names-job", f"{res.name}: Job {name} created, but no durable claim names it"
            )
            return
        if not claim.get("dispatchStarted"):
            self.fail(
                "claim-names-job", f"{res.name}: Job {name} created before its dispatch marker"
            )
        elif not self.passes or self.passes[-1].marker_written != op:
            self.fail(
                "one-create",
                f"{res.name}: Job {name} created by a pass that did not write its dispatch "
                "marker (the next pass never creates)",
            )
        self._own_inputs(res, obj, claim, name)
        template = body["spec"]["template"]["metadata"].get("annotations", {})
        snapshot = (claim.get("admissionSnapshot") or {}).get("digest")
        if template.get(ANNOTATION_ADMISSION) != snapshot:
            self.fail(
                "job-carries-snapshot",
                f"{res.name}: Job {name} carries admission digest "
                f"{template.get(ANNOTATION_ADMISSION)} but its claim persisted {snapshot}",
            )
        elif digest(body["spec"]["template"]["spec"]) != snapshot:
            # The digest is of the Pod spec the Job runs: a label saying the right digest
            # over a template that changed since the snapshot is not the envelope.
            self.fail(
                "job-carries-snapshot",
                f"{res.name}: Job {name}'s Pod template is not the one whose digest its "
                "claim persisted",
            )
        if self.passes and self.passes[-1].res is res and self.passes[-1].snapshot_written:
            self.fail(
                "snapshot-pass-returns",
                f"{res.name}: Job {name} created in the pass that wrote its admission snapshot",
            )
        if op_type in MUTATING:
            self._mutation_dispatched(res, obj, claim, name)
        else:
            self.readings[op] = self._bindings(res, obj)
            if op_type in READINGS:
                self.readings_of[res.name] += 1
                self.reading_order.setdefault(op, len(self.reading_order))
                self._no_reading_while_stalled(res, obj)

    def _mutation_dispatched(
        self, res: SimResource, obj: dict[str, Any], claim: dict[str, Any], job: str
    ) -> None:
        status = obj.get("status") or {}
        op = claim["operationId"]
        key = (obj["metadata"]["uid"], op)
        self.dispatches[key] += 1
        if self.dispatches[key] > 1:
            self.fail("one-create", f"second dispatch of operation {op}")
        if status.get("pendingObservation") or status.get("unresolvedRun"):
            self.fail("no-replay-while-owed", f"{res.name}: {op} dispatched while proof is owed")
        digest_ = claim.get("planDigest") or ""
        if (key[0], digest_) in self.failed:
            self.fail(
                "failed-not-replayed",
                f"{res.name}: plan {digest_[:12]} dispatched again after its run failed",
            )
        if (key[0], digest_) in self.abandoned:
            self.fail(
                "abandoned-not-replayed",
                f"{res.name}: plan {digest_[:12]} dispatched again after its proof was abandoned",
            )
        self._plan_read_after_abandon(res, key[0], claim)
        lease = claim.get("lease") or {}
        holder, epoch = self._lease_holder(lease.get("leaseName", ""))
        if holder != lease.get("holder") or epoch != lease.get("epoch"):
            self.fail(
                "dispatch-under-lease",
                f"{res.name}: {op} dispatched while its Lease is held by {holder} at epoch {epoch}",
            )
        self._authorized(res, obj, claim)

    def _plan_read_after_abandon(self, res: SimResource, uid: str, claim: dict[str, Any]) -> None:
        """After an abandon, the plan dispatched comes from a reading created after it: the
        plan the unsettling reading computed before the abandon goes with the record."""
        if uid not in self.abandoned_at:
            return
        plan = self.world.cluster.system.peek(PLAN, res.namespace, str(claim.get("planName") or ""))
        computed_by = ((plan or {}).get("metadata", {}).get("annotations") or {}).get(
            "ptah.io/computed-by"
        )
        order = self.reading_order.get(str(computed_by), -1)
        if order < self.abandoned_at[uid]:
            self.fail(
                "abandoned-not-replayed",
                f"{res.name}: {claim['operationId']} dispatched plan "
                f"{str(claim.get('planDigest'))[:12]}, read by {computed_by} before the last "
                "proof was abandoned",
            )

    def _authorized(self, res: SimResource, obj: dict[str, Any], claim: dict[str, Any]) -> None:
        api = self.world.cluster.system
        op = claim["operationId"]
        plan_name = claim.get("planName") or ""
        plan = api.peek(PLAN, res.namespace, plan_name)
        recorded = self.plans.get(plan_name)
        if plan is None or recorded is None or plan.get("spec") != recorded[0]:
            self.fail(
                "bindings-hold",
                f"{res.name}: {op} dispatched though its plan {plan_name} moved or is gone",
            )
            return
        spec, at_plan = recorded
        now = self._bindings(res, obj)
        moved = at_plan.moved(now)
        computed_by = (plan["metadata"].get("annotations") or {}).get("ptah.io/computed-by")
        at_reading = self.readings.get(computed_by or "")
        if at_reading is not None:
            # The policy is read when the plan is made, not when the reading ran.
            moved += [m for m in at_reading.moved(now) if m not in moved and m != "policy"]
        if moved:
            self.fail(
                "bindings-hold",
                f"{res.name}: {op} dispatched though its {', '.join(moved)} moved since the plan",
            )
        policy = (api.peek(CONFIGMAP, res.namespace, POLICY) or {}).get("data") or {}
        destructive = any(s.get("sql", "").startswith("DROP") for s in spec.get("statements", []))
        if destructive and policy.get("allowDestructive", "true").lower() not in {
            "1",
            "true",
            "yes",
        }:
            self.fail(
                "policy-permits",
                f"{res.name}: destructive {op} dispatched while the policy forbids it",
            )
        engines = {
            e.strip() for e in policy.get("allowedEngines", "postgres,mysql,sqlite").split(",")
        }
        if "postgres" not in engines:
            self.fail(
                "policy-permits",
                f"{res.name}: {op} dispatched for an engine the policy does not allow",
            )
        rule = (obj["spec"].get("policy") or {}).get("approval", "Never")
        required = rule == "Always" or (rule == "Destructive" and destructive)
        if not required:
            return
        approval = api.peek(APPROVAL, res.namespace, claim.get("approvalName") or "")
        a_spec = (approval or {}).get("spec") or {}
        ref = a_spec.get("resourceRef") or {}
        spent = ((approval or {}).get("status") or {}).get("consumedByOperation")
        if (
            approval is None
            or ref.get("name") != res.name
            or ref.get("kind") != res.family.kind.kind
            or a_spec.get("planDigest") != claim.get("planDigest")
            or spent != op
        ):
            self.fail(
                "approval-authorizes",
                f"{res.name}: {op} dispatched without an approval of its own resource and "
                f"plan spent by it (approval {claim.get('approvalName')}, spent by {spent})",
            )

    def _touch(self, lease: str) -> None:
        """When a write to ``lease`` was asked, and the version it was asked on (a write
        the fault injector refused leaves that version in place: it renewed nothing)."""
        stored = self.world.cluster.system.peek(LEASE, LOCK_NS, lease)
        version = (stored or {}).get("metadata", {}).get("resourceVersion")
        self.lease_touched[lease] = (version, self.world.clock.now())

    def _lease_taken(self, lease: str, taker: str) -> None:
        holder, _ = self._lease_holder(lease)
        stored = self.world.cluster.system.peek(LEASE, LOCK_NS, lease)
        version = (stored or {}).get("metadata", {}).get("resourceVersion")
        last = self.lease_touched.get(lease)
        if holder is None or holder == taker:
            return
        self._no_writer_under(lease, holder, f"taken by {taker}")
        if last is None or last[0] == version:
            return
        touched = last[1]
        duration = int(
            ((self.world.cluster.system.peek(LEASE, LOCK_NS, lease) or {}).get("spec") or {}).get(
                "leaseDurationSeconds"
            )
            or 0
        )
        age = (self.world.clock.now() - touched).total_seconds()
        if age < duration:
            self.fail(
                "lease-live-holder",
                f"Lease {lease} taken by {taker} {age:.0f}s after {holder} renewed it "
                f"(duration {duration}s)",
            )

    def _lease_released(self, lease: str) -> None:
        holder, _ = self._lease_holder(lease)
        if holder is None:
            return
        uid, _, op = holder.partition("/")
        found = self._by_uid(uid)
        if found is not None:
            claim = (found[1].get("status") or {}).get("activeOperation") or {}
            if claim.get("operationId") == op:
                self.fail(
                    "release-after-outcome", f"Lease {lease} released while claim {op} is live"
                )
        if op in self._may_write():
            self.fail("lease-while-executor", f"Lease {lease} released while {op} may still write")
        self._no_writer_under(lease, holder, "released")
        # No exception for a Job its controller never saw: absence is not evidence.
        self._released_on_evidence(lease, op)

    def _released_on_evidence(self, lease: str, op: str) -> None:
        """A release hands the database back only on evidence: every Pod the operation's
        Job ran reported its container terminated to the API. A Pod that left the API
        without that report never gives evidence, however long ago it went: its Lease is
        left to expire, never released."""
        for truth in self.world.kubelet.truth.values():
            if truth.operation_id == op and truth.mutating and not truth.terminated:
                self.fail(
                    "release-on-evidence",
                    f"Lease {lease} released, but {truth.pod} of {op} never reported its "
                    f"container stopped ({'still running' if truth.alive else 'gone unseen'})",
                )
                return

    def _no_writer_under(self, lease: str, holder: str, what: str) -> None:
        """By the simulated database's own writer count, not by the API or the kubelet's
        reports: a Pod gone from the API may still have a process that writes."""
        op = holder.partition("/")[2]
        for db in self.world.dbs.by_name.values():
            if lease_name(db.identity.digest) == lease and op in db.writers:
                self.fail(
                    "release-under-writer",
                    f"Lease {lease} {what} while {op} still writes to {db.name} "
                    f"({len(db.writers)} writer(s) by its own count)",
                )

    # --- the world's executors

    def _may_write(self) -> dict[str, str]:
        """Mutating operations whose executor may still write, with the database their
        claim planned: a process alive, or a Job not terminal whose Pod has not started."""
        out: dict[str, str] = {}
        kubelet = self.world.kubelet
        for truth in kubelet.truth.values():
            if truth.alive and truth.mutating and truth.planned_db:
                out[truth.operation_id] = truth.planned_db
        started = {t.job_uid for t in kubelet.truth.values()}
        for job in self.world.cluster.system.peek_list(JOB, ""):
            # The Job's own spec says what it runs (labels can be changed by anyone).
            container = job["spec"]["template"]["spec"]["containers"][0]
            if (container.get("args") or [""])[0] not in {"apply", "migrate"}:
                continue
            if job["metadata"]["uid"] in started or (job.get("status") or {}).get("conditions"):
                continue
            env = {e["name"]: e for e in container.get("env", [])}
            db = self._job_database(job)
            if db is not None:
                out[str(env.get("PTAH_OPERATION_ID", {}).get("value", ""))] = db
        return out

    def _job_database(self, job: dict[str, Any]) -> str | None:
        env = job["spec"]["template"]["spec"]["containers"][0].get("env", [])
        for e in env:
            if e.get("name") == "PTAH_DB_URL":
                ref = e.get("valueFrom", {}).get("secretKeyRef", {})
                secret = self.world.cluster.system.peek(
                    SECRET, job["metadata"]["namespace"], ref.get("name", "")
                )
                url = ((secret or {}).get("stringData") or {}).get(ref.get("key", ""), "")
                db = self.world.dbs.open(url) if url else None
                return db.name if db else None
        return None

    # --- after every step

    def after_step(self, check_secrets: bool) -> None:
        for db in self.world.dbs.by_name.values():
            if db.max_concurrent_writers > 1 and db.name not in self.reported:
                self.reported.add(db.name)
                self.fail(
                    "one-writer",
                    f"{db.name}: {db.max_concurrent_writers} mutating executors wrote at once",
                )
            for op, n in db.executions.items():
                if n > 1 and f"x{op}" not in self.reported:
                    self.reported.add(f"x{op}")
                    self.fail("executed-once", f"operation {op} executed {n} times on {db.name}")
        self._leases_held()
        for res in self.world.resources:
            self._check(res)
        if check_secrets:
            self._no_credentials()

    def _check(self, res: SimResource) -> None:
        """The resource's transitions since it was last checked (after every pass over
        it, interleaved ones included, and after every step)."""
        obj = self._obj(res)
        status = (obj or {}).get("status") or {}
        before = self.previous.get(res.name, {})
        if status is before:
            return
        self._held_while_owed(res, obj, before, status)
        self._claim_and_record(res.name, before, status)
        self._accounted(res, obj, before, status)
        self._record_cleared(res, obj, before, status)
        self._credited(res, before, status)
        self._proof_first(res, status)
        self._note_stall(res, obj, status)
        self.previous[res.name] = status

    def _inputs(self, obj: dict[str, Any]) -> tuple[Any, ...]:
        """What a reading depends on, as the world holds it: the spec (generation), the
        Secret, the verification policy, a migration directory's ConfigMaps."""
        api = self.world.cluster.system

        def version(kind: Kind, name: str) -> str | None:
            found = api.peek(kind, obj["metadata"]["namespace"], name)
            return None if found is None else str(found["metadata"]["resourceVersion"])

        spec = obj.get("spec") or {}
        policy = str((spec.get("policy") or {}).get("verificationPolicy", POLICY))
        dirs = ((spec.get("directory") or {}).get("configMaps")) or []
        return (
            obj["metadata"].get("generation"),
            version(SECRET, str(spec["target"]["secretRef"]["name"])),
            version(CONFIGMAP, policy),
            tuple(version(CONFIGMAP, str(d)) for d in dirs),
        )

    def _note_stall(
        self, res: SimResource, obj: dict[str, Any] | None, status: dict[str, Any]
    ) -> None:
        """Remember the inputs each reading was claimed under; a deterministic failure
        stalls the resource on the inputs of the reading that failed."""
        claim = status.get("activeOperation") or {}
        if obj is not None and claim and claim.get("operationId") not in self.claimed:
            self.claimed[str(claim.get("operationId"))] = self._inputs(obj)
        failure = status.get("readingFailure") or {}
        if obj is None or not failure or failure.get("retry", True):
            self.stalls.pop(res.name, None)
            return
        operation = str(failure.get("operationId"))
        if operation in self.claimed and self.stalls.get(res.name, ("",))[0] != operation:
            self.stalls[res.name] = (operation, self.claimed[operation])

    def _no_reading_while_stalled(self, res: SimResource, obj: dict[str, Any]) -> None:
        """A reading that failed in a way the same inputs reproduce is not dispatched
        again until the spec, the Secret, the policy or the directory changes."""
        if res.name not in self.stalls:
            return
        operation, inputs = self.stalls[res.name]
        if self._inputs(obj) == inputs:
            self.fail(
                "no-retry-deterministic",
                f"{res.name}: reading dispatched again after {operation} failed "
                "deterministically, with the same inputs",
            )

    def _leases_held(self) -> None:
        for op, db_name in self._may_write().items():
            db = self.world.dbs.by_name[db_name]
            name = lease_name(db.identity.digest)
            holder, _ = self._lease_holder(name)
            if holder is None or holder.partition("/")[2] != op:
                key = f"l{op}/{holder}"
                if key not in self.reported:
                    self.reported.add(key)
                    state = "free" if holder is None else f"held by {holder}"
                    self.fail(
                        "lease-while-executor",
                        f"Lease {name} is {state} while {op} may still write {db_name}",
                    )

    def _held_while_owed(
        self,
        res: SimResource,
        obj: dict[str, Any] | None,
        before: dict[str, Any],
        status: dict[str, Any],
    ) -> None:
        if obj is None:
            owed = [k for k in ("activeOperation", "pendingLockRelease") if before.get(k)]
            if owed and res.name not in self.stripped:
                self.fail(
                    "deleted-while-owed", f"{res.name}: deleted while {', '.join(owed)} was owed"
                )
            return
        claim = status.get("activeOperation")
        if claim and FINALIZER not in (obj["metadata"].get("finalizers") or []):
            self.fail(
                "finalizer-with-claim",
                f"{res.name}: claim {claim['operationId']} without the finalizer",
            )
        staged = status.get("pendingLockRelease")
        if not claim or not staged or staged.get("operationId") == claim["operationId"]:
            return
        new = (before.get("activeOperation") or {}).get("operationId") != claim["operationId"]
        record = status.get("pendingObservation") or status.get("unresolvedRun")
        if claim.get("mutating") or (new and not record):
            # While a release is staged the pass goes no further than the release step,
            # but for the reading that proves an owed record.
            what = "mutating claim" if claim.get("mutating") else "claim"
            self.fail(
                "release-first",
                f"{res.name}: {what} {claim['operationId']} taken while the release "
                f"of {staged.get('operationId')} is staged",
            )

    def _claim_and_record(self, name: str, before: dict[str, Any], status: dict[str, Any]) -> None:
        record = status.get("pendingObservation") or status.get("unresolvedRun")
        claim = status.get("activeOperation")
        if claim and claim.get("mutating") and record:
            self.fail(
                "claim-beside-record", f"{name}: a mutating claim beside an uncertainty record"
            )
        old = before.get("activeOperation")
        if not old or not old.get("mutating") or not old.get("dispatchStarted"):
            return
        if name in self.stripped:
            return  # its claim went with the finalizer a person removed
        if claim and claim.get("operationId") == old["operationId"]:
            return
        last = status.get("lastMutation") or {}
        accounted = (
            last.get("operationId") == old["operationId"] and last.get("outcome") in ACCOUNTED
        )
        retained = record is not None and record.get("operationId") == old["operationId"]
        if accounted == retained:
            self.fail(
                "account-or-record",
                f"{name}: dispatched claim {old['operationId']} left "
                f"{'both an account and' if accounted else 'neither an account nor'} a record "
                f"(last={last.get('operationId')}/{last.get('outcome')}, "
                f"phase={status.get('phase')})",
            )

    def _accounted(
        self,
        res: SimResource,
        obj: dict[str, Any] | None,
        before: dict[str, Any],
        status: dict[str, Any],
    ) -> None:
        claim = status.get("activeOperation") or {}
        old = before.get("activeOperation") or {}
        if claim.get("jobUid") and not old.get("jobUid") and obj is not None:
            self._own_job(res, obj, claim, "adopted")
        if not old.get("jobUid") or claim.get("operationId") == old.get("operationId"):
            return
        op = old["operationId"]
        if old.get("mutating"):
            last = status.get("lastMutation") or {}
            if last.get("operationId") != op or last.get("outcome") not in ACCOUNTED:
                return
            if last["outcome"] == "Failed":
                self.failed.add(
                    (str((obj or {}).get("metadata", {}).get("uid")), old.get("planDigest") or "")
                )
            lease = old.get("lease") or {}
            holder, epoch = self._lease_holder(lease.get("leaseName", ""))
            if holder != lease.get("holder") or epoch != lease.get("epoch"):
                self.fail(
                    "account-under-lease",
                    f"{res.name}: {op} accounted {last['outcome']} while its Lease is held "
                    f"by {holder} at epoch {epoch}",
                )
        elif status.get("lastReadingAt") == before.get("lastReadingAt"):
            return
        if obj is not None:
            self._own_job(res, obj, old, "accounted")
        pods = self.world.kubelet.pods_of_job(old["jobName"])
        problem = _evidence_problem(
            pods, op, self._db_of_digest(old.get("expectedDatabase")), old.get("expectedDatabase")
        )
        if problem:
            self.fail(
                "account-evidence", f"{res.name}: {old['type']} {op} accounted, but {problem}"
            )
            return
        self._account_says_frame(res, status, old, pods[0])
        if not old.get("mutating"):
            self._settling_kept(res, before, status, old)

    def _account_says_frame(
        self, res: SimResource, status: dict[str, Any], claim: dict[str, Any], pod: PodTruth
    ) -> None:
        """The account of a claim is what its one frame said, by the log the world holds:
        an outcome the frame did not report is a run's effect discarded or invented."""
        said = pod.printed_outcome
        if claim.get("mutating"):
            accounted = (status.get("lastMutation") or {}).get("outcome")
            if FRAME_ACCOUNTS.get(said or "") != accounted:
                self.fail(
                    "account-says-frame",
                    f"{res.name}: {claim['operationId']} accounted {accounted}, but its frame "
                    f"said {said}",
                )
        elif said != "succeeded":
            self.fail(
                "account-says-frame",
                f"{res.name}: reading {claim['operationId']} published as read, but its frame "
                f"said {said}",
            )

    def _settling_kept(
        self,
        res: SimResource,
        before: dict[str, Any],
        status: dict[str, Any],
        reading: dict[str, Any],
    ) -> None:
        """A reading accepted while a record was owed, whose Pod saw the resource's own
        database settled (by the world's truth) while nothing of the uncertain run may
        still write (no withheld release of it, no Pod of it shown running), clears the
        record in the same patch."""
        record = before.get("pendingObservation") or before.get("unresolvedRun")
        new = status.get("pendingObservation") or status.get("unresolvedRun")
        if not record or not new or new.get("operationId") != record.get("operationId"):
            return
        if record["operationId"] in (status.get("abandonedProofs") or []):
            return
        seen = [
            t
            for t in self.world.kubelet.pods_of_job(str(reading.get("jobName")))
            if t.observed is not None and t.printed_op == reading.get("operationId")
        ]
        schema = res.family is SCHEMA_FAMILY
        if not seen or not all(
            t.opened_db == res.db and _settled(schema, t.observed or {}, record) for t in seen
        ):
            return
        staged = before.get("pendingLockRelease") or {}
        if staged.get("operationId") == record["operationId"] and not staged.get("executorStopped"):
            return  # its release is withheld: the run may still write, so nothing settles
        if self._shown_running(str(record["operationId"])):
            return
        self.fail(
            "proof-settles",
            f"{res.name}: reading {reading.get('operationId')} saw {res.db} settled, but the "
            f"record of {record['operationId']} was kept",
        )

    def _shown_running(self, operation: str) -> bool:
        """Whether the API shows a Pod of ``operation`` that it does not show stopped: a
        terminal phase with every container reported terminated, or never bound to a node
        and terminal or being deleted."""
        for pod in self.world.cluster.system.peek_list(POD, ""):
            labels = pod["metadata"].get("labels") or {}
            if labels.get(LABEL_OPERATION) != operation:
                continue
            status = pod.get("status") or {}
            terminal = status.get("phase") in {"Succeeded", "Failed"}
            if not (pod.get("spec") or {}).get("nodeName"):
                if terminal or pod["metadata"].get("deletionTimestamp"):
                    continue
                return True
            containers = status.get("containerStatuses") or []
            if not terminal or not containers:
                return True
            if not all("terminated" in (c.get("state") or {}) for c in containers):
                return True
        return False

    def _credited(self, res: SimResource, before: dict[str, Any], status: dict[str, Any]) -> None:
        """An outcome is credited to a run only as its own claim ends (the account of its
        frame, or Uncertain); a settling reading records Converged and credits no Apply."""
        last = status.get("lastMutation") or {}
        prev = before.get("lastMutation") or {}
        old = before.get("activeOperation") or {}
        now = status.get("activeOperation") or {}
        ended = bool(old.get("mutating") and old.get("jobUid")) and now.get(
            "operationId"
        ) != old.get("operationId")
        key = (last.get("operationId"), last.get("outcome"))
        if last and key != (prev.get("operationId"), prev.get("outcome")):
            own = ended and old.get("operationId") == last.get("operationId")
            if last.get("outcome") in ACCOUNTED and not own:
                self.fail(
                    "converged-not-attributed",
                    f"{res.name}: {last.get('operationId')} credited {last.get('outcome')} "
                    "without the account of its own claim",
                )
        applied = status.get("appliedPlanDigest")
        if applied and applied != before.get("appliedPlanDigest"):
            own = (
                ended
                and old.get("planDigest") == applied
                and last.get("operationId") == old.get("operationId")
                and last.get("outcome") == "Succeeded"
            )
            if not own:
                self.fail(
                    "converged-not-attributed",
                    f"{res.name}: plan {applied[:12]} credited as applied without the "
                    "Succeeded account of its own claim",
                )

    def _waits_on_never_run(self, status: dict[str, Any]) -> bool:
        """The proof waits on the run's Pods (no staged release of the run decides), and
        every Pod of the run the API lists provably never ran: never bound to a node and
        being deleted (the API binds no Pod that is being deleted)."""
        record = status.get("pendingObservation") or status.get("unresolvedRun") or {}
        operation = record.get("operationId")
        staged = status.get("pendingLockRelease") or {}
        if (
            not operation
            or status.get("waitingFor") != "the uncertain run to stop"
            or staged.get("operationId") == operation
        ):
            return False
        pods = self.world.cluster.system.list(POD, "", {LABEL_OPERATION: str(operation)})
        return bool(pods) and all(never_bound_and_deleting(pod) for pod in pods)

    def _proof_evidence(self, res: SimResource, record: PassRecord) -> None:
        """A pass that began with the proof waiting on Pods that never ran must not end
        still waiting on them: three such passes in a row (a pass may end before the
        prove step, its status left as an earlier pass wrote it) break the rule."""
        status = (self._obj(res) or {}).get("status") or {}
        if not (record.waits_on_never_run and self._waits_on_never_run(status)):
            self.never_ran_waits.pop(res.name, None)
            return
        self.never_ran_waits[res.name] += 1
        if self.never_ran_waits[res.name] >= 3:
            self.fail(
                "proof-evidence",
                f"{res.name}: the proof still waits for the run to stop, on Pods that were "
                "never bound to a node and are being deleted (they never ran)",
            )

    def _proof_first(self, res: SimResource, status: dict[str, Any]) -> None:
        record = status.get("pendingObservation") or status.get("unresolvedRun")
        if not record:
            self.owed.pop(res.name, None)
            return
        if self.owed.get(res.name, ("",))[0] != record.get("operationId"):
            self.owed[res.name] = (str(record.get("operationId")), self.readings_of[res.name])
        if (
            status.get("phase") == "ProofNotSettled"
            and self.readings_of[res.name] <= self.owed[res.name][1]
        ):
            # "The last reading did not settle it" is said only once a reading ran with
            # the record in place: a proof paced by stamps of two controllers' clocks
            # says it having never read (a reading stamped ahead passes for a later one).
            self.fail(
                "proof-prioritised",
                f"{res.name}: says ProofNotSettled for {record.get('operationId')} with no "
                "reading since the record",
            )
        if status.get("phase") == "Suspended":
            self.fail(
                "proof-prioritised",
                f"{res.name}: shows Suspended while proof of {record.get('operationId')} is owed",
            )
        stalled = [
            c.get("reason")
            for c in status.get("conditions") or []
            if c.get("type") == "Stalled" and c.get("status") == "True"
        ]
        if "SecretMissing" in stalled:
            # The execution binding is a gate the proof comes before: a resource owing
            # proof reads on whatever its Secret does (the reading says what it met).
            self.fail(
                "proof-prioritised",
                f"{res.name}: stalled on its Secret (the execution binding) while proof of "
                f"{record.get('operationId')} is owed",
            )

    def _own_inputs(
        self, res: SimResource, obj: dict[str, Any], claim: dict[str, Any], job: str
    ) -> None:
        name = claim.get("inputConfigMap")
        cm = self.world.cluster.system.peek(CONFIGMAP, res.namespace, name) if name else None
        if cm is None:
            return
        owners = {r.get("uid") for r in cm["metadata"].get("ownerReferences", [])}
        if obj["metadata"]["uid"] not in owners:
            self.fail(
                "own-inputs",
                f"{res.name}: Job {job} mounts input ConfigMap {name}, owned only by {owners}",
            )
        elif input_configmap_name(obj["metadata"]["uid"], digest(cm.get("data") or {})) != name:
            # The name is made from the resource and the content: another content under
            # it is not what the claim computed.
            self.fail(
                "own-inputs",
                f"{res.name}: Job {job} mounts input ConfigMap {name}, whose content is not "
                "the content its name was made from",
            )

    def _own_job(
        self, res: SimResource, obj: dict[str, Any], claim: dict[str, Any], what: str
    ) -> None:
        job = self.world.cluster.system.peek(JOB, res.namespace, claim["jobName"])
        if job is None:
            return
        owners = [r.get("uid") for r in job["metadata"].get("ownerReferences", [])]
        op = job["metadata"].get("labels", {}).get(LABEL_OPERATION)
        if owners != [obj["metadata"]["uid"]] or op != claim["operationId"]:
            self.fail(
                "adopt-own-job",
                f"{res.name}: {what} Job {claim['jobName']} owned by {owners} for operation {op}",
            )
        elif what == "adopted" and not _covers(
            job.get("spec") or {}, self.job_intents.get(claim["jobName"], {})
        ):
            self.fail(
                "adopt-own-job",
                f"{res.name}: adopted Job {claim['jobName']}, whose spec is not the one its "
                "claim created",
            )
        elif what == "accounted" and job["metadata"]["uid"] != claim.get("jobUid"):
            self.fail(
                "adopt-own-job",
                f"{res.name}: accounted Job {claim['jobName']} {job['metadata']['uid']}, not the "
                f"one it adopted ({claim.get('jobUid')})",
            )

    def _record_cleared(
        self,
        res: SimResource,
        obj: dict[str, Any] | None,
        before: dict[str, Any],
        status: dict[str, Any],
    ) -> None:
        old = before.get("pendingObservation") or before.get("unresolvedRun")
        new = status.get("pendingObservation") or status.get("unresolvedRun")
        if not old or (new and new.get("operationId") == old.get("operationId")):
            return
        if obj is None:
            if res.name not in self.stripped:
                self.fail(
                    "deleted-while-owed",
                    f"{res.name}: deleted while proof of {old['operationId']} was owed",
                )
            return
        if old["operationId"] in (status.get("abandonedProofs") or []):
            named = (obj["metadata"].get("annotations") or {}).get(ABANDON_ANNOTATION)
            if named != old["operationId"]:
                self.fail(
                    "record-cleared-by-reading",
                    f"{res.name}: record {old['operationId']} abandoned, but the annotation "
                    f"names {named}",
                )
            if old.get("planDigest"):
                self.abandoned.add((str(obj["metadata"]["uid"]), str(old["planDigest"])))
            self.abandoned_at[str(obj["metadata"]["uid"])] = len(self.reading_order)
            return
        for truth in self.world.kubelet.truth.values():
            if truth.operation_id == old["operationId"] and truth.alive:
                self.fail(
                    "record-cleared-by-reading",
                    f"{res.name}: record cleared while its executor still runs",
                )
        if not self._settled_by_reading(res, before, status, old):
            self.fail(
                "record-cleared-by-reading",
                f"{res.name}: record {old['operationId']} cleared without a settling reading",
            )

    def _settled_by_reading(
        self,
        res: SimResource,
        before: dict[str, Any],
        status: dict[str, Any],
        record: dict[str, Any],
    ) -> bool:
        """Whether the record was cleared as a reading ended, and what that reading's
        Pods saw of the resource's database when they read it settles the record. The
        database as it is now does not say: another resource's writer may have changed
        it between the reading and the controller reading its frame."""
        reading = before.get("activeOperation") or {}
        if reading.get("mutating") or reading.get("type") not in READINGS:
            return False
        now = status.get("activeOperation") or {}
        if now.get("operationId") == reading.get("operationId"):
            return False
        seen = [
            t
            for t in self.world.kubelet.pods_of_job(str(reading.get("jobName")))
            if t.observed is not None and t.printed_op == reading.get("operationId")
        ]
        schema = res.family is SCHEMA_FAMILY
        return bool(seen) and all(
            t.opened_db == res.db and _settled(schema, t.observed or {}, record) for t in seen
        )

    def _no_credentials(self) -> None:
        secrets = list(self.world.secrets.values())
        for kind, obj in self.world.cluster.system.peek_objects():
            if kind == SECRET or self._clean.get(id(obj)) is obj:
                continue
            text = json.dumps(obj)
            if not any(secret in text for secret in secrets):
                # A stored object is never changed in place: clean once, clean for good.
                self._clean[id(obj)] = obj
                continue
            for secret in secrets:
                if secret in text:
                    self.fail(
                        "no-credentials",
                        f"a credential appears in {kind.kind} {obj['metadata']['name']}",
                    )

    # --- once faults stop

    def at_rest(self) -> None:
        self._leases_accounted()
        for res in self.world.resources:
            obj = self._obj(res)
            if obj is None:
                continue
            status = obj.get("status") or {}
            record = status.get("pendingObservation") or status.get("unresolvedRun")
            owes = record or status.get("activeOperation") or status.get("pendingLockRelease")
            if FINALIZER in (obj["metadata"].get("finalizers") or []) and not owes:
                deleting = " (being deleted)" if obj["metadata"].get("deletionTimestamp") else ""
                self.fail(
                    "finalizer-removed", f"{res.name}: a finalizer with nothing owed{deleting}"
                )
            if record and self.readings_of[res.name] <= self.owed.get(res.name, ("", 0))[1]:
                self.fail(
                    "proof-prioritised",
                    f"{res.name}: owes proof of {record.get('operationId')} and has not read "
                    f"since ({status.get('phase')})",
                )
            if status.get("activeOperation"):
                self.fail(
                    "at-rest",
                    f"{res.name}: still claimed after faults stopped ({status.get('phase')})",
                )
            if status.get("pendingLockRelease"):
                self.fail("at-rest", f"{res.name}: release still pending after faults stopped")
            conditions = status.get("conditions", [])
            ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
            stalled = any(
                c.get("type") == "Stalled" and c.get("status") == "True" for c in conditions
            )
            waiting = status.get("phase") in {"WaitingForApproval", "WaitingForTarget"}
            if not (ready or record or stalled or waiting or obj["spec"].get("suspend")):
                self.fail(
                    "at-rest",
                    f"{res.name}: neither terminal nor explicitly uncertain "
                    f"({status.get('phase')})",
                )
            alone = sum(r.db == res.db for r in self.world.resources) == 1
            if ready and alone and res.family is SCHEMA_FAMILY:
                desired = obj["spec"]["source"]["inline"]
                if self.world.dbs.by_name[res.db].plan(desired)["changes"]:
                    self.fail(
                        "at-rest",
                        f"{res.name}: Ready but the database differs from the desired schema",
                    )

    def _leases_accounted(self) -> None:
        """At rest, every held Lease is named by a claim or a staged release, or was left
        to expire: its withheld release given up while the Lease was still held."""
        named: set[str] = set()
        for res in self.world.resources:
            status = (self._obj(res) or {}).get("status") or {}
            claim = status.get("activeOperation") or {}
            named.add(str((claim.get("lease") or {}).get("holder")))
            named.add(str((status.get("pendingLockRelease") or {}).get("holder")))
        for lease in self.world.cluster.system.peek_list(LEASE, LOCK_NS):
            name = lease["metadata"]["name"]
            holder = (lease.get("spec") or {}).get("holderIdentity")
            left = self.left_to_expire | self.world.gone_holders
            if holder and holder not in named and holder not in left:
                self.fail(
                    "lease-accounted",
                    f"Lease {name} held by {holder} at rest, named by no claim or staged "
                    "release, and not left to expire",
                )

    def install(self, inner: Any = None) -> None:
        """Hear the world's API: every write request through :meth:`write_hook` (around
        ``inner``, the faults), and the API's decision on each precondition."""
        self.world.cluster.faults = self.write_hook(inner)
        self.world.cluster.preconditions = self.on_precondition

    def write_hook(self, inner: Any) -> Any:
        """Every write request is judged as sent, after the faults (which may run other
        passes first), except a patch carrying a resourceVersion precondition: that one is
        judged by :meth:`on_precondition`, where the API compares its version."""

        def hook(req: WriteRequest) -> FaultDecision:
            decision: FaultDecision = inner(req) if inner else PROCEED
            if not _preconditioned(req):
                self.on_write(req)
            return decision

        return hook

    def on_precondition(self, req: WriteRequest, held: bool) -> None:
        """The API's own decision on a preconditioned patch, taken against the version
        stored before the write: one refused (409 Conflict) wrote nothing and is not
        judged; one that held is judged as written, whatever version it leaves behind
        (a Lease takeover included). A refused acquisition of a Lease is counted: the
        second of two racing acquirers (fault lease-acquire-race)."""
        if held:
            self.on_write(req)
        elif req.kind == LEASE and (dict(req.body or {}).get("spec") or {}).get("holderIdentity"):
            self.faults["lease-acquire-refused"] += 1


def _covers(live: Any, want: Any) -> bool:
    """Every field ``want`` sets is in ``live`` with the same value (the API may add
    defaults beside them)."""
    if isinstance(want, dict):
        return isinstance(live, dict) and all(_covers(live.get(k), v) for k, v in want.items())
    return bool(live == want)


def _preconditioned(req: WriteRequest) -> bool:
    meta = dict(req.body or {}).get("metadata") if req.verb == "patch" else None
    return isinstance(meta, dict) and meta.get("resourceVersion") is not None


def _evidence_problem(
    pods: list[PodTruth], op: str, db: SimDatabase | None, expected: str | None
) -> str | None:
    """Why the world says no account could honestly be read, or None."""
    if len(pods) != 1:
        return f"{len(pods)} Pods ran for its Job"
    pod = pods[0]
    if not pod.admitted:
        return f"its Pod {pod.pod} is outside the admission envelope"
    if pod.alive or not pod.terminated:
        return f"the container of {pod.pod} has not terminated"
    if pod.printed_frames != 1 or pod.printed_op != op:
        return f"{pod.pod} printed {pod.printed_frames} frame(s), for {pod.printed_op}"
    if expected is not None and (db is None or pod.opened_db != db.name):
        return f"{pod.pod} opened {pod.opened_db}, not the claim's database"
    return None


def _settled(schema: bool, observed: dict[str, Any], record: dict[str, Any]) -> bool:
    """What a reading saw settles the record: for a schema, the database at the
    Apply's expected fingerprint or no changes left; for a migration, nothing dirty, and
    nothing pending (repeatable files included) or the applied history (each repeatable at
    the checksum it last ran with) exactly what the uncertain run expected, and no applied
    migration edited since it ran."""
    if schema:
        return observed.get("fingerprint") == record.get("expectedAfter") or (
            observed.get("changes") is False
        )
    if "dirty" not in observed or observed["dirty"] is not None or observed.get("mismatched"):
        return False
    expected = record.get("expectedAfter")
    state = observed.get("state", observed.get("applied"))
    reached = bool(expected) and digest(list(state or [])) == expected
    return reached or not (observed.get("pending") or observed.get("repeatables_pending"))
