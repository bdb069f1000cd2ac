"""The one interface the lifecycle and the operator use to reach the cluster.

Objects travel as plain JSON-shaped dicts (what the API server speaks), so the
real client and the in-memory API agree byte for byte on what was written.
Every read here is uncached: authorization and supervision must see the
cluster as it is, not as a watch cache last saw it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, Protocol

from ptah.kube.kinds import Kind

Obj = dict[str, Any]
Subresource = Literal["status"] | None
ObjList = list[Obj]  # (inside the Protocol, ``list`` names its method)


class Cluster(Protocol):
    def get(self, kind: Kind, namespace: str, name: str) -> Obj | None:
        """The object, read uncached, or None when it does not exist."""

    def get_metadata(self, kind: Kind, namespace: str, name: str) -> Obj | None:
        """Only the object's metadata (uncached), or None: how Secrets are read, so
        credentials never reach the operator."""

    def list(self, kind: Kind, namespace: str, labels: dict[str, str] | None = None) -> list[Obj]:
        """Objects of ``kind`` in ``namespace`` matching every label given."""

    def list_metadata(
        self, kind: Kind, namespace: str, labels: dict[str, str] | None = None
    ) -> ObjList:
        """Only the metadata of the matching objects: how a rollout selects its Secrets,
        so their contents never reach the operator."""

    def create(self, kind: Kind, obj: Obj) -> Obj:
        """Create; raises AlreadyExists, Invalid, or an uncertain Unavailable."""

    def patch(
        self, kind: Kind, namespace: str, name: str, patch: Obj, subresource: Subresource = None
    ) -> Obj:
        """JSON merge patch. A ``metadata.resourceVersion`` in ``patch`` is a
        precondition: the write fails with Conflict when the object moved."""

    def delete(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        propagation: Literal["Background", "Foreground", "Orphan"] = "Background",
    ) -> None:
        """Delete, optionally only if the object still has ``uid``. Missing is fine."""

    def read_log(self, namespace: str, pod: str, container: str) -> str:
        """The container's log; raises NotFound when the Pod or its log is gone."""

    def now(self) -> datetime:
        """This process's clock (the simulation drives it)."""
