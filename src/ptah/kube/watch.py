"""Watch one kind over a real apiserver: list, then watch from the list's
resourceVersion, with bookmarks; relist when the server says 410 Gone.

The operator uses watches only to learn *that* something changed (which key to
reconcile); every decision reads fresh through the ``Cluster`` port. So a watch
never has to be exact: a relist re-delivers every object as ``SYNC`` and the
periodic resync covers deletions missed during a gap. This module is not part of
the ``Cluster`` Protocol the lifecycle uses; the in-memory port has no watches.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ptah.kube import errors
from ptah.kube.kinds import Kind
from ptah.kube.real import RealCluster

# Ask for metadata only: enough to map an event to a key, and a watch on Secrets
# then never carries their data into this process.
METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
METADATA_ONLY_WATCH = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"


@dataclass(frozen=True)
class WatchEvent:
    """``type`` is ADDED, MODIFIED, DELETED, or SYNC (delivered by a (re)list)."""

    type: str
    kind: Kind
    obj: dict[str, Any]


Handler = Callable[[WatchEvent], None]


class Gone(Exception):
    """The resourceVersion we resume from is too old: relist."""


class Watcher:
    """One kind, all namespaces (or one), delivering events to ``handler`` from a thread.

    ``synced`` is set after the first list was delivered (readiness). Transport
    errors back off and resume from the last resourceVersion seen (bookmarks keep
    it fresh), so a quiet kind does not force a relist after a reconnect.
    """

    def __init__(
        self,
        cluster: RealCluster,
        kind: Kind,
        handler: Handler,
        *,
        namespace: str = "",
        metadata_only: bool = False,
        label_selector: str = "",
        timeout_seconds: int = 60,
        stop: threading.Event | None = None,
        on_error: Callable[[Kind, Exception], None] | None = None,
    ) -> None:
        self.cluster = cluster
        self.kind = kind
        self.handler = handler
        self.namespace = namespace
        self.metadata_only = metadata_only
        self.label_selector = label_selector
        self.timeout_seconds = timeout_seconds
        self.stop = stop or threading.Event()
        self.on_error = on_error
        self.synced = threading.Event()
        self.resource_version: str | None = None
        self.relists = 0
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self.run, name=f"watch-{self.kind.plural}", daemon=True
        )
        self._thread.start()

    def run(self) -> None:
        backoff = 0.5
        while not self.stop.is_set():
            try:
                if self.resource_version is None:
                    self._list()
                self._watch()
                backoff = 0.5
            except Gone:
                self.resource_version = None
            except errors.ApiError as exc:
                if exc.status == 410:  # refused before streaming: also too old
                    self.resource_version = None
                    continue
                if self._pause(exc, backoff):
                    return
                backoff = min(backoff * 2, 10.0)
            except ValueError as exc:  # a malformed line or body
                if self._pause(exc, backoff):
                    return
                backoff = min(backoff * 2, 10.0)

    def _pause(self, exc: Exception, backoff: float) -> bool:
        """Report ``exc`` and wait; True when asked to stop meanwhile."""
        if self.on_error is not None:
            self.on_error(self.kind, exc)
        return self.stop.wait(backoff)

    def _list(self) -> None:
        params: dict[str, str | int] = {"limit": 500}
        if self.label_selector:
            params["labelSelector"] = self.label_selector
        items: list[dict[str, Any]] = []
        while True:
            accept = METADATA_ONLY if self.metadata_only else None
            with self.cluster.stream(
                self.kind, self.namespace, params, read_timeout=60.0, accept=accept
            ) as resp:
                resp.read()
                body = resp.json()
            items.extend(body.get("items") or [])
            meta = body.get("metadata") or {}
            if not meta.get("continue"):
                break
            params["continue"] = meta["continue"]
        self.relists += 1
        self.resource_version = str(meta.get("resourceVersion") or "") or None
        for item in items:
            self._deliver("SYNC", item)
        self.synced.set()

    def _watch(self) -> None:
        params: dict[str, str | int] = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": self.timeout_seconds,
        }
        if self.resource_version:
            params["resourceVersion"] = self.resource_version
        if self.label_selector:
            # An object whose labels stop matching arrives as DELETED: it leaves the index.
            params["labelSelector"] = self.label_selector
        accept = METADATA_ONLY_WATCH if self.metadata_only else None
        with self.cluster.stream(
            self.kind,
            self.namespace,
            params,
            read_timeout=self.timeout_seconds + 30.0,
            accept=accept,
        ) as resp:
            for line in resp.iter_lines():
                if self.stop.is_set():
                    return
                if line.strip():
                    self._event(json.loads(line))

    def _event(self, event: dict[str, Any]) -> None:
        type_ = str(event.get("type") or "")
        obj = event.get("object") or {}
        if type_ == "ERROR":
            if obj.get("code") == 410 or obj.get("reason") in ("Expired", "Gone"):
                raise Gone(str(obj.get("message") or "410 Gone"))
            raise errors.from_status(int(obj.get("code") or 500), str(obj.get("message") or ""))
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if rv:
            self.resource_version = str(rv)
        if type_ == "BOOKMARK":
            return
        self._deliver(type_, obj)

    def _deliver(self, type_: str, obj: dict[str, Any]) -> None:
        obj.setdefault("apiVersion", self.kind.api_version)
        obj["kind"] = self.kind.kind
        try:
            self.handler(WatchEvent(type_, self.kind, obj))
        except Exception as exc:  # a handler bug must not kill the watch
            if self.on_error is not None:
                self.on_error(self.kind, exc)
