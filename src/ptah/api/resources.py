"""The ptah.io/v1alpha1 resources: PtahSchema, PtahMigration, PtahPlan, PtahApproval and
PtahRollout (one template fanned out to many targets)."""

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
    SecretKeyRef,
    TargetSpec,
    UncertainRecord,
)
from ptah.api.digest import digest

# ---------------------------------------------------------------- PtahSchema


class ConfigMapKeyRef(Model):
    name: Annotated[str, Field(min_length=1)]
    key: Annotated[str, Field(min_length=1)]


class SchemaSource(Model):
    """The desired schema: inline SQL or a ConfigMap key, optionally pinned by sha256."""

    inline: str | None = None
    config_map_key_ref: ConfigMapKeyRef | None = None
    sha256: Annotated[str | None, Field(pattern=r"^[0-9a-f]{64}$")] = None


class SchemaTemplate(Model):
    """A PtahSchema's spec without its target: what a PtahRollout fans out."""

    source: SchemaSource
    policy: Policy = Field(default_factory=Policy)
    runner: RunnerSpec = Field(default_factory=RunnerSpec)
    suspend: bool = False
    drift_check_interval_seconds: Annotated[int, Field(ge=0, le=604800)] = 600


class SchemaSpec(SchemaTemplate):
    target: TargetSpec


class SchemaStatus(LifecycleStatus):
    pending_observation: UncertainRecord | None = None

    @property
    def record(self) -> UncertainRecord | None:
        return self.pending_observation

    def record_patch(self, record: UncertainRecord | None) -> dict[str, Any]:
        return {"pendingObservation": None if record is None else record.replacing()}


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


class MigrationTemplate(Model):
    """A PtahMigration's spec without its target: what a PtahRollout fans out."""

    directory: MigrationDirectory
    target_version: str | None = None
    baseline_version: str | None = None
    policy: MigrationPolicy = Field(default_factory=MigrationPolicy)
    runner: RunnerSpec = Field(default_factory=RunnerSpec)
    suspend: bool = False


class MigrationSpec(MigrationTemplate):
    target: TargetSpec


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

    @property
    def record(self) -> UncertainRecord | None:
        return self.unresolved_run

    def record_patch(self, record: UncertainRecord | None) -> dict[str, Any]:
        return {"unresolvedRun": None if record is None else record.replacing()}


class PtahMigration(Model):
    api_version: Literal["ptah.io/v1alpha1"] = "ptah.io/v1alpha1"
    kind: Literal["PtahMigration"] = "PtahMigration"
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: MigrationSpec
    status: MigrationStatus = Field(default_factory=MigrationStatus)


# ------------------------------------------------------------------ PtahPlan


# Bounds on the warnings a PtahPlan keeps: a reading's frame may say more than an object
# should carry; the count of what was cut is kept as the last warning.
PLAN_WARNINGS = 50
PLAN_WARNING_CHARS = 500


def plan_warnings(said: list[str]) -> list[str] | None:
    """The warnings a PtahPlan keeps of what a reading said: None when it said nothing,
    else at most :data:`PLAN_WARNINGS`, each cut to :data:`PLAN_WARNING_CHARS`."""
    if not said:
        return None
    kept = [
        w if len(w) <= PLAN_WARNING_CHARS else w[: PLAN_WARNING_CHARS - 3] + "..." for w in said
    ]
    if len(kept) > PLAN_WARNINGS:
        cut = len(kept) - (PLAN_WARNINGS - 1)
        kept = [*kept[: PLAN_WARNINGS - 1], f"... and {cut} more warnings"]
    return kept


class PlannedStatement(Model):
    sql: str
    hazards: list[str] = Field(default_factory=list)
    transaction: Literal["new", "none"] | None = Field(
        default=None,
        description="Where apply runs it: absent, in the plan's current transaction; new,"
        " at the start of a transaction of its own (what ran before commits first); none,"
        " outside any transaction (CREATE INDEX CONCURRENTLY).",
    )
    lock: str | None = Field(
        default=None, description="The strongest lock it takes on a table that exists."
    )


class PlanFingerprints(Model):
    """Everything the plan was computed under; any one moving discards the plan."""

    source: str
    target_schema: str
    expected_after: str
    policy: str
    binding_epoch: int
    database: str
    generation: int
    after_abandoned: str | None = Field(
        default=None,
        description="The abandoned proof (operation ID) this plan was computed after: a "
        "plan read after an abandonment is a new plan with its own digest and approval, "
        "so the abandoned plan's digest is never dispatched again.",
    )


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
    warnings: list[str] | None = Field(
        default=None,
        description="What the plan reading said beside its statements: objects left alone"
        " under spec.policy.ignore, lines of the desired file left out (psql"
        " meta-commands), online caveats. Absent when it said nothing (at most"
        f" {PLAN_WARNINGS} are kept, each cut to {PLAN_WARNING_CHARS} characters).",
    )

    def lock_heavy(self) -> list[str]:
        """The statements (``[n]``, from 1) that block their table's writers while they
        scan, rewrite or copy it: what ``spec.policy.online.lockHeavy: Refuse`` refuses."""
        return [f"[{i}]" for i, s in enumerate(self.statements, 1) if "lock-heavy" in s.hazards]


def statements_digest(statements: list[PlannedStatement]) -> str:
    """What a person decides on when approving a rollout's plans: the statements (with
    their hazards) in order, and nothing about the target they were planned for, so
    every target whose plan has exactly these statements shares one decision."""
    return digest([s.wire() for s in statements], 40)


class PtahPlan(Model):
    api_version: Literal["ptah.io/v1alpha1"] = "ptah.io/v1alpha1"
    kind: Literal["PtahPlan"] = "PtahPlan"
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: PlanSpec


# -------------------------------------------------------------- PtahApproval


class ResourceRef(Model):
    kind: Literal["PtahSchema", "PtahMigration", "PtahRollout"]
    name: Annotated[str, Field(min_length=1)]


class ApprovalSpec(Model):
    """Approves one plan digest for one resource; spent once. For a PtahRollout,
    ``planDigest`` is a statements digest: the rollout spends it once per target whose
    plan has exactly those statements, by creating that target's own approval."""

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


# --------------------------------------------------------------- PtahRollout


class LabelSelectorRequirement(Model):
    key: Annotated[str, Field(min_length=1)]
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = Field(default_factory=list)


class LabelSelector(Model):
    """A Kubernetes label selector over the Secrets of the rollout's namespace."""

    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None

    def matches(self, labels: dict[str, str]) -> bool:
        for key, value in (self.match_labels or {}).items():
            if labels.get(key) != value:
                return False
        for req in self.match_expressions or []:
            present = req.key in labels
            if req.operator == "Exists" and not present:
                return False
            if req.operator == "DoesNotExist" and present:
                return False
            if req.operator == "In" and (not present or labels[req.key] not in req.values):
                return False
            if req.operator == "NotIn" and present and labels[req.key] in req.values:
                return False
        return True


class RolloutTarget(Model):
    """One explicitly listed target: a Secret of the rollout's namespace."""

    secret_ref: SecretKeyRef
    engine: Engine | None = Field(default=None, description="Defaults to template.engine.")


class RolloutTargets(Model):
    """Which databases the template goes to: Secrets selected by label and/or listed."""

    selector: LabelSelector | None = None
    secrets: list[RolloutTarget] = Field(default_factory=list)
    secret_key: Annotated[str, Field(min_length=1)] = Field(
        default="url", description="The key holding the URL in each selected Secret."
    )


class RolloutTemplate(Model):
    """What every target gets: a PtahSchema or a PtahMigration spec without its target."""

    engine: Engine
    dev_secret_ref: SecretKeyRef | None = None
    schema_: SchemaTemplate | None = Field(default=None, alias="schema")
    migration: MigrationTemplate | None = None

    @property
    def child_kind(self) -> Literal["PtahSchema", "PtahMigration"]:
        return "PtahSchema" if self.schema_ is not None else "PtahMigration"


class RolloutStrategy(Model):
    """A canary group first, then waves of at most ``maxParallel`` targets."""

    canary: Annotated[int, Field(ge=0)] = 1
    canary_percent: Annotated[int | None, Field(ge=1, le=100)] = None
    max_parallel: Annotated[int, Field(ge=1, le=10000)] = 10
    max_failures: Annotated[int, Field(ge=0)] = 0
    stop_on_uncertain: bool = True


class RolloutSpec(Model):
    template: RolloutTemplate
    targets: RolloutTargets
    strategy: RolloutStrategy = Field(default_factory=RolloutStrategy)
    paused: bool = False


class RolloutCounts(Model):
    """Targets per phase, for the template's current revision."""

    total: int = 0
    ready: int = 0
    applying: int = 0
    waiting_for_approval: int = 0
    uncertain: int = 0
    failed: int = 0
    pending: int = 0


class RolloutStop(Model):
    """Why the rollout starts nothing new: the target and its reason."""

    target: str
    child: str = ""
    reason: str
    message: str = ""


class RolloutDecision(Model):
    """A distinct plan (by statements) that targets wait on: one decision for all."""

    statements_digest: str
    statements: int
    destructive: bool = False
    targets: int
    example: str = Field(description="One child waiting on these statements.")


class RolloutTargetStatus(Model):
    name: str = Field(description="The target: its Secret (and key, when not the default).")
    child: str
    wave: int
    phase: str
    revision: bool = Field(default=False, description="The child carries the current revision.")
    reason: str = ""


class RolloutStatus(Model):
    observed_generation: int | None = None
    phase: str | None = None
    conditions: list[Condition] = Field(default_factory=list)
    revision: str | None = Field(default=None, description="Digest of the template applied.")
    child_kind: str | None = None
    current_wave: int | None = None
    waves: int | None = None
    counts: RolloutCounts = Field(default_factory=RolloutCounts)
    stopped: RolloutStop | None = None
    decisions: list[RolloutDecision] = Field(default_factory=list)
    targets: list[RolloutTargetStatus] = Field(default_factory=list)
    applied_source: str | None = None


class PtahRollout(Model):
    api_version: Literal["ptah.io/v1alpha1"] = "ptah.io/v1alpha1"
    kind: Literal["PtahRollout"] = "PtahRollout"
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: RolloutSpec
    status: RolloutStatus = Field(default_factory=RolloutStatus)
