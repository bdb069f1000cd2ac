"""End-to-end fixtures: the real local control plane, real databases, and the operator
running as its own process (``ptah operator run``), which a test can SIGKILL and start
again.

* ``cluster`` is the real node (``real_cluster`` of ``support.cluster``: kubelet on
  containerd, the image built from the Dockerfile), so every runner Job runs in a real
  container. Runner Pods reach the databases at the node's bridge address (``secret`` rewrites
  the URL) and see the test data root (``tmp_path`` lives there) as a hostPath volume
  at the same path. ``namespace`` comes from ``tests/conftest.py``.
* ``crds``: ``deploy/crds`` applied and Established (once per cluster).
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
import json
import re
import shutil
import signal
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import e2esupport
import pytest
from e2esupport import ROOT, Operator

from ptah.kube.errors import ApiError
from ptah.kube.kinds import MIGRATION, SCHEMA
from ptah.kube.real import RealCluster
from support.cluster import runner_mount
from support.databases import database_url, fresh_database


@pytest.fixture(scope="session")
def data_root() -> Iterator[Path]:
    """Where the tier's files live: under /tmp and open to the runner's uid (10001), so
    a runner container writes a SQLite database the test then reads on the host."""
    root = Path(tempfile.mkdtemp(prefix="ptah-e2e-", dir="/tmp"))
    root.chmod(0o777)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def tmp_path(data_root: Path, request: pytest.FixtureRequest) -> Path:
    """A fresh directory per test under ``data_root`` (pytest's own is root-only)."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name)[:50]
    path = data_root / f"{name}-{uuid.uuid4().hex[:6]}"
    path.mkdir()
    path.chmod(0o777)
    return path


@pytest.fixture
def cluster(request: pytest.FixtureRequest, data_root: Path) -> Any:
    """The test's cluster: the real node (one per session), with the tier's runner
    defaults (the data root mounted) and Pod-side database URLs; a module that sets
    ``E2E_NODE = "agent"`` (test_node_partition: the agent as the node's one link to
    the API) gets the process agent's cluster instead."""
    if getattr(request.module, "E2E_NODE", "real") == "agent":
        e2esupport.pod_url = e2esupport._same
        e2esupport.runner_defaults = None
        return request.getfixturevalue("agent_cluster")
    c = request.getfixturevalue("real_cluster")
    e2esupport.pod_url = c.pod_url
    defaults = data_root / "runner-defaults.json"
    defaults.write_text(json.dumps(runner_mount(data_root)))
    e2esupport.runner_defaults = defaults
    return c


_CRDS_APPLIED: set[Path] = set()


@pytest.fixture
def crds(cluster: Any) -> None:
    """deploy/crds applied and Established, once per cluster."""
    if cluster.state_dir in _CRDS_APPLIED:
        return
    cluster.kubectl("apply", "-f", str(ROOT / "deploy" / "crds"))
    crds = ("ptahschemas", "ptahmigrations", "ptahplans", "ptahapprovals", "ptahrollouts")
    cluster.wait_established(*(f"{crd}.ptah.io" for crd in crds))
    _CRDS_APPLIED.add(cluster.state_dir)


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
    return database_url("PTAH_TEST_PG_URL", "PostgreSQL 15")


@pytest.fixture
def pg_database(pg_admin_url: str) -> Iterator[str]:
    """A fresh database; yields its URL (same role, password and host)."""
    with fresh_database(pg_admin_url, "ptah_e2e_") as url:
        yield url
