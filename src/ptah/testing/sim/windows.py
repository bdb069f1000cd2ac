"""The contract's failure windows, and which schedules reached each one.

A window is the stretch between two durable writes of a mutating claim (the rows of
docs/mutation-lifecycle.md, "Every durable write, and what follows it"): what the
next pass sees if the process stops there. A schedule reaches a window when a fault
lands while a resource sits in it: the controller stopping (a crash at a durable
write, or an outage longer than the Lease duration), the resource being deleted, or
its Job being deleted or changing owner. The simulation prints, per window, how many
schedules reached it, so a window no fault lands in shows up as a number, not as an
untested promise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ptah.kube.clock import parse_rfc3339
from ptah.kube.kinds import APPROVAL, JOB, LEASE
from ptah.lifecycle.context import FINALIZER
from ptah.lifecycle.hold import MARGIN_SECONDS
from ptah.testing.sim.world import LOCK_NS, SimResource, Watcher, World

# window -> the durable write that opens it and what the next pass must see
WINDOWS: dict[str, str] = {
    "finalizer>claim": "add_finalizer: a finalizer with no claim, removed by the next pass",
    "claim>lease": "write_claim: a claim with no Lease and no Job, which proceeds",
    "lease>epoch": "acquire_lease: the Lease held under an epoch the status does not name",
    "epoch>snapshot": "write_lease_epoch: the realm bound, no admission snapshot yet",
    "snapshot>dispatch": "write_admission_snapshot: no Job can exist yet",
    "consumed>marker": "consume_approval: an approval spent with nothing dispatched",
    "marker>create": "write_dispatch_started: a claim that says a Job may exist (none does)",
    "create>uid": "create_job: a Job under the reserved name, its UID not yet recorded",
    "uid>account": "write_job_uid: a dispatched claim supervising its Job",
    "ttl>outcome": "write_job_ttl: a Job with a TTL under a live claim",
    "outcome>release": "write_outcome: a record or account, and a staged release",
    "release>cleared": "release_lease: the Lease given up, the staged release not yet cleared",
    # Windows of the rules that bound a run in time rather than of a write: what a fault
    # landing there tests.
    "hold>own-clock": "a release withheld while its executor writes on, cut off, under a "
    "replica whose clock is off from the one that stamped holdUntil by more than the "
    "hold's margin: the hold is measured on each process's own clock from its own sighting",
    "deadline>pod-kill": "a mutating process cut off from the API past its Job's deadline: "
    "only the Pod's own activeDeadlineSeconds, enforced by its node, ends it",
    "record>reading": "a record no reading has read yet, whose resource's lastReadingAt "
    "(another clock) is not before its recordedAt: the proof paces itself by proofReadAt",
}
STOPS = {"stop", "outage", "starved"}


def window_of(world: World, res: SimResource) -> str | None:
    """The window ``res`` sits in now, or None when it is between windows."""
    api = world.cluster.system
    obj = api.peek(res.family.kind, res.namespace, res.name)
    if obj is None:
        return None
    status = obj.get("status") or {}
    claim = status.get("activeOperation") or {}
    if claim.get("mutating"):
        lease = claim.get("lease") or {}
        if lease.get("epoch") is None:
            held = api.peek(LEASE, LOCK_NS, lease.get("leaseName", ""))
            holder = ((held or {}).get("spec") or {}).get("holderIdentity")
            return "lease>epoch" if holder == lease.get("holder") else "claim>lease"
        if not claim.get("admissionSnapshot"):
            return "epoch>snapshot"
        if not claim.get("dispatchStarted"):
            approval = api.peek(APPROVAL, res.namespace, claim.get("approvalName") or "")
            spent = ((approval or {}).get("status") or {}).get("consumedByOperation")
            return "consumed>marker" if spent == claim["operationId"] else "snapshot>dispatch"
        job = api.peek(JOB, res.namespace, claim.get("jobName", ""))
        if not claim.get("jobUid"):
            return "create>uid" if job is not None else "marker>create"
        if job is not None and job["spec"].get("ttlSecondsAfterFinished") is not None:
            return "ttl>outcome"
        return "uid>account"
    if claim:
        return None
    staged = status.get("pendingLockRelease")
    if staged:
        held = api.peek(LEASE, LOCK_NS, staged.get("leaseName", ""))
        holder = ((held or {}).get("spec") or {}).get("holderIdentity")
        return "outcome>release" if holder == staged.get("holder") else "release>cleared"
    record = status.get("pendingObservation") or status.get("unresolvedRun")
    if FINALIZER in (obj["metadata"].get("finalizers") or []) and not record:
        return "finalizer>claim"
    return None


def timing_windows(world: World, res: SimResource) -> list[str]:
    """The windows of the timing rules ``res`` sits in now (beside :func:`window_of`)."""
    obj = world.cluster.system.peek(res.family.kind, res.namespace, res.name)
    if obj is None:
        return []
    status = obj.get("status") or {}
    out = []
    staged = status.get("pendingLockRelease") or {}
    claim = status.get("activeOperation") or {}
    ops = {staged.get("operationId"), claim.get("operationId")} - {None}
    runs = [r for r in world.kubelet.runs.values() if r.operation_id in ops and r.started]
    cut_off = [r for r in runs if r.cut_off]
    if staged.get("withheld") and staged.get("holdUntil") and cut_off:
        # The offset of the clock that stamped the dispatch (holdUntil - holdSeconds),
        # against the world's clock at the Job's create, which followed it.
        job = world.cluster.system.peek(JOB, cut_off[0].namespace, cut_off[0].job)
        created = (job or {}).get("metadata", {}).get("creationTimestamp")
        if created:
            stamped = parse_rfc3339(staged["holdUntil"]) - parse_rfc3339(created)
            offset = stamped.total_seconds() - int(staged.get("holdSeconds") or 0)
            # A replica moving to another node counts with the clock it comes back with:
            # the stop that moves it is the one that lands in this window.
            skews = [r.skew for r in world.replicas]
            skews += [r.moves_to for r in world.replicas if r.moves_to is not None]
            if any(abs(skew - offset) > MARGIN_SECONDS for skew in skews):
                out.append("hold>own-clock")
    now = world.clock.now()
    for run in runs:
        job = world.cluster.system.peek(JOB, run.namespace, run.job)
        past = job is None or world.kubelet.deadline_passed(job, now)
        if run.cut_off and run.mutating and past:
            out.append("deadline>pod-kill")
            break
    record = status.get("pendingObservation") or status.get("unresolvedRun") or {}
    read, recorded = status.get("lastReadingAt"), record.get("recordedAt")
    unread = record and not record.get("proofReadAt") and read and recorded
    if unread and parse_rfc3339(read) >= parse_rfc3339(recorded):
        out.append("record>reading")
    return out


@dataclass
class WindowCounter(Watcher):
    """Forwards what the world reports to the invariants, and notes the windows each
    fault landed in."""

    world: World
    inner: Watcher
    reached: dict[str, set[str]] = field(default_factory=dict)

    def pass_started(self, res: SimResource, depth: int) -> None:
        self.inner.pass_started(res, depth)

    def pass_ended(self, res: SimResource, ok: bool) -> None:
        self.inner.pass_ended(res, ok)

    def fault(self, what: str, res: SimResource | None) -> None:
        self.inner.fault(what, res)
        targets = self.world.resources if res is None and what == "outage" else [res]
        for target in targets:
            if target is None:
                continue
            cause = "stop" if what in STOPS else what
            for window in [window_of(self.world, target), *timing_windows(self.world, target)]:
                if window is not None:
                    self.reached.setdefault(window, set()).add(cause)


def tally(results: list[Any]) -> dict[str, dict[str, int]]:
    """window -> cause -> schedules that reached the window by that cause."""
    out: dict[str, dict[str, int]] = {w: {} for w in WINDOWS}
    for r in results:
        for window, causes in r.windows.items():
            for cause in causes:
                out[window][cause] = out[window].get(cause, 0) + 1
    return out
