"""Helpers for the PtahMigration end-to-end tests: directories as ConfigMaps (with their
``ptah.sum``), the resource, its status, fresh MariaDB databases, and the history table
read straight from the database.

Named ``migflow`` rather than ``migsupport``: ``tests/migrations/migsupport.py`` exists,
and both directories sit on ``sys.path`` in one pytest session, so a second module of
that name would shadow the first depending on collection order.

The fixtures here (``mysql_database``, ``sqlite_url``, ``target``) are imported by the
test modules; ``conftest.py`` and ``e2esupport.py`` belong to the operator's e2e suite
and are reused as they are.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import e2esupport
import pytest
from e2esupport import secret, status, wait_status

from ptah.engines.connect import open_target
from ptah.engines.versioned.directory import SUM_FILE
from ptah.kube.kinds import CONFIGMAP, JOB, LEASE, MIGRATION, POD
from ptah.kube.real import RealCluster
from support.databases import database_url, fresh_database
from support.migration_dir import with_sum
from support.wait import wait_for

# ------------------------------------------------------------------ directories


def split_with_sum(files: dict[str, str], parts: int) -> list[dict[str, str]]:
    """The directory spread over ``parts`` ConfigMaps; the one ``ptah.sum`` (covering the
    merged directory) goes with the first part."""
    names = sorted(files)
    chunks: list[dict[str, str]] = [{} for _ in range(parts)]
    for i, name in enumerate(names):
        chunks[i * parts // len(names)][name] = files[name]
    chunks[0][SUM_FILE] = with_sum(files)[SUM_FILE]
    return chunks


def write_tree(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name, text in with_sum(files).items():
        (path / name).write_text(text)
    return path


def configmap(kube: RealCluster, ns: str, name: str, data: dict[str, str]) -> None:
    kube.create(CONFIGMAP, {"metadata": {"name": name, "namespace": ns}, "data": data})


def replace_configmap(kube: RealCluster, ns: str, name: str, data: dict[str, str]) -> None:
    """A whole new data map (a merge patch with removed keys set to null)."""
    old = (kube.get(CONFIGMAP, ns, name) or {}).get("data") or {}
    patch: dict[str, Any] = {k: None for k in old if k not in data}
    patch.update(data)
    kube.patch(CONFIGMAP, ns, name, {"data": patch})


# ------------------------------------------------------------------ the resource


def migration(
    kube: RealCluster,
    ns: str,
    name: str,
    secret_name: str,
    engine: str,
    *,
    configmaps: list[str] | None = None,
    volume: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    directory: dict[str, Any] = {"volume": volume} if volume else {"configMaps": configmaps}
    body = {
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "target": {"engine": engine, "secretRef": {"name": secret_name}},
            "directory": directory,
            **spec,
        },
    }
    return kube.create(MIGRATION, body)


def mstatus(kube: RealCluster, ns: str, name: str) -> dict[str, Any]:
    return status(kube, ns, name, MIGRATION)


def uid_of(kube: RealCluster, ns: str, name: str) -> str:
    return e2esupport.uid_of(kube, ns, name, MIGRATION)


def wait_mstatus(
    kube: RealCluster,
    ns: str,
    name: str,
    what: str,
    pred: Callable[[dict[str, Any]], bool],
    timeout: float = 90,
    log: Path | None = None,
) -> dict[str, Any]:
    """Poll the PtahMigration's status until ``pred``; on timeout show where it stands."""
    keys = ("phase", "waitingFor", "lastMutation", "history", "unresolvedRun", "conditions")
    return wait_status(kube, ns, name, what, pred, timeout, log, kind=MIGRATION, show=keys)


def ready_at(versions: list[str]) -> Callable[[dict[str, Any]], bool]:
    """Ready, no claim, the last History reading shows exactly ``versions`` applied, and
    nothing is pending up to the target version."""

    def pred(s: dict[str, Any]) -> bool:
        history = s.get("history") or {}
        return (
            s.get("phase") == "Ready"
            and not s.get("activeOperation")
            and history.get("applied") == versions
            and not s.get("pendingVersions")
        )

    return pred


def condition(s: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in s.get("conditions") or [] if c["type"] == kind), {})


def migrate_jobs(kube: RealCluster, ns: str, owner_uid: str) -> list[dict[str, Any]]:
    return kube.list(JOB, ns, {"ptah.io/owner-uid": owner_uid, "ptah.io/operation-type": "Migrate"})


def job_finished(job: dict[str, Any] | None) -> bool:
    """The Job has its Complete or Failed condition (a deleted Job has neither)."""
    st = (job or {}).get("status") or {}
    return any(
        cond["type"] in ("Complete", "Failed") and cond["status"] == "True"
        for cond in st.get("conditions") or []
    )


def realm_leases(kube: RealCluster, ns: str) -> list[dict[str, Any]]:
    return [
        lease
        for lease in kube.list(LEASE, ns)
        if lease["metadata"]["name"].startswith("ptah-realm-")
    ]


class LeaseWatch:
    """Samples the realm Leases' holders, so a test can show who held a database when.

    Polling cannot prove that two holders never overlapped (the database timestamps
    do that); it shows the sequence of holders, and that there was only ever one Lease
    for one physical database."""

    def __init__(self, kube: RealCluster, ns: str) -> None:
        self.kube, self.ns = kube, ns
        self.names: set[str] = set()
        self.holders: list[str] = []

    def sample(self) -> None:
        for lease in realm_leases(self.kube, self.ns):
            self.names.add(lease["metadata"]["name"])
            holder = lease["spec"].get("holderIdentity") or ""
            if holder and (not self.holders or self.holders[-1] != holder):
                self.holders.append(holder)


# ------------------------------------------------------------------ databases


def _exec(url: str, sql: str) -> None:
    with open_target(url) as target, contextlib.closing(target.connection.cursor()) as cur:
        cur.execute(sql)


def query(url: str, sql: str) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` on any engine (closing() because sqlite3 cursors are no context
    managers)."""
    with open_target(url) as target, contextlib.closing(target.connection.cursor()) as cur:
        cur.execute(sql)
        return [tuple(r) for r in cur.fetchall()]


def history(url: str) -> dict[str, dict[str, Any]]:
    """The history table's migration rows by version, read from the database itself."""
    cols = (
        "version",
        "statements_applied",
        "statements_total",
        "statement_running",
        "started_at",
        "finished_at",
        "error",
        "operation_id",
        "kind",
    )
    rows = query(url, f"SELECT {', '.join(cols)} FROM ptah_schema_history ORDER BY installed_rank")
    return {str(r[0]): dict(zip(cols, r, strict=True)) for r in rows if r[8] == "migration"}


def mysql_admin_url() -> str:
    return database_url("PTAH_TEST_MYSQL_URL", "MariaDB 10.11")


@pytest.fixture
def mysql_database() -> Iterator[str]:
    """A fresh MariaDB database per test; yields its URL."""
    with fresh_database(mysql_admin_url(), "ptah_e2e_") as url:
        yield url


@pytest.fixture(params=["sqlite", "postgres", "mysql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(engine, URL) of a fresh database on each engine."""
    engine = str(request.param)
    if engine == "sqlite":
        yield engine, f"sqlite:///{tmp_path / 'app.db'}"
    elif engine == "postgres":
        yield engine, request.getfixturevalue("pg_database")
    else:
        yield engine, request.getfixturevalue("mysql_database")


def wait_history(
    url: str, what: str, pred: Callable[[dict[str, dict[str, Any]]], bool], timeout: float = 60
) -> dict[str, dict[str, Any]]:
    holder: dict[str, Any] = {}

    def probe() -> bool:
        try:
            holder["h"] = history(url)
        except Exception:
            return False
        return pred(holder["h"])

    wait_for(what, probe, timeout=timeout, interval=0.05)
    return dict(holder["h"])


def monotonic() -> float:
    return time.monotonic()


def slow_second_file(users: str, seconds: int) -> dict[str, str]:
    """Two MariaDB migrations whose second file is three statements, the middle one a
    sleep of ``seconds``: a window to stop the runner in the middle of a file (MariaDB
    commits each DDL statement, so the file is then partial)."""
    return {
        "0001_users.sql": f"CREATE TABLE users ({users});\n",
        "0002_slow.sql": (
            "CREATE TABLE a (id INT PRIMARY KEY);\n"
            f"DO SLEEP({seconds});\n"
            "CREATE TABLE b (id INT PRIMARY KEY);\n"
        ),
    }


def runner_in_second_statement(
    kube: RealCluster,
    namespace: str,
    operator: Any,
    url: str,
    files: dict[str, str],
    timeout: float = 120,
    runner: dict[str, Any] | None = None,
) -> tuple[str, dict[str, Any]]:
    """Start the operator on a PtahMigration ``app`` of ``files`` (ConfigMap ``mig``,
    Secret ``db`` with ``url``, ``runner`` settings) and wait until its runner is in
    statement 2 of 0002. Returns the resource's uid and its one runner Pod."""
    secret(kube, namespace, "db", url)
    configmap(kube, namespace, "mig", with_sum(files))
    operator.start()
    spec = {} if runner is None else {"runner": runner}
    migration(kube, namespace, "app", "db", "mysql", configmaps=["mig"], **spec)
    wait_history(
        url,
        "statement 2 of 0002 running",
        lambda h: (h.get("2") or {}).get("statement_running") == 2,
        timeout=timeout,
    )
    uid = uid_of(kube, namespace, "app")
    (job,) = migrate_jobs(kube, namespace, uid)
    pods = kube.list(POD, namespace, {"job-name": job["metadata"]["name"]})
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    return uid, pods[0]
