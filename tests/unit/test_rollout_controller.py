"""The PtahRollout controller on the in-memory API: waves, stops, one decision per
distinct plan, targets joining and leaving, restarts, and idleness.

The children's lifecycle is played by the test (it writes their status the way the
lifecycle would): the rollout reads nothing else, so this tests exactly its rules.
The real lifecycle under a rollout is shown by tests/e2e/test_rollout.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from ptah.api.resources import PlannedStatement, PlanSpec, statements_digest
from ptah.families.rollout import (
    ANN_REVISION,
    ANN_WAVE,
    ROLLOUT_WRITES,
    RolloutController,
    child_name,
)
from ptah.kube.kinds import APPROVAL, EVENT, PLAN, ROLLOUT, SCHEMA, SECRET
from ptah.lifecycle.authorize import plan_digest
from ptah.lifecycle.context import Env
from ptah.testing.memory import MemoryCluster

NS = "tenants"
SQL = "CREATE TABLE t (id INTEGER PRIMARY KEY);"


class Stop(Exception):
    pass


class World:
    def __init__(self, n: int = 7, **strategy: Any) -> None:
        self.api = MemoryCluster()
        self.ctl = RolloutController()
        self.hook: Any = lambda when, write: None
        self.env = Env(cluster=self.api, hook=lambda w, n_: self.hook(w, n_))
        for i in range(n):
            self.secret(f"db-{i:02d}")
        self.strategy = {"canary": 1, "maxParallel": 3, **strategy}
        self.api.system.create(
            ROLLOUT,
            {
                "apiVersion": "ptah.io/v1alpha1",
                "kind": "PtahRollout",
                "metadata": {"name": "r", "namespace": NS, "labels": {"team": "a"}},
                "spec": {
                    "template": {
                        "engine": "sqlite",
                        "schema": {"source": {"inline": SQL}, "policy": {"approval": "Always"}},
                    },
                    "targets": {"selector": {"matchLabels": {"fleet": "x"}}},
                    "strategy": self.strategy,
                },
            },
        )

    def secret(self, name: str, labels: dict[str, str] | None = None) -> None:
        self.api.system.create(
            SECRET,
            {
                "metadata": {
                    "name": name,
                    "namespace": NS,
                    "labels": labels or {"fleet": "x"},
                },
                "stringData": {"url": f"sqlite:////tmp/{name}.db"},
            },
        )

    def run(self) -> None:
        self.ctl.reconcile(self.env, NS, "r")

    def rollout(self) -> dict[str, Any]:
        obj = self.api.system.get(ROLLOUT, NS, "r")
        assert obj is not None
        return obj

    def status(self) -> dict[str, Any]:
        return dict(self.rollout().get("status") or {})

    def children(self) -> dict[str, dict[str, Any]]:
        return {c["metadata"]["name"]: c for c in self.api.system.list(SCHEMA, NS)}

    def child(self, i: int) -> dict[str, Any]:
        return self.children()[f"r-db-{i:02d}"]

    def set_status(self, i: int, **fields: Any) -> None:
        obj = self.child(i)
        gen = obj["metadata"].get("generation") or 1
        self.api.system.patch(
            SCHEMA,
            NS,
            obj["metadata"]["name"],
            {"status": {"observedGeneration": gen, **fields}},
            "status",
        )

    def ready(self, *idx: int, source: str = "d1") -> None:
        for i in idx:
            self.set_status(
                i,
                phase="Ready",
                appliedSource=source,
                activeOperation=None,
                conditions=[cond("Ready", True), cond("Stalled", False)],
            )

    def failed(self, i: int, reason: str = "ApplyFailed") -> None:
        self.set_status(
            i,
            phase="Failed",
            conditions=[cond("Ready", False), cond("Stalled", True, reason, "boom")],
        )

    def uncertain(self, i: int) -> None:
        self.set_status(
            i,
            phase="ProofOwed",
            pendingObservation={"operationId": "apply-x", "reason": "JobGone", "detail": "lost"},
            conditions=[cond("Ready", False), cond("Stalled", False)],
        )

    def applying(self, i: int) -> None:
        self.set_status(
            i,
            phase="Applying",
            activeOperation={"operationId": "apply-y", "type": "Apply"},
            conditions=[cond("Ready", False), cond("Stalled", False)],
        )

    def waiting(self, i: int, sql: list[str]) -> str:
        """The child planned ``sql`` and waits for approval; returns the statements digest."""
        obj = self.child(i)
        spec = PlanSpec.model_validate(
            {
                "ownerKind": "PtahSchema",
                "ownerName": obj["metadata"]["name"],
                "ownerUid": obj["metadata"]["uid"],
                "engine": "sqlite",
                "statements": [{"sql": s} for s in sql],
                "changes": True,
                "computedUnder": {
                    "source": "s",
                    "targetSchema": f"t{i}",
                    "expectedAfter": "a",
                    "policy": "p",
                    "bindingEpoch": 1,
                    "database": f"db{i}",
                    "generation": obj["metadata"].get("generation") or 1,
                },
            }
        )
        d = plan_digest(spec)
        name = f"{obj['metadata']['name']}-{d[:16]}"
        self.api.system.create(
            PLAN, {"metadata": {"name": name, "namespace": NS}, "spec": spec.wire()}
        )
        self.set_status(
            i,
            phase="WaitingForApproval",
            currentPlan={
                "name": name,
                "digest": d,
                "statements": len(sql),
                "destructive": False,
                "changes": True,
                "generation": obj["metadata"].get("generation") or 1,
            },
            conditions=[cond("Ready", False), cond("Stalled", False)],
        )
        return statements_digest([PlannedStatement(sql=s) for s in sql])

    def approve_rollout(self, statements: str, name: str = "ok") -> None:
        self.api.system.create(
            APPROVAL,
            {
                "metadata": {"name": name, "namespace": NS},
                "spec": {
                    "resourceRef": {"kind": "PtahRollout", "name": "r"},
                    "planDigest": statements,
                    "approvedBy": "alice",
                },
            },
        )

    def child_approvals(self) -> list[dict[str, Any]]:
        return [
            a
            for a in self.api.system.list(APPROVAL, NS)
            if a["spec"]["resourceRef"]["kind"] == "PtahSchema"
        ]

    def events(self, reason: str) -> list[str]:
        return [
            e["message"]
            for e in self.api.system.list(EVENT, NS)
            if e["reason"] == reason and e["involvedObject"]["kind"] == "PtahRollout"
        ]


def cond(type_: str, on: bool, reason: str = "x", message: str = "") -> dict[str, Any]:
    return {
        "type": type_,
        "status": "True" if on else "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


def test_canary_then_waves_of_max_parallel_to_all_ready() -> None:
    w = World(7)
    w.run()
    assert list(w.children()) == ["r-db-00"]
    s = w.status()
    assert s["currentWave"] == 0 and s["counts"]["total"] == 7 and s["counts"]["pending"] == 6
    assert w.events("WaveStarted") == ["wave 0 (canary): 1 target(s): db-00"]
    child = w.child(0)
    assert child["spec"]["target"] == {
        "engine": "sqlite",
        "secretRef": {"name": "db-00", "key": "url"},
    }
    assert child["metadata"]["labels"] == {"team": "a", "ptah.io/rollout": "r"}
    assert child["metadata"]["ownerReferences"][0]["kind"] == "PtahRollout"
    w.run()  # the canary is not done: nothing more starts
    assert len(w.children()) == 1
    w.ready(0)
    w.run()
    assert sorted(w.children()) == ["r-db-00", "r-db-01", "r-db-02", "r-db-03"]
    assert w.child(3)["metadata"]["annotations"][ANN_WAVE] == "1"
    w.ready(1, 2)
    w.run()
    assert len(w.children()) == 4, "wave 1 is not done while db-03 is still pending"
    w.ready(3)
    w.run()
    assert len(w.children()) == 7
    w.ready(4, 5, 6)
    w.run()
    s = w.status()
    assert s["phase"] == "Ready" and s["counts"]["ready"] == 7 and s["waves"] == 3
    assert s["appliedSource"] == "d1"
    conds = {c["type"]: c["status"] for c in s["conditions"]}
    assert conds == {
        "Ready": "True",
        "Reconciling": "False",
        "Stalled": "False",
        "SourceApplied": "True",
    }
    assert len(w.events("WaveStarted")) == 3 and len(w.events("RolloutReady")) == 1


def test_converged_rollout_writes_nothing() -> None:
    w = World(4)
    for _ in range(4):
        w.run()
        w.ready(*range(len(w.children())))
    w.run()
    assert w.status()["phase"] == "Ready"
    w.api.requests.reset()
    for _ in range(3):
        w.run()
    assert w.api.requests.total_writes == 0
    # reads per idle pass: the rollout, Secrets, two child kinds, approvals
    assert w.api.requests.total_reads == 3 * 5


def test_one_decision_per_distinct_plan_spent_once_per_target() -> None:
    w = World(5, maxParallel=4)
    w.run()
    s1 = w.waiting(0, ["ALTER TABLE t ADD COLUMN a TEXT"])
    w.run()
    s = w.status()
    assert s["phase"] == "WaitingForApproval"
    assert s["decisions"] == [
        {
            "statementsDigest": s1,
            "statements": 1,
            "destructive": False,
            "targets": 1,
            "example": "r-db-00",
        }
    ]
    assert w.child_approvals() == []
    w.approve_rollout(s1)
    w.run()
    [a] = w.child_approvals()
    plan = w.child(0)["status"]["currentPlan"]
    assert a["spec"]["resourceRef"] == {"kind": "PtahSchema", "name": "r-db-00"}
    assert a["spec"]["planDigest"] == plan["digest"] and a["spec"]["approvedBy"] == "alice"
    w.run()
    assert len(w.child_approvals()) == 1, "spent once for this target"
    w.ready(0)
    w.run()
    # wave 1: three plan the same statements, one (a different start) plans others
    for i in (1, 2, 3):
        assert w.waiting(i, ["ALTER TABLE t ADD COLUMN a TEXT"]) == s1
    s2 = w.waiting(4, ["CREATE TABLE t (id INTEGER PRIMARY KEY)", "ALTER TABLE t ADD a TEXT"])
    w.run()
    spent = {a["spec"]["resourceRef"]["name"] for a in w.child_approvals()}
    assert spent == {"r-db-00", "r-db-01", "r-db-02", "r-db-03"}
    [d] = w.status()["decisions"]
    assert d["statementsDigest"] == s2 and d["targets"] == 1 and d["example"] == "r-db-04"
    # The same approval is never spent on a target twice: after its approval was
    # consumed, a new plan with the same statements waits for a new decision.
    first = next(a for a in w.child_approvals() if a["spec"]["resourceRef"]["name"] == "r-db-01")
    w.api.system.patch(
        APPROVAL,
        NS,
        first["metadata"]["name"],
        {"status": {"conditions": [cond("Consumed", True)]}},
        "status",
    )
    w.api.system.delete(PLAN, NS, w.child(1)["status"]["currentPlan"]["name"])
    w.waiting(1, ["ALTER TABLE t ADD COLUMN a TEXT"])  # replanned (another digest)
    w.run()
    assert [a["spec"]["resourceRef"]["name"] for a in w.child_approvals()].count("r-db-01") == 1
    assert {d["statementsDigest"]: d["targets"] for d in w.status()["decisions"]} == {
        s1: 1,
        s2: 1,
    }
    w.approve_rollout(s1, name="again")
    w.run()
    assert [a["spec"]["resourceRef"]["name"] for a in w.child_approvals()].count("r-db-01") == 2


def test_a_target_waiting_for_its_own_decision_does_not_hold_the_others() -> None:
    w = World(6, maxParallel=2)
    w.run()
    s1 = w.waiting(0, ["ALTER TABLE t ADD COLUMN a TEXT"])
    w.approve_rollout(s1)
    w.run()
    w.ready(0)
    w.run()  # wave 1: db-01, db-02
    w.waiting(1, ["DROP TABLE t"])
    w.ready(2)
    w.run()  # db-01 waits for its own decision: wave 2 starts
    assert "r-db-04" in w.children()
    assert w.status()["counts"]["waitingForApproval"] == 1


def test_failed_canary_stops_naming_the_target_and_starts_nothing_else() -> None:
    w = World(5, maxFailures=3)
    w.run()
    w.failed(0)
    for _ in range(2):
        w.run()
    s = w.status()
    assert list(w.children()) == ["r-db-00"]
    assert s["phase"] == "Stopped"
    assert s["stopped"]["target"] == "db-00" and s["stopped"]["reason"] == "ApplyFailed"
    assert "db-00" in s["stopped"]["message"] and "boom" in s["stopped"]["message"]
    conds = {c["type"]: c for c in s["conditions"]}
    assert conds["Stalled"]["status"] == "True" and conds["Ready"]["status"] == "False"
    assert len(w.events("RolloutStopped")) == 1, "one Event per stop, not per pass"


def test_max_failures_tolerated_then_stop() -> None:
    w = World(8, maxParallel=3, maxFailures=1)
    w.run()
    w.ready(0)
    w.run()
    w.failed(1)
    w.ready(2, 3)
    w.run()  # one failure tolerated: wave 2 starts
    assert len(w.children()) == 7
    w.failed(4)
    w.run()
    s = w.status()
    assert s["stopped"]["target"] == "db-04" and "maxFailures 1" in s["stopped"]["message"]
    w.ready(5, 6)
    w.run()
    assert len(w.children()) == 7, "stopped: the last wave never starts"


def test_uncertain_outcome_stops_and_spends_no_approval() -> None:
    w = World(6, maxParallel=3)
    w.run()
    s1 = w.waiting(0, ["ALTER TABLE t ADD COLUMN a TEXT"])
    w.approve_rollout(s1)
    w.run()
    w.ready(0)
    w.run()
    w.uncertain(1)
    w.waiting(2, ["ALTER TABLE t ADD COLUMN a TEXT"])
    w.run()
    s = w.status()
    assert s["stopped"]["target"] == "db-01" and s["stopped"]["reason"] == "JobGone"
    assert s["counts"]["uncertain"] == 1
    assert {a["spec"]["resourceRef"]["name"] for a in w.child_approvals()} == {"r-db-00"}


def test_paused_holds_and_resumes() -> None:
    w = World(3)
    w.api.system.patch(ROLLOUT, NS, "r", {"spec": {"paused": True}})
    w.run()
    assert w.children() == {} and w.status()["phase"] == "Paused"
    w.api.system.patch(ROLLOUT, NS, "r", {"spec": {"paused": False}})
    w.run()
    assert list(w.children()) == ["r-db-00"]


def test_a_new_secret_joins_the_next_wave_and_after_completion() -> None:
    w = World(2, maxParallel=5)
    w.run()
    w.ready(0)
    w.run()
    w.secret("db-09")  # created while wave 1 runs: joins the next wave
    w.ready(1)
    w.run()
    assert w.child(9)["metadata"]["annotations"][ANN_WAVE] == "2"
    w.ready(9)
    w.run()
    assert w.status()["phase"] == "Ready"
    w.secret("db-10")
    w.run()
    assert w.child(10)["metadata"]["annotations"][ANN_WAVE] == "3"
    assert w.status()["counts"] == {
        "total": 4, "ready": 3, "applying": 1, "waitingForApproval": 0, "uncertain": 0,
        "failed": 0, "pending": 0,
    }  # fmt: skip


def test_a_removed_target_is_deleted_only_when_it_owes_nothing() -> None:
    w = World(2, maxParallel=5)
    w.run()
    w.ready(0)
    w.run()
    w.applying(1)
    w.api.system.patch(SECRET, NS, "db-01", {"metadata": {"labels": {"fleet": "gone"}}})
    w.run()
    assert "r-db-01" in w.children(), "mid-apply: never deleted"
    assert w.status()["counts"]["total"] == 1
    w.ready(1)
    w.run()
    assert "r-db-01" not in w.children()
    assert w.events("TargetRemoved") == ["db-01: child r-db-01 deleted"]


def test_a_changed_template_rolls_out_again_canary_first() -> None:
    w = World(4, maxParallel=3)
    for _ in range(3):
        w.run()
        w.ready(*range(len(w.children())))
    w.run()
    old = w.status()["revision"]
    w.api.system.patch(
        ROLLOUT,
        NS,
        "r",
        {"spec": {"template": {"schema": {"source": {"inline": SQL + " -- v2"}}}}},
    )
    w.run()
    s = w.status()
    assert s["revision"] != old and s["currentWave"] == 0
    revisions = {n: c["metadata"]["annotations"][ANN_REVISION] for n, c in w.children().items()}
    assert revisions["r-db-00"] == s["revision"]
    assert all(revisions[f"r-db-0{i}"] == old for i in (1, 2, 3))
    assert w.child(0)["spec"]["source"] == {"inline": SQL + " -- v2"}
    assert w.child(1)["spec"]["source"] == {"inline": SQL}
    assert s["counts"]["pending"] == 3 and s["counts"]["applying"] == 1


@pytest.mark.parametrize("write", ROLLOUT_WRITES)
def test_a_crash_at_any_write_loses_nothing(write: str) -> None:
    """Stop the pass before and after each rollout write, then run a fresh controller on
    what was left: never more than a wave's size in flight, never an approval twice."""
    for when in ("before", "after"):
        w = World(7, maxParallel=3)
        fired = {"n": 0}

        def hook(when_: str, name: str, when: str = when, fired: dict[str, int] = fired) -> None:
            if when_ == when and name == write and fired["n"] < 2:
                fired["n"] += 1
                raise Stop()

        w.hook = hook
        s1 = ""
        for step in range(30):
            if step > 8 and w.status().get("phase") == "Ready":
                break
            try:
                w.run()
            except Stop:
                w.ctl = RolloutController()  # a restarted process
                continue
            kids = w.children()
            if "r-db-00" in kids and not s1:
                s1 = w.waiting(0, ["ALTER TABLE t ADD a TEXT"])
                w.approve_rollout(s1)
            waves: dict[str, int] = {}
            for c in kids.values():
                wave = c["metadata"]["annotations"][ANN_WAVE]
                waves[wave] = waves.get(wave, 0) + 1
            assert waves.get("0", 0) <= 1 and all(n <= 3 for n in waves.values()), waves
            if any(a["spec"]["resourceRef"]["name"] == "r-db-00" for a in w.child_approvals()):
                w.ready(*range(len(kids)))
        spent = [a["spec"]["resourceRef"]["name"] for a in w.child_approvals()]
        assert len(spent) == len(set(spent))
        assert w.status()["phase"] == "Ready", (write, when, w.status())


def test_invalid_spec_is_a_condition_not_a_traceback() -> None:
    w = World(1)
    w.api.system.patch(ROLLOUT, NS, "r", {"spec": {"strategy": {"maxParallel": 0}}})
    w.run()
    s = w.status()
    assert s["phase"] == "Blocked"
    stalled = next(c for c in s["conditions"] if c["type"] == "Stalled")
    assert stalled["reason"] == "InvalidSpec" and "maxParallel" in stalled["message"]


def test_explicit_targets_come_first_with_their_engine() -> None:
    w = World(2)
    w.api.system.patch(
        ROLLOUT,
        NS,
        "r",
        {
            "spec": {
                "targets": {
                    "secrets": [{"secretRef": {"name": "pg-main"}, "engine": "postgres"}],
                },
            }
        },
    )
    w.run()
    [name] = w.children()
    assert name == child_name("r", next(iter([_t("pg-main")])))
    assert w.children()[name]["spec"]["target"]["engine"] == "postgres"
    assert w.status()["counts"]["total"] == 3


def _t(name: str) -> Any:
    from ptah.families.rollout import Target

    return Target(name, name, "url", "postgres")


def test_child_names_stay_dns_safe_and_distinct() -> None:
    long = "x" * 80
    a = child_name("rollout", _t(long + "a"))
    b = child_name("rollout", _t(long + "b"))
    assert a != b and len(a) <= 63 and len(b) <= 63
    assert child_name("r", _t("db_1")).replace("-", "").isalnum()


def _drain(c: Any) -> set[tuple[str, str]]:
    out = set()
    while (key := c.queue.get(0)) is not None:
        out.add((key.kind, key.name))
        c.queue.done(key)
    return out


def test_operator_maps_child_status_approvals_and_secrets_to_the_rollout() -> None:
    """A child's status echo wakes its rollout (not the child); an approval naming the
    rollout and a Secret change in its namespace wake it; its own status echo does not."""
    from ptah.kube.watch import WatchEvent
    from ptah.operator.controller import Controller, Settings
    from ptah.operator.main import drivers, families

    w = World(2)
    w.run()
    c = Controller(w.api, families(), Settings(), drivers=drivers())
    rollout = w.rollout()
    c.handle(WatchEvent("ADDED", ROLLOUT, rollout))
    child = w.child(0)
    c.handle(WatchEvent("ADDED", SCHEMA, child))
    assert _drain(c) == {("PtahRollout", "r"), ("PtahSchema", "r-db-00")}
    w.ready(0)
    c.handle(WatchEvent("MODIFIED", SCHEMA, w.child(0)))
    assert _drain(c) == {("PtahRollout", "r")}
    w.run()
    c.handle(WatchEvent("MODIFIED", ROLLOUT, w.rollout()))
    assert _drain(c) == set(), "the rollout's own status echo"
    approval = {
        "metadata": {"name": "ok", "namespace": NS},
        "spec": {"resourceRef": {"kind": "PtahRollout", "name": "r"}, "planDigest": "x" * 40},
    }
    c.handle(WatchEvent("ADDED", APPROVAL, approval))
    assert _drain(c) == {("PtahRollout", "r")}
    secret = {"metadata": {"name": "new", "namespace": NS, "labels": {}}}
    c.handle(WatchEvent("ADDED", SECRET, secret))
    assert _drain(c) == {("PtahRollout", "r")}
    elsewhere = {"metadata": {"name": "new", "namespace": "other", "labels": {}}}
    c.handle(WatchEvent("ADDED", SECRET, elsewhere))
    assert _drain(c) == set()


def test_a_child_aimed_elsewhere_is_rewritten_before_any_decision_is_spent() -> None:
    """Someone re-aims a child at another Secret: the rollout spends no approval on it and
    writes it back to its own target."""
    w = World(2)
    w.run()
    s1 = w.waiting(0, ["ALTER TABLE t ADD COLUMN a TEXT"])
    w.api.system.patch(
        SCHEMA, NS, "r-db-00", {"spec": {"target": {"secretRef": {"name": "db-01"}}}}
    )
    assert w.waiting(0, ["ALTER TABLE t ADD COLUMN a TEXT"]) == s1  # planned, aimed elsewhere
    w.approve_rollout(s1)
    w.run()
    assert w.child_approvals() == []
    assert w.child(0)["spec"]["target"]["secretRef"] == {"name": "db-00", "key": "url"}
