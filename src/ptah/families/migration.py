"""PtahMigration: a directory of versioned (and repeatable) migrations, a History
reading, an Apply of what is pending.

Only what differs from PtahSchema lives here: the directory mounts, the runner's
history and migrate subcommands, how a History reading becomes a plan (one
statement per pending version) and which reading settles an uncertain run
(a History of the same database with nothing pending and nothing dirty).
Repeatable files count as pending when their checksum changed; the state a run
reaches is the applied versions plus each repeatable's applied checksum.
"""

from __future__ import annotations

from typing import Any

from ptah.api.common import OperationType, PlanSummary, UncertainRecord
from ptah.api.digest import digest
from ptah.api.parsed import parse
from ptah.api.resources import (
    HistoryReading,
    MigrationSpec,
    MigrationStatus,
    PlannedStatement,
)
from ptah.kube.kinds import CONFIGMAP, MIGRATION
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
from ptah.workload.job import Mount

MIGRATIONS_MOUNT = "/ptah/migrations"


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) if x.isdigit() else 0 for x in v.replace("_", ".").split("."))


def _applied_state(reading: HistoryReading) -> list[str]:
    """What the database has: versions, then each repeatable at its applied checksum."""
    return [
        *reading.applied,
        *(f"{r.name}@{r.applied_checksum}" for r in reading.repeatables if r.applied_checksum),
    ]


class MigrationFamily:
    kind = MIGRATION
    label = "migration"
    reading_type: OperationType = "History"
    mutation_type: OperationType = "Migrate"
    watches: tuple[Watch, ...] = (Watch(CONFIGMAP),)  # the directory's ConfigMaps

    def spec_of(self, p: Pass) -> MigrationSpec:
        return parse(MigrationSpec, p.spec)

    def status_of(self, obj: dict[str, Any]) -> MigrationStatus:
        return parse(MigrationStatus, obj.get("status") or {})

    def references(self, spec: dict[str, Any]) -> References:
        directory = spec.get("directory") or {}
        return References(frozenset(str(n) for n in directory.get("configMaps") or []))

    def _mounts(self, p: Pass) -> list[Mount]:
        directory = p.spec.get("directory") or {}
        if directory.get("volume"):
            return [Mount("migrations-0", f"{MIGRATIONS_MOUNT}/0", dict(directory["volume"]))]
        return [
            Mount(f"migrations-{i}", f"{MIGRATIONS_MOUNT}/{i}", {"configMap": {"name": name}})
            for i, name in enumerate(directory.get("configMaps") or [])
        ]

    def _dir_args(self, p: Pass) -> list[str]:
        args: list[str] = []
        for mount in self._mounts(p):
            args += ["--dir", mount.path]
        return args

    def source_fingerprint(self, p: Pass) -> str | None:
        directory = p.spec.get("directory") or {}
        if directory.get("volume"):
            return digest(directory["volume"])
        parts = []
        for name in directory.get("configMaps") or []:
            cm = p.cluster.get(CONFIGMAP, p.namespace, name)
            if cm is None:
                return None
            parts.append([name, cm["metadata"]["uid"], digest(cm.get("data") or {})])
        return digest(parts)

    def reading_inputs(self, p: Pass) -> ReadingInputs | Observe:
        source = self.source_fingerprint(p)
        if source is None:
            return Observe(
                "Blocked",
                stalled_reason="DirectoryMissing",
                message="a ConfigMap of spec.directory.configMaps does not exist",
                waiting_for="the migration directory",
            )
        args = ["history", *self._dir_args(p)]
        baseline = self.spec_of(p).baseline_version
        if baseline:
            # The files up to it never run on a database without history: not read.
            args += ["--baseline", str(baseline)]
        return ReadingInputs(source=source, args=args, mounts=self._mounts(p))

    def _pending(self, spec: MigrationSpec, reading: HistoryReading) -> list[str]:
        if spec.target_version is None:
            return list(reading.pending)
        limit = _version_key(spec.target_version)
        return [v for v in reading.pending if _version_key(v) <= limit]

    def has_reading(self, status: MigrationStatus) -> bool:
        return status.history is not None

    def blocked(
        self, p: Pass, spec: MigrationSpec, status: MigrationStatus, plan: PlanSummary
    ) -> Observe | ReadAgain | None:
        reading = status.history
        assert reading is not None
        if reading.dirty:
            # A repair (``ptah migrate resolve``) happens in the database, where no watch
            # sees it: the History is read again after a pause, so a repaired migration
            # goes on by itself.
            since = p.seconds_since(reading.read_at)
            interval = p.env.proof_retry_seconds
            if since is not None and since >= interval:
                return READ_AGAIN
            d = reading.dirty[0]
            return Observe(
                "Blocked",
                stalled_reason="Dirty",
                message=f"migration {d.version} stopped at statement {d.statement} of {d.total}: "
                f"{d.error}"[:400]
                + "; repair the database and its history row by hand (ptah migrate resolve); "
                "the history is read again every "
                f"{interval:g} s",
                waiting_for="a person to resolve the partial migration",
                requeue_after=interval - since if since is not None else interval,
            )
        if reading.mismatched:
            m = reading.mismatched[0]
            return Observe(
                "Blocked",
                stalled_reason="ChecksumMismatch",
                message=f"applied migration {m.version} was edited (expected {m.expected[:12]}, "
                f"found {m.actual[:12]}); nothing was run",
                waiting_for="the directory restored",
            )
        return None

    def ready(
        self, p: Pass, spec: MigrationSpec, status: MigrationStatus, plan: PlanSummary
    ) -> Observe | ReadAgain:
        assert status.history is not None
        # The directory's own hash (the runner's, as `ptah migrate hash` prints it), so
        # a CI step can compute the digest it waits for from the files it ships.
        return Observe("Ready", ready=True, applied_source=status.history.directory_hash or None)

    def approval_required(self, spec: MigrationSpec, plan: PlanSummary) -> bool:
        return spec.policy.approval == "Always"

    def mutation_inputs(
        self, p: Pass, spec: MigrationSpec, plan: PlanSummary
    ) -> MutationInputs | Observe | ReadAgain:
        args = ["migrate", *self._dir_args(p)]
        if spec.target_version:
            args += ["--to", spec.target_version]
        if spec.baseline_version:
            args += ["--baseline", spec.baseline_version]
        return MutationInputs(
            args=args,
            mounts=self._mounts(p),
            expected_after=plan.expected_after,
            source=self.source_fingerprint(p),
        )

    def _reading(self, frame: ResultFrame) -> HistoryReading:
        """The frame's History payload as the status model. The runner's entries carry
        more than status keeps (a dirty entry's state, start time and applied count; an
        out-of-order entry's state and successor), and an interrupted file has no error
        text: each is projected onto the status fields here, so a partial file is
        reported instead of failing the pass."""
        data = frame.data
        dirty = [
            {
                "version": str(d["version"]),
                "statement": int(d["statement"]),
                "total": int(d["total"]),
                "error": str(d.get("error") or d.get("state") or "interrupted"),
            }
            for d in data.get("dirty", [])
        ]
        late = [
            str(o["version"]) if isinstance(o, dict) else str(o) for o in data.get("outOfOrder", [])
        ]
        repeatables = [
            {
                "name": str(r["name"]),
                "checksum": str(r["checksum"]),
                "appliedChecksum": str(r.get("appliedChecksum") or ""),
                "state": str(r["state"]),
            }
            for r in data.get("repeatables", [])
        ]
        return HistoryReading.model_validate(
            {
                "applied": data.get("applied", []),
                "pending": data.get("pending", []),
                "repeatables": repeatables,
                "repeatablesPending": data.get("repeatablesPending", []),
                "undoIgnored": data.get("undoIgnored", []),
                "dirty": dirty,
                "mismatched": data.get("mismatched", []),
                "outOfOrder": late,
                "missingFromDirectory": data.get("missingFromDirectory", []),
                "directoryHash": data.get("directoryHash", ""),
                "database": frame.database.digest if frame.database else "",
            }
        )

    def plan_from_reading(self, p: Pass, frame: ResultFrame) -> PlanDraft:
        reading = self._reading(frame)
        spec = MigrationSpec.model_validate(p.spec)
        pending = self._pending(spec, reading)
        repeatables = list(reading.repeatables_pending)
        after = [
            *reading.applied,
            *pending,
            *(f"{r.name}@{r.checksum}" for r in reading.repeatables),
        ]
        return PlanDraft(
            statements=[PlannedStatement(sql=f"-- migration {v}") for v in pending]
            + [PlannedStatement(sql=f"-- repeatable {name}") for name in repeatables],
            changes=bool(pending or repeatables) and not reading.dirty and not reading.mismatched,
            destructive=False,
            target_schema=digest(_applied_state(reading)),
            expected_after=digest(after),
        )

    def reading_status(self, p: Pass, frame: ResultFrame) -> dict[str, Any]:
        reading = self._reading(frame).model_copy(update={"read_at": p.now_iso()})
        spec = MigrationSpec.model_validate(p.spec)
        return {
            "history": reading.replacing(),
            "pendingVersions": self._pending(spec, reading),
            "pendingRepeatables": list(reading.repeatables_pending),
        }

    def settles(self, record: UncertainRecord, frame: ResultFrame) -> bool:
        reading = self._reading(frame)
        if reading.dirty or reading.mismatched:
            return False
        reached = (
            bool(record.expected_after) and digest(_applied_state(reading)) == record.expected_after
        )
        return reached or not (reading.pending or reading.repeatables_pending)

    def unsettled(self, p: Pass) -> str:
        reading = self.status_of(p.obj).history
        if reading is None:
            return "no reading yet"
        if reading.dirty:
            d = reading.dirty[0]
            return (
                f"migration {d.version} is partially applied: it stopped at statement "
                f"{d.statement} of {d.total} ({d.error[:200]})"
            )
        if reading.mismatched:
            return f"applied migration {reading.mismatched[0].version} was edited"
        if reading.pending:
            return f"versions still pending: {', '.join(reading.pending[:10])}"
        return f"repeatable files still to run: {', '.join(reading.repeatables_pending[:10])}"
