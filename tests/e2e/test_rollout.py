"""PtahRollout on the real control plane, with the operator as its own process and real
SQLite and PostgreSQL targets: one template fanned out as child resources that each
keep the whole lifecycle, canary then waves, one decision per distinct plan, a stop
that names the failing target with nothing dispatched past it, an operator SIGKILLed
mid-wave that resumes, and a target added mid-rollout.

Most targets are SQLite (a file per target: cheap); the fleet test adds five
PostgreSQL databases so both engines share one rollout and one decision.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import e2esupport
import psycopg
import pytest
from e2esupport import (
    PTAH,
    Operator,
    approve,
    events,
    pass_writes,
    sqlite_columns,
    wait_for,
    with_database,
)
from migflow import with_sum, write_tree

from ptah.engines.versioned import sumfile
from ptah.engines.versioned.directory import read_directory
from ptah.kube.kinds import APPROVAL, CONFIGMAP, JOB, MIGRATION, ROLLOUT, SCHEMA, SECRET, Kind
from ptah.kube.real import RealCluster

pytestmark = pytest.mark.integration

FILES = {
    "0001_users.sql": "CREATE TABLE users (id INTEGER PRIMARY KEY, name VARCHAR(100) NOT NULL);\n",
    "0002_email.sql": "ALTER TABLE users ADD COLUMN email VARCHAR(200);\n",
}
V1 = "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL);"
V2 = "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT);"


# ------------------------------------------------------------------ helpers


def target_secret(
    kube: RealCluster, ns: str, name: str, url: str, engine: str = "sqlite", fleet: str = "e2e"
) -> None:
    """A target's Secret, its URL as the runner Pod reaches the database."""
    labels = {"fleet": fleet}
    if engine != "sqlite":
        labels["ptah.io/engine"] = engine
    kube.create(
        SECRET,
        {
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "stringData": {"url": e2esupport.pod_url(url)},
        },
    )


def open_to_runner(db: Path) -> None:
    """A SQLite file the test made (as root) stays writable by the runner (uid 10001)."""
    db.chmod(0o666)


def rollout(
    kube: RealCluster, ns: str, name: str, template: dict[str, Any], **strategy: Any
) -> None:
    kube.create(
        ROLLOUT,
        {
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "template": {"engine": "sqlite", **template},
                "targets": {"selector": {"matchLabels": {"fleet": "e2e"}}},
                "strategy": strategy,
            },
        },
    )


def rstatus(kube: RealCluster, ns: str, name: str) -> dict[str, Any]:
    obj = kube.get(ROLLOUT, ns, name)
    assert obj is not None
    return dict(obj.get("status") or {})


def wait_rollout(
    kube: RealCluster, ns: str, name: str, what: str, pred: Any, op: Operator, timeout: float = 480
) -> dict[str, Any]:
    holder: dict[str, Any] = {}

    def probe() -> bool:
        holder["s"] = rstatus(kube, ns, name)
        return bool(pred(holder["s"]))

    try:
        wait_for(f"rollout {name}: {what}", probe, timeout=timeout, interval=0.5)
    except AssertionError as exc:
        s = holder.get("s") or {}
        brief = {k: s.get(k) for k in ("phase", "currentWave", "counts", "stopped", "decisions")}
        raise AssertionError(f"{exc}\nstatus: {brief}\nlog: {op.log_path}") from None
    return holder["s"]


def children(kube: RealCluster, ns: str, kind: Kind) -> dict[str, dict[str, Any]]:
    return {c["metadata"]["name"]: c for c in kube.list(kind, ns, {"ptah.io/rollout": "fleet"})}


def waves(kids: dict[str, dict[str, Any]]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for c in kids.values():
        wave = int(c["metadata"]["annotations"]["ptah.io/rollout-wave"])
        out.setdefault(wave, []).append(c["metadata"]["annotations"]["ptah.io/rollout-target"])
    return {w: sorted(v) for w, v in sorted(out.items())}


def approve_rollout(kube: RealCluster, ns: str, name: str, statements: str, tag: str) -> None:
    approve(kube, ns, f"{name}-{tag}", name, statements, kind=ROLLOUT)


def directory_hash(files: dict[str, str], where: Path) -> str:
    """What `ptah migrate hash` prints for the directory (without its ``h1:``)."""
    for n, t in files.items():
        (where / n).write_text(t)
    return sumfile.compute(read_directory([where]).files).header


def jobs_by_owner(kube: RealCluster, ns: str, op_type: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for job in kube.list(JOB, ns, {"ptah.io/operation-type": op_type}):
        owner = job["metadata"]["ownerReferences"][0]["name"]
        out[owner] = out.get(owner, 0) + 1
    return out


@pytest.fixture
def pg_databases(pg_admin_url: str) -> Iterator[list[str]]:
    names = [f"ptah_ro_{uuid.uuid4().hex[:8]}" for _ in range(5)]
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        for n in names:
            conn.execute(f'CREATE DATABASE "{n}"')
    try:
        yield [with_database(pg_admin_url, n) for n in names]
    finally:
        with psycopg.connect(pg_admin_url, autocommit=True) as conn:
            for n in names:
                conn.execute(f'DROP DATABASE IF EXISTS "{n}" WITH (FORCE)')


def migration_template(configmap: str, approval: str = "Never") -> dict[str, Any]:
    return {
        "migration": {"directory": {"configMaps": [configmap]}, "policy": {"approval": approval}}
    }


# ------------------------------------------------------------------ tests


def test_fleet_of_20_sqlite_and_5_postgres_canary_then_waves_with_one_approval(
    kube: RealCluster,
    namespace: str,
    operator: Operator,
    tmp_path: Path,
    pg_databases: list[str],
    cluster: Any,
) -> None:
    kube.create(CONFIGMAP, {"metadata": {"name": "mig", "namespace": namespace},
                            "data": with_sum(FILES)})  # fmt: skip
    dbs = [tmp_path / f"t{i:02d}.db" for i in range(20)]
    for i, db in enumerate(dbs):
        target_secret(kube, namespace, f"t{i:02d}", f"sqlite:///{db}")
    for i, url in enumerate(pg_databases):
        target_secret(kube, namespace, f"pg{i}", url, engine="postgres")
    operator.start()
    rollout(kube, namespace, "fleet", migration_template("mig", "Always"), canary=1, maxParallel=8)

    # The canary plans and waits for a person; nothing else has started.
    s = wait_rollout(
        kube, namespace, "fleet", "the canary's decision", lambda s: s.get("decisions"), operator
    )
    [decision] = s["decisions"]
    assert decision["targets"] == 1 and s["counts"]["total"] == 25
    assert len(children(kube, namespace, MIGRATION)) == 1
    assert jobs_by_owner(kube, namespace, "Migrate") == {}

    # One decision, taken with the CLI, covers the whole fleet (both engines plan the
    # same two versions).
    proc = subprocess.run(
        [str(PTAH), "approve", "rollout/fleet", "-n", namespace, "--yes",
         f"--kubeconfig={cluster.kubeconfig}"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 target: these 2 statement(s)" in proc.stdout, proc.stdout
    assert "-- migration 1;" in proc.stdout and "-- migration 2;" in proc.stdout, proc.stdout

    s = wait_rollout(
        kube, namespace, "fleet", "all Ready", lambda s: s.get("phase") == "Ready", operator, 600
    )
    assert s["counts"]["ready"] == 25 and s.get("stopped") is None
    kids = children(kube, namespace, MIGRATION)
    layout = waves(kids)
    secrets = kube.list_metadata(SECRET, namespace, {"fleet": "e2e"})
    first = min(secrets, key=lambda m: (m["metadata"]["creationTimestamp"], m["metadata"]["name"]))
    assert layout[0] == [first["metadata"]["name"]], layout  # the first Secret is the canary
    assert [len(v) for v in layout.values()] == [1, 8, 8, 8], layout
    # Canary first: no other child existed before the canary's Migrate had succeeded.
    canary = next(
        c for c in kids.values() if c["metadata"]["annotations"]["ptah.io/rollout-wave"] == "0"
    )
    done_at = canary["status"]["lastMutation"]["at"]
    others = [c for c in kids.values() if c is not canary]
    assert all(c["metadata"]["creationTimestamp"] >= done_at for c in others)
    # One Migrate per target, each consuming its own approval created from the one decision.
    assert set(jobs_by_owner(kube, namespace, "Migrate").values()) == {1}
    approvals = kube.list(APPROVAL, namespace)
    rollout_level = [a for a in approvals if a["spec"]["resourceRef"]["kind"] == "PtahRollout"]
    per_child = [a for a in approvals if a["spec"]["resourceRef"]["kind"] == "PtahMigration"]
    assert len(rollout_level) == 1 and len(per_child) == 25
    for a in per_child:
        child = kids[a["spec"]["resourceRef"]["name"]]
        assert a["status"]["consumedByOperation"] == child["status"]["lastMutation"]["operationId"]
        assert a["spec"]["planDigest"] == child["status"]["lastMutation"]["planDigest"]
    for db in dbs:
        assert sqlite_columns(db, "users") == ["id", "name", "email"]
    for url in pg_databases:
        with psycopg.connect(url) as conn:
            cols = conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'users'"
                " ORDER BY ordinal_position"
            ).fetchall()
        assert [c[0] for c in cols] == ["id", "name", "email"]
    # Status for people: printer columns, Events per wave, metrics per rollout.
    out = cluster.kubectl("get", "prollout", "fleet", namespace=namespace).stdout
    assert "Ready" in out and "25" in out, out
    started = [
        e["message"] for e in events(kube, namespace, "fleet") if e["reason"] == "WaveStarted"
    ]
    assert len(started) == 4 and started[0].startswith("wave 0 (canary)"), started
    text = operator.metrics()
    assert (
        f'ptah_rollout_targets{{namespace="{namespace}",phase="ready",rollout="fleet"}} 25.0'
        in text
    )
    # The GitOps gate: the directory's own hash, and `ptah wait` agrees.
    (tmp_path / "dir").mkdir()
    digest = directory_hash(FILES, tmp_path / "dir")
    assert s["appliedSource"] == digest
    proc = subprocess.run(
        [str(PTAH), "wait", "rollout/fleet", "-n", namespace, f"--source-digest=h1:{digest}",
         "--timeout=30", f"--kubeconfig={cluster.kubeconfig}"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_target_with_another_starting_schema_waits_for_its_own_decision(
    kube: RealCluster, namespace: str, operator: Operator, tmp_path: Path
) -> None:
    dbs = [tmp_path / f"s{i}.db" for i in range(6)]
    for i, db in enumerate(dbs):
        with sqlite3.connect(db) as conn:
            if i != 3:  # s3 starts empty: its plan creates the table
                conn.execute(V1)
        open_to_runner(db)
        target_secret(kube, namespace, f"s{i}", f"sqlite:///{db}")
    operator.start()
    template = {"schema": {"source": {"inline": V2}, "policy": {"approval": "Always"}}}
    rollout(kube, namespace, "fleet", template, canary=1, maxParallel=2)
    s = wait_rollout(
        kube, namespace, "fleet", "the canary's decision", lambda s: s.get("decisions"), operator
    )
    common = s["decisions"][0]["statementsDigest"]
    approve_rollout(kube, namespace, "fleet", common, "add-email")
    s = wait_rollout(
        kube,
        namespace,
        "fleet",
        "five Ready, one waiting",
        lambda s: s["counts"]["ready"] == 5 and s["counts"]["waitingForApproval"] == 1,
        operator,
    )
    [odd] = s["decisions"]
    assert odd["statementsDigest"] != common and odd["example"] == "fleet-s3"
    assert s["phase"] == "WaitingForApproval"
    rows = {t["name"]: t for t in s["targets"]}
    assert rows["s3"]["phase"] == "WaitingForApproval" and rows["s3"]["wave"] == 2
    assert rows["s5"]["wave"] == 3 and rows["s5"]["phase"] == "Ready", "the others went on"
    assert sqlite_columns(dbs[3], "users") == []
    assert all(sqlite_columns(dbs[i], "users") == ["id", "name", "email"] for i in (0, 1, 2, 4, 5))
    approve_rollout(kube, namespace, "fleet", odd["statementsDigest"], "s3")
    wait_rollout(
        kube, namespace, "fleet", "all Ready", lambda s: s.get("phase") == "Ready", operator
    )
    assert sqlite_columns(dbs[3], "users") == ["id", "name", "email"]


def test_a_failed_canary_stops_the_rollout_with_nothing_dispatched_past_it(
    kube: RealCluster, namespace: str, operator: Operator, tmp_path: Path
) -> None:
    kube.create(CONFIGMAP, {"metadata": {"name": "mig", "namespace": namespace},
                            "data": with_sum(FILES)})  # fmt: skip
    dbs = [tmp_path / f"f{i}.db" for i in range(6)]
    # The injected failure: the canary's history says 0001 is applied but its table was
    # dropped by hand, so 0002 (ALTER TABLE users) fails on it, and only on it.
    tree = write_tree(tmp_path / "dir", FILES)
    proc = subprocess.run(
        [str(PTAH), "migrate", "apply", f"--url=sqlite:///{dbs[0]}", f"--dir={tree}", "--to=0001"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with sqlite3.connect(dbs[0]) as conn:
        conn.execute("DROP TABLE users")
    open_to_runner(dbs[0])
    for i, db in enumerate(dbs):
        target_secret(kube, namespace, f"f{i}", f"sqlite:///{db}")
    operator.start()
    rollout(kube, namespace, "fleet", migration_template("mig"), canary=1, maxParallel=5)
    s = wait_rollout(
        kube, namespace, "fleet", "stopped", lambda s: s.get("stopped") is not None, operator
    )
    assert s["stopped"]["target"] == "f0" and s["stopped"]["child"] == "fleet-f0"
    assert s["stopped"]["reason"] in ("MigrateFailed", "FailedPlan"), s["stopped"]
    assert "f0" in s["stopped"]["message"], s["stopped"]
    # Barrier: the operator has looked at the rollout after the stop (its Event), so
    # anything it was going to start would exist by now.
    wait_for(
        "the RolloutStopped Event",
        lambda: [e for e in events(kube, namespace, "fleet") if e["reason"] == "RolloutStopped"],
    )
    later = rstatus(kube, namespace, "fleet")
    assert later["phase"] == "Stopped" and later["counts"]["pending"] == 5
    assert list(children(kube, namespace, MIGRATION)) == ["fleet-f0"]
    owners = {j["metadata"]["ownerReferences"][0]["name"] for j in kube.list(JOB, namespace)}
    assert owners == {"fleet-f0"}
    assert not any(db.exists() for db in dbs[1:]), "no runner ever opened another target"


def test_operator_sigkill_mid_wave_resumes_and_a_target_added_mid_rollout_joins(
    kube: RealCluster, namespace: str, operator: Operator, tmp_path: Path
) -> None:
    kube.create(CONFIGMAP, {"metadata": {"name": "mig", "namespace": namespace},
                            "data": with_sum(FILES)})  # fmt: skip
    dbs = [tmp_path / f"k{i}.db" for i in range(7)]
    for i, db in enumerate(dbs):
        target_secret(kube, namespace, f"k{i}", f"sqlite:///{db}")
    operator.start()
    rollout(kube, namespace, "fleet", migration_template("mig"), canary=1, maxParallel=3)

    def migrating_in_wave_1() -> bool:
        # The kill lands once a wave-1 Migrate Job exists, so the restarted operator
        # adopts it (or finds it finished). A kill between dispatchStarted and the
        # create is another case, with its own test (test_migration_crash's
        # killed_between_marker_and_create): no Job is ever seen, and the proof of a
        # migration that never ran is left to a person, so no rollout could finish.
        wave_1 = {
            name
            for name, c in children(kube, namespace, MIGRATION).items()
            if c["metadata"]["annotations"]["ptah.io/rollout-wave"] == "1"
        }
        return any(owner in wave_1 for owner in jobs_by_owner(kube, namespace, "Migrate"))

    def marker_without_job() -> bool:
        # Another wave-1 child may be inside its own marker>create window while one Job
        # exists (maxParallel 3): CI's rehearsal of 0aa1355 killed k2 there (JobMissing,
        # the rollout stopped on an uncertain outcome).
        for c in children(kube, namespace, MIGRATION).values():
            claim = (c.get("status") or {}).get("activeOperation") or {}
            if claim.get("dispatchStarted") and kube.get(JOB, namespace, claim["jobName"]) is None:
                return True
        return False

    def paused_outside_the_window() -> bool:
        # Paused first (SIGSTOP), so nothing moves between the check and the kill; the
        # requests already sent land meanwhile.
        assert operator.proc is not None
        operator.proc.send_signal(signal.SIGSTOP)
        outside = False
        try:
            time.sleep(0.5)
            outside = migrating_in_wave_1() and not marker_without_job()
        finally:
            if not outside:
                operator.proc.send_signal(signal.SIGCONT)
        return outside

    wait_for("a wave-1 Migrate Job created", paused_outside_the_window, timeout=180, interval=0.1)
    operator.stop(signal.SIGKILL)
    added = tmp_path / "k9.db"
    target_secret(kube, namespace, "k9", f"sqlite:///{added}")  # while the operator is down
    operator.start()
    s = wait_rollout(
        kube, namespace, "fleet", "all Ready", lambda s: s.get("phase") == "Ready", operator, 480
    )
    assert s["counts"]["total"] == 8 and s["counts"]["ready"] == 8
    layout = waves(children(kube, namespace, MIGRATION))
    assert [len(v) for v in layout.values()] == [1, 3, 3, 1], layout
    assert layout[3] == ["k9"], "the added Secret came last, in the next wave"
    # Nothing lost or repeated: one Migrate per target, the files applied once each.
    assert jobs_by_owner(kube, namespace, "Migrate") == {f"fleet-k{i}": 1 for i in [*range(7), 9]}
    for db in [*dbs, added]:
        assert sqlite_columns(db, "users") == ["id", "name", "email"]
    assert operator.runs == 2
    # Idle after convergence: the rollout and its children are not written again, and
    # the passes send no write at all (`pass_writes`: a write that changes nothing keeps
    # the resourceVersion).
    writes = pass_writes(operator)
    before = {
        c["metadata"]["name"]: c["metadata"]["resourceVersion"]
        for kind in (ROLLOUT, MIGRATION, SCHEMA)
        for c in kube.list(kind, namespace)
    }
    passes = _passes(operator)
    for i in range(2):  # a Secret event wakes every rollout with a selector
        target_secret(kube, namespace, f"other-{i}", "sqlite:///nowhere", fleet="another")
        wait_for("a rollout pass", lambda i=i: _passes(operator) >= passes + i + 1, timeout=60)
    after = {
        c["metadata"]["name"]: c["metadata"]["resourceVersion"]
        for kind in (ROLLOUT, MIGRATION, SCHEMA)
        for c in kube.list(kind, namespace)
    }
    assert after == before
    assert pass_writes(operator) == writes


def _passes(operator: Operator) -> float:
    total = 0.0
    for line in operator.metrics().splitlines():
        if line.startswith('ptah_reconcile_total{family="rollout"'):
            total += float(line.rsplit(" ", 1)[1])
    return total
