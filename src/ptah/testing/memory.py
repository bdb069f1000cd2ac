"""An in-memory Kubernetes API with the semantics the lifecycle depends on.

The simulation runs thousands of seeded fault schedules; each needs an API that
behaves like kube-apiserver where Ptah's safety argument leans on it:
resourceVersion preconditions, the status subresource, generation, finalizers
and deletionTimestamp, owner-reference garbage collection, generateName. It is
plain dicts, no threads, no sleeping, no wall clock: the same seed gives the
same uids, names, timestamps and resourceVersions.

Deliberate simplifications, each chosen to keep runs deterministic:

- Garbage collection is immediate: it runs inside the write that made an
  object garbage (the owner's removal, a create naming an owner that is gone),
  not later on a controller's schedule. A Foreground deletion therefore blocks
  only on dependents that hold their own finalizers, as on a real cluster.
- Pods have no grace period: deleting one removes it at once (unless it holds
  finalizers), like an unscheduled Pod on a real cluster. Its logs go with it.
- Validation covers what a Ptah bug could trip on (names, label values,
  metadata shapes, finalizers on a deleting object), not every field schema.
- Setting ``metadata.resourceVersion`` on create is rejected as Invalid (the
  real server answers 500; RealCluster refuses it before sending, the same way).

Objects go in and come out as deep copies; the store itself is never handed
out, and stored objects are never mutated in place (each write builds a new
dict, sharing unchanged subtrees with the old one).
"""

from __future__ import annotations

import random
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeVar

from ptah.kube.clock import Clock, SimClock, rfc3339
from ptah.kube.errors import AlreadyExists, ApiError, Conflict, Invalid, NotFound, Unavailable
from ptah.kube.kinds import POD, Kind
from ptah.kube.merge import json_copy, merge_patch
from ptah.kube.port import Obj, Subresource

Propagation = Literal["Background", "Foreground", "Orphan"]
KindKey = tuple[str, str]  # (group, kind)
ObjKey = tuple[KindKey, str, str]  # (kind, namespace, name)
ObjList = list[Obj]  # spelled once here: inside the classes ``list`` is the port method
StrList = list[str]
T = TypeVar("T")

FOREGROUND = "foregroundDeletion"
_NAME_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # apiserver's generateName alphabet
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
# Metadata the server owns: a patch can neither set nor clear these.
_SERVER_META = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)
_BUILTIN_GROUP_SUFFIX = ".k8s.io"


# --- fault injection -------------------------------------------------------------


@dataclass(frozen=True)
class WriteRequest:
    """What a write hook sees. ``body`` is the caller's object or patch: read, never mutate."""

    verb: Literal["create", "patch", "delete"]
    kind: Kind
    namespace: str
    name: str  # for a create with generateName: the prefix
    subresource: Subresource = None
    body: Mapping[str, Any] | None = None
    propagation: Propagation | None = None

    @property
    def fields(self) -> tuple[str, ...]:
        """Summary of the body: top-level keys, and ``key.sub`` for the keys one level down.

        e.g. ``("metadata.finalizers", "metadata.resourceVersion", "status.activeOperation")``.
        """
        out: list[str] = []
        for k, v in (self.body or {}).items():
            if isinstance(v, dict) and v:
                out.extend(f"{k}.{sub}" for sub in v)
            else:
                out.append(k)
        return tuple(out)


@dataclass(frozen=True)
class ReadRequest:
    verb: Literal["get", "list", "log"]
    kind: Kind
    namespace: str
    name: str = ""  # empty for list
    labels: Mapping[str, str] | None = None  # a list's label selector


@dataclass(frozen=True)
class Proceed:
    """Let the write through untouched."""


@dataclass(frozen=True)
class FailBefore:
    """Raise ``error`` without writing anything (set ``uncertain`` on it to model a timeout)."""

    error: ApiError


@dataclass(frozen=True)
class ApplyThenFail:
    """The server acts on the request, the response is lost: the caller gets an uncertain
    Unavailable whatever the server did (applied it, or refused it with its own error)."""

    message: str = "injected: the write reached the server, its response was lost"


FaultDecision = Proceed | FailBefore | ApplyThenFail
PROCEED = Proceed()
WriteFaults = Callable[[WriteRequest], FaultDecision]
ReadFaults = Callable[[ReadRequest], ApiError | None]
# Told, for a patch carrying a resourceVersion precondition, whether it held, at the
# instant the API compares it with the stored version (before anything is stored).
PreconditionHook = Callable[[WriteRequest, bool], None]


# --- request counting -------------------------------------------------------------


@dataclass
class RequestCounter:
    """API requests made through the observed port, by (verb, kind).

    ``writes`` counts write requests (a no-op patch is still a request);
    ``effective_writes`` counts the ones that changed the store.
    """

    reads: Counter[tuple[str, str]] = field(default_factory=Counter)
    writes: Counter[tuple[str, str]] = field(default_factory=Counter)
    effective_writes: int = 0

    @property
    def total_reads(self) -> int:
        return sum(self.reads.values())

    @property
    def total_writes(self) -> int:
        return sum(self.writes.values())

    @property
    def total(self) -> int:
        return self.total_reads + self.total_writes

    def reset(self) -> None:
        self.reads.clear()
        self.writes.clear()
        self.effective_writes = 0


# --- snapshots ---------------------------------------------------------------------


@dataclass(frozen=True)
class StoreSnapshot:
    """The whole store at one instant, for assertions and debugging (and ``restore``)."""

    objects: dict[ObjKey, Obj]
    kinds: dict[KindKey, Kind]
    logs: dict[tuple[str, str, str], str]
    resource_version: int
    rng_state: Any

    def of(self, kind: Kind) -> list[Obj]:
        kk = (kind.group, kind.kind)
        return [o for (k, _, _), o in self.objects.items() if k == kk]


# --- helpers -----------------------------------------------------------------------


def tracks_generation(kind: Kind) -> bool:
    """Whether the real server maintains ``metadata.generation`` for ``kind``.

    Custom resources always do; of the built-ins Ptah uses, Jobs and Pods do
    (the kinds with a status subresource); ConfigMaps, Secrets, Events and
    Leases do not.
    """
    return kind.has_status or (
        kind.group != "" and "." in kind.group and not kind.group.endswith(_BUILTIN_GROUP_SUFFIX)
    )


def _clone(value: Any) -> Any:
    """Deep copy of a stored (already validated) JSON value."""
    t = type(value)
    if t is dict:
        return _clone_dict(value)
    if t is list:
        return _clone_list(value)
    return value


def _clone_dict(value: dict[str, Any]) -> dict[str, Any]:
    # A shallow copy at C speed, then only the containers replaced: leaves are shared
    # (the simulation spends much of its time here, and most values are strings).
    out = value.copy()
    for k, v in value.items():
        t = type(v)
        if t is dict:
            out[k] = _clone_dict(v)
        elif t is list:
            out[k] = _clone_list(v)
    return out


def _clone_list(value: list[Any]) -> list[Any]:
    return [
        _clone_dict(v) if type(v) is dict else _clone_list(v) if type(v) is list else v
        for v in value
    ]


def _clone_obj(obj: Obj) -> Obj:
    return _clone_dict(obj)


def _bad_request(message: str) -> ApiError:
    err = ApiError(message)
    err.status = 400
    err.reason = "BadRequest"
    return err


def _refs(obj: Obj) -> list[dict[str, Any]]:
    refs: list[dict[str, Any]] = obj["metadata"].get("ownerReferences") or []
    return refs


def _validate_name(name: str) -> None:
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        raise Invalid(f"metadata.name: Invalid value: {name!r}: must be a DNS subdomain")


def _validate_meta(meta: dict[str, Any]) -> None:
    """The metadata checks a Ptah bug could plausibly trip on a real server."""
    for field_name in ("labels", "annotations"):
        m = meta.get(field_name)
        if m is None:
            continue
        if type(m) is not dict:
            raise Invalid(f"metadata.{field_name}: must be a map of strings")
        for k, v in m.items():
            if type(v) is not str:
                raise Invalid(f"metadata.{field_name}.{k}: must be a string")
            if field_name == "labels":
                _validate_label(k, v)
    fins = meta.get("finalizers")
    if fins is not None and (type(fins) is not list or any(type(f) is not str for f in fins)):
        raise Invalid("metadata.finalizers: must be a list of strings")
    refs = meta.get("ownerReferences")
    if refs is not None:
        if type(refs) is not list:
            raise Invalid("metadata.ownerReferences: must be a list")
        for r in refs:
            if type(r) is not dict or not all(
                type(r.get(k)) is str and r.get(k) for k in ("apiVersion", "kind", "name", "uid")
            ):
                raise Invalid("metadata.ownerReferences: apiVersion, kind, name, uid required")


def _drop_empty(meta: dict[str, Any]) -> None:
    """Empty maps and lists vanish from metadata, as Go's ``omitempty`` drops them."""
    for k in ("labels", "annotations", "finalizers", "ownerReferences"):
        if k in meta and not meta[k]:
            del meta[k]


def _validate_label(key: str, value: str) -> None:
    prefix, _, name = key.rpartition("/")
    if (
        (prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)))
        or len(name) > 63
        or not _LABEL_NAME.match(name)
    ):
        raise Invalid(f"metadata.labels: Invalid value: {key!r}: not a qualified name")
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        raise Invalid(f"metadata.labels: Invalid value: {value!r}: not a valid label value")


def _content_changed(old: Obj, new: Obj, with_status: bool) -> bool:
    """Whether anything but metadata (and status, where it is a subresource) changed."""
    skip = ("metadata", "status") if with_status else ("metadata",)
    keys = (old.keys() | new.keys()) - set(skip)
    return any(old.get(k) != new.get(k) for k in keys)


# --- the cluster -------------------------------------------------------------------


class MemoryCluster:
    """The ``Cluster`` port over an in-memory store; see the module docstring.

    ``faults`` is consulted on every write and ``read_faults`` on every read made
    through this object (both may be reassigned at any time). ``preconditions`` is
    told, for every patch made through this object that carries a resourceVersion
    precondition and reaches the comparison, whether the precondition held: where
    the API itself decides to write it or refuse it (Conflict), so a watcher judges
    what was written, not what it re-derives later. ``system`` is a second door onto
    the same store that skips faults, counters and hooks: the simulation's own Job
    controller and kubelet, and test setup, use it.
    """

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        seed: int = 0,
        faults: WriteFaults | None = None,
        read_faults: ReadFaults | None = None,
    ) -> None:
        self.clock: Clock = clock if clock is not None else SimClock()
        self.faults = faults
        self.read_faults = read_faults
        self.preconditions: PreconditionHook | None = None
        self.requests = RequestCounter()
        self.system = SystemClient(self)
        self._rng = random.Random(seed)
        self._rv = 0
        self._objects: dict[KindKey, dict[tuple[str, str], Obj]] = {}
        # per kind, its stored keys in (namespace, name) order; dropped when a key comes
        # or goes (an update keeps its key), rebuilt by the next list
        self._order: dict[KindKey, list[tuple[str, str]]] = {}
        self._kinds: dict[KindKey, Kind] = {}
        self._by_uid: dict[str, ObjKey] = {}
        # owner uid -> dependents' keys (a dict as an ordered set, for determinism)
        self._dependents: dict[str, dict[ObjKey, None]] = {}
        self._logs: dict[tuple[str, str, str], str] = {}

    # -- the port (observed: counted, fault-injected) --

    def get(self, kind: Kind, namespace: str, name: str) -> Obj | None:
        self._read("get", kind, namespace, name)
        obj = self._get(kind, namespace, name)
        return None if obj is None else _clone_obj(obj)

    def get_metadata(self, kind: Kind, namespace: str, name: str) -> Obj | None:
        """Only the metadata, as the real API's PartialObjectMetadata."""
        self._read("get", kind, namespace, name)
        obj = self._get(kind, namespace, name)
        if obj is None:
            return None
        return {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "metadata": _clone(obj["metadata"]),
        }

    def list(self, kind: Kind, namespace: str, labels: dict[str, str] | None = None) -> list[Obj]:
        self._read("list", kind, namespace, "", labels)
        return [_clone_obj(o) for o in self._list(kind, namespace, labels)]

    def list_metadata(
        self, kind: Kind, namespace: str, labels: dict[str, str] | None = None
    ) -> ObjList:
        """Only the metadata, as the real API's PartialObjectMetadataList."""
        self._read("list", kind, namespace, "", labels)
        return [
            {
                "apiVersion": o.get("apiVersion"),
                "kind": o.get("kind"),
                "metadata": _clone(o["metadata"]),
            }
            for o in self._list(kind, namespace, labels)
        ]

    def create(self, kind: Kind, obj: Obj) -> Obj:
        meta = obj.get("metadata") or {}
        req = WriteRequest(
            "create",
            kind,
            str(meta.get("namespace") or ""),
            str(meta.get("name") or meta.get("generateName") or ""),
            body=obj,
        )
        return _clone_obj(self._write(req, lambda: self._create(kind, obj)))

    def patch(
        self, kind: Kind, namespace: str, name: str, patch: Obj, subresource: Subresource = None
    ) -> Obj:
        req = WriteRequest("patch", kind, namespace, name, subresource, body=patch)
        stored = self._write(
            req, lambda: self._patch(kind, namespace, name, patch, subresource, req)
        )
        return _clone_obj(stored)

    def delete(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        propagation: Propagation = "Background",
    ) -> None:
        """Delete; raises NotFound when the object is missing (callers may ignore it)."""
        req = WriteRequest("delete", kind, namespace, name, propagation=propagation)
        self._write(req, lambda: self._delete(kind, namespace, name, uid, propagation))

    def read_log(self, namespace: str, pod: str, container: str) -> str:
        self._read("log", POD, namespace, pod)
        return self._read_log(namespace, pod, container)

    def now(self) -> datetime:
        return self.clock.now()

    # -- simulation controls --

    def set_log(self, namespace: str, pod: str, container: str, text: str) -> None:
        """Replace a container's log (the simulated kubelet's output). The Pod must exist."""
        self._require_pod(namespace, pod)
        self._logs[(namespace, pod, container)] = text

    def append_log(self, namespace: str, pod: str, container: str, text: str) -> None:
        self._require_pod(namespace, pod)
        key = (namespace, pod, container)
        self._logs[key] = self._logs.get(key, "") + text

    def snapshot(self) -> StoreSnapshot:
        return StoreSnapshot(
            objects={
                (kk, ns, name): _clone(o)
                for kk, store in self._objects.items()
                for (ns, name), o in store.items()
            },
            kinds=dict(self._kinds),
            logs=dict(self._logs),
            resource_version=self._rv,
            rng_state=self._rng.getstate(),
        )

    def restore(self, snap: StoreSnapshot) -> None:
        """Put the store back exactly as ``snap`` saw it (counters and hooks are left alone)."""
        self._objects = {}
        self._order = {}
        self._by_uid = {}
        self._dependents = {}
        self._kinds = dict(snap.kinds)
        for (kk, ns, name), o in snap.objects.items():
            self._put((kk, ns, name), _clone(o), None)
        self._logs = dict(snap.logs)
        self._rv = snap.resource_version
        self._rng.setstate(snap.rng_state)

    def objects(self) -> Iterator[tuple[Kind, Obj]]:
        """Every stored object (copies), in a deterministic order."""
        for kk, store in self._objects.items():
            for o in store.values():
                yield self._kinds[kk], _clone(o)

    @property
    def resource_version(self) -> int:
        return self._rv

    # -- observation --

    def _read(
        self,
        verb: Literal["get", "list", "log"],
        kind: Kind,
        ns: str,
        name: str,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        self.requests.reads[(verb, kind.kind)] += 1
        if self.read_faults is not None:
            err = self.read_faults(ReadRequest(verb, kind, ns, name, labels))
            if err is not None:
                raise err

    def _write(self, req: WriteRequest, apply: Callable[[], T]) -> T:
        self.requests.writes[(req.verb, req.kind.kind)] += 1
        decision = PROCEED if self.faults is None else self.faults(req)
        rv_before = self._rv
        if isinstance(decision, FailBefore):
            self._refused_before(req)
            raise decision.error
        if isinstance(decision, ApplyThenFail):
            try:
                apply()
            except ApiError:
                pass
            finally:
                if self._rv != rv_before:
                    self.requests.effective_writes += 1
            raise Unavailable(decision.message, uncertain=True)
        try:
            return apply()
        finally:
            if self._rv != rv_before:
                self.requests.effective_writes += 1

    def _refused_before(self, req: WriteRequest) -> None:
        """A patch refused before it reached the store (an injected error) still tells
        ``preconditions`` whether its precondition held at that instant, as its patch
        would have: a watcher judges the request as sent, unless it was stale."""
        if self.preconditions is None or req.verb != "patch":
            return
        meta = (req.body or {}).get("metadata")
        rv = meta.get("resourceVersion") if type(meta) is dict else None
        if rv is None:
            return
        try:
            old = self._get(req.kind, req.namespace, req.name)
        except ApiError:
            return
        if old is not None:
            self.preconditions(req, rv == old["metadata"]["resourceVersion"])

    # -- store primitives --

    def _store(self, kind: Kind) -> dict[tuple[str, str], Obj]:
        kk = (kind.group, kind.kind)
        store = self._objects.get(kk)
        if store is None:
            store = self._objects[kk] = {}
            self._kinds[kk] = kind
        return store

    def _ns(self, kind: Kind, namespace: str) -> str:
        if not kind.namespaced:
            return ""
        if not namespace:
            raise Invalid(f"{kind.kind} is namespaced: a namespace is required")
        return namespace

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _put(self, key: ObjKey, new: Obj, old: Obj | None) -> None:
        """Store ``new`` at ``key``, keeping the uid and owner indexes in step."""
        kk, ns, name = key
        store = self._objects.setdefault(kk, {})
        if (ns, name) not in store:
            self._order.pop(kk, None)
        store[(ns, name)] = new
        uid = new["metadata"]["uid"]
        self._by_uid[uid] = key
        old_refs = _refs(old) if old is not None else []
        new_refs = _refs(new)
        if old_refs != new_refs:
            for r in old_refs:
                deps = self._dependents.get(r["uid"])
                if deps is not None:
                    deps.pop(key, None)
            for r in new_refs:
                self._dependents.setdefault(r["uid"], {})[key] = None

    def _pop(self, key: ObjKey) -> Obj:
        kk, ns, name = key
        obj = self._objects[kk].pop((ns, name))
        self._order.pop(kk, None)
        self._by_uid.pop(obj["metadata"]["uid"], None)
        for r in _refs(obj):
            deps = self._dependents.get(r["uid"])
            if deps is not None:
                deps.pop(key, None)
                if not deps:
                    del self._dependents[r["uid"]]
        return obj

    def _at(self, key: ObjKey) -> Obj | None:
        kk, ns, name = key
        store = self._objects.get(kk)
        return None if store is None else store.get((ns, name))

    # -- reads --

    def _get(self, kind: Kind, namespace: str, name: str) -> Obj | None:
        ns = self._ns(kind, namespace)
        store = self._objects.get((kind.group, kind.kind))
        return None if store is None else store.get((ns, name))

    def _list(self, kind: Kind, namespace: str, labels: dict[str, str] | None) -> ObjList:
        """Matching objects ordered by (namespace, name), as etcd's key order gives them."""
        kk = (kind.group, kind.kind)
        store = self._objects.get(kk)
        if not store:
            return []
        order = self._order.get(kk)
        if order is None:
            order = self._order[kk] = sorted(store)
        ns = namespace if kind.namespaced else ""
        out: ObjList = []
        for key in order:
            if ns and key[0] != ns:
                continue
            o = store[key]
            if labels:
                have = o["metadata"].get("labels") or {}
                if any(have.get(k) != v for k, v in labels.items()):
                    continue
            out.append(o)
        return out

    def _read_log(self, namespace: str, pod: str, container: str) -> str:
        self._require_pod(namespace, pod)
        text = self._logs.get((namespace, pod, container))
        if text is None:
            raise NotFound(f"no log for container {container!r} of pod {namespace}/{pod}")
        return text

    def _require_pod(self, namespace: str, pod: str) -> None:
        if self._get(POD, namespace, pod) is None:
            raise NotFound(f'pods "{pod}" not found')

    # -- create --

    def _create(self, kind: Kind, body: Obj) -> Obj:
        if type(body) is not dict:
            raise _bad_request("the body must be a JSON object")
        obj: Obj = json_copy(body)
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        elif type(meta) is not dict:
            raise _bad_request("metadata must be an object")
        for field_name, want in (("apiVersion", kind.api_version), ("kind", kind.kind)):
            have = obj.pop(field_name, None)
            if have is not None and have != want:
                raise _bad_request(f"{field_name} {have!r} does not match {want!r}")
        obj = {"apiVersion": kind.api_version, "kind": kind.kind, **obj}
        if meta.get("resourceVersion"):
            raise Invalid("metadata.resourceVersion: must be empty on create")
        ns = self._ns(kind, str(meta.get("namespace") or ""))
        if ns:
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        _validate_meta(meta)
        _drop_empty(meta)
        store = self._store(kind)
        name = meta.get("name") or ""
        if name:
            _validate_name(name)
            if (ns, name) in store:
                raise AlreadyExists(f'{kind.plural} "{name}" already exists')
        else:
            name = self._generate_name(meta.get("generateName") or "", ns, store)
            meta["name"] = name
        for k in ("deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"):
            meta.pop(k, None)
        if kind.has_status:
            obj.pop("status", None)  # the status subresource owns it; create clears it
        meta["uid"] = str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
        meta["creationTimestamp"] = rfc3339(self.clock.now())
        if tracks_generation(kind):
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        meta["resourceVersion"] = self._next_rv()
        key: ObjKey = ((kind.group, kind.kind), ns, name)
        self._put(key, obj, None)
        if _refs(obj):
            self._attempt_collect(key)  # an owner already gone makes this garbage at once
        return obj

    def _generate_name(self, prefix: str, ns: str, store: dict[tuple[str, str], Obj]) -> str:
        if not prefix:
            raise Invalid("metadata.name: Required value: name or generateName is required")
        base = prefix[:58]
        for _ in range(8):  # the apiserver retries a generated name that collides
            suffix = "".join(self._rng.choice(_NAME_SUFFIX_ALPHABET) for _ in range(5))
            name = base + suffix
            _validate_name(name)
            if (ns, name) not in store:
                return name
        raise AlreadyExists(f"could not generate a free name from {prefix!r}")

    # -- patch --

    def _patch(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        patch: Obj,
        subresource: Subresource,
        req: WriteRequest | None = None,
    ) -> Obj:
        if subresource not in (None, "status"):
            raise NotFound(f"no subresource {subresource!r}")
        if subresource == "status" and not kind.has_status:
            raise NotFound(f"{kind.plural} have no status subresource")
        ns = self._ns(kind, namespace)
        key: ObjKey = ((kind.group, kind.kind), ns, name)
        old = self._at(key)
        if old is None:
            raise NotFound(f'{kind.plural} "{name}" not found')
        if type(patch) is not dict:
            raise _bad_request("a merge patch must be a JSON object")
        old_meta: dict[str, Any] = old["metadata"]
        pmeta = patch.get("metadata", {})
        if type(pmeta) is not dict:
            raise _bad_request("metadata must be an object")
        if subresource is None:
            for type_field in ("apiVersion", "kind"):
                v = patch.get(type_field)
                if v is not None and v != old[type_field]:
                    raise Invalid(f'{type_field}: Invalid value: "{v}": must be {old[type_field]}')
        if pmeta:
            rv = pmeta.get("resourceVersion")
            if rv is not None and req is not None and self.preconditions is not None:
                self.preconditions(req, rv == old_meta["resourceVersion"])
            if rv is not None and rv != old_meta["resourceVersion"]:
                raise Conflict(
                    f'Operation cannot be fulfilled on {kind.plural} "{name}": the object has been '
                    "modified; please apply your changes to the latest version and try again"
                )
            uid = pmeta.get("uid")
            if uid is not None and uid != old_meta["uid"]:
                # Not a precondition on a merge patch: the server rejects the change itself.
                raise Invalid(f'metadata.uid: Invalid value: "{uid}": field is immutable')
            for ident in ("name", "namespace"):
                v = pmeta.get(ident)
                if v is not None and v != old_meta.get(ident, ""):
                    raise _bad_request(f"metadata.{ident} does not match the request")

        merged: Obj = merge_patch(old, patch)
        if subresource == "status":
            new: Obj = dict(old)
            if "status" in merged:
                new["status"] = merged["status"]
            else:
                new.pop("status", None)
        else:
            new = merged
            new["apiVersion"] = old["apiVersion"]
            new["kind"] = old["kind"]
            meta = merged.get("metadata")
            meta = dict(meta) if type(meta) is dict else {}
            for k in _SERVER_META:
                if k in old_meta:
                    meta[k] = old_meta[k]
                else:
                    meta.pop(k, None)
            _validate_meta(meta)
            _drop_empty(meta)
            new["metadata"] = meta
            if kind.has_status:
                if "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)
            if "deletionTimestamp" in old_meta:
                before = set(old_meta.get("finalizers") or ())
                added = [f for f in meta.get("finalizers") or () if f not in before]
                if added:
                    raise Invalid(
                        f"metadata.finalizers: Forbidden: no new finalizers can be added if the "
                        f"object is being deleted, found new finalizers {added}"
                    )
        if new == old:
            return old  # the apiserver skips no-op updates: no new resourceVersion
        meta = new["metadata"] = dict(new["metadata"])
        if (
            subresource is None
            and tracks_generation(kind)
            and _content_changed(old, new, kind.has_status)
        ):
            meta["generation"] = int(old_meta.get("generation", 0)) + 1
        meta["resourceVersion"] = self._next_rv()
        self._put(key, new, old)
        if "deletionTimestamp" in meta and not meta.get("finalizers"):
            self._remove(key)
        elif _refs(new) != _refs(old):
            self._attempt_collect(key)
        return new

    def _update_meta(self, key: ObjKey, obj: Obj, changes: dict[str, Any]) -> Obj:
        """A server-side metadata write (deletion marks, finalizers, owner references)."""
        meta = dict(obj["metadata"])
        for k, v in changes.items():
            if v is None:
                meta.pop(k, None)
            else:
                meta[k] = v
        new = dict(obj)
        new["metadata"] = meta
        meta["resourceVersion"] = self._next_rv()
        self._put(key, new, obj)
        return new

    # -- delete and garbage collection --

    def _delete(
        self, kind: Kind, namespace: str, name: str, uid: str | None, propagation: Propagation
    ) -> None:
        ns = self._ns(kind, namespace)
        key: ObjKey = ((kind.group, kind.kind), ns, name)
        obj = self._at(key)
        if obj is None:
            raise NotFound(f'{kind.plural} "{name}" not found')
        if uid is not None and uid != obj["metadata"]["uid"]:
            raise Conflict(
                f"Precondition failed: UID in precondition: {uid}, "
                f"UID in object meta: {obj['metadata']['uid']}"
            )
        if propagation not in ("Background", "Foreground", "Orphan"):
            raise _bad_request(f"unknown propagationPolicy {propagation!r}")
        self._delete_key(key, propagation)

    def _delete_key(self, key: ObjKey, propagation: Propagation) -> None:
        obj = self._at(key)
        if obj is None:
            return
        meta = obj["metadata"]
        if propagation == "Orphan":
            self._orphan_dependents(meta["uid"])
            obj = self._at(key)
            if obj is None:
                return
            meta = obj["metadata"]
        fins: list[str] = meta.get("finalizers") or []
        if propagation == "Foreground":
            if FOREGROUND in fins:
                return  # already waiting for its dependents (this also breaks owner cycles)
            self._mark_deleting(key, obj, [*fins, FOREGROUND])
            for dep in list(self._dependents.get(meta["uid"], ())):
                self._attempt_collect(dep)
            self._finish_foreground(meta["uid"])
            return
        if fins:
            if "deletionTimestamp" not in meta:
                self._mark_deleting(key, obj, fins)
            return
        self._remove(key)

    def _mark_deleting(self, key: ObjKey, obj: Obj, finalizers: StrList) -> Obj:
        meta = obj["metadata"]
        changes: dict[str, Any] = {"finalizers": finalizers}
        if "deletionTimestamp" not in meta:
            changes["deletionTimestamp"] = rfc3339(self.clock.now())
            changes["deletionGracePeriodSeconds"] = 0
            if "generation" in meta:  # the real server bumps generation when deletion starts
                changes["generation"] = meta["generation"] + 1
        return self._update_meta(key, obj, changes)

    def _remove(self, key: ObjKey) -> None:
        """The object is gone: drop it, its logs, and collect what it owned."""
        obj = self._pop(key)
        self._rv += 1  # a delete is a write to etcd too
        kk, ns, name = key
        if kk == ("", "Pod"):
            for log_key in [k for k in self._logs if k[0] == ns and k[1] == name]:
                del self._logs[log_key]
        uid = obj["metadata"]["uid"]
        for dep in list(self._dependents.pop(uid, {})):
            self._attempt_collect(dep)
        for r in _refs(obj):
            self._finish_foreground(r["uid"])

    def _owner_state(
        self, dep_ns: str, ref: dict[str, Any]
    ) -> Literal["solid", "dangling", "waiting"]:
        okey = self._by_uid.get(ref["uid"])
        owner = None if okey is None else self._at(okey)
        if owner is None or (okey is not None and okey[1] not in ("", dep_ns)):
            return "dangling"  # gone, or in another namespace (which GC treats as absent)
        ometa = owner["metadata"]
        if "deletionTimestamp" in ometa and FOREGROUND in (ometa.get("finalizers") or ()):
            return "waiting"
        return "solid"

    def _attempt_collect(self, key: ObjKey) -> None:
        """The garbage collector's verdict on one dependent (attemptToDeleteItem)."""
        obj = self._at(key)
        if obj is None:
            return
        refs = _refs(obj)
        if not refs:
            return
        states = [self._owner_state(key[1], r) for r in refs]
        if "solid" in states:
            if all(s == "solid" for s in states):
                return
            keep = [r for r, s in zip(refs, states, strict=True) if s == "solid"]
            self._update_meta(key, obj, {"ownerReferences": keep})
            return
        fins = obj["metadata"].get("finalizers") or []
        if "waiting" in states and self._dependents.get(obj["metadata"]["uid"]):
            self._delete_key(key, "Foreground")
        elif "orphan" in fins:
            self._delete_key(key, "Orphan")
        elif FOREGROUND in fins:
            self._delete_key(key, "Foreground")
        else:
            self._delete_key(key, "Background")

    def _finish_foreground(self, owner_uid: str) -> None:
        """Drop ``foregroundDeletion`` once no dependent with blockOwnerDeletion remains."""
        okey = self._by_uid.get(owner_uid)
        if okey is None:
            return
        owner = self._at(okey)
        if owner is None:
            return
        ometa = owner["metadata"]
        fins: list[str] = ometa.get("finalizers") or []
        if "deletionTimestamp" not in ometa or FOREGROUND not in fins:
            return
        for dkey in self._dependents.get(owner_uid, ()):
            dep = self._at(dkey)
            if dep is not None and any(
                r["uid"] == owner_uid and r.get("blockOwnerDeletion") for r in _refs(dep)
            ):
                return
        rest = [f for f in fins if f != FOREGROUND]
        owner = self._update_meta(okey, owner, {"finalizers": rest or None})
        if not rest:
            self._remove(okey)

    def _orphan_dependents(self, owner_uid: str) -> None:
        for dkey in list(self._dependents.get(owner_uid, ())):
            dep = self._at(dkey)
            if dep is None:
                continue
            keep = [r for r in _refs(dep) if r["uid"] != owner_uid]
            self._update_meta(dkey, dep, {"ownerReferences": keep or None})


class SystemClient:
    """The store without faults or counting: what the simulated controllers use.

    The simulation's Job controller and kubelet are part of "the cluster", so
    their writes are neither Ptah's API requests nor subject to Ptah's faults.
    """

    def __init__(self, cluster: MemoryCluster) -> None:
        self._c = cluster

    def get(self, kind: Kind, namespace: str, name: str) -> Obj | None:
        obj = self._c._get(kind, namespace, name)
        return None if obj is None else _clone_obj(obj)

    def list(self, kind: Kind, namespace: str, labels: dict[str, str] | None = None) -> list[Obj]:
        return [_clone_obj(o) for o in self._c._list(kind, namespace, labels)]

    def peek(self, kind: Kind, namespace: str, name: str) -> Obj | None:
        """The stored object itself, not a copy: read it, never change it. Stored objects
        are never mutated in place, so what ``peek`` returned stays as it was (and is
        ``is``-identical to a later peek until the object is written)."""
        return self._c._get(kind, namespace, name)

    def peek_list(
        self, kind: Kind, namespace: str, labels: dict[str, str] | None = None
    ) -> ObjList:
        """Like :meth:`list`, without copies (see :meth:`peek`)."""
        return self._c._list(kind, namespace, labels)

    def peek_objects(self) -> Iterator[tuple[Kind, Obj]]:
        """Like :meth:`MemoryCluster.objects`, without copies (see :meth:`peek`)."""
        for kk, store in self._c._objects.items():
            for o in store.values():
                yield self._c._kinds[kk], o

    def create(self, kind: Kind, obj: Obj) -> Obj:
        return _clone_obj(self._c._create(kind, obj))

    def patch(
        self, kind: Kind, namespace: str, name: str, patch: Obj, subresource: Subresource = None
    ) -> Obj:
        return _clone_obj(self._c._patch(kind, namespace, name, patch, subresource))

    def delete(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        propagation: Propagation = "Background",
    ) -> None:
        self._c._delete(kind, namespace, name, uid, propagation)

    def read_log(self, namespace: str, pod: str, container: str) -> str:
        return self._c._read_log(namespace, pod, container)

    def now(self) -> datetime:
        return self._c.clock.now()
