"""Which resources an event concerns.

An event is only a hint that something changed; the pass reads everything fresh.
So the mapping may over-approximate (an extra pass that changes nothing writes
nothing) but must never miss a resource whose next step the change unblocks:
its Job or Pod moved, its plan appeared, an approval arrived, a Lease it waits
on was released, or a ConfigMap or Secret it reads changed.

The index of primaries is built from the watches of the families' own kinds (and
the drivers'); it is used for mapping only, never for a decision. Which ConfigMaps
and Secrets a primary reads is the lifecycle's and its family's to say
(``ptah.lifecycle.watches.referenced``); this module knows no family.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from ptah.kube.kinds import APPROVAL, CONFIGMAP, JOB, LEASE, PLAN, POD, SECRET
from ptah.lifecycle.family import AnyFamily
from ptah.lifecycle.watches import referenced
from ptah.workload.job import LABEL_OWNER_UID

if TYPE_CHECKING:
    from ptah.kube.kinds import Kind
    from ptah.lifecycle.context import Env
    from ptah.lifecycle.family import Watch
    from ptah.lifecycle.report import PassReport
    from ptah.lifecycle.step import Result

REALM_PREFIX = "ptah-realm-"
Families = Mapping[str, AnyFamily]  # by kind name


class Driver(Protocol):
    """A kind the operator drives by something other than the mutation lifecycle (a
    PtahRollout): its own pass, what it watches, and which events concern which of its
    objects."""

    kind: Kind
    label: str
    watches: tuple[Watch, ...]

    def reconcile(
        self, env: Env, namespace: str, name: str, report: PassReport | None = None
    ) -> Result:
        """One pass over the object; when to look again, and what the pass did."""

    def concerns(
        self, kind: str, obj: dict[str, Any], objects: Iterable[dict[str, Any]]
    ) -> set[str]:
        """Names (in ``obj``'s namespace) of this kind's ``objects`` that an event on
        ``obj`` concerns; status-only changes of lifecycle resources are asked too."""


class Key(NamedTuple):
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    assert isinstance(meta, dict)
    return meta


def realm_leases(obj: dict[str, Any]) -> set[str]:
    """Lease names a primary waits to acquire: a claim whose Lease epoch is not yet
    written. A holder is left out on purpose: its own renewals would otherwise wake
    it in a loop, and it re-reads its Lease on every supervising pass anyway."""
    lease = ((obj.get("status") or {}).get("activeOperation") or {}).get("lease") or {}
    if lease.get("leaseName") and lease.get("epoch") is None:
        return {str(lease["leaseName"])}
    return set()


class Index:
    """The primaries last seen by the watches, by key and by uid."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._objs: dict[Key, dict[str, Any]] = {}
        self._by_uid: dict[str, Key] = {}

    def upsert(self, obj: dict[str, Any]) -> tuple[Key, dict[str, Any] | None]:
        """Index ``obj``; returns its key and the copy it replaced."""
        meta = _meta(obj)
        key = Key(str(obj["kind"]), str(meta.get("namespace") or ""), str(meta["name"]))
        with self._lock:
            previous = self._objs.get(key)
            self._objs[key] = obj
            if meta.get("uid"):
                self._by_uid[str(meta["uid"])] = key
        return key, previous

    def remove(self, obj: dict[str, Any]) -> Key:
        meta = _meta(obj)
        key = Key(str(obj["kind"]), str(meta.get("namespace") or ""), str(meta["name"]))
        with self._lock:
            self._objs.pop(key, None)
            self._by_uid.pop(str(meta.get("uid") or ""), None)
        return key

    def by_uid(self, uid: str) -> Key | None:
        with self._lock:
            return self._by_uid.get(uid)

    def has(self, key: Key) -> bool:
        with self._lock:
            return key in self._objs

    def get(self, key: Key) -> dict[str, Any] | None:
        """The copy the watch last delivered for ``key``."""
        with self._lock:
            return self._objs.get(key)

    def version(self, key: Key) -> str | None:
        """The resourceVersion of the copy the watch last delivered for ``key``."""
        with self._lock:
            obj = self._objs.get(key)
        rv = _meta(obj).get("resourceVersion") if obj is not None else None
        return str(rv) if rv else None

    def all_keys(self) -> list[Key]:
        with self._lock:
            return list(self._objs)

    def objects(self) -> list[tuple[Key, dict[str, Any]]]:
        with self._lock:
            return list(self._objs.items())


_WATCHED_META = ("generation", "uid", "annotations", "labels", "finalizers", "deletionTimestamp")


def only_status_changed(previous: dict[str, Any] | None, obj: dict[str, Any]) -> bool:
    """True when a primary's update touched nothing but its status (and bookkeeping).

    Only the operator writes status, and every pass that leaves a next step owed
    returns "again" itself; so the echo of its own status write need not start
    another pass. Spec (generation), annotations (the abandon-proof hatch),
    finalizers and deletion still do.
    """
    if previous is None:
        return False
    before, after = _meta(previous), _meta(obj)
    return all(before.get(k) == after.get(k) for k in _WATCHED_META)


def keys_for(
    kind: str, obj: dict[str, Any], index: Index, lock_namespace: str, families: Families
) -> set[Key]:
    """The primaries (resources of ``families``) an event on ``obj`` (of ``kind``) concerns."""
    meta = _meta(obj)
    namespace = str(meta.get("namespace") or "")
    name = str(meta.get("name") or "")
    if kind in families:
        return {Key(kind, namespace, name)}
    if kind in (JOB.kind, POD.kind, PLAN.kind):
        return _owned(obj, index, namespace, families)
    if kind == APPROVAL.kind:
        ref = (obj.get("spec") or {}).get("resourceRef") or {}
        if ref.get("kind") in families and ref.get("name"):
            return {Key(str(ref["kind"]), namespace, str(ref["name"]))}
        return set()
    if kind == LEASE.kind:
        if namespace != lock_namespace or not name.startswith(REALM_PREFIX):
            return set()
        return {key for key, o in index.objects() if name in realm_leases(o)}
    if kind in (CONFIGMAP.kind, SECRET.kind):
        found = _owned(obj, index, namespace, families)
        for key, o in index.objects():
            family = families.get(key.kind)
            if family is None or key.namespace != namespace:
                continue
            refs = referenced(family, o)
            if name in (refs.configmaps if kind == CONFIGMAP.kind else refs.secrets):
                found.add(key)
        return found
    return set()


def _owned(obj: dict[str, Any], index: Index, namespace: str, families: Families) -> set[Key]:
    """Owner references naming a primary, else the owner-uid label (a Pod's owner is
    its Job; it carries the Job template's labels, ``ptah.io/owner-uid`` among them)."""
    meta = _meta(obj)
    found: set[Key] = set()
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") in families and ref.get("name"):
            found.add(Key(str(ref["kind"]), namespace, str(ref["name"])))
    if not found:
        uid = (meta.get("labels") or {}).get(LABEL_OWNER_UID)
        key = index.by_uid(str(uid)) if uid else None
        if key is not None:
            found.add(key)
    return found


def driver_keys(
    kind: str, obj: dict[str, Any], index: Index, drivers: Sequence[Driver]
) -> set[Key]:
    """The driven objects (rollouts) an event concerns, asked of each driver with the
    objects of its kind in the event's namespace."""
    namespace = str(_meta(obj).get("namespace") or "")
    found: set[Key] = set()
    for driver in drivers:
        mine = driver.kind.kind
        if kind == mine:
            continue
        objects = [
            o for key, o in index.objects() if key.kind == mine and key.namespace == namespace
        ]
        if objects:
            found.update(Key(mine, namespace, n) for n in driver.concerns(kind, obj, objects))
    return found
