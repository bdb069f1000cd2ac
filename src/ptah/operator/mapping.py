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

import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from ptah.kube.kinds import APPROVAL, CONFIGMAP, JOB, LEASE, PLAN, POD, SECRET
from ptah.lifecycle.account import terminated_state
from ptah.lifecycle.executor import TERMINAL, job_terminal, pod_stopped, pods_ran
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
        # Which ConfigMaps and Secrets each primary reads (``referenced``), and the
        # reverse: kept per spec, computed when first asked after the spec moved.
        self._refs: dict[Key, list[tuple[str, str, str]]] = {}
        self._readers: dict[tuple[str, str, str], set[Key]] = {}
        self._stale: set[Key] = set()
        self._kinds: dict[str, int] = {}  # how many primaries of each kind
        self._waiting: dict[Key, set[str]] = {}  # key -> ``realm_leases`` of its copy
        self._waiters: dict[str, set[Key]] = {}  # Lease name -> keys waiting on it

    def upsert(self, obj: dict[str, Any]) -> tuple[Key, dict[str, Any] | None]:
        """Index ``obj``; returns its key and the copy it replaced."""
        meta = _meta(obj)
        key = Key(str(obj["kind"]), str(meta.get("namespace") or ""), str(meta["name"]))
        with self._lock:
            previous = self._objs.get(key)
            self._objs[key] = obj
            if previous is None:
                self._kinds[key.kind] = self._kinds.get(key.kind, 0) + 1
            if meta.get("uid"):
                self._by_uid[str(meta["uid"])] = key
            if previous is None or previous.get("spec") != obj.get("spec"):
                self._stale.add(key)
            self._wait(key, realm_leases(obj))
        return key, previous

    def _wait(self, key: Key, leases: set[str]) -> None:
        before = self._waiting.pop(key, set())
        for name in before - leases:
            waiters = self._waiters.get(name)
            if waiters is not None:
                waiters.discard(key)
                if not waiters:
                    del self._waiters[name]
        for name in leases:
            self._waiters.setdefault(name, set()).add(key)
        if leases:
            self._waiting[key] = leases

    def waiting_for(self, lease: str) -> set[Key]:
        """The primaries whose copy waits to acquire the realm Lease ``lease``."""
        with self._lock:
            return set(self._waiters.get(lease, ()))

    def has_kind(self, kind: str) -> bool:
        with self._lock:
            return bool(self._kinds.get(kind))

    def remove(self, obj: dict[str, Any]) -> Key:
        meta = _meta(obj)
        key = Key(str(obj["kind"]), str(meta.get("namespace") or ""), str(meta["name"]))
        with self._lock:
            if self._objs.pop(key, None) is not None:
                self._kinds[key.kind] -= 1
            self._by_uid.pop(str(meta.get("uid") or ""), None)
            self._stale.discard(key)
            self._unread(key)
            self._wait(key, set())
        return key

    def _unread(self, key: Key) -> None:
        for ref in self._refs.pop(key, []):
            readers = self._readers.get(ref)
            if readers is not None:
                readers.discard(key)
                if not readers:
                    del self._readers[ref]

    def readers(self, kind: str, namespace: str, name: str, families: Families) -> set[Key]:
        """The primaries (of ``families``) whose spec reads the ConfigMap or Secret
        ``name`` of ``namespace`` (``referenced``), as last watched."""
        with self._lock:
            for key in self._stale:
                self._unread(key)
                family = families.get(key.kind)
                obj = self._objs.get(key)
                if family is None or obj is None:
                    continue
                refs = referenced(family, obj)
                at = [(CONFIGMAP.kind, key.namespace, n) for n in refs.configmaps]
                at += [(SECRET.kind, key.namespace, n) for n in refs.secrets]
                self._refs[key] = at
                for ref in at:
                    self._readers.setdefault(ref, set()).add(key)
            self._stale.clear()
            return set(self._readers.get((kind, namespace, name), ()))

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


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def motion(kind: str, obj: dict[str, Any]) -> tuple[Any, ...]:
    """What a Job or Pod shows the steps that wait on it (a pass reads it afresh; this
    only says whether one would see something new).

    A Job: whether it is terminal and, once it is, how many Pods it counts; whether its
    deletion began; its labels, annotations and owners, and (while it runs) its spec's
    generation: what the supervising pass compares with the claim's intent. A terminal
    Job's spec no longer matters to anyone (the TTL its owner patches onto it is such a
    change). A Pod: whether it is terminal, stopped on evidence, its runner container
    terminated; whether its deletion began; its labels and owners. A Pod going from
    Pending to Running, a Job counting an active Pod, a condition that is not an end:
    none of them is a step's next input; the supervising poll still runs meanwhile."""
    meta = _meta(obj)
    ident = (
        bool(meta.get("deletionTimestamp")),
        _canon(meta.get("labels") or {}),
        _canon(meta.get("ownerReferences") or []),
    )
    if kind == JOB.kind:
        terminal = job_terminal(obj)
        return (
            *ident,
            _canon(meta.get("annotations") or {}),
            terminal,
            pods_ran(obj) if terminal else None,
            None if terminal else meta.get("generation"),
        )
    phase = (obj.get("status") or {}).get("phase")
    return (*ident, phase in TERMINAL, pod_stopped(obj), terminated_state(obj) is not None)


class Motions:
    """The last :func:`motion` seen of each Job and Pod, by uid: whether an event on one
    moved it (only then is its owner woken).

    A relist (``SYNC``) and a deletion always count. An object first seen counts when it
    already shows something beyond having been created (terminal, stopped, deleted):
    a Job or Pod that has only just started unblocks no step (the pass that creates a
    Job reads it back itself)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[str, int] = {}  # uid -> hash of its last motion (a few bytes each)
        self._running: set[str] = set()  # uids of the Jobs last seen neither ended nor going

    def moved(self, event_type: str, kind: str, obj: dict[str, Any]) -> bool:
        meta = _meta(obj)
        uid = str(meta.get("uid") or "")
        if event_type == "DELETED":
            with self._lock:
                self._seen.pop(uid, None)
                self._running.discard(uid)
            return True
        now = hash(motion(kind, obj))
        with self._lock:
            before = self._seen.get(uid)
            if uid:
                self._seen[uid] = now
                if kind == JOB.kind and not job_terminal(obj) and not meta.get("deletionTimestamp"):
                    self._running.add(uid)
                else:
                    self._running.discard(uid)
            job_runs = kind == POD.kind and any(
                r.get("kind") == JOB.kind and str(r.get("uid") or "") in self._running
                for r in meta.get("ownerReferences") or []
            )
        if event_type == "SYNC" or not uid:
            return True
        if job_runs and not meta.get("deletionTimestamp"):
            # A Pod of a Job last seen running: every step that reads Pods waits for the
            # Job to end first (or to go), and that is an event of the Job's own. A Pod
            # whose deletion begins still counts: its Job may be gone already.
            return False
        if before is None:
            fresh = {**obj, "status": {}, "metadata": {**meta, "deletionTimestamp": None}}
            before = hash(motion(kind, fresh))
        return now != before

    def __len__(self) -> int:
        with self._lock:
            return len(self._seen)


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
        return index.waiting_for(name)
    if kind in (CONFIGMAP.kind, SECRET.kind):
        return _owned(obj, index, namespace, families) | index.readers(
            kind, namespace, name, families
        )
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
        if kind == mine or not index.has_kind(mine):
            continue
        objects = [
            o for key, o in index.objects() if key.kind == mine and key.namespace == namespace
        ]
        if objects:
            found.update(Key(mine, namespace, n) for n in driver.concerns(kind, obj, objects))
    return found
