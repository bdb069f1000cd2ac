"""What a resource family supplies to the lifecycle, and nothing more.

The lifecycle owns every obligation and the decision's skeleton
(``ptah.lifecycle.decide``); a family answers only questions whose answer differs
between PtahSchema and PtahMigration: what blocks it, when it is Ready, whether a
plan needs approval, the runner inputs of its reading and of its mutation, how a
reading becomes a plan, which reading settles an uncertainty record, and which
objects its spec references (so the operator knows whose change wakes it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ptah.api.common import LifecycleStatus, OperationType, PlanSummary, UncertainRecord
from ptah.api.resources import PlannedStatement
from ptah.kube.kinds import Kind
from ptah.runner.frame import ResultFrame
from ptah.workload.job import Mount

if TYPE_CHECKING:
    from ptah.lifecycle.context import Pass

SpecT = TypeVar("SpecT")
StatusT = TypeVar("StatusT", bound=LifecycleStatus)


@dataclass(frozen=True)
class Work:
    """An operation the lifecycle claims."""

    type: OperationType
    mutating: bool
    input_fingerprint: str
    args: list[str]
    inputs: dict[str, str] = field(default_factory=dict)
    mounts: list[Mount] = field(default_factory=list)
    plan_name: str | None = None
    plan_digest: str | None = None
    approval_name: str | None = None
    expected_database: str | None = None
    expected_after: str | None = None
    source: str | None = None


@dataclass(frozen=True)
class Observe:
    """Nothing to claim: publish where the resource stands and when to look again."""

    phase: str
    ready: bool = False
    stalled_reason: str | None = None
    message: str = ""
    waiting_for: str | None = None
    requeue_after: float | None = None
    applied_source: str | None = None  # with ready: the source digest the target reached


@dataclass(frozen=True)
class ReadAgain:
    """A family's answer that the target must be read again before anything else."""


READ_AGAIN = ReadAgain()


@dataclass(frozen=True)
class ReadingInputs:
    """What a family's read-only reading runs with, and the digest of the source it reads."""

    source: str
    args: list[str]
    inputs: dict[str, str] = field(default_factory=dict)
    mounts: list[Mount] = field(default_factory=list)


@dataclass(frozen=True)
class MutationInputs:
    """What a family's mutation of an approved plan runs with."""

    args: list[str]
    inputs: dict[str, str] = field(default_factory=dict)
    mounts: list[Mount] = field(default_factory=list)
    expected_after: str | None = None
    source: str | None = None


@dataclass(frozen=True)
class PlanDraft:
    """A reading turned into the content of a PtahPlan."""

    statements: list[PlannedStatement]
    changes: bool
    destructive: bool
    target_schema: str
    expected_after: str
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class References:
    """Objects (in the resource's namespace) a spec reads, by name."""

    configmaps: frozenset[str] = frozenset()
    secrets: frozenset[str] = frozenset()

    def __or__(self, other: References) -> References:
        return References(self.configmaps | other.configmaps, self.secrets | other.secrets)


@dataclass(frozen=True)
class Watch:
    """A kind the operator watches for a family; ``metadata_only`` when name, labels and
    owners are all that mapping an event needs; ``label_selector`` when only objects
    carrying those labels can concern a resource (the server filters)."""

    kind: Kind
    metadata_only: bool = True
    label_selector: str = ""


class Family(Protocol[SpecT, StatusT]):
    kind: Kind
    label: str  # the family's name in metrics ("schema", "migration")
    reading_type: OperationType
    mutation_type: OperationType
    watches: tuple[Watch, ...]  # kinds its spec reads beyond the lifecycle's own

    def spec_of(self, p: Pass) -> SpecT:
        """The typed spec; raises ``pydantic.ValidationError`` for a malformed one."""

    def status_of(self, obj: dict[str, Any]) -> StatusT:
        """The typed status of ``obj``."""

    def references(self, spec: dict[str, Any]) -> References:
        """Objects the family's own part of ``spec`` reads (the target Secret and the
        verification policy are the lifecycle's: ``ptah.lifecycle.decide.referenced``)."""

    # ----------------------------------------------------------- the decision

    def source_fingerprint(self, p: Pass) -> str | None:
        """The current desired source, re-read uncached; None when it cannot be read."""

    def has_reading(self, status: StatusT) -> bool:
        """Whether the status holds the reading the family decides from."""

    def blocked(
        self, p: Pass, spec: SpecT, status: StatusT, plan: PlanSummary
    ) -> Observe | ReadAgain | None:
        """What holds a current plan back until a person acts, if anything (or that the
        target must be read again to see whether it still does)."""

    def ready(
        self, p: Pass, spec: SpecT, status: StatusT, plan: PlanSummary
    ) -> Observe | ReadAgain:
        """The Ready observation for a plan with no changes, or that a reading is due."""

    def approval_required(self, spec: SpecT, plan: PlanSummary) -> bool:
        """Whether ``plan`` needs a PtahApproval before it runs."""

    def reading_inputs(self, p: Pass) -> ReadingInputs | Observe:
        """The reading's runner inputs, or why it cannot be read."""

    def mutation_inputs(
        self, p: Pass, spec: SpecT, plan: PlanSummary
    ) -> MutationInputs | Observe | ReadAgain:
        """The mutation's runner inputs, what holds the plan back once its content is read,
        or that the plan must be read again (its object is gone)."""

    # ----------------------------------------------------------- readings

    def plan_from_reading(self, p: Pass, frame: ResultFrame) -> PlanDraft:
        """The plan a successful reading computed."""

    def reading_status(self, p: Pass, frame: ResultFrame) -> dict[str, Any]:
        """Family status fields a successful reading sets (wire names)."""

    def settles(self, record: UncertainRecord, frame: ResultFrame) -> bool:
        """Whether ``frame`` (a fresh read-only reading) settles ``record``."""

    def unsettled(self, p: Pass) -> str:
        """What the last reading showed that kept the record open, for a person."""


AnyFamily = Family[Any, Any]
