"""One simulated world: the in-memory API, databases, the kubelet, controller replicas,
and the people who edit, approve, suspend, delete and rotate."""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ptah.families.migration import MigrationFamily
from ptah.families.schema import SchemaFamily
from ptah.kube import errors
from ptah.kube.clock import SimClock, rfc3339
from ptah.kube.kinds import (
    APPROVAL,
    CONFIGMAP,
    JOB,
    LEASE,
    MIGRATION,
    PLAN,
    POD,
    SCHEMA,
    SECRET,
    Kind,
)
from ptah.lifecycle.context import ABANDON_ANNOTATION, Env
from ptah.lifecycle.family import AnyFamily
from ptah.lifecycle.reconcile import reconcile
from ptah.lifecycle.sighting import run_key
from ptah.targetlock import HOLDER_JOB, HOLDER_KIND, HOLDER_NAME, HOLDER_NAMESPACE
from ptah.testing.memory import MemoryCluster, WriteRequest
from ptah.testing.sim.database import Databases
from ptah.testing.sim.kubelet import BROKEN, NODE_CONFIRMS, NS, OTHER_DATABASE, Kubelet, PodRun
from ptah.workload.job import LABEL_OPERATION
from ptah.workload.names import lease_name

# The finalizer a Job controller puts on each Pod it makes, until it has counted the Pod.
JOB_TRACKING = "batch.kubernetes.io/job-tracking"

SCHEMA_FAMILY = SchemaFamily()
MIGRATION_FAMILY = MigrationFamily()
TABLES = [f"CREATE TABLE t{i}" for i in range(6)]
LEASE_DURATION = 120
LOCK_NS = "ptah-system"
# The namespaces a world's resources are drawn into.
NAMESPACES = (NS, "team-a", "team-b")
# Writes a reading makes too: a stop after one is aimed at a mutating claim's window.
CLAIM_WRITES = {
    "write_claim",
    "write_admission_snapshot",
    "write_dispatch_started",
    "create_job",
    "write_job_uid",
    "write_job_ttl",
    "write_outcome",
}
# The writes carrying the resourceVersion their pass read (of the resource itself, or of
# the approval it spends): the precondition is all that stops a pass gone stale from
# writing over another's.
PRECONDITIONED_WRITES = {
    "add_finalizer",
    "consume_approval",
    "remove_finalizer",
    "write_claim",
    "write_lease_expectation",
    "write_lease_epoch",
    "write_admission_snapshot",
    "write_dispatch_started",
    "write_job_uid",
    "write_outcome",
    "write_release_evidence",
    "clear_lock_release",
    "write_execution_binding",
    "write_observation",
    "abandon_proof",
}


class ControllerStopped(Exception):
    """Raised from a write hook: the controller process stops right there."""


class SkewedView:
    """The cluster as one controller replica sees it: the same API, its own clock."""

    def __init__(self, cluster: MemoryCluster, skew: float) -> None:
        self._c = cluster
        self._skew = timedelta(seconds=skew)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._c, name)

    def now(self) -> datetime:
        return self._c.now() + self._skew


@dataclass
class Replica:
    name: str
    env: Env
    skew: float
    restarts: int = 0
    down_until: datetime | None = None  # an outage: no passes, then a fresh process
    moves_to: float | None = None  # the next process runs on a node with this clock offset


class Watcher:
    """What the invariants hear about passes (a pass is one reconcile call)."""

    def pass_started(self, res: SimResource, depth: int) -> None:
        return None

    def pass_ended(self, res: SimResource, ok: bool) -> None:
        return None

    def fault(self, what: str, res: SimResource | None) -> None:
        return None


# The deadline a person shortens spec.runner's to after a dispatch: the shortest a world
# is built with (runs complete within it), so the world still converges after the edit.
SHORTENED_DEADLINE = 60


@dataclass
class SimResource:
    family: AnyFamily
    name: str
    secret: str
    db: str
    # Its namespace, where its Secret, its ConfigMaps, its approvals, plans, Jobs and Pods
    # live too (the realm's Lease lives in the lock namespace, shared by all).
    namespace: str = NS


@dataclass
class World:
    seed: int
    rng: random.Random
    clock: SimClock
    cluster: MemoryCluster
    dbs: Databases
    kubelet: Kubelet
    replicas: list[Replica] = field(default_factory=list)
    resources: list[SimResource] = field(default_factory=list)
    secrets: dict[str, str] = field(default_factory=dict)
    crash: tuple[str, str, int] | None = None
    crashes: list[str] = field(default_factory=list)
    api_fault_rate: float = 0.0
    faults_on: bool = True
    watcher: Watcher = field(default_factory=Watcher)
    depth: int = 0  # passes in progress (an interleaved pass runs inside another's write)
    starved_until: dict[str, datetime] = field(default_factory=dict)
    runner_defaults: dict[str, Any] = field(default_factory=dict)
    # Clock faults draw from their own stream, so every other draw of a schedule is left
    # as it was; the operations whose withheld release already had its chance of one.
    clocks: random.Random = field(default_factory=random.Random)
    moved_for: set[str] = field(default_factory=set)
    # A resource whose next pass runs on the named replica (its worker moved there).
    handover: dict[str, str] = field(default_factory=dict)
    # Passes that race another's write (a second controller over the same resource, a
    # worker over another resource between a Lease read and its write) draw from their
    # own stream, so every other draw of a schedule stays as it was.
    races: random.Random = field(default_factory=random.Random)
    # A holder gone quiet over a cut-off executor draws from its own stream too.
    quiet: random.Random = field(default_factory=random.Random)
    # A Job deleted with its waiting Pod orphaned: its own stream too.
    orphaning: random.Random = field(default_factory=random.Random)
    # Orphaned Pods to be force-deleted, unseen, as soon as they start.
    unseen_orphans: set[str] = field(default_factory=set)
    # Two acquirers racing for one Lease, and the Leases an earlier deployment left
    # behind, draw from their own stream too.
    acquirers: random.Random = field(default_factory=random.Random)
    # Holders of Leases an earlier deployment left behind (their resources are gone):
    # left to expire, named by no claim.
    gone_holders: set[str] = field(default_factory=set)
    # A Job recreated under its reserved name, a release write delayed on the network, and
    # a spec.runner edit while a claim is in flight draw from their own streams too.
    replaced: random.Random = field(default_factory=random.Random)
    impatient: random.Random = field(default_factory=random.Random)
    delays: random.Random = field(default_factory=random.Random)
    renewals: random.Random = field(default_factory=random.Random)
    edits: random.Random = field(default_factory=random.Random)
    # A deadline shortened in spec.runner after a mutating run's dispatch: its own stream.
    shortened: random.Random = field(default_factory=random.Random)
    # A Job deleted while a Pod it just made waits unscheduled: its own stream.
    stuck: random.Random = field(default_factory=random.Random)
    # Reads of a run's Job and Pods that fail while its orphan starts: its own stream, the
    # runs that had their chance of it, and until when each run's reads fail.
    unreadable: random.Random = field(default_factory=random.Random)
    unread_drawn: set[str] = field(default_factory=set)
    unread_until: dict[str, datetime] = field(default_factory=dict)
    # An approval naming another kind under the resource's own name, and a quiet holder's
    # Job put back under its reserved name while its first Pod writes on: their own streams.
    misnamed: random.Random = field(default_factory=random.Random)
    restored: random.Random = field(default_factory=random.Random)
    # An applied migration edited in place while proof is owed: its own stream.
    mended: random.Random = field(default_factory=random.Random)
    # A ConfigMap put under a claim's reserved input name, with other content, just
    # before the claim creates it: its own stream, and when each one is taken away.
    squatted: random.Random = field(default_factory=random.Random)
    squatters: dict[tuple[str, str], datetime] = field(default_factory=dict)
    # An accounted run's Job put back under its reserved name before its release: its own
    # stream, and the operations that had their chance of it.
    reapplied: random.Random = field(default_factory=random.Random)
    reapplied_for: set[str] = field(default_factory=set)
    # The copies' Pods, by name, with their resource and operation: each runs until its
    # resource's release has seen it (or no longer waits for the operation).
    reapplied_runs: dict[str, tuple[SimResource, str]] = field(default_factory=dict)
    # A resource's Secret deleted while it owes proof (and put back later, as a secrets
    # operator recreates it): its own stream, and each Secret gone with when it returns.
    unsecret: random.Random = field(default_factory=random.Random)
    secrets_gone: dict[tuple[str, str], tuple[dict[str, Any], datetime]] = field(
        default_factory=dict
    )

    @classmethod
    def build(cls, seed: int) -> World:
        rng = random.Random(seed)
        clock = SimClock()
        cluster = MemoryCluster(clock=clock, seed=seed)
        dbs = Databases()
        dbs.add("db1")
        dbs.add("db2")
        dbs.add(OTHER_DATABASE)  # planned by nobody; reached only by a misdirected run
        world = cls(seed, rng, clock, cluster, dbs, Kubelet(cluster, dbs, rng))
        world.clocks = random.Random(f"{seed}/clocks")
        world.kubelet.frame_damage = random.Random(f"{seed}/frames")
        world.kubelet.adoption = random.Random(f"{seed}/adoption")
        world.kubelet.failures = random.Random(f"{seed}/failures")
        world.races = random.Random(f"{seed}/races")
        world.quiet = random.Random(f"{seed}/quiet")
        world.orphaning = random.Random(f"{seed}/orphaning")
        world.acquirers = random.Random(f"{seed}/acquirers")
        world.replaced = random.Random(f"{seed}/replaced")
        world.impatient = random.Random(f"{seed}/impatient")
        world.delays = random.Random(f"{seed}/delays")
        world.renewals = random.Random(f"{seed}/renewals")
        world.edits = random.Random(f"{seed}/edits")
        world.shortened = random.Random(f"{seed}/shortened")
        world.stuck = random.Random(f"{seed}/stuck")
        world.unreadable = random.Random(f"{seed}/unreadable")
        world.misnamed = random.Random(f"{seed}/misnamed")
        world.restored = random.Random(f"{seed}/restored")
        world.mended = random.Random(f"{seed}/mended")
        world.squatted = random.Random(f"{seed}/squatted")
        world.reapplied = random.Random(f"{seed}/reapplied")
        world.unsecret = random.Random(f"{seed}/unsecret")
        world.kubelet.on_partition = world._partition_spreads
        world._populate()
        world._leases_left_behind()
        return world

    # --- setup

    def _populate(self) -> None:
        api = self.cluster.system
        policy = self.rng.random() < 0.5
        if policy:
            api.create(CONFIGMAP, _policy_cm({"allowDestructive": "true"}))
        spellings = ["sim://u:{pw}@db1/app", "sim://u:{pw}@DB1:5432/app/"]
        count = self.rng.choice([1, 2, 2, 3])
        for i in range(count):
            family: AnyFamily = SCHEMA_FAMILY if self.rng.random() < 0.55 else MIGRATION_FAMILY
            shared = i > 0 and self.rng.random() < 0.6
            url = (spellings[i % 2] if shared or i == 0 else "sim://u:{pw}@db2/app").replace(
                "/app", ""
            )
            db = "db1" if shared or i == 0 else "db2"
            # Platform teams keep their resources in namespaces of their own, and two of
            # them may address one database: its realm (one Lease, in the lock namespace)
            # is shared across namespaces, while each holder's Jobs and Pods live in its
            # own. Drawn from its own stream, so every other draw stays as it was.
            namespace = random.Random(f"{self.seed}/r{i}/namespace").choice(NAMESPACES)
            self._add_resource(family, f"r{i}", url, db, namespace)
        if policy:
            # The verification policy is read from each resource's namespace.
            for namespace in sorted({r.namespace for r in self.resources} - {NS}):
                api.create(CONFIGMAP, _policy_cm({"allowDestructive": "true"}, namespace))
        far = self.rng.random() < 0.2  # one replica's clock is off by minutes
        for i in range(2 if far else self.rng.choice([1, 2])):
            skew = self.rng.uniform(-30, 30) if i else 0.0
            if far and i:
                skew = self.rng.choice([-1, 1]) * self.rng.uniform(150, 400)
            self.replicas.append(self._replica(f"c{i}", skew))

    def _leases_left_behind(self) -> None:
        """A database that more than one resource addresses was served before: its Lease,
        which no resource owns, outlived the deployment that took it, released (free at
        some epoch) or still naming a holder whose resource is gone (expired by anyone's
        clock once watched long enough). The first acquisitions then take an existing
        Lease by a patch carrying the version they read, not by a create."""
        for db in sorted({r.db for r in self.resources}):
            if sum(r.db == db for r in self.resources) < 2 or self.acquirers.random() >= 0.8:
                continue
            epoch = self.acquirers.randint(1, 5)
            annotations: dict[str, str] = {}
            holder = None
            if self.acquirers.random() < 0.25:
                holder = f"gone-{db}/apply-{epoch:04d}"
                self.gone_holders.add(holder)
                annotations = {
                    HOLDER_NAMESPACE: NS,
                    HOLDER_KIND: SCHEMA.kind,
                    HOLDER_NAME: f"gone-{db}",
                    HOLDER_JOB: f"gone-{db}-apply-{epoch}",
                }
            stamp = rfc3339(self.clock.now() - timedelta(days=1))
            self.cluster.system.create(
                LEASE,
                {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {
                        "name": lease_name(self.dbs.by_name[db].identity.digest),
                        "namespace": LOCK_NS,
                        "annotations": annotations,
                    },
                    "spec": {
                        "holderIdentity": holder,
                        "leaseDurationSeconds": LEASE_DURATION,
                        "leaseTransitions": epoch,
                        "acquireTime": stamp,
                        "renewTime": stamp,
                    },
                },
            )

    def _add_resource(
        self, family: AnyFamily, name: str, url_template: str, db: str, namespace: str = NS
    ) -> None:
        api = self.cluster.system
        password = f"pw-{self.seed}-{name}-secret"
        self.secrets[name] = password
        api.create(
            SECRET,
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": f"{name}-db", "namespace": namespace},
                "stringData": {"url": url_template.format(pw=password)},
            },
        )
        target = {"engine": "postgres", "secretRef": {"name": f"{name}-db", "key": "url"}}
        # Now and then a short runner deadline, so the hold (the Job's deadline + the
        # Pod's + 60 s) passes within a schedule and a Pod's own deadline kills a process
        # cut off from the API. Drawn from its own stream: the world is otherwise built as
        # it was.
        aside = random.Random(f"{self.seed}/{name}/deadline")
        deadline = aside.choice([60, 120, 300]) if aside.random() < 0.4 else None
        if family is SCHEMA_FAMILY:
            spec: dict[str, Any] = {
                "target": target,
                "source": {"inline": self._source(3)},
                "policy": {
                    "approval": self.rng.choice(["Never", "Destructive", "Always"]),
                    "allowDestructive": self.rng.random() < 0.7,
                },
                "driftCheckIntervalSeconds": self.rng.choice([0, 300]),
            }
            kind = SCHEMA
        else:
            directory = _migrations_cm(f"{name}-dir", self.rng.randint(1, 3), namespace)
            if random.Random(f"{self.seed}/{name}/repeatable").random() < 0.5:
                # A repeatable file beside the versions (its own stream).
                directory["data"]["R__views.sql"] = "CREATE OR REPLACE VIEW v AS SELECT 1;"
            api.create(CONFIGMAP, directory)
            spec = {
                "target": target,
                "directory": {"configMaps": [f"{name}-dir"]},
                "policy": {"approval": self.rng.choice(["Never", "Always"])},
            }
            kind = MIGRATION
        if deadline is not None:
            spec["runner"] = {"activeDeadlineSeconds": deadline}
        api.create(
            kind,
            {
                "apiVersion": "ptah.io/v1alpha1",
                "kind": kind.kind,
                "metadata": {"name": name, "namespace": namespace},
                "spec": spec,
            },
        )
        self.resources.append(SimResource(family, name, f"{name}-db", db, namespace))

    def _replica(self, name: str, skew: float) -> Replica:
        view = SkewedView(self.cluster, skew)
        env = Env(
            cluster=view,
            lock_namespace=LOCK_NS,
            controller=name,
            hook=self._hook,
            lease_duration=LEASE_DURATION,
            runner_defaults=dict(self.runner_defaults),
        )
        return Replica(name, env, skew)

    # --- controller stops

    def _hook(self, when: str, write: str) -> None:
        if (
            self.faults_on
            and self.depth == 1
            and len(self.resources) > 1
            and self.rng.random() < 0.03
        ):
            self._interleave()
        if (
            self.faults_on
            and when == "after"
            and write == "create_job"
            and self.rng.random() < 0.05
        ):
            self._tamper_job(self._claimed_job())
        if (
            self.faults_on
            and when == "after"
            and write in {"write_lease_epoch", "write_admission_snapshot"}
            and self.rng.random() < 0.05
        ):
            self._revoke_approval()
        if (
            self.faults_on
            and when == "after"
            and write == "write_admission_snapshot"
            and self.edits.random() < 0.1
        ):
            self._edit_runner()
        if (
            self.faults_on
            and when == "after"
            and write == "create_job"
            and self.replaced.random() < 0.05
        ):
            job = self._claimed_job()
            if job is not None:
                self._replace_job(job, edited=True)
        if (
            self.faults_on
            and when == "after"
            and write == "write_job_uid"
            and self.replaced.random() < 0.05
        ):
            job = self._claimed_job()
            if job is not None:
                self._replace_job(job, edited=False)
        if (
            self.faults_on
            and when == "after"
            and write == "create_job"
            and self._mutating_now()
            and self.rng.random() < 0.04
        ):
            self._job_vanishes_unseen()
        if (
            self.faults_on
            and when == "after"
            and write == "create_job"
            and self._mutating_now()
            and self.shortened.random() < 0.2
        ):
            self._shorten_deadline()
        if (
            self.faults_on
            and self.depth == 1
            and when == "before"
            and write in PRECONDITIONED_WRITES
            and self.races.random() < 0.02
        ):
            self._stale_pass()
        if self.crash is None:
            return
        target_write, target_when, remaining = self.crash
        if write != target_write or when != target_when:
            return
        if when == "after" and write in CLAIM_WRITES and not self._mutating_now():
            return  # aim the stop at a mutation's window, not a reading's
        if remaining > 1:
            self.crash = (target_write, target_when, remaining - 1)
            return
        self.crash = None
        self.crashes.append(f"{when}:{write}")
        self.watcher.fault("stop", self._current)
        raise ControllerStopped(f"{when} {write}")

    def _interleave(self) -> None:
        """Another worker's pass over another resource runs between two of this pass's
        writes: passes over different resources are concurrent in a real operator."""
        current = self._current
        others = [r for r in self.resources if r is not current]
        if not others:
            return
        self.watcher.fault("interleaved-pass", current)
        self.reconcile_one(self.rng.choice(others))

    def _stale_pass(self) -> None:
        """Another controller's pass over the same resource runs between this pass's reads
        and its next preconditioned write (two replicas while leadership moves): this pass
        is now stale, and its write must fail on its resourceVersion precondition rather
        than write over what the other pass wrote."""
        current = self._current
        if current is None:
            return
        self.watcher.fault("stale-pass", current)
        self.reconcile_one(current)

    def lease_race(self, req: WriteRequest) -> None:
        """Between a controller's read of a Lease and its write of it, other workers'
        passes run (a request delayed on the network, a process paused): they may take,
        renew or release the same Lease meanwhile, so the write must carry the version it
        read and fail when the Lease moved."""
        self._acquirers_race(req)
        self._release_delayed(req)
        self._renewal_delayed(req)
        self._inputs_squatted(req)
        if (
            not self.faults_on
            or self.depth != 1
            or req.kind != LEASE
            or req.verb != "patch"
            or self.races.random() >= 0.05
        ):
            return
        self.watcher.fault("lease-race", self._current)
        for _ in range(self.races.randint(1, 4)):
            self.reconcile_one(self.races.choice(self.resources))

    def _inputs_squatted(self, req: WriteRequest) -> None:
        """Now and then, as a claim creates its runner-input ConfigMap, one is already
        there under that name with other content (restored from a backup of an edited
        copy, made by hand from one): the plan with a statement more, the desired source
        with a table more. Its maker takes it away a while later. A claim's inputs are
        what its name was made from, never what happens to stand under it."""
        if (
            not self.faults_on
            or req.kind != CONFIGMAP
            or req.verb != "create"
            or not req.name.startswith("ptah-input-")
            or self.squatted.random() >= 0.05
        ):
            return
        self.squat_inputs(req, timedelta(seconds=self.squatted.uniform(30, 300)))

    def squat_inputs(self, req: WriteRequest, stays: timedelta) -> None:
        """Put another content under the input ConfigMap ``req`` creates, for ``stays``."""
        api = self.cluster.system
        if api.peek(CONFIGMAP, req.namespace, req.name) is not None:
            return
        data: dict[str, str] = {}
        for key, text in dict((req.body or {}).get("data") or {}).items():
            if key.endswith(".json"):
                body = json.loads(text)
                body["statements"] = [*body.get("statements", []), {"sql": "DROP TABLE t0"}]
                data[key] = json.dumps(body, sort_keys=True)
            else:
                data[key] = f"{text}\nCREATE TABLE t9"
        self.watcher.fault("inputs-squatted", self._current)
        api.create(
            CONFIGMAP,
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": req.name,
                    "namespace": req.namespace,
                    "ownerReferences": list(
                        ((req.body or {}).get("metadata") or {}).get("ownerReferences") or []
                    ),
                },
                "data": data,
            },
        )
        self.squatters[(req.namespace, req.name)] = self.clock.now() + stays

    def squatters_leave(self) -> None:
        """The squatting input ConfigMaps whose time has come are taken away."""
        now = self.clock.now()
        for (namespace, name), until in sorted(self.squatters.items()):
            if until <= now:
                del self.squatters[(namespace, name)]
                with contextlib.suppress(errors.NotFound):
                    self.cluster.system.delete(CONFIGMAP, namespace, name)

    def _acquirers_race(self, req: WriteRequest) -> None:
        """Two acquirers race for one Lease: a controller has read it free, expired or
        absent and its acquisition (a create, or a patch naming a holder) is delayed on
        its way (a paused process, a slow network) while the world goes on: the other
        resources addressing the same database make their passes (each another worker
        or replica, acquiring for its own claim) and their Jobs run, until one of them
        wrote the Lease. Both read it free and both write: only the precondition the
        acquisition carries (the version it read; a create's AlreadyExists) stands
        between the two and two holders of one epoch, whose executors both write."""
        spec = dict(req.body or {}).get("spec") or {}
        acquiring = req.verb == "create" or (req.verb == "patch" and spec.get("holderIdentity"))
        current = self._current
        if (
            not self.faults_on
            or self.depth != 1
            or req.kind != LEASE
            or not acquiring
            or current is None
        ):
            return
        now = self.clock.now()
        rivals = [
            r
            for r in self.resources
            if r is not current
            and r.db == current.db
            and self.starved_until.get(r.name, now) <= now  # a stuck worker makes no pass
        ]
        if not rivals or self.acquirers.random() >= 0.9:
            return
        self.watcher.fault("lease-acquire-race", current)
        before = self._lease_version(req.namespace, req.name)
        for _ in range(self.acquirers.randint(3, 12)):
            for rival in rivals:
                self.reconcile_one(rival)
                if self._lease_version(req.namespace, req.name) != before:
                    # The rival took it: the delayed acquisition must now be refused.
                    self.watcher.fault("lease-acquire-contended", current)
                    return
            self.kubelet.step()
            self.clock.advance(5)

    def _release_delayed(self, req: WriteRequest) -> None:
        """A release read the Lease as its own, and its write is delayed on its way (a
        paused process, a slow network) for longer than the Lease duration: meanwhile the
        other resources on the same database make their passes and their Jobs run, and one
        of them, finding the Lease unchanged for a Lease duration by its own clock and its
        holder's executor stopped, takes it. Only the version the release carries stands
        between the late write and the taker's tenure."""
        spec = dict(req.body or {}).get("spec") or {}
        current = self._lease_patch_in_pass(req)
        if current is None or "holderIdentity" not in spec or spec["holderIdentity"] is not None:
            return
        rivals = [r for r in self.resources if r is not current and r.db == current.db]
        if not rivals or self.delays.random() >= 0.5:
            return
        self.watcher.fault("release-delayed", current)
        self._rivals_meanwhile(req, rivals, self.delays.randint(26, 60), "release-overtaken")

    def _renewal_delayed(self, req: WriteRequest) -> None:
        """A renewal at the dispatch boundary read the Lease as its own, and its write is
        delayed on its way for longer than the Lease duration: a rival on the same
        database finds the Lease expired and its holder's claim not dispatched, takes it,
        and dispatches. Only the version the renewal carries makes it fail, so the
        delayed holder does not dispatch beside the taker. Its own stream."""
        spec = dict(req.body or {}).get("spec") or {}
        current = self._lease_patch_in_pass(req)
        if current is None or "renewTime" not in spec or "holderIdentity" in spec:
            return
        obj = self.cluster.system.peek(current.family.kind, current.namespace, current.name) or {}
        claim = (obj.get("status") or {}).get("activeOperation") or {}
        if claim.get("dispatchStarted"):
            return  # a dispatched holder's Lease is not taken while its run may write
        rivals = [r for r in self.resources if r is not current and r.db == current.db]
        if not rivals or self.renewals.random() >= 0.15:
            return
        self.watcher.fault("renewal-delayed", current)
        self._rivals_meanwhile(req, rivals, self.renewals.randint(26, 60), "renewal-overtaken")

    def _lease_patch_in_pass(self, req: WriteRequest) -> SimResource | None:
        """The resource whose pass (not one interleaved in it) patches a Lease with
        ``req``, while faults are on; None otherwise."""
        if not self.faults_on or self.depth != 1 or req.kind != LEASE or req.verb != "patch":
            return None
        return self._current

    def _rivals_meanwhile(
        self, req: WriteRequest, rivals: list[SimResource], rounds: int, overtaken: str
    ) -> None:
        """While ``req`` (a write of a Lease) is on its way, the ``rivals`` make their
        passes and the kubelet and the clock go on (5 s a round), until one of them wrote
        the Lease (the fault ``overtaken``) or ``rounds`` have passed."""
        before = self._lease_version(req.namespace, req.name)
        for _ in range(rounds):
            for rival in rivals:
                self.reconcile_one(rival)
            if self._lease_version(req.namespace, req.name) != before:
                self.watcher.fault(overtaken, self._current)
                return
            self.kubelet.step()
            self.clock.advance(5)

    def _lease_version(self, namespace: str, name: str) -> str | None:
        lease = self.cluster.system.peek(LEASE, namespace, name)
        return None if lease is None else str(lease["metadata"]["resourceVersion"])

    def _mutating_now(self) -> bool:
        res = self._current
        obj = self.cluster.system.peek(res.family.kind, res.namespace, res.name) if res else None
        status = (obj or {}).get("status") or {}
        claim = status.get("activeOperation") or {}
        return bool(claim.get("mutating") or status.get("pendingLockRelease"))

    def restart(self, replica: Replica) -> None:
        """A fresh process on what was left: no memory, including Lease observations (or
        its sightings of a run, so the hold starts over). It may run on another node, with
        that node's clock."""
        if replica.moves_to is not None:
            replica.skew, replica.moves_to = replica.moves_to, None
        fresh = self._replica(replica.name, replica.skew)
        replica.env = fresh.env
        replica.restarts += 1

    def _partition_spreads(self) -> None:
        """A network failure rarely cuts off one node alone: now and then the operator's
        replica (or one resource's worker) loses the API with it, for longer than the
        Lease duration, while the cut-off executor goes on writing."""
        if self.faults_on and self.rng.random() < 0.5:
            self.outage()

    def holder_goes_quiet(self) -> None:
        """Now and then, while a Lease holder's executor runs, one network failure cuts
        the executor's node off and leaves the holder's worker stuck for longer than the
        Lease duration; the executor, slow, writes on, and may lose its Job meanwhile
        (deleted with its Pods, seen by nobody). By every other process's clock the Lease
        expires while its executor may still write, so only the check of the holder's
        executor (its Job, its Pods, its claim's dispatch marker, its staged release)
        stands between the database and a second writer. The holder is a live dispatched
        claim or a staged release withheld for its executor. Drawn from its own stream,
        so every other draw of a schedule stays as it was."""
        if not self.faults_on:
            return
        running = {r.operation_id for r in self.kubelet.runs.values() if r.mutating and r.started}
        holders = []
        for res in self.resources:
            if not any(o is not res and o.db == res.db for o in self.resources):
                continue  # nobody else could take its Lease: silence there proves nothing
            quiet_until = self.starved_until.get(res.name)
            if quiet_until is not None and quiet_until > self.clock.now():
                continue  # one failure at a time: its first quiet spell plays out
            obj = self.cluster.system.peek(res.family.kind, res.namespace, res.name)
            status = (obj or {}).get("status") or {}
            claim = status.get("activeOperation") or {}
            staged = status.get("pendingLockRelease") or {}
            if claim.get("dispatchStarted") and claim.get("operationId") in running:
                holders.append((res, str(claim["operationId"])))
            elif staged.get("withheld") and staged.get("operationId") in running:
                holders.append((res, str(staged["operationId"])))
        if not holders or self.quiet.random() >= 0.08:
            return
        res, op = self.quiet.choice(holders)
        seconds = self.quiet.uniform(LEASE_DURATION + 10, 3.5 * LEASE_DURATION)
        until = self.clock.now() + timedelta(seconds=seconds)
        self.starved_until[res.name] = max(self.starved_until.get(res.name, until), until)
        # Kubelet steps come about every 17 s of the world's clock: the executor outlives
        # the holder's silence and another process's own sighting of the expired Lease.
        extra = self.quiet.randint(20, 40)
        self.kubelet.partition(max(self.kubelet.partitioned, extra + 1))
        jobs = set()
        for run in self.kubelet.runs.values():
            if run.operation_id == op:
                jobs.add(run.job)
                if run.done:
                    run.exit_lag = max(run.exit_lag, extra)
                else:
                    run.steps_left = max(run.steps_left, extra)
        # The holder's worker is stuck (a controller stop for that resource), and why.
        self.watcher.fault("starved", res)
        self.watcher.fault("holder-quiet", res)
        draw = self.quiet.random()
        if draw < 0.85:
            # Its Job deleted: with its Pods (gone from the API, or, since only the cut-off
            # node can confirm they stopped, left Terminating), or with its Pods orphaned
            # (still shown running).
            for job in sorted(jobs):
                if self.cluster.system.peek(JOB, res.namespace, job) is not None:
                    self._delete_quiet_job(res, job, draw)
        elif draw < 0.9:
            self._force_delete_quiet_pods(res, op)
        elif draw < 0.95:
            self._strip_quiet_holder(res, jobs)

    def _force_delete_quiet_pods(self, res: SimResource, op: str) -> None:
        """Someone force-deletes the quiet holder's Pods on the cut-off node (``kubectl
        delete pod --force``): the objects go, the processes write on, and the Job
        controller fails the Job (``backoffLimit: 0``) and counts the Pods. A terminal
        Job whose Pods nobody saw stop."""
        runs = [r for r in self.kubelet.runs.values() if r.operation_id == op]
        if not runs:
            return
        self.watcher.fault("holder-quiet-pods-force-deleted", res)
        # A long run on a node cut off long enough for another resource to come wanting
        # the Lease while the processes still write.
        for run in runs:
            self._force_delete_cut_off(run, 80)

    def _strip_quiet_holder(self, res: SimResource, jobs: set[str]) -> None:
        """A person, seeing the quiet holder stuck, deletes it and strips Ptah's finalizer
        by hand: the resource is gone at once, and its Job and Pods are garbage-collected
        with it, the Pods on the cut-off node left Terminating (only their node can
        confirm they stopped). Nothing of the holder says it holds the Lease any more; its
        Pods, shown not stopped, still do."""
        api = self.cluster.system
        obj = api.peek(res.family.kind, res.namespace, res.name)
        runs = [run for run in self.kubelet.runs.values() if run.job in jobs]
        if (
            obj is None
            or not runs
            or any(api.peek(POD, res.namespace, r.pod) is None for r in runs)
        ):
            # A Pod already gone unseen: with its resource gone too, nothing in the API
            # could show that its process lives (beyond what Ptah can know).
            return
        self.watcher.fault("holder-finalizer-stripped", res)
        # The node stays cut off, its processes writing, long enough for another
        # resource on the database to come wanting the Lease and see it expire.
        self.kubelet.partition(max(self.kubelet.partitioned, 80))
        for run in runs:
            run.steps_left = max(run.steps_left, 80)
        status = obj.get("status") or {}
        for held in (
            (status.get("activeOperation") or {}).get("lease"),
            status.get("pendingLockRelease"),
        ):
            if held and held.get("holder"):
                self.gone_holders.add(str(held["holder"]))
        for run in runs:
            # The Pod is now the only trace of its process that the API has; no fault of
            # this world takes it without the node's word (a person who does that after
            # removing the finalizer leaves nothing any controller could go by).
            self.kubelet.last_traces.add(run.pod)
            fins = (api.peek(POD, res.namespace, run.pod) or {})["metadata"].get("finalizers") or []
            api.patch(
                POD, res.namespace, run.pod, {"metadata": {"finalizers": [*fins, NODE_CONFIRMS]}}
            )
        with contextlib.suppress(errors.NotFound):
            api.delete(res.family.kind, res.namespace, res.name)
            api.patch(res.family.kind, res.namespace, res.name, {"metadata": {"finalizers": None}})

    def orphan_waiting_pod(self) -> None:
        """Now and then a Job whose Pod waits for a node (left unscheduled) is deleted
        with ``propagationPolicy: Orphan`` (``kubectl delete --cascade=orphan``): the
        Pod stays, waiting, and no Job deadline bounds when it starts any more (the
        kubelet may keep it waiting past the hold, :meth:`Kubelet._orphaned_while_waiting`).
        Its own stream, so every other draw of a schedule stays as it was."""
        if not self.faults_on:
            return
        now = self.clock.now()
        waiting = sorted(
            {
                (run.job, run.namespace)
                for run in self.kubelet.runs.values()
                if run.mutating and not run.started and run.start_after and run.start_after > now
            }
        )
        if not waiting or self.orphaning.random() >= 0.1:
            return
        job, namespace = self.orphaning.choice(waiting)
        obj = self.cluster.system.peek(JOB, namespace, job)
        if obj is None:
            return
        owner = self._owner_of(obj)
        self.watcher.fault("job-orphaned-while-waiting", owner)
        self.cluster.system.delete(JOB, namespace, job, propagation="Orphan")
        if owner is not None and self.orphaning.random() < 0.6:
            self._orphan_starts_unseen(owner, job)

    def _orphan_starts_unseen(self, owner: SimResource, job: str) -> None:
        """The orphaned Pod waits long past a hold counted from before, while its owner's
        worker is stuck (no controller looks at it meanwhile); it then starts, and is
        force-deleted on its cut-off node as it does (:meth:`lose_started_orphans`).
        The owner's controller finds the Job and the Pod gone, never having seen the Pod
        wait or run: only a hold started again at that look covers the Pod's deadline."""
        now = self.clock.now()
        start = now
        for run in self.kubelet.runs.values():
            if run.job != job or run.started:
                continue
            pod = self.cluster.system.peek(POD, run.namespace, run.pod) or {}
            deadline = int((pod.get("spec") or {}).get("activeDeadlineSeconds") or 300)
            # Past a hold counted from now (the Job's deadline + its own + 60 s) by the
            # time it runs to its own deadline.
            later = self.orphaning.uniform(1.05, 1.5) * min(deadline, 300) + 60
            run.orphan_drawn = True  # the kubelet draws no wait of its own for it
            run.start_after = now + timedelta(seconds=later)
            start = max(start, run.start_after)
            self.unseen_orphans.add(run.pod)
        if start == now:
            return
        self.watcher.fault("orphan-starts-unseen", owner)
        # Kubelet steps come about every 17 s of the world's clock: the worker stays
        # stuck until the Pod has started and gone.
        until = start + timedelta(seconds=self.orphaning.uniform(60, 120))
        self.starved_until[owner.name] = max(self.starved_until.get(owner.name, until), until)

    def orphan_starts_while_unread(self) -> None:
        """Now and then, once a controller has seen an orphaned Pod wait, every read of
        its run's Job and Pods fails (the API times out on them: writes, the Lease's
        renewals among them, still go through) until long after the Pod starts, late,
        and is force-deleted on its cut-off node (:meth:`lose_started_orphans`). The
        look after the failed ones finds nothing: only a hold started again there, the
        first readable look after the waiting one, covers the Pod's deadline (or, when the
        controller restarts as the reads start failing, its first look that reads). Its
        own stream, so every other draw of a schedule stays as it was."""
        if not self.faults_on:
            return
        now = self.clock.now()
        seen = set().union(*(r.env.sightings.waiting for r in self.replicas))
        for run in sorted(self.kubelet.runs.values(), key=lambda r: r.pod):
            if run.pod in self.unread_drawn or run.started or not run.mutating:
                continue
            if self.cluster.system.peek(JOB, run.namespace, run.job) is not None:
                continue  # only an orphan escapes the Job's deadline
            owner = next(
                (
                    r
                    for r in self.resources
                    if run_key(r.namespace, r.name, run.operation_id) in seen
                ),
                None,
            )
            if owner is None:
                continue
            self.unread_drawn.add(run.pod)
            if self.unreadable.random() >= 0.5:
                continue
            pod = self.cluster.system.peek(POD, run.namespace, run.pod) or {}
            deadline = int((pod.get("spec") or {}).get("activeDeadlineSeconds") or 300)
            # It starts past a hold counted from the look that saw it wait.
            later = self.unreadable.uniform(1.05, 1.5) * min(deadline, 300) + 60
            run.orphan_drawn = True
            run.start_after = now + timedelta(seconds=later)
            self.unseen_orphans.add(run.pod)
            until = run.start_after + timedelta(seconds=self.unreadable.uniform(60, 120))
            self.unread_until[run.operation_id] = until
            self.watcher.fault("orphan-starts-while-unread", owner)
            if self.unreadable.random() < 0.5:
                # Its controller restarts as the reads start failing: the fresh process
                # never has a look that reads, only its first sighting of the release,
                # for longer than a hold counted from that sighting.
                key = run_key(owner.namespace, owner.name, run.operation_id)
                for replica in self.replicas:
                    if key in replica.env.sightings.waiting:
                        self.restart(replica)
                longer = 2 * deadline + 60 + self.unreadable.uniform(30, 90)
                self.unread_until[run.operation_id] = max(until, now + timedelta(seconds=longer))

    def unread(self, kind: Kind, name: str, labels: Mapping[str, str] | None) -> bool:
        """Whether a read of ``kind`` (a get of ``name``, or a list by ``labels``) fails
        now under :meth:`orphan_starts_while_unread` (drawn already, so it plays out in
        the quiet steps too)."""
        now = self.clock.now()
        for op, until in self.unread_until.items():
            if until <= now:
                continue
            if kind == POD and (labels or {}).get(LABEL_OPERATION) == op:
                return True
            if kind == JOB and any(
                r.job == name and r.operation_id == op for r in self.kubelet.runs.values()
            ):
                return True
        return False

    def lose_started_orphans(self) -> None:
        """Force-delete the unseen orphans (:meth:`_orphan_starts_unseen`) that have
        started: the node is cut off, so the process writes on until its own deadline. A
        fault already drawn, so it plays out in the quiet steps too."""
        for name in sorted(self.unseen_orphans):
            run = self.kubelet.runs.get(name)
            if run is None:
                self.unseen_orphans.discard(name)
                continue
            if not run.started:
                continue
            self.unseen_orphans.discard(name)
            self._force_delete_cut_off(run, 80)

    def _delete_quiet_job(self, res: SimResource, job: str, draw: float) -> None:
        api = self.cluster.system
        saved = api.peek(JOB, res.namespace, job)
        if draw < 0.5:
            self.watcher.fault("holder-quiet-job-deleted", res)
            obj = api.peek(JOB, res.namespace, job)
            if obj is not None:
                self._deleted_with_a_replacement(obj)
            api.delete(JOB, res.namespace, job, propagation="Background")
            self._job_put_back(res, saved)
        elif draw < 0.6:
            self.watcher.fault("holder-quiet-job-orphaned", res)
            api.delete(JOB, res.namespace, job, propagation="Orphan")
        elif draw < 0.7:
            self._lose_quiet_pods(res, job)
            self._job_put_back(res, saved)
        else:
            self.watcher.fault("holder-quiet-pods-terminating", res)
            pods = [run.pod for run in self.kubelet.runs.values() if run.job == job]
            for name in pods:
                pod = api.peek(POD, res.namespace, name)
                if pod is not None:
                    fins = pod["metadata"].get("finalizers") or []
                    api.patch(
                        POD,
                        res.namespace,
                        name,
                        {"metadata": {"finalizers": [*fins, NODE_CONFIRMS]}},
                    )
            api.delete(JOB, res.namespace, job, propagation="Background")
            for name in pods:
                if api.peek(POD, res.namespace, name) is not None:
                    api.delete(POD, res.namespace, name)

    def _job_put_back(self, res: SimResource, saved: dict[str, Any] | None) -> None:
        """Now and then the quiet holder's deleted Job is put back under its reserved name
        from a saved manifest (a GitOps sync, a backup restore, ``kubectl apply`` of what
        ``kubectl get -o yaml`` printed): the same name, labels, annotations and owner, a
        new UID. Its own Pod (another node, connected) runs the same operation and ends,
        and the Job is seen terminal, counting that Pod, while the first Job's Pod, gone
        from the API unseen, writes on on its cut-off node. The name says nothing of the
        first run: only the UID its claim adopted does."""
        if saved is None or self.restored.random() >= 0.5:
            return
        meta = saved["metadata"]
        if self.cluster.system.peek(JOB, meta["namespace"], meta["name"]) is not None:
            return
        self.watcher.fault("holder-quiet-job-put-back", res)
        self.put_back_job(saved)

    def job_put_back_at_release(self, kind: Kind, labels: Mapping[str, str] | None) -> None:
        """Now and then, once a mutating run has been accounted (every Pod of its Job seen
        to stop, its release staged with the outcome as owed), its Job is deleted and put
        back under its reserved name from a saved manifest (a GitOps sync of what ``kubectl
        get -o yaml`` printed, a backup restore) just as the release step looks at the
        run's Pods: a new UID, and its Pod, made at once, runs the same operation (on a
        connected node). The release is owed only once no Pod of the operation may still
        write, whichever Job made it: the adopted Job's Pods are not all of them. Called
        on every read (a list of Pods by ``labels``); each accounted run has one chance of
        it, drawn from its own stream, so every other draw of a schedule stays as it was."""
        res = self._current
        op = str((labels or {}).get(LABEL_OPERATION) or "")
        if not self.faults_on or kind != POD or res is None or not op:
            return
        if op in self.reapplied_for:
            return
        api = self.cluster.system
        obj = api.peek(res.family.kind, res.namespace, res.name)
        status = (obj or {}).get("status") or {}
        staged = status.get("pendingLockRelease") or {}
        last = status.get("lastMutation") or {}
        name = str(staged.get("jobName") or "")
        if (
            staged.get("operationId") != op
            or not name
            or not staged.get("executorStopped")
            # A run that succeeded: the copy finds the work done (a failed run's copy
            # would do it, a person's run, not Ptah's).
            or last.get("operationId") != op
            or last.get("outcome") != "Succeeded"
        ):
            return
        job = api.peek(JOB, res.namespace, name)
        if job is None:
            return
        self.reapplied_for.add(op)
        if self.reapplied.random() >= 0.9:
            return
        self.watcher.fault("job-put-back-after-account", res)
        api.delete(JOB, res.namespace, name, propagation="Background")
        self.put_back_job(job)
        for run in self.kubelet.start_now(name, res.namespace):
            run.steps_left = 10**6  # until the release has seen it (put_back_copies_end)
            self.reapplied_runs[run.pod] = (res, op)

    def put_back_copies_end(self) -> None:
        """The Pod of a Job put back at a release's look (:meth:`job_put_back_at_release`)
        runs on until the release has recorded it (its name in the release's evidence),
        or the release no longer waits for the operation: a Pod that comes and goes
        between two looks is beyond what any controller can know (like a Job deleted with
        its Pods before anyone saw it). Called after every step, the quiet ones too."""
        api = self.cluster.system
        for pod, (res, op) in sorted(self.reapplied_runs.items()):
            obj = api.peek(res.family.kind, res.namespace, res.name)
            staged = ((obj or {}).get("status") or {}).get("pendingLockRelease") or {}
            seen = {str(p.get("name")) for p in staged.get("pods") or []}
            run = self.kubelet.runs.get(pod)
            if run is None or staged.get("operationId") != op or pod in seen:
                del self.reapplied_runs[pod]
                if run is not None:
                    run.steps_left = min(run.steps_left, self.reapplied.randint(1, 3))

    def put_back_job(self, saved: dict[str, Any]) -> None:
        """Create the Job ``saved`` again from its manifest: a new UID under its name."""
        meta = saved["metadata"]
        namespace = str(meta["namespace"])
        self.cluster.system.create(
            JOB,
            {
                "apiVersion": saved.get("apiVersion", "batch/v1"),
                "kind": "Job",
                "metadata": {
                    "name": meta["name"],
                    "namespace": namespace,
                    "labels": dict(meta.get("labels") or {}),
                    "annotations": dict(meta.get("annotations") or {}),
                    "ownerReferences": list(meta.get("ownerReferences") or []),
                },
                "spec": json.loads(json.dumps(saved["spec"])),
            },
        )

    def _lose_quiet_pods(self, res: SimResource, job: str) -> None:
        """The quiet holder's Job is deleted and its Pods on the cut-off node force-deleted
        (their processes write on), while a Pod the Job controller had just made to
        replace one, never scheduled, stays Terminating behind the Job's tracking
        finalizer: the API lists only a Pod that provably never started. A listing is no
        count of the Pods that ran."""
        api = self.cluster.system
        obj = api.peek(JOB, res.namespace, job)
        if obj is None or (obj.get("status") or {}).get("conditions"):
            return  # a terminal Job makes no Pod
        self.watcher.fault("holder-quiet-pods-lost", res)
        self._unscheduled_replacement(obj)
        api.delete(JOB, res.namespace, job, propagation="Background")
        for run in list(self.kubelet.runs.values()):
            if run.job == job and api.peek(POD, res.namespace, run.pod) is not None:
                api.delete(POD, res.namespace, run.pod)

    def _deleted_with_a_replacement(self, job: dict[str, Any]) -> None:
        """Now and then a mutating Job deleted while it runs had just made a Pod that no
        node took yet: deleted with the Job, that Pod stays Terminating behind the Job's
        tracking finalizer, listed under the run's operation for as long as the
        finalizer stays. It provably never ran, so it must hold no proof back."""
        labels = job["metadata"].get("labels") or {}
        operation = str(labels.get(LABEL_OPERATION, ""))
        if (
            not operation.startswith(("apply-", "migrate-"))
            or (job.get("status") or {}).get("conditions")
            or self.stuck.random() >= 0.5
        ):
            return
        self.watcher.fault("job-deleted-replacement-stuck", self._owner_of(job))
        self._unscheduled_replacement(job)

    def _unscheduled_replacement(self, obj: dict[str, Any]) -> None:
        """A Pod the Job controller has just made for Job ``obj`` (to replace one, say),
        never scheduled, with the Job's tracking finalizer: once deleted (with its Job),
        it stays Terminating until someone removes the finalizer, nobody here."""
        api = self.cluster.system
        job = obj["metadata"]["name"]
        namespace = str(obj["metadata"]["namespace"])
        template = obj["spec"]["template"]
        api.create(
            POD,
            {
                "metadata": {
                    "name": f"{job}-replacement",
                    "namespace": namespace,
                    "labels": dict(template["metadata"].get("labels") or {}),
                    "finalizers": [JOB_TRACKING],
                    "ownerReferences": [
                        {
                            "apiVersion": "batch/v1",
                            "kind": "Job",
                            "name": job,
                            "uid": obj["metadata"]["uid"],
                        }
                    ],
                },
                "spec": dict(template["spec"]),
            },
        )

    def rescheduled_while_withheld(self) -> None:
        """While a release is withheld (or a dispatched run not yet accounted) and its
        executor writes on, cut off from the API, now and then an operator replica goes
        down for longer than the Lease duration and comes back on a node whose clock is
        off by minutes. Offsets between clocks are
        within the clock assumption: the hold is measured from each process's own first
        sighting of the run, never from the ``holdUntil`` another clock stamped, and the
        process here may see that stamp pass long before its own hold does."""
        if not self.faults_on:
            return
        cut_off = {run.operation_id for run in self.kubelet.runs.values() if run.cut_off}
        if not cut_off:
            return
        for res in self.resources:
            obj = self.cluster.system.peek(res.family.kind, res.namespace, res.name)
            status = (obj or {}).get("status") or {}
            staged = status.get("pendingLockRelease") or {}
            claim = status.get("activeOperation") or {}
            # Withheld, or still claimed (dispatched, not staged yet): then the replica
            # that stages the release is not the clock that stamped dispatchStarted.
            if staged.get("withheld"):
                op, claimed = staged.get("operationId"), False
            elif claim.get("dispatchStarted") and claim.get("mutating"):
                op, claimed = claim.get("operationId"), True
            else:
                continue
            if op not in cut_off or op in self.moved_for:
                continue
            self.moved_for.add(op)
            if self.clocks.random() >= 0.9:
                continue
            replica = self.clocks.choice(self.replicas)
            sign = 1 if self.clocks.random() < 0.75 else -1
            replica.moves_to = replica.skew + sign * self.clocks.uniform(150, 1500)
            seconds = self.clocks.uniform(LEASE_DURATION + 10, 3.5 * LEASE_DURATION)
            replica.down_until = self.clock.now() + timedelta(seconds=seconds)
            self.watcher.fault("clock-moved", res)
            if claimed and self.clocks.random() < 0.5:
                # The resource's worker moves with it (it takes the leadership, say):
                # nothing passes over the resource until the replica is back, and the
                # replica that accounts the run and stages its release is the one
                # whose clock is not the one that stamped dispatchStarted.
                until = replica.down_until + timedelta(seconds=1)
                self.starved_until[res.name] = max(self.starved_until.get(res.name, until), until)
                self.handover[res.name] = replica.name
                self.watcher.fault("worker-moved-with-clock", res)
                for run in self.kubelet.runs.values():
                    if run.operation_id == op and run.started and not run.done:
                        # The Job controller fails the Job and counts the Pod (the Job
                        # stands, terminal); the process writes on until its own
                        # deadline, its node cut off until past it (kubelet steps come
                        # about every 17 s of the world's clock).
                        run.steps_left = 10**6
                        self._force_delete_cut_off(run, (run.deadline or 300) // 10 + 10)

    def _force_delete_cut_off(self, run: PodRun, steps: int) -> None:
        """Someone force-deletes ``run``'s Pod (``kubectl delete pod --force``) on its node,
        cut off from the API for ``steps`` more kubelet steps: the object goes, and the
        process writes on for at least that long."""
        self.kubelet.partition(max(self.kubelet.partitioned, steps))
        run.steps_left = max(run.steps_left, steps)
        if self.cluster.system.peek(POD, run.namespace, run.pod) is not None:
            self.cluster.system.delete(POD, run.namespace, run.pod)
            self.watcher.fault("outage", None)

    def outage(self) -> None:
        """A controller makes no pass for longer than the Lease duration: a whole replica
        down, or one resource's worker stuck while the others go on."""
        seconds = self.rng.uniform(LEASE_DURATION + 10, 3.5 * LEASE_DURATION)
        until = self.clock.now() + timedelta(seconds=seconds)
        if self.rng.random() < 0.5:
            replica = self.rng.choice(self.replicas)
            replica.down_until = until
            self.watcher.fault("outage", None)
        else:
            res = self.rng.choice(self.resources)
            self.starved_until[res.name] = until
            self.watcher.fault("starved", res)

    # --- one step

    _current: SimResource | None = None
    # The replica whose process makes the pass in progress (the innermost one).
    pass_replica: Replica | None = None

    def reconcile_one(self, res: SimResource | None = None) -> None:
        self.kubelet.enforce_pod_deadlines()  # a node kills at the deadline, not at a step
        self.squatters_leave()
        now = self.clock.now()
        for replica in self.replicas:
            if replica.down_until is not None and replica.down_until <= now:
                replica.down_until = None
                self.restart(replica)
        up = [r for r in self.replicas if r.down_until is None]
        if not up:
            return
        replica = self.rng.choice(up)
        if res is None:
            ready = [r for r in self.resources if self.starved_until.get(r.name, now) <= now]
            if not ready:
                return
            res = self.rng.choice(ready)
        moved = self.handover.pop(res.name, None)
        replica = next((r for r in up if r.name == moved), replica)
        outer, self._current = self._current, res
        outer_replica, self.pass_replica = self.pass_replica, replica
        self.depth += 1
        self.watcher.pass_started(res, self.depth)
        ok = False
        try:
            reconcile(replica.env, res.family, res.namespace, res.name)
            ok = True
        except ControllerStopped:
            self.restart(replica)
            if self.depth > 1:
                # The interleaved pass ran in the same process as the outer one.
                self.watcher.pass_ended(res, ok)
                self.depth -= 1
                self._current, self.pass_replica = outer, outer_replica
                raise
        except errors.ApiError:
            pass
        self.watcher.pass_ended(res, ok)
        self.depth -= 1
        self._current, self.pass_replica = outer, outer_replica

    def person_acts(self, quiet: bool) -> None:
        """People: approve, edit, suspend, delete, rotate, abandon a proof."""
        api = self.cluster.system
        res = self.rng.choice(self.resources)
        obj = api.peek(res.family.kind, res.namespace, res.name)
        if obj is None:
            return
        status = obj.get("status") or {}
        roll = self.rng.random()
        if (
            not quiet
            and res.family is MIGRATION_FAMILY
            and status.get("phase") in {"ProofOwed", "ProofNotSettled"}
            and self.mended.random() < 0.3
        ):
            self._edit_applied_migration(res)
        if status.get("phase") == "WaitingForApproval" and roll < 0.6:
            plan = status.get("currentPlan") or {}
            digest = plan.get("digest", "")
            mistake = self.rng.random() if not quiet else 1.0
            if mistake < 0.15:
                digest = "0" * 40  # an approval of a stale or foreign plan never authorizes
            elif mistake < 0.3:
                # The right plan, the wrong resource: it authorizes neither.
                self._approve_for_another(res, status)
                return
            self._approve(res, digest)
            return
        if not quiet and status.get("phase") in {"ProofOwed", "ProofNotSettled"}:
            self._secret_gone_while_owed(res)
        impatient = status.get("phase") == "ProofOwed" and self.impatient.random() < 0.15
        if impatient:
            # Someone abandons the proof while the run may still write (the release of its
            # Lease is withheld meanwhile): the record goes, the withheld release stays.
            self.watcher.fault("abandon-while-owed", res)
        if impatient or (
            status.get("phase") in {"ProofNotSettled"} and roll < (0.3 if quiet else 0.1)
        ):
            record = status.get("pendingObservation") or status.get("unresolvedRun") or {}
            operation = record.get("operationId", "")
            if self.rng.random() < 0.3:
                # A person pastes the wrong operation: it must abandon nothing.
                self.watcher.fault("abandon-wrong-operation", res)
                operation = self.rng.choice(["apply-0000", "migrate-0000", ""])
            self._annotate(res, operation)
            return
        if quiet:
            if obj["spec"].get("suspend"):
                api.patch(res.family.kind, res.namespace, res.name, {"spec": {"suspend": False}})
            return
        if roll < 0.08 and res.family is SCHEMA_FAMILY:
            text = self._source(self.rng.randint(2, 4))
            api.patch(SCHEMA, res.namespace, res.name, {"spec": {"source": {"inline": text}}})
        elif roll < 0.12:
            api.patch(
                res.family.kind,
                res.namespace,
                res.name,
                {"spec": {"suspend": not obj["spec"].get("suspend")}},
            )
        elif roll < 0.14:
            self._rotate(res)
        elif roll < 0.16:
            for job in api.list(JOB, ""):
                draw = self.rng.random()
                if draw < 0.5:
                    # Now and then with its Pods orphaned: no Job, and a Pod still
                    # running (the same draw decides, so other schedules stay as they were).
                    orphan = draw < 0.1
                    self.watcher.fault(
                        "job-deleted-orphan" if orphan else "job-deleted", self._owner_of(job)
                    )
                    if not orphan:
                        self._deleted_with_a_replacement(job)
                    api.delete(
                        JOB,
                        job["metadata"]["namespace"],
                        job["metadata"]["name"],
                        propagation="Orphan" if orphan else "Background",
                    )
        elif roll < 0.19:
            self._edit_policy(res.namespace)
        elif roll < 0.21 and res.family is MIGRATION_FAMILY:
            # The directory edited in place (no generation change): a later migration.
            version = self.rng.randint(9, 40)
            self.watcher.fault("directory-edited", res)
            api.patch(
                CONFIGMAP,
                res.namespace,
                f"{res.name}-dir",
                {"data": {f"{version}_later.sql": f"SELECT {version};"}},
            )
        elif roll < 0.23:
            self.watcher.fault("deleted", res)
            with contextlib.suppress(errors.NotFound):
                api.delete(res.family.kind, res.namespace, res.name)
        elif roll < 0.24:
            for approval in api.list(APPROVAL, ""):
                meta = approval["metadata"]
                api.delete(APPROVAL, meta["namespace"], meta["name"])
        elif roll < 0.27:
            self._tamper_job()
        elif roll < 0.29:
            self._tamper_plan()
        elif roll < 0.31:
            self._approve_for_another(res, status)
        elif roll < 0.33:
            pods = api.list(POD, "")
            if pods:
                pod = self.rng.choice(pods)
                if pod["metadata"]["name"] in self.kubelet.last_traces:
                    return  # the only trace of a live process: see _strip_quiet_holder
                self.watcher.fault("pod-deleted", None)
                api.delete(POD, pod["metadata"]["namespace"], pod["metadata"]["name"])
        elif roll < 0.35:
            self._upgrade_operator(res)

    def _source(self, tables: int) -> str:
        """A desired source; now and then one that does not load (until it is edited)."""
        lines = self.rng.sample(TABLES, tables)
        if self.rng.random() < 0.25:
            lines.insert(self.rng.randrange(len(lines) + 1), BROKEN)
        return "\n".join(lines)

    def _owner_of(self, job: dict[str, Any]) -> SimResource | None:
        owners = {r.get("uid") for r in job["metadata"].get("ownerReferences", [])}
        for res in self.resources:
            obj = self.cluster.system.peek(res.family.kind, res.namespace, res.name)
            if obj is not None and obj["metadata"]["uid"] in owners:
                return res
        return None

    def _edit_policy(self, namespace: str) -> None:
        """The verification policy of ``namespace`` changes in a way that matters:
        destructive plans allowed or not, this engine allowed or not."""
        api = self.cluster.system
        data = {
            "allowDestructive": self.rng.choice(["true", "false"]),
            "allowedEngines": self.rng.choice(
                ["postgres,mysql,sqlite", "postgres", "mysql,sqlite"]
            ),
        }
        self.watcher.fault("policy-edited", None)
        cm = api.get(CONFIGMAP, namespace, "ptah-verification-policy")
        if cm is None:
            api.create(CONFIGMAP, _policy_cm(data, namespace))
        elif self.rng.random() < 0.15:
            api.delete(CONFIGMAP, namespace, "ptah-verification-policy")
        else:
            api.patch(CONFIGMAP, namespace, "ptah-verification-policy", {"data": data})

    def _edit_applied_migration(self, res: SimResource) -> None:
        """While proof of an uncertain migration is owed, a person edits a migration the
        database already ran, in place (a fix "for next time"): the History reading shows
        it mismatched, which settles nothing, however little is pending."""
        ran = [v for v in self.dbs.by_name[res.db].history if v.isdigit()]
        cm = self.cluster.system.peek(CONFIGMAP, res.namespace, f"{res.name}-dir")
        files = [n for n in ((cm or {}).get("data") or {}) if n.split("_", 1)[0] in ran]
        if not files:
            return
        name = self.mended.choice(sorted(files))
        self.watcher.fault("applied-migration-edited", res)
        text = f"CREATE TABLE m{name.split('_', 1)[0]} (id bigint);"
        self.cluster.system.patch(
            CONFIGMAP, res.namespace, f"{res.name}-dir", {"data": {name: text}}
        )

    def _claimed_job(self) -> dict[str, Any] | None:
        res = self._current
        if res is None:
            return None
        obj = self.cluster.system.peek(res.family.kind, res.namespace, res.name)
        claim = ((obj or {}).get("status") or {}).get("activeOperation") or {}
        return (
            self.cluster.system.get(JOB, res.namespace, claim.get("jobName", "")) if claim else None
        )

    def _job_vanishes_unseen(self) -> None:
        """The create landed; before the controller records the Job's UID, the Job's Pod
        starts on a node that then loses the API, the Job is deleted with its Pods (a
        person, a cleanup controller), and the controller stops. Nobody ever saw the Job
        under its reserved name, while its process writes on: the empty name looks just
        like a create that never happened (seed 3011927 of the 32,000-schedule run)."""
        job = self._claimed_job()
        if job is None:
            return
        name = job["metadata"]["name"]
        namespace = str(job["metadata"]["namespace"])
        runs = self.kubelet.start_now(name, namespace)
        if not any(run.started for run in runs):
            return
        self.watcher.fault("job-vanished-unseen", self._current)
        self.kubelet.partition(self.rng.randint(5, 30))
        self.cluster.system.delete(JOB, namespace, name, propagation="Background")
        self.crashes.append("after:create_job")
        self.watcher.fault("stop", self._current)
        raise ControllerStopped("after create_job, the Job vanished unseen")

    def _replace_job(self, job: dict[str, Any], edited: bool) -> None:
        """Someone replaces a Job under its reserved name (a policy controller that
        rewrites Jobs by deleting and re-creating them, ``kubectl replace --force`` of a
        saved or edited manifest, a backup restore): the same name, labels, annotations
        and owner references, a new UID, and its spec as it was or ``edited`` (the image
        pointed at a mirror, the runner's arguments changed); its Pods run what the copy
        says. Right after the create, before the read-back, only the spec tells the copy
        from the Job the claim created; once its UID is adopted, the UID does."""
        api = self.cluster.system
        name = job["metadata"]["name"]
        namespace = str(job["metadata"]["namespace"])
        spec = json.loads(json.dumps(job["spec"]))
        container = spec["template"]["spec"]["containers"][0]
        if edited and self.replaced.random() < 0.5:
            container["image"] = "mirror.example/" + str(container.get("image"))
        elif edited:
            container["args"] = [*container.get("args", []), "--verbose"]
        meta = job["metadata"]
        self.watcher.fault("job-replaced" if edited else "job-recreated", self._owner_of(job))
        api.delete(JOB, namespace, name, propagation="Background")
        api.create(
            JOB,
            {
                "apiVersion": job.get("apiVersion", "batch/v1"),
                "kind": "Job",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "labels": dict(meta.get("labels") or {}),
                    "annotations": dict(meta.get("annotations") or {}),
                    "ownerReferences": list(meta.get("ownerReferences") or []),
                },
                "spec": spec,
            },
        )

    def _edit_runner(self) -> None:
        """A person edits spec.runner while a claim is between its admission snapshot and
        its dispatch: its resources, service account or node selector, its image kept, or
        its image alone. The next Job's Pod template is not the one the snapshot names."""
        res = self._current
        if res is None:
            return
        draw = self.edits.random()
        runner: dict[str, Any]
        if draw < 0.3:
            runner = {"resources": {"limits": {"memory": f"{self.edits.randint(1, 9)}00Mi"}}}
        elif draw < 0.55:
            runner = {"serviceAccountName": f"runner-{self.edits.randint(1, 9)}"}
        elif draw < 0.8:
            runner = {"nodeSelector": {"pool": f"p{self.edits.randint(1, 9)}"}}
        else:
            runner = {"image": self.edits.choice(["ptah/ptah:dev", "ptah/ptah:next"])}
        self.watcher.fault("runner-edited-in-flight", res)
        self.cluster.system.patch(
            res.family.kind, res.namespace, res.name, {"spec": {"runner": runner}}
        )

    def _shorten_deadline(self) -> None:
        """A person shortens spec.runner's deadline right after a mutating run's Job was
        created. The Job and its Pods keep the deadline they were built with, so nothing
        of that run may be judged over by the shorter one."""
        res = self._current
        if res is None:
            return
        obj = self.cluster.system.get(res.family.kind, res.namespace, res.name)
        runner = ((obj or {}).get("spec") or {}).get("runner") or {}
        if int(runner.get("activeDeadlineSeconds") or 900) <= SHORTENED_DEADLINE:
            return
        self.watcher.fault("deadline-shortened-after-dispatch", res)
        shorter = {"spec": {"runner": {"activeDeadlineSeconds": SHORTENED_DEADLINE}}}
        self.cluster.system.patch(res.family.kind, res.namespace, res.name, shorter)

    def _revoke_approval(self) -> None:
        """A reviewer takes back the approval a claim in flight names, between its claim
        and its dispatch: the approval is gone, or re-issued under its name for another plan
        or another resource, when the dispatch boundary re-reads it."""
        res = self._current
        if res is None:
            return
        obj = self.cluster.system.peek(res.family.kind, res.namespace, res.name)
        claim = ((obj or {}).get("status") or {}).get("activeOperation") or {}
        name = str(claim.get("approvalName") or "")
        old = self.cluster.system.peek(APPROVAL, res.namespace, name) if name else None
        if old is None:
            return
        self.watcher.fault("approval-revoked", res)
        self.cluster.system.delete(APPROVAL, res.namespace, name)
        # A spec is immutable, so a reviewer who changes their mind deletes the approval
        # and may create one under the same name: for another plan, or another resource.
        again = self.rng.random()
        if again < 1 / 3:
            return
        spec = dict(old["spec"])
        if again < 2 / 3:
            self.watcher.fault("approval-reissued-other-plan", res)
            spec["planDigest"] = "0" * 40
        else:
            others = [r for r in self.resources if r is not res]
            if not others:
                return
            other = self.rng.choice(others)
            self.watcher.fault("approval-reissued-other-resource", res)
            spec["resourceRef"] = {"kind": other.family.kind.kind, "name": other.name}
        self.cluster.system.create(
            APPROVAL,
            {
                "apiVersion": old["apiVersion"],
                "kind": old["kind"],
                "metadata": {"name": name, "namespace": res.namespace},
                "spec": spec,
            },
        )

    def _tamper_job(self, job: dict[str, Any] | None = None) -> None:
        """Someone changes a Job's owner or labels: another controller adopting Jobs,
        reacting to a Job's creation (then it lands between the create and the read-back)
        or at any time."""
        api = self.cluster.system
        jobs = api.list(JOB, "")
        if job is None and not jobs:
            return
        job = job or self.rng.choice(jobs)
        owner = self._owner_of(job)
        self.watcher.fault("job-owner-changed", owner)
        refs = list(job["metadata"].get("ownerReferences", []))
        if self.rng.random() < 0.5 and refs:
            others = [r for r in self.resources if r is not owner]
            other = self.rng.choice(others) if others else None
            obj = api.get(other.family.kind, other.namespace, other.name) if other else None
            uid = obj["metadata"]["uid"] if obj else "0000-foreign"
            refs = [dict(refs[0], uid=uid, name=other.name if other else "foreign")]
            patch: dict[str, Any] = {"metadata": {"ownerReferences": refs}}
        else:
            patch = {"metadata": {"labels": {"ptah.io/operation-id": "tampered"}}}
        api.patch(JOB, job["metadata"]["namespace"], job["metadata"]["name"], patch)

    def _tamper_plan(self) -> None:
        """Someone replaces a PtahPlan: a plan is immutable, so it is deleted and created
        again under its name with other statements."""
        api = self.cluster.system
        plans = api.list(PLAN, "")
        if not plans:
            return
        plan = self.rng.choice(plans)
        namespace = str(plan["metadata"]["namespace"])
        self.watcher.fault("plan-replaced", None)
        statements = list(plan["spec"].get("statements", []))
        statements.append({"sql": "DROP TABLE t0", "hazards": []})
        forged = {
            "apiVersion": plan["apiVersion"],
            "kind": plan["kind"],
            "metadata": {
                "name": plan["metadata"]["name"],
                "namespace": namespace,
                "annotations": dict(plan["metadata"].get("annotations") or {}),
            },
            "spec": dict(plan["spec"], statements=statements),
        }
        api.delete(PLAN, namespace, plan["metadata"]["name"])
        api.create(PLAN, forged)

    def _approve_for_another(self, res: SimResource, status: dict[str, Any]) -> None:
        """An approval naming another resource, carrying this one's plan digest."""
        digest = (status.get("currentPlan") or {}).get("digest")
        others = [r for r in self.resources if r is not res]
        if not digest or not others:
            return
        self.watcher.fault("approval-for-another", res)
        other = self.rng.choice(others)
        if self.misnamed.random() < 0.3:
            # The right name, the wrong kind: an approval of this plan for a PtahSchema
            # named like this PtahMigration (or the other way round) authorizes neither.
            self.watcher.fault("approval-for-another-kind", res)
            kind = MIGRATION if res.family is SCHEMA_FAMILY else SCHEMA
            self._approve(res, digest, kind.kind)
            return
        self._approve(other, digest)

    def _upgrade_operator(self, res: SimResource) -> None:
        """The operator restarts with other runner defaults (a new image), or a resource's
        spec.runner changes: the next Job's template is not the one the snapshot names."""
        if self.rng.random() < 0.5:
            image = self.rng.choice(["ptah/ptah:dev", "ptah/ptah:next"])
            self.runner_defaults = {"image": image}
            self.watcher.fault("operator-upgraded", None)
            for replica in self.replicas:
                self.restart(replica)
        else:
            image = self.rng.choice(["ptah/ptah:dev", "ptah/ptah:next"])
            self.watcher.fault("runner-edited", res)
            self.cluster.system.patch(
                res.family.kind, res.namespace, res.name, {"spec": {"runner": {"image": image}}}
            )

    def _approve(self, res: SimResource, digest: str, kind: str | None = None) -> None:
        name = f"{res.name}-approval-{self.rng.randint(0, 10**6)}"
        while self.cluster.system.peek(APPROVAL, res.namespace, name) is not None:
            # A long schedule draws the same number twice; a person picks another name
            # (without another draw, so every other schedule stays as it was).
            name += "-again"
        self.cluster.system.create(
            APPROVAL,
            {
                "apiVersion": "ptah.io/v1alpha1",
                "kind": "PtahApproval",
                "metadata": {"name": name, "namespace": res.namespace},
                "spec": {
                    "resourceRef": {"kind": kind or res.family.kind.kind, "name": res.name},
                    "planDigest": digest,
                },
            },
        )

    def _annotate(self, res: SimResource, operation_id: str) -> None:
        self.cluster.system.patch(
            res.family.kind,
            res.namespace,
            res.name,
            {"metadata": {"annotations": {ABANDON_ANNOTATION: operation_id}}},
        )

    def _secret_gone_while_owed(self, res: SimResource) -> None:
        """Now and then the Secret of a resource that owes proof is deleted (a secrets
        operator re-syncing it, a person cleaning up) and comes back minutes later, as a
        new object: the proof comes before the execution binding, so the resource keeps
        proving meanwhile instead of waiting on its Secret. Its own stream, so every other
        draw of a schedule stays as it was."""
        key = (res.namespace, res.secret)
        if key in self.secrets_gone or self.unsecret.random() >= 0.3:
            return
        api = self.cluster.system
        secret = api.get(SECRET, res.namespace, res.secret)
        if secret is None:
            return
        self.watcher.fault("secret-deleted-while-owed", res)
        api.delete(SECRET, res.namespace, res.secret)
        back = self.clock.now() + timedelta(seconds=self.unsecret.uniform(60, 900))
        self.secrets_gone[key] = (secret, back)

    def secrets_return(self, every: bool = False) -> None:
        """The Secrets deleted by :meth:`_secret_gone_while_owed` come back once their time
        has come (all of them, ``every``, as the faults end)."""
        now = self.clock.now()
        for (namespace, name), (secret, back) in sorted(self.secrets_gone.items()):
            if not every and back > now:
                continue
            del self.secrets_gone[(namespace, name)]
            body = {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": name, "namespace": namespace},
                "stringData": dict(secret.get("stringData") or {}),
            }
            with contextlib.suppress(errors.AlreadyExists):
                self.cluster.system.create(SECRET, body)

    def _rotate(self, res: SimResource) -> None:
        """A rotated Secret: a new execution-binding epoch; sometimes a new spelling."""
        api = self.cluster.system
        secret = api.get(SECRET, res.namespace, res.secret)
        if secret is None:
            return
        url = secret["stringData"]["url"]
        url = url.replace("@db1", "@Db1") if "@db1" in url else url.replace("@Db1", "@db1")
        api.patch(SECRET, res.namespace, res.secret, {"stringData": {"url": url}})


def _policy_cm(data: dict[str, str], namespace: str = NS) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "ptah-verification-policy", "namespace": namespace},
        "data": data,
    }


def _migrations_cm(name: str, count: int, namespace: str = NS) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": {f"{i}_step{i}.sql": f"CREATE TABLE m{i} (id int);" for i in range(1, count + 1)},
    }
