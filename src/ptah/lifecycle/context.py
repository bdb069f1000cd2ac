"""One reconcile pass: the resource as read at its start, and where things live."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ptah.api.common import LifecycleStatus
from ptah.kube.clock import parse_rfc3339, rfc3339
from ptah.kube.events import EventSink, record_event
from ptah.kube.kinds import SECRET
from ptah.kube.port import Cluster
from ptah.lifecycle.report import PassReport
from ptah.lifecycle.sighting import Sightings
from ptah.targetlock import ExpiryObserver

if TYPE_CHECKING:
    from ptah.lifecycle.family import AnyFamily

FINALIZER = "ptah.io/mutation-lifecycle"
ABANDON_ANNOTATION = "ptah.io/abandon-proof"

# A hook called around each durable write; the simulation and the crash tests
# raise from it to stop the controller exactly there.
WriteHook = Callable[[str, str], None]


def _no_hook(_: str, __: str) -> None:
    return None


# Whether the resource this pass works on may make a new claim now: the operator's
# operation slots (ptah.operator.slots) bound the operations in flight at once. It is a
# throttle, read before a claim is written and never after: a claim made runs its course.
ClaimGate = Callable[[], bool]


def _admit_all() -> bool:
    return True


T = TypeVar("T")

# The default interval between supervising passes over a running Job (see Env).
SUPERVISE_SECONDS = 30.0


@dataclass
class Env:
    """What a controller process brings to every pass. ``observer`` and ``sightings``
    are the only state kept between passes, and both are this process's own
    observations, measured on its own clock: a Lease's expiry (the seed requires it),
    and what it saw of dispatched runs, from which their holds count
    (:mod:`ptah.lifecycle.hold`)."""

    cluster: Cluster
    lock_namespace: str = "ptah-system"
    controller: str = "ptah-controller"
    observer: ExpiryObserver = field(default_factory=ExpiryObserver)
    hook: WriteHook = _no_hook
    lease_duration: int = 120
    poll_seconds: float = 5.0
    # Between two supervising passes over a dispatched Job still running: the Job's and
    # its Pods' watch events wake the owner for every move a waiting step reads (see
    # ptah.operator.mapping), so this poll only renews the Lease and re-validates the Job
    # when nothing moved. It stays well inside ``lease_duration`` (the operator refuses
    # more than a quarter of it), so a renewal never waits on a late pass.
    supervise_seconds: float = SUPERVISE_SECONDS
    runner_defaults: dict[str, Any] = field(default_factory=dict)
    proof_retry_seconds: float = 300.0
    # A transient reading failure is retried after poll_seconds * 2**n, at most this.
    retry_ceiling_seconds: float = 300.0
    sightings: Sightings = field(default_factory=Sightings)
    # Where a pass's Events go: written at once by default (the simulation and the
    # in-memory tests); the operator hands them to its one background writer
    # (``ptah.kube.events.EventEmitter``), so no step waits for one.
    events: EventSink = record_event
    admit_claim: ClaimGate = _admit_all


class ObjectPass:
    """What every pass over one object shares, a family's or a rollout's: the object as
    the pass last saw it, and the one choke point of its durable writes (the hook runs
    before and after each, so a crash test can stop the controller between two)."""

    env: Env
    obj: dict[str, Any]

    @property
    def cluster(self) -> Cluster:
        return self.env.cluster

    @property
    def namespace(self) -> str:
        return str(self.obj["metadata"]["namespace"])

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])

    @property
    def uid(self) -> str:
        return str(self.obj["metadata"]["uid"])

    @property
    def generation(self) -> int:
        return int(self.obj["metadata"].get("generation") or 1)

    def commit(self, write: str, action: Callable[[], T]) -> T:
        """Run the durable write ``write`` between the hook's two calls."""
        self.env.hook("before", write)
        result = action()
        self.env.hook("after", write)
        return result


@dataclass
class Pass(ObjectPass):
    env: Env
    family: AnyFamily
    obj: dict[str, Any]
    report: PassReport = field(default_factory=PassReport)

    def __post_init__(self) -> None:
        self.report.saw(self.obj, self.status)

    def saw(self, obj: dict[str, Any]) -> None:
        """The resource as a write of this pass left it."""
        self.obj = obj
        self.report.saw(obj, self.status)

    @property
    def spec(self) -> dict[str, Any]:
        spec = self.obj.get("spec") or {}
        assert isinstance(spec, dict)
        return spec

    _parsed: tuple[dict[str, Any], LifecycleStatus] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    _secret: tuple[int, str, dict[str, Any] | None] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    _writes: int = field(default=0, init=False, repr=False, compare=False)

    def commit(self, write: str, action: Callable[[], T]) -> T:
        self._writes += 1
        return super().commit(write, action)

    def secret_metadata(self, name: str) -> dict[str, Any] | None:
        """The Secret's metadata, read once between two durable writes of the pass: the
        binding step and the claim's authorization both judge the binding, and a second
        read a few milliseconds after the first, with nothing written between them,
        proves nothing the first did not. Any write of the pass ends the reading."""
        memo = self._secret
        if memo is None or memo[0] != self._writes or memo[1] != name:
            memo = (self._writes, name, self.cluster.get_metadata(SECRET, self.namespace, name))
            self._secret = memo
        return memo[2]

    @property
    def status(self) -> LifecycleStatus:
        """Parsed once per version of ``obj``: a write replaces ``obj`` (never edits it),
        and the parsed status is read, never changed (``model_copy`` makes changes)."""
        parsed = self._parsed
        if parsed is None or parsed[0] is not self.obj:
            parsed = (self.obj, self.family.status_of(self.obj))
            self._parsed = parsed
        return parsed[1]

    @property
    def binding_epoch(self) -> int:
        """The execution-binding epoch the resource is under now (0 before the first)."""
        binding = self.status.execution_binding
        return binding.epoch if binding else 0

    @property
    def deleting(self) -> bool:
        return bool(self.obj["metadata"].get("deletionTimestamp"))

    @property
    def finalizers(self) -> list[str]:
        return list(self.obj["metadata"].get("finalizers") or [])

    @property
    def annotations(self) -> dict[str, str]:
        return dict(self.obj["metadata"].get("annotations") or {})

    def now_iso(self) -> str:
        return rfc3339(self.cluster.now())

    def seconds_since(self, stamp: str | None) -> float | None:
        """Seconds from ``stamp`` to this process's now (negative when it lies ahead)."""
        if not stamp:
            return None
        return (self.cluster.now() - parse_rfc3339(stamp)).total_seconds()
