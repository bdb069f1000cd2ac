"""The simulated Job controller and kubelet.

Jobs get a Pod; a Pod runs the runner's operation against a simulated database
over several steps (so a controller can interleave with a live executor); the
log carries a frame rendered by the runner's real frame code. Faults here are
the executor's and the node's, each one a way a real cluster misleads a
controller:

- killed mid-run (with all, part or none of its work done), a lost log, a forged
  frame beside the real one, a frame naming another operation;
- a run that opened another database than the one planned, and really wrote it;
- an SQL error (a failed frame, the transaction rolled back);
- more than one Pod for one Job, each running the same operation and printing a
  valid-looking frame, listed in either order;
- a Pod an admission webhook changed on its way in (outside the envelope): its image
  rewritten to a mirror, a sidecar container injected, or its annotations stripped;
  a Pod is bound to a node as it is created, so "stopped" means what its node reported,
  except one left unscheduled (below), which has no node until it starts;
- kubelet lag both ways: a container that printed its frame but has not exited
  yet, a Job marked terminal before its Pods stop, or only some steps after;
- the Job's active deadline, enforced as the Job controller does (through the API: no
  Pod of a Job past its deadline is created or started, and its running Pods are
  deleted), and the Pod's own ``activeDeadlineSeconds``, enforced as a kubelet does, on
  the node, from the container's start and even while the node is cut off: the process
  is killed at its deadline, whatever the API can hear. A Pod can start late (left
  unscheduled until its Job's deadline is near), so a process may outlive the Job's
  deadline by up to the Pod's; or bound to its node, its container held back until just
  past its Job's deadline, it starts inside the Job controller's lag there as the node
  loses the API, and writes on through the kill's whole grace period at its own deadline;
- a node cut off from the API (a partition) while its containers keep running and
  writing: nothing they do reaches the API (no status, no log) until it reconnects, and
  meanwhile a running Pod may be force-deleted (``kubectl delete --force``): its object
  goes at once, its process does not. Or the Pod garbage collector marks it Failed
  first (phase Failed, its container's last report still "running"), as it does for a
  Pod on an unreachable node. Or it is deleted gracefully (``kubectl delete``, or its Job
  deleted and the garbage collector taking its Pods): the object stays, Terminating
  (a deletionTimestamp, its phase and containers still what the node last said), since
  only its node can confirm the containers stopped, and the process writes on until the
  node is back, kills it and confirms. The cluster has other nodes: a Pod created while
  that node is cut off runs elsewhere, connected, so a reading can run and report while
  the cut-off node's process still writes. The Job controller, which is not cut off, counts
  a Pod deleted before it was counted as failed and, with ``backoffLimit: 0``, fails the
  Job; the process is killed only once the kubelet reconnects and finds its Pod gone.

The Job controller keeps the bookkeeping a real one keeps and the operator reads
(``status.active``, ``succeeded``, ``failed``), from what the API shows, never from the
processes themselves.

Beside the API objects the kubelet keeps the world's truth about each Pod
(:class:`PodTruth`): which database it really opened, whether it was admitted,
which frame it printed, whether its process still runs. The invariants judge
Ptah against that truth, never against what Ptah wrote about itself.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ptah.api.digest import digest
from ptah.kube.clock import parse_rfc3339
from ptah.kube.kinds import CONFIGMAP, JOB, POD, SECRET
from ptah.runner.frame import ResultFrame, escape_line, render
from ptah.testing.memory import MemoryCluster
from ptah.testing.sim.database import Databases, SimDatabase
from ptah.workload.job import CONTAINER

NS = "default"
OTHER_DATABASE = "elsewhere"
# A line of a simulated desired source that makes it fail to load (deterministically).
BROKEN = "BROKEN SYNTAX"
EXECUTOR_FAULTS = (
    "killed",
    "killed-late",
    "log-lost",
    "forged",
    "other-db",
    "foreign-frame",
    "sql-failed",
    "webhook",
)
NODE = "sim-node"
# Held by a Pod deleted gracefully while its node is cut off: the object stays,
# Terminating, until its node confirms its containers stopped (the kubelet's part of
# a graceful deletion, which the memory API server models as a finalizer).
NODE_CONFIRMS = "sim.ptah.io/node-confirms"
TERMINAL = frozenset({"Succeeded", "Failed"})
# The Job controller acts on a Job's deadline within this many seconds: a Pod admitted in
# that lag may still start. And a container killed at its Pod's deadline gets SIGTERM and
# writes on for up to its grace period before the SIGKILL. The hold's margin (60 s) is
# there for both.
JOB_CONTROLLER_LAG = 15
KILL_GRACE = 30
# The share of mutating runner Pods whose container starts only in the Job controller's lag
# at their Job's deadline, on a node that loses the API as it starts (Kubelet._edge_start).
EDGE_START_RATE = 0.3


@dataclass
class PodTruth:
    """What really happened in one Pod, whatever its API object says."""

    pod: str
    job: str
    job_uid: str
    operation_id: str
    mutating: bool
    planned_db: str | None  # the database the Secret's URL names
    opened_db: str | None  # the database the process really opened
    admitted: bool  # the Pod is what the Job's template asked for
    alive: bool = True  # the process may still run (and write)
    # The last time the world saw its process alive, having started: before each pass and
    # each kubelet step (the world's clock moves in jumps, so when it stopped between two
    # of them is not known; it was alive then).
    seen_alive_at: datetime | None = None
    printed_op: str | None = None  # the operation the one frame in its log names
    printed_frames: int = 0  # frame lines in its log that verify (length and digest)
    printed_outcome: str | None = None  # the outcome the one frame in its log says
    terminated: bool = False  # the container is reported terminated
    # What a reading saw of its database at the instant it read it (a later writer may
    # change the database before the controller reads the frame).
    observed: dict[str, Any] | None = None
    namespace: str = NS  # the Pod's (its Job's, its resource's)


@dataclass
class PodRun:
    """A live executor: which Pod, which operation, how many steps are left."""

    namespace: str
    pod: str
    job: str
    operation_id: str
    op: str
    args: list[str]
    steps_left: int
    db: SimDatabase | None
    url: str
    inputs: dict[str, str]
    dirs: list[dict[str, str]]
    mutating: bool
    fault: str | None = None
    truth: PodTruth | None = None
    exit_lag: int = 0  # kubelet steps between printing the frame and the exit
    done: bool = False  # the work is over (frame printed or process killed)
    exit_code: int = 0
    exit_reason: str = "Completed"
    grace: int = 0  # kubelet steps a process outlives its deleted Pod
    started: bool = False  # the node started its container
    started_at: datetime | None = None  # when (the Pod's startTime, on the node's clock)
    start_after: datetime | None = None  # left unscheduled until then (a late start)
    deadline: int | None = None  # the Pod's activeDeadlineSeconds
    kill_grace: float = 0.0  # seconds it writes on after the SIGTERM at its deadline
    cut_off: bool = False  # on the node that lost the API (while the partition lasts)
    orphan_drawn: bool = False  # whether its wait as an orphan was drawn
    # Bound to its node, its container held back (an image pull) until this instant, when
    # the node starts it on its own, whatever the world's steps (Kubelet._edge_start).
    starts_at: datetime | None = None
    # Then the Pod garbage collector marks the Pod of the lost node Failed, its containers
    # never reported, before the Job controller acts on the deadline.
    marked_failed_at_start: bool = False


def never_bound_and_deleting(pod: dict[str, Any]) -> bool:
    """A Pod no node was bound to, being deleted: the API binds no Pod that is being
    deleted, so it provably never runs."""
    return bool(pod["metadata"].get("deletionTimestamp")) and not (pod.get("spec") or {}).get(
        "nodeName"
    )


@dataclass
class Kubelet:
    cluster: MemoryCluster
    dbs: Databases
    rng: random.Random
    faults_on: bool = True
    fault_rate: float = 0.1
    runs: dict[str, PodRun] = field(default_factory=dict)
    truth: dict[str, PodTruth] = field(default_factory=dict)  # by Pod name
    job_lag: dict[str, tuple[str, int]] = field(default_factory=dict)  # by Job uid
    events: dict[str, int] = field(default_factory=dict)
    _executed: set[str] = field(default_factory=set)  # Jobs whose work was counted
    # The node cut off from the API for this many more kubelet steps (0: connected), and
    # not before this instant.
    partitioned: int = 0
    cut_off_until: datetime | None = None
    # Called as a partition starts: what else the same network failure cuts off.
    on_partition: Callable[[], None] | None = None
    # What the node could not report while cut off, sent on reconnect, by Pod name.
    _unsent_logs: dict[str, tuple[str, str | None, int, str | None]] = field(default_factory=dict)
    _unsent_exits: dict[str, PodRun] = field(default_factory=dict)
    # Damage to a frame line on its way to the API, drawn from its own stream so every
    # other draw of a schedule stays as it was.
    frame_damage: random.Random = field(default_factory=lambda: random.Random(0))
    # A Pod whose controller reference a webhook gave to another owner: its own stream too.
    adoption: random.Random = field(default_factory=lambda: random.Random(0))
    # A mutating run whose SQL fails (beside the executor faults' own draw, which picks it
    # only now and then among eight): failed runs are what the rules on a failed plan
    # (never dispatched again by itself, lastMutation kept) are judged on. Its own stream.
    failures: random.Random = field(default_factory=lambda: random.Random(0))
    # Pods that are the only trace of a live process (their resource's record removed
    # by a person): no fault force-deletes them; only their node's word removes them.
    last_traces: set[str] = field(default_factory=set)
    # The Job controller's count of each Pod it has finished with (Succeeded/Failed).
    _counted: dict[tuple[str, str], str] = field(default_factory=dict)
    # Graceful deletions on a cut-off node draw from their own stream (seeded from the
    # schedule's, without drawing from it), so every other draw stays as it was.
    graceful: random.Random = field(init=False)
    # The Job controller's lag at a deadline and the kill's grace period: their own stream.
    lag: random.Random = field(init=False)
    # How long a Pod orphaned while unscheduled waits for a node: its own stream.
    orphans: random.Random = field(init=False)
    # A container started as its node lost the API (the start never reported): its own
    # stream.
    unreported: random.Random = field(init=False)
    # A database that refuses a runner's connection (down, or its credentials rejected):
    # its own stream.
    refusals: random.Random = field(init=False)
    # A container that starts only in the Job controller's lag at its Job's deadline, as
    # its node loses the API: its own stream, and that lag by Job UID (a Job not named
    # here is acted on at its deadline's first step).
    edges: random.Random = field(init=False)
    deadline_lag: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.graceful = random.Random(f"{self.rng.getstate()[1][:4]}/graceful")
        self.lag = random.Random(f"{self.rng.getstate()[1][:4]}/lag")
        self.orphans = random.Random(f"{self.rng.getstate()[1][:4]}/orphans")
        self.unreported = random.Random(f"{self.rng.getstate()[1][:4]}/unreported")
        self.refusals = random.Random(f"{self.rng.getstate()[1][:4]}/refusals")
        self.edges = random.Random(f"{self.rng.getstate()[1][:4]}/edges")

    @property
    def api(self) -> Any:
        return self.cluster.system

    def step(self) -> None:
        self.enforce_pod_deadlines()
        self._start_pods()
        if self.partitioned:
            elsewhere = [name for name, run in self.runs.items() if not run.cut_off]
            self._run_offline()
            self._run_pods(elsewhere)
        else:
            self._run_pods(list(self.runs))
            self._maybe_partition()
        self._finish_jobs()
        self._ttl()

    def pods_of_job(self, job: str) -> list[PodTruth]:
        return [t for t in self.truth.values() if t.job == job]

    def live_operations(self) -> dict[str, PodTruth]:
        """Operations with a process that may still run, by operation ID."""
        return {t.operation_id: t for t in self.truth.values() if t.alive}

    def _count(self, what: str) -> None:
        self.events[what] = self.events.get(what, 0) + 1

    # --- the Job controller

    def _start_pods(self) -> None:
        now = self.cluster.now()
        for job in self.api.peek_list(JOB, ""):
            if (job.get("status") or {}).get("conditions") or self.deadline_passed(job, now):
                continue  # past its deadline a Job starts no Pod
            uid = job["metadata"]["uid"]
            if any(t.job_uid == uid for t in self.truth.values()):
                continue  # backoffLimit 0: a Job's Pods are created once
            count = 2 if self._fault("second-pod") else 1
            order = ["a", "b"]
            if count == 2:
                self._count("fault:second-pod")
                self.rng.shuffle(order)  # the extra Pod is listed first or second
            for i in range(count):
                self._create_pod(job, order[i], extra=i > 0)
            if self.faults_on:
                roll = self.rng.random()
                lag = "early" if roll < 0.08 else "late" if roll < 0.16 else "at"
                if lag != "at":
                    self._count(f"fault:job-terminal-{lag}")
                self.job_lag[uid] = (lag, self.rng.randint(1, 3))

    def _create_pod(self, job: dict[str, Any], suffix: str, extra: bool) -> None:
        template = job["spec"]["template"]
        ns = str(job["metadata"]["namespace"])
        meta = template["metadata"]
        name = f"{job['metadata']['name']}-{suffix}"
        while name in self.truth:
            # A Job created again under its name gets Pods of its own names (a real Job's
            # Pods are named by generateName).
            name += "x"
        container = template["spec"]["containers"][0]
        env = {e["name"]: e for e in container.get("env", [])}
        url = self._secret_value(env.get("PTAH_DB_URL"), ns)
        op_id = env.get("PTAH_OPERATION_ID", {}).get("value", "")
        args = list(container.get("args", []))
        op = args[0] if args else ""
        mutating = op in {"apply", "migrate"}
        fault = None
        if not extra and (self._fault("executor") or (mutating and self._fault("executor"))):
            fault = self.rng.choice(EXECUTOR_FAULTS)
            if fault == "other-db" and not mutating:
                # A reading that reached another database would plan that database's
                # realm; nothing Ptah holds before the run can tell (see the note in
                # docs/mutation-lifecycle.md), so this fault is aimed at mutations, whose
                # frame names the claim's database.
                fault = "log-lost"
            if fault == "webhook":
                # An admission webhook changes the Pod on its way in: rewrites the image
                # (a registry mirror), injects a sidecar (a mesh), or strips annotations
                # it does not know (a policy engine).
                fault = "webhook-" + self.rng.choice(["image", "sidecar", "annotations"])
            self._count(f"fault:{fault}")
        elif not extra and mutating and self.faults_on and self.failures.random() < 0.08:
            fault = "sql-failed"
            self._count(f"fault:{fault}")
        spec = json.loads(json.dumps(template["spec"]))
        annotations = dict(meta.get("annotations", {}))
        if fault == "webhook-image":
            spec["containers"][0]["image"] = "mirror.example/" + str(container.get("image"))
        elif fault == "webhook-sidecar":
            spec["containers"].append({"name": "mesh-proxy", "image": "mesh/proxy:1"})
        elif fault == "webhook-annotations":
            annotations = {k: v for k, v in annotations.items() if not k.startswith("ptah.io/")}
        job_ref = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": job["metadata"]["name"],
            "uid": job["metadata"]["uid"],
            "controller": True,
        }
        owners = [job_ref]
        if not extra and self.faults_on and self.adoption.random() < 0.02:
            # A webhook (or another controller adopting Pods) makes itself the Pod's
            # controller on its way in and leaves the Job's reference a plain one: the
            # Pod still lists the Job, but the Job is not what controls it.
            self._count("fault:webhook-owner")
            owners = [
                dict(job_ref, controller=False),
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "adopter",
                    "uid": f"adopter-{job['metadata']['uid']}",
                    "controller": True,
                },
            ]
        # What the Job asked for, whatever a webhook made of it: the truth of admission.
        admitted = (
            spec == template["spec"]
            and annotations == dict(meta.get("annotations", {}))
            and owners == [job_ref]
        )
        spec["nodeName"] = NODE  # bound at once (one node), unless left unscheduled
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": dict(
                    meta.get("labels", {}), **{"controller-uid": job["metadata"]["uid"]}
                ),
                "annotations": annotations,
                "ownerReferences": owners,
            },
            "spec": spec,
            "status": {"phase": "Pending"},
        }
        self.api.create(POD, pod)
        inputs: dict[str, str] = {}
        dirs: list[dict[str, str]] = []
        for vol in template["spec"].get("volumes", []):
            cm = self.api.peek(CONFIGMAP, ns, vol.get("configMap", {}).get("name", ""))
            data = dict((cm or {}).get("data") or {})
            if vol["name"] == "input":
                inputs = data
            else:
                dirs.append(data)
        planned = self.dbs.open(url) if url else None
        opened = self.dbs.by_name[OTHER_DATABASE] if fault == "other-db" else planned
        if (
            fault is None
            and not extra
            and mutating
            and self.faults_on
            and self.refusals.random() < 0.08
        ):
            # The database refuses the connection (down, or the credentials rejected): the
            # runner opens nothing, writes nothing, and its frame names no database, which
            # is not the claim's (an account needs the claim's database named).
            fault = "connect-refused"
            opened = None
            self._count(f"fault:{fault}")
        truth = PodTruth(
            pod=name,
            job=job["metadata"]["name"],
            job_uid=job["metadata"]["uid"],
            operation_id=op_id,
            mutating=mutating,
            planned_db=planned.name if planned else None,
            opened_db=opened.name if opened else None,
            admitted=admitted,
            namespace=ns,
        )
        self.truth[name] = truth
        self.runs[name] = PodRun(
            ns,
            name,
            job["metadata"]["name"],
            op_id,
            op,
            args,
            self.rng.randint(1, 4),
            opened,
            url,
            inputs,
            dirs,
            mutating,
            fault,
            truth,
            exit_lag=self.rng.choice([0, 0, 1, 2]) if self.faults_on else 0,
            grace=self.rng.choice([0, 1, 2]) if self.faults_on else 0,
            start_after=self._late_start(job) if mutating else None,
        )
        if self.runs[name].start_after is not None:
            # Left unscheduled: no node is bound to it until it starts.
            self.api.patch(POD, ns, name, {"spec": {"nodeName": None}})
        elif mutating and not extra and fault is None:
            self._edge_start(job, self.runs[name])

    def _late_start(self, job: dict[str, Any]) -> datetime | None:
        """Now and then a Pod is left unscheduled (no node fits yet) until its Job's
        deadline is near: it starts then, and runs for its own deadline from there. Only
        the Job's deadline bounds how late that is: a Job without one may have its Pod
        start well past where that deadline would have been."""
        deadline = job["spec"].get("activeDeadlineSeconds")
        pod_deadline = job["spec"]["template"]["spec"].get("activeDeadlineSeconds")
        created = job["metadata"].get("creationTimestamp")
        if (
            not self.faults_on
            or self.rng.random() >= 0.25
            or (deadline is None and pod_deadline is None)
            or not created
        ):
            return self._start_at_deadline(job)
        self._count("fault:pod-start-late")
        if deadline is None:
            # Nothing deletes it while it waits: it may start after a hold counted from
            # the dispatch (twice the deadline and the margin) has passed.
            late = self.rng.uniform(2.5, 4.0) * min(int(pod_deadline), 300)
        else:
            # Late by more than the hold's margin, within a schedule's fault phase.
            late = self.rng.uniform(0.5, 0.95) * min(int(deadline), 300)
        return parse_rfc3339(created) + timedelta(seconds=late)

    def _start_at_deadline(self, job: dict[str, Any]) -> datetime | None:
        """Now and then a Pod of a Job with a short deadline starts at the deadline's edge:
        the Job controller acts on a deadline some seconds late (its lag), and a Pod
        admitted meanwhile starts, runs for its own deadline from there and writes on
        through the kill's grace period. The hold's margin is there for exactly this.
        Drawn from its own stream, so every other draw of a schedule stays as it was."""
        deadline = job["spec"].get("activeDeadlineSeconds")
        created = job["metadata"].get("creationTimestamp")
        if (
            not self.faults_on
            or deadline is None
            or int(deadline) > 300
            or not created
            or self.lag.random() >= 0.3
        ):
            return None
        self._count("fault:pod-start-at-deadline")
        edge = int(deadline) + self.lag.uniform(0, JOB_CONTROLLER_LAG)
        return parse_rfc3339(created) + timedelta(seconds=edge)

    def _mark_node_lost(self, run: PodRun) -> None:
        """What the Pod garbage collector writes of a Pod on an unreachable node: Failed,
        NodeLost, a disruption target (its containers' last report unchanged)."""
        status = {
            "phase": "Failed",
            "reason": "NodeLost",
            "conditions": [{"type": "DisruptionTarget", "status": "True"}],
        }
        self.api.patch(POD, run.namespace, run.pod, {"status": status}, "status")

    def _edge_start(self, job: dict[str, Any], run: PodRun) -> None:
        """Now and then a runner Pod, bound to the node at once, has its container held
        back (a slow image pull, a kubelet busy) until its Job's deadline has just passed,
        while the Job controller, some seconds behind at that deadline, has not failed the
        Job yet (:meth:`hold_back`). Only a Pod no other fault touches, of a Job whose
        deadline is at most 300 s (as :meth:`_start_at_deadline`), and drawn from its own
        stream, so every other draw of a schedule stays as it was and a schedule with long
        deadlines keeps the course (and the faults it reaches) it had without this one."""
        if (
            not self.faults_on
            or job["spec"].get("activeDeadlineSeconds") is None
            or int(job["spec"]["activeDeadlineSeconds"]) > 300
            or not job["metadata"].get("creationTimestamp")
            or self.edges.random() >= EDGE_START_RATE
        ):
            return
        into = self.edges.uniform(0.5, 0.95)
        self.hold_back(job, run, into, marked_failed=self.edges.random() < 0.5)

    def hold_back(
        self, job: dict[str, Any], run: PodRun, into: float, marked_failed: bool = False
    ) -> None:
        """Hold ``run``'s container back on its node until ``into`` of the way through the
        Job controller's lag at ``job``'s deadline (here the whole lag: it acts on this
        Job's deadline that late). The node starts the container then and loses the API as
        it does, until the process there is dead (:meth:`_start_on_time`); the Job
        controller fails the Job and deletes the Pod, and only the Pod's own deadline, on
        the node, ends the process, whose statement in flight ignores the SIGTERM, so it
        writes on until the SIGKILL at the grace period's end. That is the latest a
        dispatched runner can write: the Job's deadline and its controller's lag, the Pod's
        deadline and the kill's grace period, which the hold's margin is there for. Or
        (``marked_failed``) the Pod garbage collector marks the Pod of the lost node Failed
        first, its containers never reported (no evidence that the process stopped), and
        the Job controller, which deletes only a Pod not yet terminal, leaves it so."""
        self._count("fault:pod-start-in-deadline-lag")
        run.marked_failed_at_start = marked_failed
        self.deadline_lag[job["metadata"]["uid"]] = JOB_CONTROLLER_LAG
        late = int(job["spec"]["activeDeadlineSeconds"]) + into * JOB_CONTROLLER_LAG
        run.starts_at = parse_rfc3339(job["metadata"]["creationTimestamp"]) + timedelta(
            seconds=late
        )
        run.steps_left = 10**6  # a long run: only the Pod's deadline ends it

    def create_held_back(
        self, job_name: str, namespace: str, into: float, marked_failed: bool = False
    ) -> PodRun | None:
        """The Job controller creates the Pod of Job ``job_name`` now, its container held
        back into its Job controller's lag at the deadline (:meth:`hold_back`, aimed)."""
        job = self.api.peek(JOB, namespace, job_name)
        if job is None or any(t.job_uid == job["metadata"]["uid"] for t in self.truth.values()):
            return None
        self._create_pod(job, "a", extra=False)
        run = next(r for r in self.runs.values() if r.job == job_name)
        if run.starts_at is None:
            self.hold_back(job, run, into, marked_failed)
        return run

    def _start_on_time(self, now: datetime) -> None:
        """The node starts each container held back by :meth:`_edge_start` at its instant
        (a real node does not wait for the world's next step), and loses the API as it
        does, until the process there has been killed at its Pod's deadline. A Pod gone
        before then never starts; one being deleted starts only on a node cut off from the
        API, which has not heard of the deletion (a node in touch never starts it:
        :meth:`_run_pods`)."""
        for run in sorted(self.runs.values(), key=lambda r: r.pod):
            if run.starts_at is None or run.started or run.starts_at > now:
                continue
            pod = self.api.peek(POD, run.namespace, run.pod)
            if pod is None:
                continue  # it never starts (enforce_pod_deadlines ends it)
            if (pod.get("metadata") or {}).get("deletionTimestamp") and not run.cut_off:
                continue
            deadline = (pod.get("spec") or {}).get("activeDeadlineSeconds")
            run.started = True
            run.started_at = run.starts_at
            run.deadline = int(deadline) if deadline is not None else None
            run.kill_grace = KILL_GRACE
            if run.mutating and run.db is not None:
                run.db.writers.add(run.operation_id)
                run.db.max_concurrent_writers = max(
                    run.db.max_concurrent_writers, len(run.db.writers)
                )
            # The start never reaches the API: the Pod stays Pending, bound.
            self.partition(max(self.partitioned, 40))
            if run.marked_failed_at_start:
                self._count("fault:lag-start-marked-failed")
                self._mark_node_lost(run)
            if run.deadline is not None:
                until = run.starts_at + timedelta(seconds=run.deadline + run.kill_grace + 5)
                self.cut_off_until = max(self.cut_off_until or until, until)

    def _secret_value(self, env: dict[str, Any] | None, namespace: str) -> str:
        if not env:
            return ""
        ref = env.get("valueFrom", {}).get("secretKeyRef", {})
        secret = self.api.peek(SECRET, namespace, ref.get("name", ""))
        return str(((secret or {}).get("stringData") or {}).get(ref.get("key", ""), ""))

    def _fault(self, what: str) -> bool:
        return self.faults_on and self.rng.random() < self.fault_rate

    # --- the kubelet

    def _run_pods(self, names: list[str]) -> None:
        """The connected nodes' kubelet: ``names`` are the runs on them."""
        for name in names:
            run = self.runs.get(name)
            if run is None:
                continue
            pod = self.api.peek(POD, run.namespace, name)
            if pod is None:
                if run.grace > 0:
                    # The Pod object is gone; its process handles SIGTERM a little longer.
                    run.grace -= 1
                    continue
                self._killed(run)
                continue
            if (pod.get("metadata") or {}).get("deletionTimestamp") and run.started:
                # Deleted gracefully while its node was cut off: back in touch, the
                # kubelet kills the process and confirms (the object goes).
                self._killed(run)
                self._report_exit(run)
                continue
            if run.started and _phase(pod) in TERMINAL:
                # The control plane marked the Pod terminal without the node's word (see
                # _run_offline). A terminal phase is final: back in touch, the kubelet
                # kills what still runs there and reports its container terminated.
                self._killed(run)
                self._report_exit(run)
                continue
            if _phase(pod) == "Pending" and run.started:
                # Its start never reached the API (its node lost it as the container
                # started): back in touch, the kubelet reports it running.
                self.api.patch(POD, run.namespace, name, {"status": _running()}, "status")
                continue
            if _phase(pod) == "Pending":
                if run.starts_at is not None:
                    if (pod.get("metadata") or {}).get("deletionTimestamp"):
                        # Deleted before its container started: the kubelet, in touch,
                        # never starts it, and confirms the deletion.
                        self._killed(run)
                        self._confirm_deletion(run.namespace, name)
                    continue  # its node starts it on its own time (_start_on_time)
                self._orphaned_while_waiting(run, pod)
                if run.start_after is not None and self.cluster.now() < run.start_after:
                    continue  # not scheduled yet
                if self._never_starts(run, self.cluster.now()):
                    # The Job controller acts on the deadline as it passes (this step's
                    # _finish_jobs deletes the Pod): a Pod still Pending then never
                    # starts, however far the clock jumped since the last step. A start
                    # after the deadline would break the hold's premise (the Job's
                    # deadline + the Pod's deadline + 60 s bound a process), which a
                    # real Job controller keeps within seconds, not the sim's jumps.
                    continue
                if not (pod.get("spec") or {}).get("nodeName"):
                    self.api.patch(
                        POD, run.namespace, name, {"spec": {"nodeName": NODE}}
                    )  # scheduled
                unreported = run.mutating and self.faults_on and self.unreported.random() < 0.05
                if not unreported:
                    self.api.patch(POD, run.namespace, name, {"status": _running()}, "status")
                run.started = True
                run.started_at = self.cluster.now()
                deadline = (pod.get("spec") or {}).get("activeDeadlineSeconds")
                run.deadline = int(deadline) if deadline is not None else None
                if self.faults_on:
                    run.kill_grace = self.lag.uniform(0, KILL_GRACE)
                if run.mutating and run.db is not None:
                    run.db.writers.add(run.operation_id)
                    run.db.max_concurrent_writers = max(
                        run.db.max_concurrent_writers, len(run.db.writers)
                    )
                if unreported:
                    # The node lost the API as the container started: the API shows the
                    # Pod bound and Pending, with no container reported, while it writes
                    # (the Pod garbage collector may mark it Failed meanwhile, still with
                    # no container status: no evidence that the process stopped).
                    self._count("fault:start-unreported")
                    run.steps_left = max(run.steps_left, 40)
                    self.partition(max(self.partitioned, self.unreported.randint(40, 80)))
                    if self.unreported.random() < 0.5:
                        # The Pod garbage collector marks the Pod of the lost node Failed:
                        # Failed, with no container ever reported, while it writes on.
                        self._count("fault:unreported-marked-failed")
                        status = {
                            "phase": "Failed",
                            "reason": "NodeLost",
                            "conditions": [{"type": "DisruptionTarget", "status": "True"}],
                        }
                        self.api.patch(POD, run.namespace, name, {"status": status}, "status")
                    continue
                if run.start_after is not None and self.faults_on and self.rng.random() < 0.8:
                    # Started late, a long run, and its node loses the API past the Job's
                    # deadline: the Job controller fails the Job and deletes the Pod, and
                    # only the Pod's own deadline, on the node, ends the process.
                    self._count("fault:late-start-cut-off")
                    run.steps_left = 10**6
                    self.partition(self.rng.randint(40, 80))
                    if run.deadline is not None and self.lag.random() < 0.5:
                        # Now and then the node stays cut off until the Pod's own deadline
                        # (and the kill's grace) has ended the process there.
                        self._count("fault:cut-off-until-deadline")
                        until = run.started_at + timedelta(
                            seconds=run.deadline + run.kill_grace + 5
                        )
                        self.cut_off_until = max(self.cut_off_until or until, until)
                continue
            if run.done:
                run.exit_lag -= 1
                if run.exit_lag <= 0:
                    self._exit(run)
                continue
            run.steps_left -= 1
            if run.steps_left > 0:
                continue
            self._complete(run)
            if run.exit_lag <= 0:
                self._exit(run)

    def start_now(self, job_name: str, namespace: str = NS) -> list[PodRun]:
        """The Job controller and the kubelet act at once on one Job: its Pod created and
        its container started (a fault aimed at the instant after a create)."""
        job = self.api.peek(JOB, namespace, job_name)
        if job is None:
            return []
        if not any(t.job_uid == job["metadata"]["uid"] for t in self.truth.values()):
            self._create_pod(job, "a", extra=False)
        names = [name for name, run in self.runs.items() if run.job == job_name]
        self._run_pods(names)
        return [self.runs[name] for name in names if name in self.runs]

    def enforce_pod_deadlines(self) -> None:
        """The kubelet's own deadline: a container running past its Pod's
        ``activeDeadlineSeconds`` is killed on the node, connected or not (the kubelet
        needs no API for it); the exit is reported when the node can report. Called
        before every controller pass as well as every kubelet step, since a real kubelet
        does not wait for a step."""
        now = self.cluster.now()
        self._start_on_time(now)
        for run in list(self.runs.values()):
            if not run.started and self._never_starts(run, now):
                self._killed(run)
                continue
            if run.started_at is None or run.deadline is None:
                continue
            if (now - run.started_at).total_seconds() < run.deadline + run.kill_grace:
                continue  # SIGTERM at the deadline; it writes on through its grace period
            self._count("pod-deadline-kill")
            if run.truth is not None:
                # The SIGKILL came at the grace period's end, between two of the world's
                # looks: the process was alive until that instant, not only until the last
                # look (the clock may have jumped far past it since).
                run.truth.seen_alive_at = run.started_at + timedelta(
                    seconds=run.deadline + run.kill_grace
                )
            self._killed(run)
            run.exit_code, run.exit_reason = 137, "DeadlineExceeded"
            run.done = True
            if self.partitioned and run.cut_off:
                self._unsent_exits[run.pod] = run
            else:
                self._report_exit(run)
        for run in self.runs.values():
            if run.started and run.truth is not None and run.truth.alive:
                run.truth.seen_alive_at = now

    def _orphaned_while_waiting(self, run: PodRun, pod: dict[str, Any]) -> None:
        """An unscheduled Pod whose Job is gone but which is not being deleted (its Job
        deleted with ``propagationPolicy: Orphan``) is bound by no Job deadline: now and
        then no node fits it (or the node it is bound to does not take it up) for longer
        than a hold counted from the dispatch, and it starts (and runs for its own
        deadline) well after it."""
        if (
            run.orphan_drawn
            or run.start_after is None
            or not self.faults_on
            or (pod.get("metadata") or {}).get("deletionTimestamp")
        ):
            return
        job = self.api.peek(JOB, run.namespace, run.job)
        if job is not None and job["metadata"]["uid"] == (run.truth.job_uid if run.truth else None):
            return
        run.orphan_drawn = True
        if self.orphans.random() >= 0.6:
            return
        deadline = int((pod.get("spec") or {}).get("activeDeadlineSeconds") or 300)
        # Past twice its deadline and a minute from now: past a hold counted from before.
        later = self.orphans.uniform(2.0, 3.0) * min(deadline, 300) + 60
        run.start_after = max(run.start_after, self.cluster.now() + timedelta(seconds=later))
        self._count("fault:orphan-start-late")
        if self.orphans.random() < 0.5:
            # The scheduler bound it to a node whose kubelet has not taken it up (cut off,
            # or slow): bound, still Pending, it has not started, and may start late.
            self.api.patch(POD, run.namespace, run.pod, {"spec": {"nodeName": NODE}})
            self._count("fault:orphan-bound-waiting")

    def _never_starts(self, run: PodRun, now: datetime) -> bool:
        """The truth about a Pod that never started: once its object is gone, or it is
        being deleted before any node was bound to it, or its Job's deadline has passed,
        it never will (past the deadline no Pod of the Job starts;
        a node cannot start a Pod it has not started before its object went), so it
        is over, whatever the API can hear of it yet. A Pod orphaned by its Job's
        deletion still may: nothing enforces the Job's deadline on it any more."""
        pod = self.api.peek(POD, run.namespace, run.pod)
        if pod is None:
            return True
        if never_bound_and_deleting(pod):
            return True
        job = self.api.peek(JOB, run.namespace, run.job)
        lagged = now - timedelta(seconds=JOB_CONTROLLER_LAG)
        return job is not None and self.deadline_passed(job, lagged)

    def kill(self, name: str) -> None:
        """The process of Pod ``name`` dies now (its Pod was deleted, its deadline passed)."""
        run = self.runs.get(name)
        if run is not None:
            self._killed(run)

    def _killed(self, run: PodRun) -> None:
        """A Pod deleted mid-run: its process dies, having done all, part or none."""
        self.runs.pop(run.pod, None)
        if run.truth is not None:
            run.truth.alive = False
        if run.db is None or not run.mutating or not run.started:
            return  # a process that never started wrote nothing
        if run.operation_id in run.db.writers:
            if not run.done and self.rng.random() < 0.5:
                self._effect(run, partial=True)
            self._stop_writing(run)

    def _stop_writing(self, run: PodRun) -> None:
        if run.db is None:
            return
        others = [
            r
            for r in self.runs.values()
            if r.operation_id == run.operation_id and r.db is run.db and r.started
        ]
        if not others:
            run.db.writers.discard(run.operation_id)

    def _complete(self, run: PodRun) -> None:
        """The work ends: the effect on the database and the frame in the log. The
        container exits ``exit_lag`` kubelet steps later."""
        run.done = True
        frame: ResultFrame | None = None
        if run.fault in {"killed", "killed-late"}:
            if run.mutating and run.db is not None and run.fault == "killed-late":
                self._effect(run, partial=True)
        else:
            frame = self._execute(run)
        if frame is None:
            run.exit_code, run.exit_reason = 137, "Error"
            self._log(run, "starting\n", None, 0, None)
            return
        printed = frame
        if run.fault == "foreign-frame":
            printed = frame.model_copy(update={"operation_id": _foreign(run.operation_id)})
        line = render(printed)
        frames = 1
        if self.faults_on and self.frame_damage.random() < 0.03:
            # The log line reaches the API damaged (a bit flipped in its header's digest,
            # its length intact): a line that does not verify is no frame at all.
            self._count("fault:frame-damaged")
            parts = line.split(" ", 4)  # prefix, version, length, digest, payload
            parts[3] = parts[3][:-1] + ("0" if parts[3][-1] != "0" else "1")
            line = " ".join(parts)
            frames = 0
        log = escape_line("connected\nNOTICE: " + line) + "\n" + line + "\n"
        if run.fault == "forged":
            log += render(frame.model_copy(update={"outcome": "succeeded"})) + "\n"
            frames = 2
        run.exit_code = 0 if frame.outcome == "succeeded" else 1
        run.exit_reason = "Completed" if run.exit_code == 0 else "Error"
        if run.fault == "log-lost":
            return
        self._log(run, log, printed.operation_id if frames else None, frames, printed.outcome)

    def _log(
        self, run: PodRun, text: str, op: str | None, frames: int, outcome: str | None
    ) -> None:
        if self.partitioned and run.cut_off:
            # The log is on the node; the API cannot fetch it until the node is back.
            self._unsent_logs[run.pod] = (text, op, frames, outcome)
            return
        if self.api.peek(POD, run.namespace, run.pod) is None:
            return
        self.cluster.set_log(run.namespace, run.pod, CONTAINER, text)
        if run.truth is not None:
            run.truth.printed_op = op
            run.truth.printed_frames = frames
            run.truth.printed_outcome = outcome if frames == 1 else None

    def _exit(self, run: PodRun) -> None:
        self.runs.pop(run.pod, None)
        if run.truth is not None:
            run.truth.alive = False
        if run.mutating:
            self._stop_writing(run)
        if self.partitioned and run.cut_off:
            self._unsent_exits[run.pod] = run  # reported once the node is back
            return
        self._report_exit(run)

    def _report_exit(self, run: PodRun) -> None:
        if not run.done:
            run.exit_code, run.exit_reason = 137, "Error"
        phase = "Succeeded" if run.exit_code == 0 else "Failed"
        state = {"terminated": {"exitCode": run.exit_code, "reason": run.exit_reason}}
        pod = self.api.peek(POD, run.namespace, run.pod)
        if pod is None:
            return
        if _phase(pod) in TERMINAL:
            phase = _phase(pod)  # a terminal phase never changes
        status = {
            "phase": phase,
            "containerStatuses": [{"name": CONTAINER, "state": state, "ready": False}],
        }
        self.api.patch(POD, run.namespace, run.pod, {"status": status}, "status")
        if run.truth is not None:
            run.truth.terminated = True
        self._confirm_deletion(run.namespace, run.pod)

    def _confirm_deletion(self, namespace: str, name: str) -> None:
        """The node confirms a graceful deletion once the containers stopped."""
        pod = self.api.peek(POD, namespace, name)
        fins = ((pod or {}).get("metadata") or {}).get("finalizers") or []
        if NODE_CONFIRMS in fins:
            rest = [f for f in fins if f != NODE_CONFIRMS]
            self.api.patch(POD, namespace, name, {"metadata": {"finalizers": rest or None}})

    # --- the node cut off from the API

    def _maybe_partition(self) -> None:
        """Now and then, while a mutation's container runs, the node loses the API."""
        running = [r for r in self.runs.values() if r.mutating and r.started and not r.done]
        if running and self._fault("partition"):
            self._count("fault:partition")
            # Long enough, now and then, for a Lease to expire meanwhile. The node cut
            # off holds every Pod it has now; Pods created meanwhile run elsewhere.
            self.partition(self.rng.randint(2, 30))
            if self.on_partition is not None:
                self.on_partition()

    def partition(self, steps: int) -> None:
        """The node holding every Pod there is now loses the API for ``steps`` kubelet
        steps (or, when already cut off, for ``steps`` more). Pods created meanwhile run
        on another node, connected."""
        self.partitioned = steps
        for run in self.runs.values():
            run.cut_off = True

    def _run_offline(self) -> None:
        """Containers already started keep running and writing; nothing reaches the API,
        and the kubelet does not learn of a deleted Pod. Meanwhile a running Pod may be
        force-deleted, or its Job deleted (its Pods collected): the objects go, the
        process writes on (until the node is back and kills it) after its Job failed or
        vanished."""
        # A process that has done its work but not exited yet (flushing, slow to exit)
        # is as alive as one still writing: either may be the one whose Pod goes.
        started = [
            r
            for r in self.runs.values()
            if r.cut_off and r.started and r.pod not in self.last_traces
        ]
        if started and self.faults_on and self.rng.random() < 0.5:
            run = self.rng.choice(started)
            pod = self.api.peek(POD, run.namespace, run.pod)
            if pod is not None:
                roll = self.rng.random()
                if roll < 0.3 and self.api.peek(JOB, run.namespace, run.job) is not None:
                    self._count("fault:job-deleted-offline")
                    self.api.delete(JOB, run.namespace, run.job, propagation="Background")
                elif roll < 0.5 and _phase(pod) not in TERMINAL:
                    # The Pod garbage collector marks a Pod on an unreachable node Failed
                    # before it deletes it: the phase says Failed, the containers' last
                    # report still says running, and the process goes on writing.
                    self._count("fault:marked-failed-offline")
                    self._mark_node_lost(run)
                else:
                    self._count("fault:force-deleted")
                    # A force delete takes the object whether or not its node confirmed.
                    self._confirm_deletion(run.namespace, run.pod)
                    if self.api.peek(POD, run.namespace, run.pod) is not None:
                        self.api.delete(POD, run.namespace, run.pod)
                if run.done:
                    self._count("fault:deleted-after-work")
                    run.exit_lag += self.rng.randint(2, 30)
                else:
                    run.steps_left += self.rng.randint(2, 30)
        self._delete_gracefully_offline()
        for run in [r for r in self.runs.values() if r.cut_off]:
            if not run.started:
                continue  # the node cannot start what it has not heard of
            if run.done:
                run.exit_lag -= 1
                if run.exit_lag <= 0:
                    self._exit(run)
                continue
            run.steps_left -= 1
            if run.steps_left <= 0:
                self._complete(run)
                if run.exit_lag <= 0:
                    self._exit(run)
        self.partitioned -= 1
        if self.partitioned == 0 and self.cut_off_until is not None:
            if self.cluster.now() < self.cut_off_until:
                self.partitioned = 1  # not back before the process there was killed
            else:
                self.cut_off_until = None
        if self.partitioned == 0:
            self._reconnect()

    def _delete_gracefully_offline(self) -> None:
        """Now and then a running Pod on the cut-off node is deleted gracefully, alone or
        with its Job (the garbage collector deleting the Job's Pods): the object stays,
        Terminating and still shown running, because only its node can confirm the
        containers stopped; the process writes on until the node is back."""
        if not self.faults_on or self.graceful.random() >= 0.2:
            return
        started = sorted(
            (r for r in self.runs.values() if r.cut_off and r.started), key=lambda r: r.pod
        )
        live = [
            r
            for r in started
            if (pod := self.api.peek(POD, r.namespace, r.pod)) is not None
            and not pod["metadata"].get("deletionTimestamp")
            and _phase(pod) not in TERMINAL
        ]
        if not live:
            return
        run = self.graceful.choice(live)
        pods = [run.pod]
        job = self.api.peek(JOB, run.namespace, run.job)
        with_job = job is not None and self.graceful.random() < 0.5
        if with_job:
            pods = [r.pod for r in live if r.job == run.job]
        for name in pods:
            fins = self.api.peek(POD, run.namespace, name)["metadata"].get("finalizers") or []
            self.api.patch(
                POD, run.namespace, name, {"metadata": {"finalizers": [*fins, NODE_CONFIRMS]}}
            )
        if with_job:
            self._count("fault:job-deleted-pods-terminating")
            self.api.delete(JOB, run.namespace, run.job, propagation="Background")
        else:
            self._count("fault:pod-terminating")
        for name in pods:
            if self.api.peek(POD, run.namespace, name) is not None:
                self.api.delete(POD, run.namespace, name)
        if run.done:
            run.exit_lag += self.graceful.randint(2, 30)
        else:
            run.steps_left += self.graceful.randint(2, 30)

    def _reconnect(self) -> None:
        """Back in touch: what exited meanwhile is reported (where its Pod still exists);
        a process whose Pod is gone is found by the next kubelet step and killed."""
        for back in [*self.runs.values(), *self._unsent_exits.values()]:
            back.cut_off = False
        for name, (text, op, frames, outcome) in list(self._unsent_logs.items()):
            run = self._unsent_exits.get(name) or self.runs.get(name)
            if run is not None:
                self._log(run, text, op, frames, outcome)
        self._unsent_logs.clear()
        for run in list(self._unsent_exits.values()):
            self._report_exit(run)
        self._unsent_exits.clear()

    def _execute(self, run: PodRun) -> ResultFrame:
        db = run.db
        kind = {"plan": "plan", "apply": "apply", "history": "history", "migrate": "migrate"}
        op_type = kind.get(run.op, "identify")

        def frame(outcome: str, data: dict[str, Any], reason: str = "") -> ResultFrame:
            return ResultFrame.model_validate(
                {
                    "operationId": run.operation_id,
                    "operationType": op_type,
                    "database": db.identity if db else None,
                    "outcome": outcome,
                    "reason": reason,
                    "data": data,
                }
            )

        if db is None:
            return frame("failed", {}, "could not connect")
        if run.fault == "sql-failed" and run.mutating:
            return frame("failed", {}, "ERROR: relation already exists (statement 1 rolled back)")
        if run.op == "plan":
            desired = run.inputs.get("desired.sql", "")
            lines = desired.splitlines()
            if BROKEN in lines:  # a source that does not load fails the same way every time
                line = lines.index(BROKEN) + 1
                message = f"desired schema does not load: line {line}: syntax error"
                return frame("failed", {"message": message}, "DesiredSchemaInvalid")
            planned = db.plan(desired)
            self._observed(run, fingerprint=db.fingerprint(), changes=planned["changes"])
            return frame("succeeded", planned)
        if run.op == "history":
            history = db.read_history(_versions(run.dirs), _files(run.dirs), _repeatable(run.dirs))
            applied = [str(v) for v in history["applied"]]  # type: ignore[attr-defined]
            repeatables: list[dict[str, str]] = history["repeatables"]  # type: ignore[assignment]
            self._observed(
                run,
                dirty=db.dirty,
                applied=applied,
                pending=history["pending"],
                mismatched=bool(history["mismatched"]),
                repeatables_pending=bool(history["repeatablesPending"]),
                # What the database has, as the family states it: the applied versions,
                # then each repeatable at the checksum it last ran with.
                state=[
                    *applied,
                    *(
                        f"{r['name']}@{r['appliedChecksum']}"
                        for r in repeatables
                        if r["appliedChecksum"]
                    ),
                ],
            )
            return frame("succeeded", history)
        if run.op == "apply":
            body = json.loads(run.inputs.get("plan.json", "{}"))
            if body.get("fingerprintBefore") != db.fingerprint():
                return frame("refused", {}, "TargetDrifted")
            self._effect(run, partial=False)
            return frame(
                "succeeded",
                {"executed": len(body["statements"]), "fingerprintAfter": db.fingerprint()},
            )
        if run.op == "migrate":
            if db.dirty:
                return frame("refused", {}, "Dirty")
            if db.read_history(_versions(run.dirs), _files(run.dirs))["mismatched"]:
                # An applied migration edited since it ran: the runner runs nothing.
                return frame("refused", {}, "ChecksumMismatch")
            applied = self._effect(run, partial=False)
            return frame("succeeded", {"applied": applied})
        return frame("failed", {}, f"unknown operation {run.op}")

    @staticmethod
    def _observed(run: PodRun, **seen: Any) -> None:
        if run.truth is not None:
            run.truth.observed = seen

    def _count_execution(self, run: PodRun) -> None:
        """One per Job: two Pods of one Job (the cluster's duplicate) are one dispatch;
        the same operation done by a second Job is what the invariant looks for."""
        assert run.db is not None
        if run.job not in self._executed:
            self._executed.add(run.job)
            run.db.executions[run.operation_id] += 1

    def _effect(self, run: PodRun, partial: bool) -> list[str]:
        """What the executor did to the database; counted, so a second run shows."""
        db = run.db
        assert db is not None
        if run.op == "apply":
            body = json.loads(run.inputs.get("plan.json", "{}"))
            if body.get("fingerprintBefore") != db.fingerprint():
                return []
            statements = [s["sql"] for s in body.get("statements", [])]
            if statements:
                self._count_execution(run)
            if not partial or self.rng.random() < 0.5:
                db.apply_statements(statements)
            return []
        pending = [v for v in _versions(run.dirs) if v not in db.history]
        to = _flag(run.args, "--to")
        if to is not None:
            pending = [v for v in pending if int(v) <= int(to)]
        if pending and db.dirty is None:
            self._count_execution(run)
        done: list[str] = []
        for v in pending:
            if db.dirty is not None:
                break
            if partial and self.rng.random() < 0.5:
                db.dirty = v
                break
            db.history.append(v)
            db.checksums[v] = digest(_files(run.dirs).get(v, ""), 32)
            done.append(v)
        if partial or db.dirty is not None:
            return done  # a run stopped part way never reaches its repeatable files
        changed = {
            name: digest(text, 32)
            for name, text in _repeatable(run.dirs).items()
            if db.repeatables.get(name) != digest(text, 32)
        }
        if changed and not pending:
            self._count_execution(run)
        db.repeatables.update(changed)
        return done

    def _finish_jobs(self) -> None:
        now = self.cluster.now()
        stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        for job in self.api.peek_list(JOB, ""):
            job_ns = str(job["metadata"]["namespace"])
            self._count_pods(job)
            if (job.get("status") or {}).get("conditions"):
                continue
            uid = job["metadata"]["uid"]
            name = job["metadata"]["name"]
            pods = [p for p in self.api.peek_list(POD, job_ns) if _owned_by(p, uid)]
            # The Job controller acts on the deadline at its first step past it, or later
            # by its lag where one was drawn (_edge_start).
            behind = timedelta(seconds=self.deadline_lag.get(uid, 0))
            if self.deadline_passed(job, now - behind):
                self._terminal(job_ns, name, "Failed", stamp, "DeadlineExceeded")
                for pod in pods:
                    if _phase(pod) in {"Pending", "Running"}:
                        self.api.delete(POD, job_ns, pod["metadata"]["name"])
                continue
            counted = [self._counted.get((uid, t.pod)) for t in self._created(uid)]
            if not counted:
                continue  # its Pods are not created yet
            runs = [r for r in self.runs.values() if r.job == name]
            lag, steps = self.job_lag.get(uid, ("at", 0))
            if not pods:
                # Every Pod it created was deleted before it was counted: failed, and with
                # backoffLimit 0 the Job fails (no replacement).
                ok = "Succeeded" in counted
            elif lag == "early" and not self.partitioned:
                # Marked terminal once every Pod's work is over, before the exits.
                if any(not r.done for r in runs):
                    continue
                ok = any(r.exit_code == 0 for r in runs) or any(
                    _phase(p) == "Succeeded" for p in pods
                )
            else:
                if any(_phase(p) in {"Pending", "Running"} for p in pods):
                    continue
                if lag == "late" and steps > 0:
                    self.job_lag[uid] = (lag, steps - 1)
                    continue
                ok = "Succeeded" in counted or any(_phase(p) == "Succeeded" for p in pods)
            self._terminal(job_ns, name, "Complete" if ok else "Failed", stamp, "")

    def _created(self, job_uid: str) -> list[PodTruth]:
        """The Pods the Job controller created for a Job (its own record, as the tracking
        finalizer keeps it)."""
        return [t for t in self.truth.values() if t.job_uid == job_uid]

    def _count_pods(self, job: dict[str, Any]) -> None:
        """The Job's own count of the Pods it ran, as Job tracking keeps it, from what
        the API shows: a Pod is counted once seen terminal, and a Pod deleted before it
        was counted counts as failed (whatever its process still does)."""
        uid = job["metadata"]["uid"]
        job_ns = str(job["metadata"]["namespace"])
        created = self._created(uid)
        listed: dict[str, dict[str, Any]] | None = None  # read only for a Pod not counted yet
        for t in created:
            key = (uid, t.pod)
            if key in self._counted:
                continue
            if listed is None:
                listed = {
                    p["metadata"]["name"]: p
                    for p in self.api.peek_list(POD, job_ns)
                    if _owned_by(p, uid)
                }
            pod = listed.get(t.pod)
            if pod is None:
                self._counted[key] = "Failed"
            elif _phase(pod) in {"Succeeded", "Failed"}:
                self._counted[key] = _phase(pod)
        outcomes = [self._counted.get((uid, t.pod)) for t in created]
        counts = {
            "active": outcomes.count(None),
            "succeeded": outcomes.count("Succeeded"),
            "failed": outcomes.count("Failed"),
        }
        status = job.get("status") or {}
        if any(int(status.get(k) or 0) != v for k, v in counts.items()):
            self.api.patch(JOB, job_ns, job["metadata"]["name"], {"status": counts}, "status")

    def deadline_passed(self, job: dict[str, Any], now: datetime) -> bool:
        deadline = job["spec"].get("activeDeadlineSeconds")
        created = job["metadata"].get("creationTimestamp")
        if deadline is None or not created:
            return False
        return (now - parse_rfc3339(created)).total_seconds() > int(deadline)

    def _terminal(self, namespace: str, name: str, kind: str, stamp: str, reason: str) -> None:
        cond = {"type": kind, "status": "True", "lastTransitionTime": stamp}
        if reason:
            cond["reason"] = reason
        self.api.patch(
            JOB,
            namespace,
            name,
            {"status": {"conditions": [cond], "completionTime": stamp}},
            "status",
        )

    def _ttl(self) -> None:
        now = self.cluster.now()
        for job in self.api.peek_list(JOB, ""):
            job_ns = str(job["metadata"]["namespace"])
            ttl = job["spec"].get("ttlSecondsAfterFinished")
            done = (job.get("status") or {}).get("completionTime")
            if ttl is None or not done:
                continue
            finished = parse_rfc3339(done)
            if (now - finished).total_seconds() >= ttl:
                self.api.delete(JOB, job_ns, job["metadata"]["name"], propagation="Background")


def _foreign(operation_id: str) -> str:
    """Another operation's ID: a frame from a stale run, or a runner given the wrong one."""
    return "x" + operation_id[1:] if not operation_id.startswith("x") else "y" + operation_id[1:]


def _phase(pod: dict[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase", "Pending"))


def _running() -> dict[str, Any]:
    return {
        "phase": "Running",
        "containerStatuses": [{"name": CONTAINER, "state": {"running": {}}, "ready": True}],
    }


def _owned_by(pod: dict[str, Any], uid: str) -> bool:
    return any(r.get("uid") == uid for r in pod["metadata"].get("ownerReferences", []))


def _versions(dirs: list[dict[str, str]]) -> list[str]:
    versions = {name.split("_", 1)[0] for d in dirs for name in d if name.endswith(".sql")}
    return sorted((v for v in versions if v.isdigit()), key=int)


def _repeatable(dirs: list[dict[str, str]]) -> dict[str, str]:
    """Each repeatable file's content (``R__<name>.sql``), by name."""
    return {
        name.removeprefix("R__").removesuffix(".sql"): text
        for d in dirs
        for name, text in d.items()
        if name.startswith("R__") and name.endswith(".sql")
    }


def _files(dirs: list[dict[str, str]]) -> dict[str, str]:
    """Each version's file content, as the directory holds it."""
    return {
        name.split("_", 1)[0]: text
        for d in dirs
        for name, text in d.items()
        if name.endswith(".sql")
    }


def _flag(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else None
