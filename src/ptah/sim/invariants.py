"""The invariants the simulation checks after every step, each stated against the world
itself (databases, executors, the API's write stream), not against what the
controller says about itself."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ptah.kube.kinds import CONFIGMAP, JOB, LEASE, SECRET
from ptah.kube.memory import PROCEED, FaultDecision, WriteRequest
from ptah.sim.database import SimDatabase
from ptah.sim.kubelet import NS
from ptah.sim.world import SCHEMA_FAMILY, World
from ptah.workload.job import LABEL_OPERATION, LABEL_OPERATION_TYPE, LABEL_OWNER_UID

MUTATING = {"Apply", "Migrate"}
READINGS = {"Plan", "History"}
DEFAULT_POLICY = "ptah-verification-policy"


@dataclass
class Invariants:
    world: World
    violations: list[str] = field(default_factory=list)
    creates: Counter[str] = field(default_factory=Counter)
    dispatches: Counter[tuple[str, str]] = field(default_factory=Counter)
    previous: dict[str, dict[str, Any]] = field(default_factory=dict)
    # resource -> (operation that failed deterministically, the inputs it failed under)
    stalls: dict[str, tuple[str, tuple[Any, ...]]] = field(default_factory=dict)
    claimed: dict[str, tuple[Any, ...]] = field(default_factory=dict)

    def fail(self, message: str) -> None:
        self.violations.append(message)

    # --- watching the write stream

    def on_write(self, req: WriteRequest) -> None:
        if req.kind == JOB and req.verb == "create":
            self.creates[req.name] += 1
            if self.creates[req.name] > 1:
                self.fail(f"second create of Job {req.name}")
            body = dict(req.body or {})
            meta = body.get("metadata", {})
            labels = meta.get("labels", {})
            if labels.get(LABEL_OPERATION_TYPE) in READINGS:
                self._no_reading_while_stalled(labels.get(LABEL_OWNER_UID, ""))
            if labels.get(LABEL_OPERATION_TYPE) in MUTATING:
                key = (labels[LABEL_OWNER_UID], labels[LABEL_OPERATION])
                self.dispatches[key] += 1
                if self.dispatches[key] > 1:
                    self.fail(f"second dispatch of operation {key[1]}")
                self._no_record_owed(labels[LABEL_OWNER_UID], key[1])
        if req.kind == LEASE and req.verb == "patch":
            spec = dict(req.body or {}).get("spec", {})
            if "holderIdentity" in spec and spec["holderIdentity"] is None:
                self._check_release(req.name)

    def _no_record_owed(self, owner_uid: str, operation: str) -> None:
        """A mutation is never dispatched while its resource owes proof of an earlier one."""
        for res in self.world.resources:
            obj = self.world.cluster.system.get(res.family.kind, NS, res.name)
            if obj is None or obj["metadata"]["uid"] != owner_uid:
                continue
            status = obj.get("status") or {}
            if status.get("pendingObservation") or status.get("unresolvedRun"):
                self.fail(f"{res.name}: {operation} dispatched while proof is owed")

    def _inputs(self, res: Any, obj: dict[str, Any]) -> tuple[Any, ...]:
        """What a reading depends on, as the world holds it: the spec (generation), the
        Secret, the verification policy, a migration directory's ConfigMaps."""
        api = self.world.cluster.system

        def version(kind: Any, name: str) -> str | None:
            found = api.get(kind, NS, name)
            return None if found is None else str(found["metadata"]["resourceVersion"])

        spec = obj.get("spec") or {}
        policy = str((spec.get("policy") or {}).get("verificationPolicy", DEFAULT_POLICY))
        dirs = ((spec.get("directory") or {}).get("configMaps")) or []
        return (
            obj["metadata"].get("generation"),
            version(SECRET, str(spec["target"]["secretRef"]["name"])),
            version(CONFIGMAP, policy),
            tuple(version(CONFIGMAP, str(d)) for d in dirs),
        )

    def _note_stall(
        self, res: Any, obj: dict[str, Any] | None, before: dict[str, Any], status: dict[str, Any]
    ) -> None:
        """Remember the inputs each reading was claimed under; a deterministic failure
        stalls the resource on the inputs of the reading that failed."""
        claim = status.get("activeOperation") or {}
        if obj is not None and claim and claim.get("operationId") not in self.claimed:
            self.claimed[str(claim.get("operationId"))] = self._inputs(res, obj)
        failure = status.get("readingFailure") or {}
        if obj is None or not failure or failure.get("retry", True):
            self.stalls.pop(res.name, None)
            return
        operation = str(failure.get("operationId"))
        if operation in self.claimed and self.stalls.get(res.name, ("",))[0] != operation:
            self.stalls[res.name] = (operation, self.claimed[operation])

    def _no_reading_while_stalled(self, owner_uid: str) -> None:
        """A reading that failed in a way the same inputs reproduce is not dispatched
        again until the spec, the Secret, the policy or the directory changes."""
        for res in self.world.resources:
            obj = self.world.cluster.system.get(res.family.kind, NS, res.name)
            if obj is None or obj["metadata"]["uid"] != owner_uid or res.name not in self.stalls:
                continue
            operation, inputs = self.stalls[res.name]
            if self._inputs(res, obj) == inputs:
                self.fail(
                    f"{res.name}: reading dispatched again after {operation} failed "
                    "deterministically, with the same inputs"
                )

    def _check_release(self, lease: str) -> None:
        obj = self.world.cluster.system.get(LEASE, "ptah-system", lease)
        holder = (obj or {}).get("spec", {}).get("holderIdentity") or ""
        operation = holder.split("/", 1)[-1]
        for run in self.world.kubelet.runs.values():
            if run.operation_id == operation and run.mutating and run.fault != "stray":
                self.fail(f"Lease {lease} released while {operation} may still write")

    # --- after every step

    def after_step(self, check_secrets: bool) -> None:
        for res in self.world.resources:
            obj = self.world.cluster.system.get(res.family.kind, NS, res.name)
            status = (obj or {}).get("status") or {}
            before = self.previous.get(res.name, {})
            self._claim_and_record(res.name, before, status)
            self._record_cleared(res, obj, before, status)
            self._note_stall(res, obj, before, status)
            self.previous[res.name] = status
        for db in self.world.dbs.by_name.values():
            for op, n in db.executions.items():
                if n > 1:
                    self.fail(f"operation {op} executed {n} times on {db.name}")
        if check_secrets:
            self._no_credentials()

    def _claim_and_record(self, name: str, before: dict[str, Any], status: dict[str, Any]) -> None:
        record = status.get("pendingObservation") or status.get("unresolvedRun")
        claim = status.get("activeOperation")
        if claim and claim.get("mutating") and record:
            self.fail(f"{name}: a mutating claim beside an uncertainty record")
        old = before.get("activeOperation")
        if not old or not old.get("mutating") or not old.get("dispatchStarted"):
            return
        if claim and claim.get("operationId") == old["operationId"]:
            return
        last = status.get("lastMutation") or {}
        accounted = last.get("operationId") == old["operationId"] and last.get("outcome") in {
            "Succeeded",
            "Failed",
            "Refused",
            "Fenced",
        }
        retained = record is not None and record.get("operationId") == old["operationId"]
        if accounted == retained:
            self.fail(
                f"{name}: dispatched claim {old['operationId']} left "
                f"{'both an account and' if accounted else 'neither an account nor'} a record "
                f"(last={last.get('operationId')}/{last.get('outcome')}, "
                f"phase={status.get('phase')})"
            )

    def _record_cleared(
        self, res: Any, obj: dict[str, Any] | None, before: dict[str, Any], status: dict[str, Any]
    ) -> None:
        old = before.get("pendingObservation") or before.get("unresolvedRun")
        new = status.get("pendingObservation") or status.get("unresolvedRun")
        if not old or (new and new.get("operationId") == old.get("operationId")):
            return
        if obj is None:
            self.fail(f"{res.name}: deleted while proof of {old['operationId']} was owed")
            return
        if old["operationId"] in (status.get("abandonedProofs") or []):
            return
        for run in self.world.kubelet.runs.values():
            if run.operation_id == old["operationId"]:
                self.fail(f"{res.name}: record cleared while its executor still runs")
        db = self.world.dbs.by_name[res.db]
        if not _settled(res.family is SCHEMA_FAMILY, db, obj, old):
            self.fail(f"{res.name}: record {old['operationId']} cleared without a settling reading")

    def _no_credentials(self) -> None:
        secrets = list(self.world.secrets.values())
        for kind, obj in self.world.cluster.objects():
            if kind == SECRET:
                continue
            text = json.dumps(obj)
            for secret in secrets:
                if secret in text:
                    self.fail(f"a credential appears in {kind.kind} {obj['metadata']['name']}")

    # --- once faults stop

    def at_rest(self) -> None:
        for res in self.world.resources:
            obj = self.world.cluster.system.get(res.family.kind, NS, res.name)
            if obj is None:
                continue
            status = obj.get("status") or {}
            record = status.get("pendingObservation") or status.get("unresolvedRun")
            if status.get("activeOperation"):
                self.fail(f"{res.name}: still claimed after faults stopped ({status.get('phase')})")
            if status.get("pendingLockRelease"):
                self.fail(f"{res.name}: release still pending after faults stopped")
            ready = any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in status.get("conditions", [])
            )
            stalled = any(
                c.get("type") == "Stalled" and c.get("status") == "True"
                for c in status.get("conditions", [])
            )
            waiting = status.get("phase") == "WaitingForApproval"
            if not (ready or record or stalled or waiting or obj["spec"].get("suspend")):
                self.fail(
                    f"{res.name}: neither terminal nor explicitly uncertain ({status.get('phase')})"
                )
            alone = sum(r.db == res.db for r in self.world.resources) == 1
            if ready and alone and res.family is SCHEMA_FAMILY:
                desired = obj["spec"]["source"]["inline"]
                if self.world.dbs.by_name[res.db].plan(desired)["changes"]:
                    self.fail(f"{res.name}: Ready but the database differs from the desired schema")

    def write_hook(self, inner: Any) -> Any:
        def hook(req: WriteRequest) -> FaultDecision:
            decision: FaultDecision = inner(req) if inner else PROCEED
            self.on_write(req)
            return decision

        return hook


def _settled(schema: bool, db: SimDatabase, obj: dict[str, Any], record: dict[str, Any]) -> bool:
    if schema:
        desired = obj["spec"]["source"]["inline"]
        return db.fingerprint() == record.get("expectedAfter") or not db.plan(desired)["changes"]
    return db.dirty is None
