"""The claim publishes the phase of the operation it claims (conditions.in_flight), so
the resource says Reading or Applying from its claim on, not from whenever a pass first
sees the Job running; and a supervising pass over the running Job then writes nothing."""

from __future__ import annotations

from typing import Any

from ptah.kube import kinds
from ptah.kube.port import Obj
from ptah.operator.mapping import Key
from ptah.testing.memory import MemoryCluster
from support.schemas import sqlite_schema


class Recording(MemoryCluster):
    """Keeps the body of every status patch of a PtahSchema."""

    def __init__(self) -> None:
        super().__init__()
        self.status_patches: list[dict[str, Any]] = []

    def patch(
        self,
        kind: kinds.Kind,
        namespace: str,
        name: str,
        patch: Obj,
        subresource: str | None = None,
    ) -> Obj:
        if kind == kinds.SCHEMA and subresource == "status":
            self.status_patches.append(patch.get("status") or {})
        return super().patch(kind, namespace, name, patch, subresource)


def test_the_claim_says_reading_and_a_pass_over_the_running_job_writes_nothing() -> None:
    from ptah.operator.controller import Controller, Settings
    from ptah.operator.main import families

    cluster = Recording()
    sqlite_schema(cluster)
    c = Controller(cluster, families(), Settings(lock_namespace="sys"))
    key = Key("PtahSchema", "ns", "s")
    again, known = c.process(key, chain=True)
    while again:
        again, known = c.process(key, chain=True, known=known)
    claim = next(p for p in cluster.status_patches if p.get("activeOperation"))
    assert claim["phase"] == "Reading"
    assert claim["activeOperation"]["jobName"] in next(
        cond["message"] for cond in claim["conditions"] if cond["type"] == "Reconciling"
    )
    live = cluster.get(kinds.SCHEMA, "ns", "s")
    assert live is not None and live["status"]["activeOperation"]["jobUid"]
    assert live["status"]["phase"] == "Reading"
    # The Job runs (nothing here finishes it): the supervising pass has nothing to say.
    version = live["metadata"]["resourceVersion"]
    c.process(key)
    after = cluster.get(kinds.SCHEMA, "ns", "s")
    assert after is not None and after["metadata"]["resourceVersion"] == version
