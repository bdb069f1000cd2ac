"""``ptah status`` and ``ptah approve`` as a person runs them: the installed ``ptah``
command, a kubeconfig, the real local control plane, and a real operator that plans a
SQLite schema, waits for the approval and applies it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.cluster import runner_mount

ROOT = Path(__file__).resolve().parents[2]
PTAH = Path(sys.executable).parent / "ptah"


def ptah(cluster: Any, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "PTAH_APPROVER": "ci-person"}
    return subprocess.run(
        [str(PTAH), *args], input=stdin, capture_output=True, text=True, env=env, timeout=180
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def crds(cluster: Any) -> None:
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "deploy/crds"))
    cluster.wait_established(
        *(
            f"{crd}.ptah.io"
            for crd in ("ptahschemas", "ptahmigrations", "ptahplans", "ptahapprovals")
        )
    )


@pytest.fixture
def operator(cluster: Any, namespace: str, crds: None, tmp_path: Path) -> Iterator[Path]:
    health = _free_port()
    log = tmp_path / "operator.log"
    argv = [
        str(PTAH),
        "operator",
        "run",
        f"--kubeconfig={cluster.kubeconfig}",
        f"--namespace-scope={namespace}",
        f"--lock-namespace={namespace}",
        f"--health-port={health}",
        "--metrics-port=0",
        "--bind-address=127.0.0.1",
        "--poll-seconds=1",
    ]
    # The runner Pods see the test's directory (the SQLite file) at its own path.
    defaults = tmp_path / "runner-defaults.json"
    defaults.write_text(json.dumps(runner_mount(tmp_path)))
    env = {**os.environ, "PTAH_RUNNER_DEFAULTS": str(defaults)}
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=out, env=env)

    def ready() -> bool:
        assert proc.poll() is None, f"operator exited; see {log}"
        try:
            return httpx.get(f"http://127.0.0.1:{health}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        cluster.wait_for("the operator's /readyz", ready, timeout=30)
        yield log
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(40)
        except subprocess.TimeoutExpired:
            proc.kill()


def _schema(cluster: Any, namespace: str, db: Path) -> None:
    cluster.kubectl(
        "create",
        "secret",
        "generic",
        "shop-db",
        f"--from-literal=url=sqlite:///{db}",
        namespace=namespace,
    )
    body = {
        "apiVersion": "ptah.io/v1alpha1",
        "kind": "PtahSchema",
        "metadata": {"name": "shop", "namespace": namespace},
        "spec": {
            "target": {"engine": "sqlite", "secretRef": {"name": "shop-db"}},
            "source": {"inline": "CREATE TABLE customers (id INTEGER PRIMARY KEY, email TEXT);"},
            "policy": {"approval": "Always"},
        },
    }
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(body), namespace=namespace)


def _status(cluster: Any, namespace: str) -> dict[str, Any]:
    proc = cluster.kubectl("get", "ptahschema", "shop", "-o", "json", namespace=namespace)
    return dict(json.loads(proc.stdout).get("status") or {})


def test_status_and_approve_against_a_running_operator(
    cluster: Any, namespace: str, operator: Path, tmp_path: Path
) -> None:
    db = tmp_path / "shop.db"
    _schema(cluster, namespace, db)
    cluster.wait_for(
        f"a plan waiting for approval (log {operator})",
        lambda: _status(cluster, namespace).get("phase") == "WaitingForApproval",
        timeout=120,
        interval=0.5,
    )
    table = ptah(cluster, "status", "-n", namespace)
    assert table.returncode == 0, table.stderr
    (line,) = [x for x in table.stdout.splitlines() if x.startswith("schema/shop")]
    assert "WaitingForApproval" in line and "approval of plan" in line

    every = ptah(cluster, "status", "-A")
    assert every.returncode == 0 and namespace in every.stdout

    # Not a terminal and no --yes: refused, nothing created.
    refused = ptah(cluster, "approve", "schema/shop", "-n", namespace, stdin="")
    assert refused.returncode == 2 and "pass --yes" in refused.stderr
    assert "CREATE TABLE customers" in refused.stdout
    wrong = ptah(cluster, "approve", "schema/shop", "-n", namespace, "--yes", "--plan", "0000")
    assert wrong.returncode == 2 and "not the current plan" in wrong.stderr

    done = ptah(cluster, "approve", "schema/shop", "-n", namespace, "--yes", "--wait", "120")
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\nlog: {operator}"
    assert "Approved: PtahApproval" in done.stdout
    assert "  schema/shop: Ready" in done.stdout, done.stdout
    approvals = json.loads(
        cluster.kubectl("get", "ptahapprovals", "-o", "json", namespace=namespace).stdout
    )["items"]
    (approval,) = approvals
    assert approval["spec"]["approvedBy"] == "ci-person"
    assert approval["spec"]["resourceRef"] == {"kind": "PtahSchema", "name": "shop"}

    cluster.wait_for(
        f"the approved plan applied (log {operator})",
        lambda: _status(cluster, namespace).get("phase") == "Ready",
        timeout=120,
        interval=0.5,
    )
    after = ptah(cluster, "status", "-n", namespace)
    (line,) = [x for x in after.stdout.splitlines() if x.startswith("schema/shop")]
    assert "Ready" in line and "True" in line
    again = ptah(cluster, "approve", "schema/shop", "-n", namespace, "--yes")
    assert again.returncode == 2, again.stdout


def test_errors_say_what_to_do_next(cluster: Any, namespace: str, crds: None) -> None:
    missing = ptah(cluster, "approve", "schema/ghost", "-n", namespace, "--yes")
    assert missing.returncode == 2 and "ptah status -A" in missing.stderr
    empty = ptah(cluster, "status", "-n", namespace)
    assert empty.returncode == 0 and "No PtahSchema or PtahMigration" in empty.stdout
    bad = subprocess.run(
        [str(PTAH), "status", "--kubeconfig", "/nonexistent/kubeconfig"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert bad.returncode == 2 and "ptah dev up" in bad.stderr
