"""Types both resource families share: target, runner settings, conditions and the
durable safety state of the mutation lifecycle.

Field names are the wire names (camelCase), because these models are also the
source of the CRD schemas: what a user writes in YAML is what is declared here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

Engine = Literal["postgres", "mysql", "sqlite"]
OperationType = Literal["Plan", "Apply", "History", "Migrate"]


class Model(BaseModel):
    """Wire models: camelCase on the wire, snake_case in Python, unknown fields refused."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", validate_default=True
    )

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def replacing(self) -> dict[str, Any]:
        """The value for a merge patch that replaces this whole object: absent fields are
        sent as null, so nothing from an earlier write survives in the merge."""
        return self.model_dump(mode="json", by_alias=True)


class SecretKeyRef(Model):
    name: Annotated[str, Field(min_length=1, max_length=253)]
    key: Annotated[str, Field(min_length=1)] = "url"


class TargetSpec(Model):
    """Where the schema lives. The connection URL (with credentials) stays in a Secret:
    the operator reads only the Secret's metadata, and only the runner Pod sees the URL."""

    engine: Engine
    secret_ref: SecretKeyRef
    dev_secret_ref: SecretKeyRef | None = Field(
        default=None, description="Scratch database for normalising the desired schema."
    )


#: Ptah mounts the runner's inputs under this path; runner volumes stay out of it.
RESERVED_MOUNT_ROOT = "/ptah"
#: The volume a Plan runner keeps its re-plan cache on (``RunnerSpec.cache_volume``).
CACHE_VOLUME = "plan-cache"


class RunnerSpec(Model):
    """How runner Pods look. Every field ends up in the admission envelope."""

    image: Annotated[str, Field(min_length=1)] = "ptah/ptah:dev"
    service_account_name: str | None = None
    resources: dict[str, dict[str, str]] | None = None
    node_selector: dict[str, str] | None = None
    tolerations: list[dict[str, Any]] | None = None
    pod_security_context: dict[str, Any] | None = Field(
        default=None, json_schema_extra={"x-kubernetes-preserve-unknown-fields": True}
    )
    security_context: dict[str, Any] | None = Field(
        default=None, json_schema_extra={"x-kubernetes-preserve-unknown-fields": True}
    )
    active_deadline_seconds: Annotated[int, Field(ge=10, le=86400)] = 900
    ttl_seconds_after_finished: Annotated[int, Field(ge=0, le=604800)] = 600
    volumes: list[dict[str, Any]] | None = Field(
        default=None,
        description="Pod volumes of runner Pods (e.g. where a SQLite database lives).",
    )
    volume_mounts: list[dict[str, Any]] | None = Field(
        default=None, description="Where the runner container mounts spec.runner.volumes."
    )
    cache_volume: dict[str, Any] | None = Field(
        default=None,
        description="A Pod volume source without a name (e.g. {persistentVolumeClaim: "
        "{claimName: ptah-plan-cache}}) that Plan runners mount at /ptah/cache and keep the "
        "re-plan cache on, so a re-plan reuses the last inspection while the target's "
        "catalogs are unchanged. Null: no cache (every plan reads the target whole).",
    )

    @model_validator(mode="after")
    def _mounts_name_volumes(self) -> RunnerSpec:
        """Volumes and mounts beside the ones Ptah adds (``input``, ``migrations-<i>``,
        ``plan-cache`` under ``/ptah``), each mount naming a declared volume."""
        names = [str(v.get("name") or "") for v in self.volumes or []]
        if "" in names or len(set(names)) != len(names):
            raise ValueError("runner.volumes: every volume needs a name, each used once")
        taken = [n for n in names if n in ("input", CACHE_VOLUME) or n.startswith("migrations-")]
        if taken:
            raise ValueError(f"runner.volumes: name {taken[0]!r} is reserved for Ptah's inputs")
        for m in self.volume_mounts or []:
            name, path = m.get("name"), str(m.get("mountPath") or "")
            if name not in names:
                raise ValueError(f"runner.volumeMounts: {name!r} names no runner volume")
            if (
                not path.startswith("/")
                or path.rstrip("/") in ("", RESERVED_MOUNT_ROOT)
                or (path.startswith(RESERVED_MOUNT_ROOT + "/"))
            ):
                raise ValueError(
                    f"runner.volumeMounts: mountPath {path!r} must be absolute and outside "
                    f"{RESERVED_MOUNT_ROOT}"
                )
        if self.cache_volume is not None and (
            len(self.cache_volume) != 1 or "name" in self.cache_volume
        ):
            raise ValueError(
                "runner.cacheVolume: one volume source without a name, e.g. "
                "{persistentVolumeClaim: {claimName: ptah-plan-cache}}"
            )
        return self


class Condition(Model):
    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str = ""
    observed_generation: int | None = None
    last_transition_time: str


class JobRef(Model):
    name: str
    uid: str | None = None


class LeaseClaim(Model):
    """The realm this claim binds: one Lease per coordination digest."""

    coordination_digest: str
    lease_name: str
    holder: str
    expected_epoch: int = Field(description="Persisted before acquisition.")
    epoch: int | None = Field(default=None, description="Written after the Lease was taken.")


class AdmissionSnapshot(Model):
    """The Pod admission envelope: what the Job's Pod may look like, by digest."""

    digest: str
    image: str
    service_account_name: str | None = None
    active_deadline_seconds: int | None = Field(
        default=None,
        description="The deadline the Job and its Pods were built with (the digest covers"
        " it): a release's hold is measured from it, never from a later spec.runner.",
    )


class RunnerMount(Model):
    """A volume the runner reads its inputs from, persisted so a later pass rebuilds
    exactly the Job this claim names."""

    name: str
    path: str
    source: dict[str, Any] = Field(json_schema_extra={"x-kubernetes-preserve-unknown-fields": True})


class ActiveOperation(Model):
    """The claim: durable before the Job exists, carrying the Job's deterministic name."""

    operation_id: str
    type: OperationType
    mutating: bool
    job_name: str
    attempt: int = 1
    input_fingerprint: str
    binding_epoch: int
    plan_name: str | None = None
    plan_digest: str | None = None
    approval_name: str | None = None
    expected_database: str | None = Field(
        default=None, description="Identity digest of the database the work was computed for."
    )
    expected_after: str | None = Field(
        default=None, description="The schema fingerprint the plan expects after it ran."
    )
    source: str | None = Field(default=None, description="Digest of the desired source read.")
    reading_inputs: str | None = Field(
        default=None,
        description="For a reading: the digest of what it was claimed under (source, spec "
        "generation, Secret binding, verification policy); a deterministic failure holds "
        "on it.",
    )
    generation: int = 1
    claimed_at: str
    lease: LeaseClaim | None = None
    admission_snapshot: AdmissionSnapshot | None = None
    args: list[str] = Field(default_factory=list)
    input_config_map: str | None = None
    mounts: list[RunnerMount] = Field(default_factory=list)
    dispatch_started: str | None = None
    job_uid: str | None = None


class PodEvidence(Model):
    uids: list[str] = Field(default_factory=list)
    count: int = 0


class UncertainRecord(Model):
    """An unresolved mutating attempt: what may have run, where, and why we cannot tell.

    Independent of phase and of every condition reason: it is cleared only by a
    fresh read-only reading that settles it (or by the audited escape hatch).
    """

    operation_id: str
    type: OperationType
    job_name: str
    job_uid: str | None = None
    plan_name: str | None = None
    plan_digest: str | None = None
    database: str | None = Field(default=None, description="Identity digest to prove against.")
    expected_after: str | None = None
    reason: str
    detail: str = ""
    pods: PodEvidence = Field(default_factory=PodEvidence)
    recorded_at: str
    proof_read_at: str | None = Field(
        default=None,
        description="When a proving reading last finished without settling this record "
        "(set with that reading's outcome; paces the next one).",
    )


class PodSeen(Model):
    """A Pod of a dispatched Job as the operator saw it: ``stopped`` once it was observed
    terminal with its containers terminated (or provably never started)."""

    name: str
    uid: str
    stopped: bool = False


class LockRelease(Model):
    """A staged, credential-free release request, kept until an idempotent release succeeds.

    It is withheld until the executor is stopped on evidence (``ptah.lifecycle.executor``),
    and it carries that evidence: the Pods seen and whether each was seen to stop, the
    Job's own count of Pods, and why the release is withheld."""

    operation_id: str
    type: OperationType | None = Field(
        default=None, description="The type of the operation whose release this is."
    )
    lease_name: str
    holder: str
    epoch: int | None = None
    job_name: str | None = None
    job_uid: str | None = None
    executor_stopped: bool = Field(
        default=False, description="The account saw the runner terminate: release at once."
    )
    hold_until: str | None = Field(
        default=None,
        description="Dispatch plus holdSeconds, on the dispatching controller's clock: "
        "while the executor may still write, the Lease is renewed until then, and "
        "afterwards left to expire. Each controller measures the hold on its own clock.",
    )
    hold_seconds: int | None = Field(
        default=None,
        description="How long after its dispatch the executor can still run at most: the "
        "Job's active deadline (the latest a runner Pod can start) plus the Pod's (the "
        "longest it then runs, enforced by its node even when cut off from the API) plus "
        "a margin of 60 s.",
    )
    staged_at: str
    pods: list[PodSeen] = Field(
        default_factory=list, description="Every Pod of the Job seen so far."
    )
    job_pods: int | None = Field(
        default=None, description="The Job's own count of the Pods it ran, once seen terminal."
    )
    withheld: str | None = Field(default=None, description="Why the release is withheld.")


class ExecutionBinding(Model):
    """The credentials generation a plan was computed under; a rotated Secret starts a new epoch."""

    epoch: int = 0
    secret_uid: str = ""
    secret_resource_version: str = ""


# Refusals that the same plan does not reproduce, so they do not block it: the database
# moved since the plan (a re-plan gives another digest), its lock was busy, or it is
# dirty (the History reading itself holds a dirty database back, and a repair may leave
# the plan's inputs as they were). Every other refusal (a baseline needed, a destructive
# change not allowed, an invalid migration...) would refuse the same plan again.
NON_BLOCKING_REFUSALS = frozenset({"TargetDrifted", "LockBusy", "Dirty"})


class LastMutation(Model):
    """The last dispatched mutating operation and how it ended: Succeeded, Failed or
    Refused (from its frame), Uncertain (no account), or Converged (an uncertain run
    that a fresh reading proved matching, with no Apply attributed to it)."""

    operation_id: str
    plan_digest: str | None = None
    outcome: str
    reason: str | None = Field(default=None, description="The frame's reason, if it gave one.")
    at: str

    def blocks(self, plan_digest: str | None) -> bool:
        """A plan whose run failed, or was refused for a reason the same plan reproduces,
        is not dispatched again by itself: it would end the same way, and a loop of
        mutating Jobs is no retry. A plan whose run is uncertain is held by its record
        while proof is owed; once the proof is abandoned, this is what refuses the same
        digest (a plan read after the abandonment folds it in and has another digest)."""
        if self.plan_digest != plan_digest:
            return False
        if self.outcome == "Failed":
            return True
        if self.outcome == "Uncertain":
            return True
        return self.outcome == "Refused" and (self.reason or "") not in NON_BLOCKING_REFUSALS


class TargetIdentityStatus(Model):
    digest: str
    engine: Engine
    summary: str = ""


class OnlinePolicy(Model):
    """How a plan changes tables that exist (docs/online.md): online by default.

    ``enabled`` is every technique's default; a technique's own field overrides it.
    """

    enabled: bool = Field(
        default=True,
        description="Plan changes on existing tables online (each technique below"
        " defaults to this).",
    )
    indexes: bool | None = Field(
        default=None,
        description="PostgreSQL: build and drop indexes of existing tables CONCURRENTLY,"
        " outside a transaction; a changed index is built under a temporary name and"
        " swapped in.",
    )
    constraints: bool | None = Field(
        default=None,
        description="PostgreSQL: add new foreign keys and checks on existing tables NOT"
        " VALID, then VALIDATE CONSTRAINT in a transaction of its own.",
    )
    not_null: bool | None = Field(
        default=None,
        description="PostgreSQL: SET NOT NULL through a NOT VALID check, its validation,"
        " SET NOT NULL (no scan), then the check dropped.",
    )
    algorithm: bool | None = Field(
        default=None,
        description="MariaDB/MySQL: request ALGORITHM=INSTANT or INPLACE, LOCK=NONE where"
        " the server supports it for the change.",
    )
    lock_heavy: Literal["Allow", "Refuse"] = Field(
        default="Allow",
        description="Refuse: a plan with a lock-heavy statement (one that blocks the"
        " table's writers while it scans, rewrites or copies it) is not applied.",
    )
    lock_timeout_seconds: Annotated[float | None, Field(gt=0, le=600)] = Field(
        default=None,
        description="Each statement's lock_timeout (default: the runner's, 10 s).",
    )
    lock_retries: Annotated[int | None, Field(ge=0, le=50)] = Field(
        default=None,
        description="How many times a statement that timed out waiting for a lock is"
        " tried again, with back-off (default: the runner's, 3).",
    )

    def technique(self, name: str) -> bool:
        value = getattr(self, name)
        return self.enabled if value is None else bool(value)

    def plan_args(self) -> list[str]:
        """The runner's plan options: one ``--offline=<technique>`` per technique off."""
        names = {"indexes": "indexes", "constraints": "constraints", "not_null": "not-null"}
        names["algorithm"] = "algorithm"
        return [f"--offline={flag}" for field, flag in names.items() if not self.technique(field)]

    def apply_args(self) -> list[str]:
        """The runner's apply options: the lock timeout and retries."""
        args: list[str] = []
        if self.lock_timeout_seconds is not None:
            args += ["--lock-timeout-seconds", f"{self.lock_timeout_seconds:g}"]
        if self.lock_retries is not None:
            args += ["--lock-retries", str(self.lock_retries)]
        return args


# An entry of spec.policy.ignore: a kind, or a kind and a name (ptah.engines.model.
# ignore_matcher). Not empty, not starting with '*' (that would cover every object of every
# kind) or with a blank, not ending with one, one line.
IgnoreEntry = Annotated[str, Field(pattern=r"^[^\s*](.*\S)?$", max_length=253)]


class Policy(Model):
    approval: Literal["Always", "Destructive", "Never"] = "Destructive"
    allow_destructive: bool = False
    online: OnlinePolicy = Field(default_factory=OnlinePolicy)
    ownership: Literal["ignore", "manage"] = Field(
        default="ignore",
        description="PostgreSQL: ignore leaves OWNER TO out of the desired source's load and"
        " never plans owners (roles the server lacks cannot break the load); manage runs"
        " OWNER TO and plans ALTER ... OWNER TO.",
    )
    ignore: list[IgnoreEntry] = Field(
        default_factory=list,
        description="PostgreSQL and MariaDB/MySQL: objects a plan leaves alone, each entry a"
        " kind as the census and the plan's warnings name it ('operator', 'trigger',"
        " 'publication'), optionally followed by a name ('publication dbz_publication');"
        " '*' matches any characters ('publication dbz_*'). A kind Ptah does not manage is"
        " let through the desired source instead of refused as Unmanaged. A kind it manages"
        " (PostgreSQL; MariaDB/MySQL tables and views), e.g. a change-data-capture tool's"
        " publication or a migration tool's history table: on the target the"
        " object and what goes with it are never dropped, altered or counted as drift, and"
        " what it uses is not dropped from under it; a desired source that creates one is"
        " refused (IgnoredInDesired). Both are reported in the plan's warnings.",
    )
    verification_policy: str = Field(
        default="ptah-verification-policy",
        description="ConfigMap re-read uncached before every claim.",
    )


class PlanSummary(Model):
    """The plan the resource currently acts on, with what it was computed under."""

    name: str
    digest: str
    changes: bool
    destructive: bool
    statements: int
    generation: int
    binding_epoch: int
    database: str
    expected_after: str = ""
    source: str = Field(
        default="", description="Digest of the desired source it was computed from."
    )
    warnings: int | None = Field(
        default=None,
        description="How many warnings the PtahPlan carries (spec.warnings); absent: none.",
    )


class ReadingFailure(Model):
    """Why the last reading failed, as the runner said it, and whether it is retried.

    A ``retry`` failure (unreachable database, lock timeout, no frame) is read again
    at ``nextReadingAfter``. Any other (the desired source does not load, a refused
    statement, an unsupported object, an unreadable directory) would fail the same
    way again: nothing is dispatched until ``inputs`` (the digest of source, spec
    generation, Secret binding and verification policy) changes.
    """

    operation_id: str
    reason: str
    message: str = ""
    retry: bool
    inputs: str = ""
    at: str


class LifecycleStatus(Model):
    """Status fields the lifecycle owns for both families."""

    observed_generation: int | None = None
    phase: str | None = None
    conditions: list[Condition] = Field(default_factory=list)
    execution_binding: ExecutionBinding | None = None
    target_identity: TargetIdentityStatus | None = None
    active_operation: ActiveOperation | None = None
    pending_lock_release: LockRelease | None = None
    last_mutation: LastMutation | None = None
    next_attempt: int | None = None
    last_reading_at: str | None = None
    waiting_for: str | None = None
    current_plan: PlanSummary | None = None
    applied_plan_digest: str | None = None
    applied_source: str | None = Field(
        default=None,
        description="Digest of the desired source the target last reached (the GitOps gate).",
    )
    abandoned_proofs: list[str] = Field(default_factory=list)
    reading_failures: int | None = None
    next_reading_after: str | None = None
    reading_failure: ReadingFailure | None = None

    @property
    def record(self) -> UncertainRecord | None:
        """The family's uncertainty record (a PtahSchema's pendingObservation, a
        PtahMigration's unresolvedRun); each family's status model says which field."""
        return None

    def record_patch(self, record: UncertainRecord | None) -> dict[str, Any]:
        """The status fields that write ``record`` (None: clear it)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no uncertainty record")
