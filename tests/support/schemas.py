"""One PtahSchema on SQLite with its Secret, in an in-memory cluster: the smallest world
a Controller can claim, dispatch and account in."""

from __future__ import annotations

from ptah.kube import kinds
from ptah.testing.memory import MemoryCluster


def sqlite_schema(cluster: MemoryCluster, namespace: str = "ns", name: str = "s") -> None:
    cluster.create(
        kinds.SECRET,
        {"metadata": {"name": "db", "namespace": namespace}, "stringData": {"url": "sqlite:///x"}},
    )
    cluster.create(
        kinds.SCHEMA,
        {
            "apiVersion": kinds.SCHEMA.api_version,
            "kind": "PtahSchema",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "target": {"engine": "sqlite", "secretRef": {"name": "db"}},
                "source": {"inline": "CREATE TABLE t (id INTEGER PRIMARY KEY);"},
            },
        },
    )
