"""The operator runtime without a cluster: watch (list, bookmarks, 410 relist, resume),
leader election over the in-memory API, the kill hook's parsing, a pass's report (the
operation it names, the outcome metrics read from it), the runnables' order."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from typing import Any

import httpx

from ptah.api.resources import SchemaStatus
from ptah.kube import kinds
from ptah.kube.real import RealCluster
from ptah.kube.watch import Watcher, WatchEvent
from ptah.lifecycle.report import Ended, OperationRef, PassReport
from ptah.operator.controller import KillAt
from ptah.operator.leader import LeaderElector
from ptah.operator.mapping import Key
from ptah.operator.metrics import Metrics
from ptah.operator.runnables import Manager, Runnable
from ptah.testing.memory import MemoryCluster
from ptah.workload.job import LABEL_OWNER_UID
from support.clock import FakeClock


def obj(name: str, rv: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}


def lines(*events: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(e).encode() + b"\n" for e in events)


def test_watch_lists_follows_bookmarks_and_relists_on_410() -> None:
    seen: list[httpx.Request] = []
    got: list[WatchEvent] = []
    watcher: Watcher

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        n = len(seen)
        if n == 1:
            return httpx.Response(
                200, json={"metadata": {"resourceVersion": "10"}, "items": [obj("a", "9")]}
            )
        if n == 2:
            return httpx.Response(
                200,
                content=lines(
                    {"type": "ADDED", "object": obj("b", "11")},
                    {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "15"}}},
                ),
            )
        if n == 3:  # resumed from the bookmark; the server has compacted past it
            return httpx.Response(
                200,
                content=lines(
                    {
                        "type": "ERROR",
                        "object": {"kind": "Status", "code": 410, "reason": "Expired"},
                    }
                ),
            )
        if n == 4:
            return httpx.Response(
                200,
                json={
                    "metadata": {"resourceVersion": "20"},
                    "items": [obj("a", "9"), obj("b", "11")],
                },
            )
        watcher.stop.set()
        return httpx.Response(200, content=b"")

    cluster = RealCluster(
        httpx.Client(base_url="https://k8s.test", transport=httpx.MockTransport(handler))
    )
    watcher = Watcher(cluster, kinds.SCHEMA, got.append)
    watcher.run()
    assert [(e.type, e.obj["metadata"]["name"]) for e in got] == [
        ("SYNC", "a"),
        ("ADDED", "b"),
        ("SYNC", "a"),
        ("SYNC", "b"),
    ]
    assert all(e.obj["kind"] == "PtahSchema" for e in got)
    assert seen[0].url.params.get("watch") is None
    assert seen[1].url.params["resourceVersion"] == "10"
    assert seen[1].url.params["allowWatchBookmarks"] == "true"
    assert seen[2].url.params["resourceVersion"] == "15"
    assert seen[4].url.params["resourceVersion"] == "20"
    assert watcher.relists == 2 and watcher.synced.is_set()


def test_watch_resumes_after_a_transport_error_without_relisting() -> None:
    seen: list[httpx.Request] = []
    watcher: Watcher

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        if len(seen) == 1:
            return httpx.Response(200, json={"metadata": {"resourceVersion": "5"}, "items": []})
        if len(seen) == 2:
            raise httpx.ReadError("connection reset")
        watcher.stop.set()
        return httpx.Response(200, content=b"")

    cluster = RealCluster(
        httpx.Client(base_url="https://k8s.test", transport=httpx.MockTransport(handler))
    )
    errors: list[Exception] = []
    watcher = Watcher(
        cluster,
        kinds.JOB,
        lambda e: None,
        metadata_only=True,
        on_error=lambda k, e: errors.append(e),
    )
    watcher.run()
    assert len(errors) == 1 and watcher.relists == 1
    assert seen[2].url.params["resourceVersion"] == "5"
    assert "PartialObjectMetadata" in seen[2].headers["Accept"]


def test_leader_election_expiry_by_own_observation_and_loss_at_once() -> None:
    cluster = MemoryCluster()
    clock = FakeClock()
    lost: list[str] = []
    a = LeaderElector(
        cluster,
        namespace="sys",
        identity="a",
        clock=clock,
        lease_duration=15,
        renew_deadline=10,
        on_lost=lambda: lost.append("a"),
    )
    b = LeaderElector(
        cluster, namespace="sys", identity="b", clock=clock, lease_duration=15, renew_deadline=10
    )
    assert a.try_acquire_or_renew()
    a._leader, a._last_renew = True, clock.t
    assert a.is_leader()
    assert not b.try_acquire_or_renew()  # first sighting of a's record
    clock.t = 14.0
    assert not b.try_acquire_or_renew()  # unchanged, but not for a whole duration yet
    assert not a.is_leader()  # a has not renewed within its deadline: it says so itself
    clock.t = 16.0
    assert b.try_acquire_or_renew()
    lease = cluster.get(kinds.LEASE, "sys", "ptah-operator-leader")
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == "b" and lease["spec"]["leaseTransitions"] == 1
    # a comes back: the Lease is b's, so a has lost, at once.
    a.stop.set()
    assert not a.try_acquire_or_renew() and a._held_by_other
    b.release()
    lease = cluster.get(kinds.LEASE, "sys", "ptah-operator-leader")
    assert lease is not None and not lease["spec"].get("holderIdentity")


def test_kill_hook_parsing_and_matching() -> None:
    k = KillAt.parse("after:write_dispatch_started:Apply")
    assert k is not None and k.matches("after", "write_dispatch_started", "Apply")
    assert not k.matches("after", "write_dispatch_started", "Plan")
    assert not k.matches("before", "write_dispatch_started", "Apply")
    any_type = KillAt.parse("before:create_job")
    assert any_type is not None and any_type.matches("before", "create_job", None)
    assert KillAt.parse("") is None and KillAt.parse("sometime:x") is None


def test_kill_hook_dies_also_as_pid_1_of_a_namespace() -> None:
    """The operator in a container is PID 1, which cannot SIGKILL itself: the hook
    must end the process anyway, with SIGKILL's exit status."""
    code = "from ptah.operator.controller import die_now; die_now(); print('survived')"
    plain = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert plain.returncode == -9 and "survived" not in plain.stdout
    unshare = shutil.which("unshare")
    assert unshare, "util-linux unshare is missing"
    argv = [unshare, "--fork", "--pid", "--mount-proc", sys.executable, "-c", code]
    init = subprocess.run(argv, capture_output=True, text=True)
    assert "survived" not in init.stdout, init
    assert init.returncode == 137, init


def test_report_attributes_a_staged_release_to_its_operation() -> None:
    report = PassReport()
    staged = {
        "pendingLockRelease": {
            "operationId": "apply-abc",
            "type": "Apply",
            "leaseName": "l",
            "holder": "h",
            "stagedAt": "t",
        }
    }
    report.saw({"status": staged}, SchemaStatus.model_validate(staged))
    assert report.operation_type == "Apply" and report.operation_id == "apply-abc"
    claim = {
        "activeOperation": {
            "type": "Plan",
            "operationId": "p",
            "mutating": False,
            "jobName": "j",
            "inputFingerprint": "f",
            "bindingEpoch": 0,
            "claimedAt": "t",
        }
    }
    report.saw({"status": claim}, SchemaStatus.model_validate(claim))
    assert report.operation_type == "Plan"


def _counted(metrics: Metrics, type_: str, outcome: str) -> float:
    value = metrics.registry.get_sample_value(
        "ptah_operations_total", {"family": "schema", "type": type_, "outcome": outcome}
    )
    return value or 0.0


def test_operation_outcomes_are_counted_from_the_report() -> None:
    metrics = Metrics()
    key = Key("PtahSchema", "ns", "s")
    obj = {"metadata": {"name": "s"}, "status": {}}
    ended = PassReport(first=obj, last=obj)
    ended.ended = Ended(OperationRef("apply-1", "Apply"), "Succeeded")
    metrics.observe_pass(key, "schema", ended, 0.1, "ok")
    assert _counted(metrics, "Apply", "Succeeded") == 1
    metrics.observe_pass(key, "schema", PassReport(first=obj, last=obj), 0.1, "ok")
    assert _counted(metrics, "Apply", "Succeeded") == 1  # no operation ended: nothing counted
    failed = PassReport(first=obj, last=obj)
    failed.ended = Ended(OperationRef("plan-1", "Plan"), "Failed")
    metrics.observe_pass(key, "schema", failed, 0.1, "ok")
    assert _counted(metrics, "Plan", "Failed") == 1


def test_runnables_start_in_order_and_stop_in_reverse() -> None:
    seen: list[str] = []

    def part(name: str, fail: bool = False) -> Runnable:
        def start() -> None:
            if fail:
                raise RuntimeError(name)
            seen.append(f"start {name}")

        return Runnable(name, start, lambda: seen.append(f"stop {name}"))

    import threading

    stop = threading.Event()
    stop.set()
    Manager([part("probes"), part("election"), part("workers"), part("watchers")]).run(stop)
    assert seen == [
        "start probes",
        "start election",
        "start workers",
        "start watchers",
        "stop watchers",
        "stop workers",
        "stop election",
        "stop probes",
    ]
    seen.clear()
    manager = Manager([part("probes"), part("election"), part("workers", fail=True)])
    try:
        manager.start()
    except RuntimeError:
        pass
    else:
        raise AssertionError("a runnable that fails to start fails the start")
    # What had started is stopped, in reverse; what never started is not stopped.
    assert seen == ["start probes", "start election", "stop election", "stop probes"]


def _schema_event(type_: str, ns: str, generation: int, phase: str) -> WatchEvent:
    return WatchEvent(
        type_,
        kinds.SCHEMA,
        {
            "kind": "PtahSchema",
            "metadata": {"name": "s", "namespace": ns, "uid": "u", "generation": generation},
            "status": {"phase": phase},
        },
    )


def test_controller_queues_in_scope_and_ignores_the_echo_of_its_own_status_writes() -> None:
    from ptah.operator.controller import Controller, Settings
    from ptah.operator.main import families

    c = Controller(MemoryCluster(), families(), Settings(lock_namespace="sys", namespaces=["a"]))
    c.handle(_schema_event("ADDED", "b", 1, "Ready"))
    assert len(c.queue) == 0
    c.handle(_schema_event("ADDED", "a", 1, "Reading"))
    key = c.queue.get(0)
    assert key is not None and str(key) == "PtahSchema/a/s"
    c.queue.done(key)
    c.handle(_schema_event("MODIFIED", "a", 1, "Ready"))  # status only
    assert c.queue.get(0) is None
    c.handle(_schema_event("MODIFIED", "a", 2, "Ready"))  # the spec moved
    assert c.queue.get(0) == key


def test_a_pass_that_fails_on_the_api_is_retried_with_growing_back_off() -> None:
    from ptah.kube.errors import Unavailable
    from ptah.operator.controller import Controller, Settings
    from ptah.operator.main import families

    class Down(MemoryCluster):
        def get(self, kind: kinds.Kind, namespace: str, name: str) -> dict[str, Any] | None:
            raise Unavailable("apiserver away", uncertain=True)

    c = Controller(Down(), families(), Settings())
    key = Key("PtahSchema", "ns", "s")
    c.process(key)
    c.process(key)
    assert c.queue.failures(key) == 2
    assert c.queue.get(0) is None  # not hot-looped: it waits for its back-off


def test_the_periodic_resync_rereads_only_what_is_not_at_rest_at_the_version_watched(
    monkeypatch: Any,
) -> None:
    """A pass that left its resource Ready with nothing in flight spares it the periodic
    resync while the watch holds that version; anything else (a new version, a claim in
    flight, a pass that did not leave it Ready) is read again, and the full resync (start,
    election) still takes everything."""
    from ptah.lifecycle.step import Result
    from ptah.operator import controller as ctl
    from ptah.operator.main import families

    cluster = MemoryCluster()
    created = cluster.create(
        kinds.SCHEMA,
        {
            "apiVersion": kinds.SCHEMA.api_version,
            "kind": "PtahSchema",
            "metadata": {"name": "s", "namespace": "ns"},
            "spec": {},
        },
    )
    ready = cluster.patch(kinds.SCHEMA, "ns", "s", {"status": {"phase": "Ready"}}, "status")
    passes: list[str] = []

    def one_pass(
        env: Any, family: Any, namespace: str, name: str, report: Any, known: Any = None
    ) -> Result:
        obj = env.cluster.get(family.kind, namespace, name)  # as every unchained pass starts
        report.saw(obj)
        passes.append(obj["metadata"]["resourceVersion"])
        return Result(requeue_after=600.0, report=report)

    monkeypatch.setattr(ctl, "reconcile", one_pass)
    c = ctl.Controller(cluster, families(), ctl.Settings())
    c.handle(WatchEvent("ADDED", kinds.SCHEMA, ready))

    def drain() -> int:
        n = 0
        while (key := c.queue.get(0)) is not None:
            c.process(key)
            c.queue.done(key)
            n += 1
        return n

    assert drain() == 1
    c.resync(periodic=True)
    assert drain() == 0  # at rest, same version: not read again
    c.resync()
    assert drain() == 1  # the full resync takes it all the same
    busy = cluster.patch(
        kinds.SCHEMA,
        "ns",
        "s",
        {"status": {"activeOperation": {"operationId": "plan-1"}}},
        "status",
    )
    c.handle(WatchEvent("MODIFIED", kinds.SCHEMA, busy))
    drain()
    c.resync(periodic=True)
    assert drain() == 1  # a claim in flight: a lost Job event must not strand it
    c.resync(periodic=True)
    assert drain() == 1
    assert created["metadata"]["resourceVersion"] != ready["metadata"]["resourceVersion"]


def test_a_collected_job_wakes_only_an_owner_with_work_in_flight() -> None:
    """The TTL controller deleting a finished operation's Job or Pod costs an owner at rest
    no pass; an owner with a claim in flight is woken (its Job may have vanished)."""
    from ptah.operator.controller import Controller, Settings
    from ptah.operator.main import families

    c = Controller(MemoryCluster(), families(), Settings())

    def schema(status: dict[str, Any]) -> WatchEvent:
        meta = {"name": "s", "namespace": "ns", "uid": "u", "generation": 1}
        return WatchEvent(
            "ADDED", kinds.SCHEMA, {"kind": "PtahSchema", "metadata": meta, "status": status}
        )

    job = {
        "kind": "Job",
        "metadata": {
            "name": "ptah-plan-s-1",
            "namespace": "ns",
            "ownerReferences": [{"kind": "PtahSchema", "name": "s", "uid": "u"}],
        },
    }
    c.handle(schema({"phase": "Ready"}))
    key = c.queue.get(0)
    assert key is not None
    c.queue.done(key)
    c.handle(WatchEvent("DELETED", kinds.JOB, job))
    assert c.queue.get(0) is None  # at rest: nothing to account, nothing to wake
    going = {**job, "metadata": {**job["metadata"], "deletionTimestamp": "2026-12-01T00:00:00Z"}}
    pod = {
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "labels": {LABEL_OWNER_UID: "u"}},
    }
    c.handle(WatchEvent("MODIFIED", kinds.JOB, going))  # its deletion has begun
    c.handle(WatchEvent("DELETED", kinds.POD, pod))
    assert c.queue.get(0) is None
    c.handle(WatchEvent("MODIFIED", kinds.JOB, job))
    assert c.queue.get(0) == key  # any other change of its Job still wakes it
    c.queue.done(key)
    c.handle(schema({"phase": "Reading", "activeOperation": {"operationId": "plan-1"}}))
    assert c.queue.get(0) == key
    c.queue.done(key)
    c.handle(WatchEvent("DELETED", kinds.JOB, job))
    assert c.queue.get(0) == key  # in flight: a vanished Job is its next step


def test_a_chained_pass_starts_from_the_last_write_and_a_change_since_is_not_lost() -> None:
    """Passes chained in one worker read the resource once: each later pass starts from
    what the previous pass's write returned. A change made by someone else between two
    chained passes makes the next write conflict (it carries the version the pass started
    from), and the pass after it reads afresh and keeps the change."""
    from ptah.operator.controller import Controller, Settings
    from ptah.operator.main import families

    class Counting(MemoryCluster):
        reads = 0

        def get(self, kind: kinds.Kind, namespace: str, name: str) -> dict[str, Any] | None:
            if kind == kinds.SCHEMA:
                self.reads += 1
            return super().get(kind, namespace, name)

    cluster = Counting()
    cluster.create(
        kinds.SECRET,
        {"metadata": {"name": "db", "namespace": "ns"}, "stringData": {"url": "sqlite:///x"}},
    )
    spec = {
        "target": {"engine": "sqlite", "secretRef": {"name": "db"}},
        "source": {"inline": "CREATE TABLE t (id INTEGER PRIMARY KEY);"},
    }
    cluster.create(
        kinds.SCHEMA,
        {
            "apiVersion": kinds.SCHEMA.api_version,
            "kind": "PtahSchema",
            "metadata": {"name": "s", "namespace": "ns"},
            "spec": spec,
        },
    )
    c = Controller(cluster, families(), Settings(lock_namespace="sys"))
    key = Key("PtahSchema", "ns", "s")

    again, known = c.process(key, chain=True)
    passes = 1
    while again:
        again, known = c.process(key, chain=True, known=known)
        passes += 1
    assert passes >= 3, passes  # finalizer, claim, envelope, dispatch...
    assert cluster.reads == 1
    assert len(cluster.list(kinds.JOB, "ns")) == 1
    # Another resource, with a foreign write between its first two chained passes.
    cluster.create(
        kinds.SCHEMA,
        {
            "apiVersion": kinds.SCHEMA.api_version,
            "kind": "PtahSchema",
            "metadata": {"name": "s2", "namespace": "ns"},
            "spec": spec,
        },
    )
    key = Key("PtahSchema", "ns", "s2")
    cluster.reads = 0
    again, known = c.process(key, chain=True)
    assert again and known is not None
    cluster.patch(kinds.SCHEMA, "ns", "s2", {"metadata": {"labels": {"team": "a"}}})
    again, _ = c.process(key, chain=True, known=known)
    assert not again and c.queue.failures(key) == 1  # the write conflicted, nothing lost
    again, known = c.process(key, chain=True)  # as the retry runs: it reads
    while again:
        again, known = c.process(key, chain=True, known=known)
    assert cluster.reads == 2
    live = cluster.get(kinds.SCHEMA, "ns", "s2")
    assert live is not None and live["metadata"]["labels"] == {"team": "a"}
    assert (live.get("status") or {}).get("activeOperation", {}).get("jobUid")


def test_a_chain_of_new_work_yields_to_work_in_flight_between_two_passes() -> None:
    """A resource's chain of passes holds its worker while it claims and dispatches; a
    Job that moved meanwhile (its owner queued urgent) is served after the current pass,
    not after the whole chain, and the chain resumes ahead of the other new work. A chain
    taken as urgent runs on."""
    from ptah.operator.controller import Controller, Settings
    from ptah.operator.main import families

    cluster = MemoryCluster()
    cluster.create(
        kinds.SECRET,
        {"metadata": {"name": "db", "namespace": "ns"}, "stringData": {"url": "sqlite:///x"}},
    )
    for name in ("s", "t"):
        cluster.create(
            kinds.SCHEMA,
            {
                "apiVersion": kinds.SCHEMA.api_version,
                "kind": "PtahSchema",
                "metadata": {"name": name, "namespace": "ns"},
                "spec": {
                    "target": {"engine": "sqlite", "secretRef": {"name": "db"}},
                    "source": {"inline": "CREATE TABLE t (id INTEGER PRIMARY KEY);"},
                },
            },
        )
    c = Controller(cluster, families(), Settings(lock_namespace="sys"))
    s, t, busy = (Key("PtahSchema", "ns", n) for n in ("s", "t", "busy"))
    c.queue.add(s)
    c.queue.add(t)
    assert c.queue.get(0) == s
    c.queue.add(busy, urgent=True)  # its Job completed
    assert c.serve(s) == 1  # yielded after its first pass
    c.queue.done(s)
    assert [c.queue.get(0), c.queue.get(0)] == [busy, s]
    c.queue.done(busy)
    c.queue.done(s)
    c.queue.add(t, urgent=True)  # say t's Job moved: its chain is work in flight
    c.queue.add(Key("PtahSchema", "ns", "other"), urgent=True)
    assert c.queue.get(0) == t
    assert c.serve(t) > 2  # it runs on, other urgent work waiting or not


def test_one_pass_reads_the_secret_once_between_two_writes() -> None:
    """The binding step and the claim's authorization judge one reading of the Secret's
    metadata when nothing was written between them; every durable write of the pass
    ends that reading, so a check after a write reads again (and sees a change)."""
    from ptah.lifecycle.context import Env, Pass
    from ptah.operator.main import families

    class Counting(MemoryCluster):
        reads = 0

        def get_metadata(self, kind: kinds.Kind, namespace: str, name: str) -> Any:
            if kind == kinds.SECRET:
                self.reads += 1
            return super().get_metadata(kind, namespace, name)

    cluster = Counting()
    cluster.create(kinds.SECRET, {"metadata": {"name": "db", "namespace": "ns"}})
    obj = cluster.create(
        kinds.SCHEMA,
        {
            "apiVersion": kinds.SCHEMA.api_version,
            "kind": "PtahSchema",
            "metadata": {"name": "s", "namespace": "ns"},
            "spec": {},
        },
    )
    p = Pass(Env(cluster), families()["PtahSchema"], obj)
    first = p.secret_metadata("db")
    assert p.secret_metadata("db") is first and cluster.reads == 1
    moved = cluster.patch(kinds.SECRET, "ns", "db", {"metadata": {"labels": {"x": "y"}}})
    p.commit("write_observation", lambda: None)  # any durable write of the pass
    again = p.secret_metadata("db")
    assert cluster.reads == 2 and again is not None
    assert again["metadata"]["resourceVersion"] == moved["metadata"]["resourceVersion"]
    assert p.secret_metadata("other") is None and cluster.reads == 3


def test_a_job_or_pod_wakes_its_owner_only_when_it_moved_what_a_step_waits_on() -> None:
    """Job and Pod events are watched whole: a change a waiting step does not read (a Pod
    Running, a Job counting an active Pod, the TTL the owner patched onto its finished
    Job) wakes nobody; a Job that ended, a Pod that stopped once its Job ended, a deletion,
    a relabelled Job and a relist do. A Pod's moves while its Job runs wake nobody either:
    every step that reads Pods waits for the Job to end, which is the Job's own event."""
    from ptah.operator.controller import Controller, Settings
    from ptah.operator.main import families

    c = Controller(MemoryCluster(), families(), Settings())
    owner = [{"kind": "PtahSchema", "name": "s", "uid": "u", "controller": True}]

    def job(status: dict[str, Any], **meta: Any) -> dict[str, Any]:
        m = {"name": "j", "namespace": "ns", "uid": "jid", "ownerReferences": owner}
        return {"kind": "Job", "metadata": {**m, "generation": 1, **meta}, "status": status}

    def pod(status: dict[str, Any]) -> dict[str, Any]:
        refs = [{"kind": "Job", "name": "j", "uid": "jid", "controller": True}]
        meta = {"name": "p", "namespace": "ns", "uid": "pid", "ownerReferences": refs}
        return {
            "kind": "Pod",
            "metadata": {**meta, "labels": {LABEL_OWNER_UID: "u"}},
            "spec": {"nodeName": "n"},
            "status": status,
        }

    def woke(event: str, kind: kinds.Kind, o: dict[str, Any]) -> bool:
        c.handle(WatchEvent(event, kind, o))
        key = c.queue.get(0)
        if key is not None:
            c.queue.done(key)
        return key is not None

    meta = {"name": "s", "namespace": "ns", "uid": "u", "generation": 1}
    status = {"phase": "Reading", "activeOperation": {"operationId": "plan-1"}}
    assert woke("ADDED", kinds.SCHEMA, {"kind": "PtahSchema", "metadata": meta, "status": status})
    done = {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1}
    ran = {
        "phase": "Succeeded",
        "containerStatuses": [{"name": "runner", "state": {"terminated": {"exitCode": 0}}}],
    }
    assert not woke("ADDED", kinds.JOB, job({}))  # just created: its creator reads it back
    assert not woke("ADDED", kinds.POD, pod({"phase": "Pending"}))
    assert not woke("MODIFIED", kinds.JOB, job({"active": 1}))
    assert not woke("MODIFIED", kinds.POD, pod({"phase": "Running"}))
    assert not woke("MODIFIED", kinds.POD, pod(ran))  # its Job has not ended yet
    assert woke("MODIFIED", kinds.JOB, job({"active": 1}, labels={"x": "y"}))  # intent
    assert woke("MODIFIED", kinds.JOB, job(done, labels={"x": "y"}))
    assert not woke("MODIFIED", kinds.JOB, job(done, labels={"x": "y"}, generation=2))  # TTL
    assert woke("MODIFIED", kinds.POD, pod({"phase": "Failed"}))  # its Job ended
    assert woke("SYNC", kinds.POD, pod({"phase": "Failed"}))
    assert woke("DELETED", kinds.JOB, job(done))  # the owner is not at rest
    assert woke("MODIFIED", kinds.POD, pod({"phase": "Failed", "reason": "x"})) is False
    assert woke(
        "ADDED", kinds.JOB, {**job(done), "metadata": {**job(done)["metadata"], "uid": "j2"}}
    )  # ended already


def test_the_echo_of_a_pass_own_write_wakes_nobody_but_a_later_version_does() -> None:
    """A pass's own finalizer write (and a plan it creates for its resource) comes back
    from the watch at the version the write returned: that pass took what follows it.
    Another version of the same object, and a Lease the pass wrote, still wake."""
    from ptah.operator.controller import Controller, Settings
    from ptah.operator.main import families

    cluster = MemoryCluster()
    cluster.create(
        kinds.SECRET,
        {"metadata": {"name": "db", "namespace": "ns"}, "stringData": {"url": "sqlite:///x"}},
    )
    cluster.create(
        kinds.SCHEMA,
        {
            "apiVersion": kinds.SCHEMA.api_version,
            "kind": "PtahSchema",
            "metadata": {"name": "s", "namespace": "ns"},
            "spec": {
                "target": {"engine": "sqlite", "secretRef": {"name": "db"}},
                "source": {"inline": "CREATE TABLE t (id INTEGER PRIMARY KEY);"},
            },
        },
    )
    c = Controller(cluster, families(), Settings(lock_namespace="sys"))
    key = Key("PtahSchema", "ns", "s")
    c.handle(WatchEvent("ADDED", kinds.SCHEMA, cluster.get(kinds.SCHEMA, "ns", "s") or {}))
    assert c.queue.get(0) == key
    again, known = c.process(key, chain=True)
    while again and known is not None and not known["metadata"].get("finalizers"):
        again, known = c.process(key, chain=True, known=known)  # up to the claim's finalizer
    c.queue.done(key)
    assert again and known is not None and known["metadata"].get("finalizers")
    c.handle(WatchEvent("MODIFIED", kinds.SCHEMA, known))
    assert c.queue.get(0) is None  # its own write's echo
    later = cluster.patch(kinds.SCHEMA, "ns", "s", {"metadata": {"labels": {"a": "b"}}})
    c.handle(WatchEvent("MODIFIED", kinds.SCHEMA, later))
    assert c.queue.get(0) == key
    c.queue.done(key)
    plan = {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "ownerReferences": [
                {
                    "apiVersion": kinds.SCHEMA.api_version,
                    "kind": "PtahSchema",
                    "name": "s",
                    "uid": known["metadata"]["uid"],
                }
            ],
        }
    }
    written = c.own.of(key).create(
        kinds.PLAN, {"apiVersion": kinds.PLAN.api_version, "kind": "PtahPlan", **plan}
    )
    c.handle(WatchEvent("ADDED", kinds.PLAN, written))
    assert c.queue.get(0) is None
    c.handle(WatchEvent("DELETED", kinds.PLAN, written))
    assert c.queue.get(0) == key  # someone deleted its plan
    c.queue.done(key)
    other = c.own.of(Key("PtahSchema", "ns", "t")).patch(
        kinds.SCHEMA, "ns", "s", {"metadata": {"labels": {"a": "c"}}}
    )
    c.handle(WatchEvent("MODIFIED", kinds.SCHEMA, other))
    assert c.queue.get(0) == key  # written by another resource's pass: not its echo


def test_every_pass_carries_the_process_own_sightings() -> None:
    """A hold is measured from this process's own sightings of a run, kept across its
    passes (ptah.lifecycle.hold): a Pod seen waiting at one pass must still be known at
    the next, or the look after it (the Pod started, or went, in between) would not start
    the hold again. Each pass's Env once carried only the first sightings, and the rest
    started empty at every pass."""
    from ptah.operator.controller import Controller, Settings, _JobLog
    from ptah.operator.main import families

    c = Controller(MemoryCluster(), families(), Settings())
    key = Key("PtahSchema", "ns", "s")
    first = c._pass_env(PassReport(), _JobLog(c, key))
    first.sightings.waiting.add("ns/s/apply-1")
    first.sightings.jobless.add("ns/s/apply-1")
    second = c._pass_env(PassReport(), _JobLog(c, key))
    assert second.sightings.waiting == {"ns/s/apply-1"}
    assert second.sightings.jobless == {"ns/s/apply-1"}
    assert second.observer is first.observer
