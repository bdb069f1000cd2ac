"""Label scoping on the real control plane: an operator started with --label-selector
reconciles only the PtahSchemas carrying those labels."""

from __future__ import annotations

from pathlib import Path

import pytest
from e2esupport import (
    Operator,
    ready,
    resource_passes,
    schema,
    secret,
    status,
    wait_passes,
    wait_status,
)

from ptah.kube.kinds import SCHEMA
from ptah.kube.real import RealCluster

pytestmark = pytest.mark.integration

SQL = "CREATE TABLE t (id INTEGER PRIMARY KEY);"


def test_only_labelled_schemas_are_reconciled(
    kube: RealCluster, namespace: str, operator: Operator, tmp_path: Path
) -> None:
    secret(kube, namespace, "db-a", f"sqlite:///{tmp_path / 'a.db'}")
    secret(kube, namespace, "db-b", f"sqlite:///{tmp_path / 'b.db'}")
    operator.start(label_selector="team=a")
    schema(kube, namespace, "ours", SQL, "db-a", "sqlite")
    kube.patch(SCHEMA, namespace, "ours", {"metadata": {"labels": {"team": "a"}}})
    schema(kube, namespace, "theirs", SQL, "db-b", "sqlite")
    wait_status(kube, namespace, "ours", "Ready", ready, log=operator.log_path)
    # The other one is never touched: the operator went on passing over the labelled
    # one (each pass after the other was created) and never made one over it.
    wait_passes(kube, operator, SCHEMA, namespace, "ours")
    assert resource_passes(operator, SCHEMA.kind, namespace, "theirs") == 0
    assert status(kube, namespace, "theirs") == {}
    assert not (tmp_path / "b.db").exists()
    # Labelled later, it is picked up.
    kube.patch(SCHEMA, namespace, "theirs", {"metadata": {"labels": {"team": "a"}}})
    wait_status(kube, namespace, "theirs", "Ready", ready, log=operator.log_path)
