"""Operation slots on the real control plane and node: with --max-operations=1, of two
PtahSchemas created together one claims and the other waits (phase Queued, said by an
Event), and is woken when the slot frees: both end Ready long before the periodic
resync (300 s) could have picked the waiting one up."""

from __future__ import annotations

from pathlib import Path

import pytest
from e2esupport import Operator, events, ready, schema, secret, wait_status

from ptah.kube.real import RealCluster

pytestmark = pytest.mark.integration

SQL = "CREATE TABLE t (id INTEGER PRIMARY KEY);"


def test_a_claim_past_the_limit_waits_queued_and_runs_when_the_slot_frees(
    kube: RealCluster, namespace: str, operator: Operator, tmp_path: Path
) -> None:
    operator.start(max_operations="1")
    for name in ("a", "b"):
        secret(kube, namespace, f"db-{name}", f"sqlite:///{tmp_path / name}.db")
    for name in ("a", "b"):
        schema(kube, namespace, name, SQL, f"db-{name}", "sqlite")
    for name in ("a", "b"):
        wait_status(kube, namespace, name, "Ready", ready, timeout=150, log=operator.log_path)
    said = [
        name
        for name in ("a", "b")
        for e in events(kube, namespace, name)
        if "Queued" in f"{e.get('reason')} {e.get('message')}"
    ]
    assert said, "neither resource was ever Queued behind the one slot"
    assert (tmp_path / "a.db").exists() and (tmp_path / "b.db").exists()
