"""The four ptah.io/v1alpha1 resources: PtahSchema, PtahMigration, PtahPlan, PtahApproval."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from ptah.api.common import (
    Condition,
    Engine,
    LifecycleStatus,
    Model,
    Policy,
    RunnerSpec,
    TargetSpec,
    UncertainRecord,
)

# ---------------------------------------------------------------- PtahSchema


class ConfigMapKeyRef(Model):
    name: Annotated[str, Field(min_length=1)]
    key: Annotated[str, Field(min_length=1)]


class SchemaSource(Model):
    """The desired schema: inline SQL or a ConfigMap key, optionally pinned by sha256."""

    inline: str | None = None
    config_map_key_ref: ConfigMapKeyRef | None = None
    sha256: Annotated[str | None, Field(pattern=r"^[0-9a-f]{64}$")] = None


class SchemaSpec(Model):
    target: TargetSpec
    source: SchemaSource
    policy: Policy = Field(default_factory=Policy)
    runner: RunnerSpec = Field(default_factory=RunnerSpec)
    suspend: bool = False
    drift_check_interval_seconds: Annotated[int, Field(ge=0, le=604800)] = 600


class SchemaStatus(LifecycleStatus):
    pending_observation: UncertainRecord | None = None


class PtahSchema(Model):
    api_version: Literal["ptah.io/v1alpha1"] = "ptah.io/v1alpha1"
    kind: Literal["PtahSchema"] = "PtahSchema"
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: SchemaSpec
    status: SchemaStatus = Field(default_factory=SchemaStatus)


# ------------------------------------------------------------- PtahMigration


class MigrationDirectory(Model):
    """The migration directory: one or more ConfigMaps merged (so the 1 MiB object
    limit never caps a directory), or any Pod volume source mounted as a directory."""

    config_maps: list[str] | None = None
    volume: dict[str, Any] | None = Field(
        default=None, json_schema_extra={"x-kubernetes-preserve-unknown-fields": True}
    )


class MigrationPolicy(Model):
    approval: Literal["Always", "Never"] = "Never"
    verification_policy: str = "ptah-verification-policy"


class MigrationSpec(Model):
    target: TargetSpec
    directory: MigrationDirectory
    target_version: str | None = None
    baseline_version: str | None = None
    policy: MigrationPolicy = Field(default_factory=MigrationPolicy)
    runner: RunnerSpec = Field(default_factory=RunnerSpec)
    suspend: bool = False


class DirtyFile(Model):
    version: str
    statement: int
    total: int
    error: str = ""


class Mismatch(Model):
    version: str
    expected: str
    actual: str


class RepeatableFile(Model):
    """A repeatable (``R__``) file against the latest application recorded for its name:
    ``pending`` (never run), ``applied`` (same checksum), ``changed`` (edited since;
    runs again) or ``dirty`` (its last application stopped part-way)."""

    name: str
    checksum: str
    applied_checksum: str = ""
    state: Literal["pending", "applied", "changed", "dirty"]


class HistoryReading(Model):
    applied: list[str] = Field(default_factory=list)
    pending: list[str] = Field(default_factory=list)
    repeatables: list[RepeatableFile] = Field(default_factory=list)
    repeatables_pending: list[str] = Field(default_factory=list)
    undo_ignored: list[str] = Field(default_factory=list)
    dirty: list[DirtyFile] = Field(default_factory=list)
    mismatched: list[Mismatch] = Field(default_factory=list)
    out_of_order: list[str] = Field(default_factory=list)
    missing_from_directory: list[str] = Field(default_factory=list)
    directory_hash: str = ""
    database: str = ""
    read_at: str = ""


class MigrationStatus(LifecycleStatus):
    history: HistoryReading | None = None
    pending_versions: list[str] = Field(default_factory=list)
    pending_repeatables: list[str] = Field(default_factory=list)
    unresolved_run: UncertainRecord | None = None


class PtahMigration(Model):
    api_version: Literal["ptah.io/v1alpha1"] = "ptah.io/v1alpha1"
    kind: Literal["PtahMigration"] = "PtahMigration"
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: MigrationSpec
    status: MigrationStatus = Field(default_factory=MigrationStatus)


# ------------------------------------------------------------------ PtahPlan


class PlannedStatement(Model):
    sql: str
    hazards: list[str] = Field(default_factory=list)


class PlanFingerprints(Model):
    """Everything the plan was computed under; any one moving discards the plan."""

    source: str
    target_schema: str
    expected_after: str
    policy: str
    binding_epoch: int
    database: str
    generation: int


class PlanSpec(Model):
    """Immutable once created (a CEL rule refuses edits)."""

    owner_kind: Literal["PtahSchema", "PtahMigration"]
    owner_name: str
    owner_uid: str
    engine: Engine
    statements: list[PlannedStatement] = Field(default_factory=list)
    destructive: bool = False
    changes: bool = False
    computed_under: PlanFingerprints


class PtahPlan(Model):
    api_version: Literal["ptah.io/v1alpha1"] = "ptah.io/v1alpha1"
    kind: Literal["PtahPlan"] = "PtahPlan"
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: PlanSpec


# -------------------------------------------------------------- PtahApproval


class ResourceRef(Model):
    kind: Literal["PtahSchema", "PtahMigration"]
    name: Annotated[str, Field(min_length=1)]


class ApprovalSpec(Model):
    """Approves one plan digest for one resource; spent once."""

    resource_ref: ResourceRef
    plan_digest: Annotated[str, Field(min_length=8)]
    approved_by: str = ""
    reason: str = ""


class ApprovalStatus(Model):
    conditions: list[Condition] = Field(default_factory=list)
    consumed_by_operation: str | None = None


class PtahApproval(Model):
    api_version: Literal["ptah.io/v1alpha1"] = "ptah.io/v1alpha1"
    kind: Literal["PtahApproval"] = "PtahApproval"
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: ApprovalSpec
    status: ApprovalStatus = Field(default_factory=ApprovalStatus)


def approval_consumed(approval: PtahApproval) -> bool:
    return any(c.type == "Consumed" and c.status == "True" for c in approval.status.conditions)
