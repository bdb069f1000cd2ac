"""Secrets reach the operator as metadata only, on both ports."""

from __future__ import annotations

from typing import Any

import pytest

from ptah.kube.kinds import SECRET
from ptah.kube.port import Cluster
from ptah.kube.real import RealCluster
from ptah.testing.memory import MemoryCluster


@pytest.fixture(params=["memory", "real"])
def port_and_ns(request: pytest.FixtureRequest) -> tuple[Cluster, str]:
    if request.param == "memory":
        return MemoryCluster(), "default"
    cluster: Any = request.getfixturevalue("cluster")
    namespace: str = request.getfixturevalue("namespace")
    return RealCluster.from_kubeconfig(str(cluster.kubeconfig)), namespace


def test_get_metadata_carries_no_data(port_and_ns: tuple[Cluster, str]) -> None:
    port, ns = port_and_ns
    created = port.create(
        SECRET,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "db", "namespace": ns, "labels": {"app": "shop"}},
            "data": {"url": "c2VjcmV0LXBhc3N3b3Jk"},
        },
    )
    meta = port.get_metadata(SECRET, ns, "db")
    assert meta is not None
    assert meta["metadata"]["uid"] == created["metadata"]["uid"]
    assert meta["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert meta["metadata"]["labels"] == {"app": "shop"}
    assert "data" not in meta and "c2VjcmV0" not in str(meta)
    assert port.get_metadata(SECRET, ns, "absent") is None


def test_list_metadata_selects_by_label_and_carries_no_data(
    port_and_ns: tuple[Cluster, str],
) -> None:
    """How a rollout selects its Secrets: names, labels and versions, never the data."""
    port, ns = port_and_ns
    for name, fleet in (("t1", "x"), ("t2", "x"), ("t3", "y")):
        port.create(
            SECRET,
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": name, "namespace": ns, "labels": {"fleet": fleet}},
                "data": {"url": "c2VjcmV0LXBhc3N3b3Jk"},
            },
        )
    items = port.list_metadata(SECRET, ns, {"fleet": "x"})
    assert sorted(i["metadata"]["name"] for i in items) == ["t1", "t2"]
    assert all(i["kind"] == "Secret" and i["metadata"]["uid"] for i in items)
    assert "c2VjcmV0" not in str(items) and all("data" not in i for i in items)
