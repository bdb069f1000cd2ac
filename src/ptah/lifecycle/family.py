"""What a resource family supplies to the lifecycle, and nothing more.

The lifecycle owns every obligation; a family answers only questions whose
answer differs between PtahSchema and PtahMigration: which operation comes
next, which runner inputs it needs, how a reading becomes a plan, and which
reading settles an uncertainty record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ptah.api.common import LifecycleStatus, OperationType, UncertainRecord
from ptah.api.resources import PlannedStatement
from ptah.kube.kinds import Kind
from ptah.runner.frame import ResultFrame
from ptah.workload.job import Mount

if TYPE_CHECKING:
    from ptah.lifecycle.context import Pass


@dataclass(frozen=True)
class Work:
    """An operation the family wants claimed."""

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
class PlanDraft:
    """A reading turned into the content of a PtahPlan."""

    statements: list[PlannedStatement]
    changes: bool
    destructive: bool
    target_schema: str
    expected_after: str


class Family(Protocol):
    kind: Kind
    reading_type: OperationType
    mutation_type: OperationType
    record_field: str

    def status_of(self, obj: dict[str, Any]) -> LifecycleStatus:
        """The typed status of ``obj``."""

    def decide(self, p: Pass) -> Work | Observe:
        """The next step for a resource that owes nothing and holds no claim."""

    def reading_work(self, p: Pass, expected_database: str | None) -> Work | Observe:
        """A read-only reading of the target (also the proof of an uncertain run)."""

    def source_fingerprint(self, p: Pass) -> str | None:
        """The current desired source, re-read uncached; None when it cannot be read."""

    def plan_from_reading(self, p: Pass, frame: ResultFrame) -> PlanDraft:
        """The plan a successful reading computed."""

    def reading_status(self, p: Pass, frame: ResultFrame) -> dict[str, Any]:
        """Family status fields a successful reading sets (wire names)."""

    def settles(self, record: UncertainRecord, frame: ResultFrame) -> bool:
        """Whether ``frame`` (a fresh read-only reading) settles ``record``."""

    def proves_complete(self, record: UncertainRecord, frame: ResultFrame) -> bool:
        """Whether ``frame`` shows the uncertain run's own work finished (so its executor
        has nothing left to write), not merely a database that happens to match."""

    def unsettled(self, p: Pass) -> str:
        """What the last reading showed that kept the record open, for a person."""
