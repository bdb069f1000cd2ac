"""End-to-end fixtures: the real local control plane, real databases, and the operator
running as its own process (``ptah operator run``), which a test can SIGKILL and start
again.

* ``cluster``/``namespace`` come from ``tests/conftest.py`` (``support.cluster``), one
  definition for the whole session.
* ``crds`` (session): ``deploy/crds`` applied and Established.
* ``operator`` (function): an ``Operator`` bound to the test's namespace, which it also
  uses as its lock namespace (leader Lease and per-database Leases), so tests never
  coordinate with each other. Logs go to ``<tmp>/operator.log`` (JSON lines, all runs
  appended), and the path is in every failure message.
* ``pg_database``: a fresh PostgreSQL database per test, from the superuser URL
  ``PTAH_TEST_PG_URL`` (env or ``${PTAH_CACHE}/db/env``; ``bash hack/databases.sh``).

Under ``CI`` nothing is skipped: a missing component fails naming it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from e2esupport import ROOT, Operator, db_env, missing, with_database

from ptah.kube.errors import ApiError
from ptah.kube.kinds import MIGRATION, SCHEMA
from ptah.kube.real import RealCluster


@pytest.fixture(scope="session")
def crds(cluster: Any) -> None:
    cluster.kubectl("apply", "-f", str(ROOT / "deploy" / "crds"))
    for crd in ("ptahschemas", "ptahmigrations", "ptahplans", "ptahapprovals", "ptahrollouts"):
        # Right after the create, a CRD may have no status yet, and `kubectl wait` then
        # fails at once ("accessor error: <nil>") instead of waiting: ask again.
        deadline = time.monotonic() + 60
        while True:
            args = ("wait", "--for=condition=Established", f"crd/{crd}.ptah.io", "--timeout=60s")
            if cluster.kubectl(*args, check=False).returncode == 0:
                break
            if time.monotonic() > deadline:
                cluster.kubectl(*args)
            time.sleep(0.5)


@pytest.fixture
def kube(cluster: Any, crds: None) -> Iterator[RealCluster]:
    """The cluster port, as the operator uses it (admin kubeconfig)."""
    with RealCluster.from_kubeconfig(cluster.kubeconfig) as c:
        yield c


@pytest.fixture
def operator(cluster: Any, crds: None, namespace: str, tmp_path: Path) -> Iterator[Operator]:
    op = Operator(cluster.kubeconfig, namespace, tmp_path / "operator.log")
    try:
        yield op
    finally:
        code = op.stop()
        _release_finalizers(cluster, namespace)
        # A graceful stop must be graceful: exit 0 after SIGTERM.
        assert code in (None, 0, -signal.SIGKILL), f"operator exit {code}; see {op.log_path}"


def _release_finalizers(cluster: Any, namespace: str) -> None:
    """With the operator gone, nothing would remove its finalizers and the namespace
    would stay Terminating; a test's leftovers are released so it can be deleted."""
    with RealCluster.from_kubeconfig(cluster.kubeconfig) as kube:
        for kind in (SCHEMA, MIGRATION):
            for obj in kube.list(kind, namespace):
                if obj["metadata"].get("finalizers"):
                    with contextlib.suppress(ApiError):
                        kube.patch(
                            kind,
                            namespace,
                            obj["metadata"]["name"],
                            {"metadata": {"finalizers": None}},
                        )


@pytest.fixture(scope="session")
def pg_admin_url() -> str:
    url = os.environ.get("PTAH_TEST_PG_URL") or db_env().get("PTAH_TEST_PG_URL")
    if not url:
        missing("PostgreSQL 15 is missing (PTAH_TEST_PG_URL unset); run `bash hack/databases.sh`")
    assert url is not None
    try:
        psycopg.connect(url, connect_timeout=5).close()
    except psycopg.Error as exc:
        missing(f"PostgreSQL 15 unreachable ({type(exc).__name__}); run `bash hack/databases.sh`")
    return url


@pytest.fixture
def pg_database(pg_admin_url: str) -> Iterator[str]:
    """A fresh database; yields its URL (same role, password and host)."""
    name = f"ptah_e2e_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield with_database(pg_admin_url, name)
    finally:
        with psycopg.connect(pg_admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
