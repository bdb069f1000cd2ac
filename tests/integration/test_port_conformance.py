"""Both cluster ports agree on the semantics Ptah's safety argument rests on.

Each test runs against MemoryCluster and against RealCluster on the local
control plane (``ptah dev up``, via the ``cluster``/``namespace`` fixtures).
Garbage collection is immediate in memory and asynchronous on a real cluster
(kube-controller-manager's garbage collector), so checks of what GC does poll
through ``Env.eventually`` with a bounded timeout.

The status-subresource tests need a custom resource; a small test-only CRD
(``widgets.test.ptah.io``) is installed through the real port itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest

from ptah.kube import kinds
from ptah.kube.errors import AlreadyExists, ApiError, Conflict, Invalid, NotFound
from ptah.kube.kinds import Kind
from ptah.kube.port import Cluster, Obj
from ptah.testing.memory import MemoryCluster
from support.wait import wait_for

T = TypeVar("T")

WIDGET = Kind("test.ptah.io", "v1", "Widget", "widgets")
CRD = Kind(
    "apiextensions.k8s.io",
    "v1",
    "CustomResourceDefinition",
    "customresourcedefinitions",
    namespaced=False,
)
_OPEN_OBJECT = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
WIDGET_CRD: Obj = {
    "metadata": {"name": "widgets.test.ptah.io"},
    "spec": {
        "group": "test.ptah.io",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {"spec": _OPEN_OBJECT, "status": _OPEN_OBJECT},
                    }
                },
            }
        ],
    },
}
HOLD = "test.ptah.io/hold"


@dataclass
class Env:
    port: Cluster
    ns: str
    timeout: float  # how long asynchronous cluster machinery (GC) may take

    def eventually(self, what: str, probe: Callable[[], T]) -> T:
        """``probe()`` once it is truthy; immediately on the memory port."""
        got: T = wait_for(what, probe, self.timeout)
        return got

    def gone(self, kind: Kind, name: str) -> bool:
        return self.port.get(kind, self.ns, name) is None


def _crd_established(port: Cluster) -> bool:
    crd = port.get(CRD, "", WIDGET_CRD["metadata"]["name"])
    conditions = ((crd or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def _served(port: Cluster, ns: str) -> bool:
    try:
        port.list(WIDGET, ns)
    except NotFound:
        return False
    return True


@pytest.fixture(scope="session")
def widget_crd(cluster: Any) -> None:
    """Install the test CRD once per session and wait until widgets are served."""
    from ptah.kube.real import RealCluster

    with RealCluster.from_kubeconfig(cluster.kubeconfig) as port:
        with contextlib.suppress(AlreadyExists):  # left by an earlier session on a reused cluster
            port.create(CRD, WIDGET_CRD)
        env = Env(port, "default", timeout=60.0)
        env.eventually("widgets CRD Established", lambda: _crd_established(port))
        env.eventually("widgets served", lambda: _served(port, "default"))


@pytest.fixture(params=["memory", pytest.param("real", marks=pytest.mark.integration)])
def env(request: pytest.FixtureRequest) -> Iterator[Env]:
    if request.param == "memory":
        yield Env(MemoryCluster(seed=11), "conformance", timeout=0.0)
        return
    from ptah.kube.real import RealCluster

    cluster = request.getfixturevalue("cluster")
    request.getfixturevalue("widget_crd")
    ns = request.getfixturevalue("namespace")
    with RealCluster.from_kubeconfig(cluster.kubeconfig) as port:
        yield Env(port, ns, timeout=60.0)


def widget(env: Env, name: str = "w", **meta: Any) -> Obj:
    return {
        "apiVersion": WIDGET.api_version,
        "kind": WIDGET.kind,
        "metadata": {"name": name, "namespace": env.ns, **meta},
        "spec": {"size": 1},
    }


def configmap(env: Env, name: str, **meta: Any) -> Obj:
    return {"metadata": {"name": name, "namespace": env.ns, **meta}, "data": {"k": "v"}}


def owned_by(owner: Obj, block: bool = False) -> list[dict[str, Any]]:
    ref: dict[str, Any] = {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
    }
    if block:
        ref["blockOwnerDeletion"] = True
    return [ref]


def rv(obj: Obj) -> str:
    return str(obj["metadata"]["resourceVersion"])


# --- create and read ----------------------------------------------------------------------


def test_create_sets_server_fields_and_drops_status(env: Env) -> None:
    body = widget(env)
    body["status"] = {"phase": "made-up"}
    out = env.port.create(WIDGET, body)
    meta = out["metadata"]
    assert meta["uid"] and meta["resourceVersion"] and meta["creationTimestamp"]
    assert meta["generation"] == 1
    assert "status" not in out
    assert env.port.get(WIDGET, env.ns, "w") == out


def test_create_already_exists(env: Env) -> None:
    env.port.create(WIDGET, widget(env))
    with pytest.raises(AlreadyExists):
        env.port.create(WIDGET, widget(env))


def test_generate_name(env: Env) -> None:
    body = configmap(env, "")
    del body["metadata"]["name"]
    body["metadata"]["generateName"] = "gen-"
    out = env.port.create(kinds.CONFIGMAP, body)
    assert out["metadata"]["name"].startswith("gen-") and len(out["metadata"]["name"]) == 9


def test_missing_object(env: Env) -> None:
    assert env.port.get(WIDGET, env.ns, "nope") is None
    with pytest.raises(NotFound):
        env.port.patch(WIDGET, env.ns, "nope", {"spec": {"size": 2}})
    with pytest.raises(NotFound):
        env.port.delete(WIDGET, env.ns, "nope")


def test_list_by_label_selector(env: Env) -> None:
    env.port.create(kinds.CONFIGMAP, configmap(env, "b", labels={"app": "ptah", "op": "plan"}))
    env.port.create(kinds.CONFIGMAP, configmap(env, "a", labels={"app": "ptah", "op": "apply"}))
    env.port.create(kinds.CONFIGMAP, configmap(env, "c", labels={"app": "other"}))

    def names(labels: dict[str, str]) -> list[str]:
        return [o["metadata"]["name"] for o in env.port.list(kinds.CONFIGMAP, env.ns, labels)]

    assert names({"app": "ptah"}) == ["a", "b"]
    assert names({"app": "ptah", "op": "plan"}) == ["b"]
    assert names({"app": "none"}) == []
    listed = env.port.list(kinds.CONFIGMAP, env.ns, {"op": "plan"})
    assert listed[0]["kind"] == "ConfigMap" and listed[0]["apiVersion"] == "v1"


# --- patch: preconditions, status subresource, generation ----------------------------------


def test_stale_resource_version_on_status_patch_conflicts(env: Env) -> None:
    created = env.port.create(WIDGET, widget(env))
    env.port.patch(WIDGET, env.ns, "w", {"spec": {"size": 2}})
    stale = {"metadata": {"resourceVersion": rv(created)}, "status": {"phase": "claimed"}}
    with pytest.raises(Conflict):
        env.port.patch(WIDGET, env.ns, "w", stale, subresource="status")
    cur = env.port.get(WIDGET, env.ns, "w")
    assert cur is not None and "status" not in cur
    fresh = {"metadata": {"resourceVersion": rv(cur)}, "status": {"phase": "claimed"}}
    out = env.port.patch(WIDGET, env.ns, "w", fresh, subresource="status")
    assert out["status"] == {"phase": "claimed"}
    assert int(rv(out)) > int(rv(cur))


def test_stale_resource_version_on_lease_conflicts(env: Env) -> None:
    lease = env.port.create(
        kinds.LEASE,
        {
            "metadata": {"name": "lock", "namespace": env.ns},
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 30},
        },
    )
    env.port.patch(kinds.LEASE, env.ns, "lock", {"spec": {"holderIdentity": "b"}})
    with pytest.raises(Conflict):
        env.port.patch(
            kinds.LEASE,
            env.ns,
            "lock",
            {"metadata": {"resourceVersion": rv(lease)}, "spec": {"holderIdentity": "c"}},
        )
    cur = env.port.get(kinds.LEASE, env.ns, "lock")
    assert cur is not None and cur["spec"]["holderIdentity"] == "b"


def test_status_ignored_on_main_resource(env: Env) -> None:
    env.port.create(WIDGET, widget(env))
    env.port.patch(WIDGET, env.ns, "w", {"status": {"phase": "real"}}, subresource="status")
    out = env.port.patch(WIDGET, env.ns, "w", {"spec": {"size": 3}, "status": {"phase": "fake"}})
    assert out["spec"]["size"] == 3
    assert out["status"] == {"phase": "real"}


def test_spec_and_metadata_ignored_on_status_patch(env: Env) -> None:
    env.port.create(WIDGET, widget(env))
    out = env.port.patch(
        WIDGET,
        env.ns,
        "w",
        {"metadata": {"labels": {"sneaky": "yes"}}, "spec": {"size": 9}, "status": {"phase": "p"}},
        subresource="status",
    )
    assert out["status"] == {"phase": "p"}
    assert out["spec"]["size"] == 1
    assert "sneaky" not in (out["metadata"].get("labels") or {})


def test_generation_bumps_on_spec_change_only(env: Env) -> None:
    env.port.create(WIDGET, widget(env))
    out = env.port.patch(WIDGET, env.ns, "w", {"metadata": {"labels": {"a": "b"}}})
    assert out["metadata"]["generation"] == 1
    out = env.port.patch(WIDGET, env.ns, "w", {"status": {"phase": "x"}}, subresource="status")
    assert out["metadata"]["generation"] == 1
    out = env.port.patch(WIDGET, env.ns, "w", {"spec": {"size": 2}})
    assert out["metadata"]["generation"] == 2


def test_noop_patch_keeps_resource_version(env: Env) -> None:
    created = env.port.create(WIDGET, widget(env, labels={"a": "b"}))
    out = env.port.patch(WIDGET, env.ns, "w", {"metadata": {"labels": {"a": "b"}}})
    assert rv(out) == rv(created)


# --- finalizers and deletion ----------------------------------------------------------------


def test_finalizer_holds_deletion_and_removing_it_deletes(env: Env) -> None:
    env.port.create(WIDGET, widget(env, finalizers=[HOLD]))
    env.port.delete(WIDGET, env.ns, "w")
    held = env.port.get(WIDGET, env.ns, "w")
    assert held is not None
    assert held["metadata"]["deletionTimestamp"]
    assert held["metadata"]["finalizers"] == [HOLD]
    # deleting again changes nothing
    env.port.delete(WIDGET, env.ns, "w")
    again = env.port.get(WIDGET, env.ns, "w")
    assert again is not None
    assert again["metadata"]["deletionTimestamp"] == held["metadata"]["deletionTimestamp"]
    # no new finalizer on an object being deleted
    with pytest.raises(Invalid):
        env.port.patch(WIDGET, env.ns, "w", {"metadata": {"finalizers": [HOLD, "b.test/x"]}})
    env.port.patch(WIDGET, env.ns, "w", {"metadata": {"finalizers": None}})
    env.eventually("widget gone", lambda: env.gone(WIDGET, "w"))


def test_delete_uid_precondition(env: Env) -> None:
    first = env.port.create(WIDGET, widget(env))
    env.port.delete(WIDGET, env.ns, "w")
    env.eventually("widget gone", lambda: env.gone(WIDGET, "w"))
    second = env.port.create(WIDGET, widget(env))
    with pytest.raises(Conflict):
        env.port.delete(WIDGET, env.ns, "w", uid=first["metadata"]["uid"])
    assert env.port.get(WIDGET, env.ns, "w") is not None
    env.port.delete(WIDGET, env.ns, "w", uid=second["metadata"]["uid"])
    env.eventually("widget gone", lambda: env.gone(WIDGET, "w"))


# --- owner references ------------------------------------------------------------------------


def test_owner_gone_collects_dependent(env: Env) -> None:
    owner = env.port.create(WIDGET, widget(env))
    env.port.create(kinds.CONFIGMAP, configmap(env, "dep", ownerReferences=owned_by(owner)))
    env.port.delete(WIDGET, env.ns, "w", propagation="Background")
    env.eventually("dependent collected", lambda: env.gone(kinds.CONFIGMAP, "dep"))


def test_orphan_keeps_dependent_and_drops_reference(env: Env) -> None:
    owner = env.port.create(WIDGET, widget(env))
    env.port.create(kinds.CONFIGMAP, configmap(env, "dep", ownerReferences=owned_by(owner)))
    env.port.delete(WIDGET, env.ns, "w", propagation="Orphan")
    env.eventually("owner gone", lambda: env.gone(WIDGET, "w"))

    def orphaned() -> bool:
        dep = env.port.get(kinds.CONFIGMAP, env.ns, "dep")
        assert dep is not None, "an orphaned dependent must survive"
        return not dep["metadata"].get("ownerReferences")

    env.eventually("ownerReference removed", orphaned)


def test_foreground_waits_for_blocking_dependent(env: Env) -> None:
    owner = env.port.create(WIDGET, widget(env))
    env.port.create(
        kinds.CONFIGMAP,
        configmap(env, "dep", ownerReferences=owned_by(owner, block=True), finalizers=[HOLD]),
    )
    env.port.delete(WIDGET, env.ns, "w", propagation="Foreground")

    def dependent_deleting() -> bool:
        dep = env.port.get(kinds.CONFIGMAP, env.ns, "dep")
        return dep is not None and "deletionTimestamp" in dep["metadata"]

    env.eventually("dependent marked for deletion", dependent_deleting)
    held = env.port.get(WIDGET, env.ns, "w")
    assert held is not None
    assert "foregroundDeletion" in held["metadata"]["finalizers"]
    env.port.patch(kinds.CONFIGMAP, env.ns, "dep", {"metadata": {"finalizers": None}})
    env.eventually("dependent gone", lambda: env.gone(kinds.CONFIGMAP, "dep"))
    env.eventually("owner gone", lambda: env.gone(WIDGET, "w"))


# --- finer points the simulation relies on ---------------------------------------------------


def test_empty_finalizer_list_vanishes(env: Env) -> None:
    env.port.create(WIDGET, widget(env, finalizers=[HOLD]))
    out = env.port.patch(WIDGET, env.ns, "w", {"metadata": {"finalizers": []}})
    assert "finalizers" not in out["metadata"]


def test_deletion_start_bumps_generation(env: Env) -> None:
    env.port.create(WIDGET, widget(env, finalizers=[HOLD]))
    env.port.delete(WIDGET, env.ns, "w")
    held = env.port.get(WIDGET, env.ns, "w")
    assert held is not None and held["metadata"]["generation"] == 2
    env.port.patch(WIDGET, env.ns, "w", {"metadata": {"finalizers": None}})


def test_no_status_subresource_on_plain_kinds(env: Env) -> None:
    env.port.create(kinds.LEASE, {"metadata": {"name": "l", "namespace": env.ns}, "spec": {}})
    with pytest.raises(NotFound):
        env.port.patch(kinds.LEASE, env.ns, "l", {"status": {"x": 1}}, subresource="status")


def test_uid_in_patch_is_immutable(env: Env) -> None:
    """A merge patch cannot act on a different object's uid: the server rejects it."""
    env.port.create(WIDGET, widget(env))
    with pytest.raises(Invalid):
        env.port.patch(WIDGET, env.ns, "w", {"metadata": {"uid": "0" * 8}, "spec": {"size": 5}})


def test_label_value_too_long_is_invalid(env: Env) -> None:
    with pytest.raises(Invalid):
        env.port.create(WIDGET, widget(env, labels={"test.ptah.io/digest": "a" * 64}))


def test_dependent_of_a_gone_owner_is_collected(env: Env) -> None:
    owner = env.port.create(WIDGET, widget(env))
    env.port.delete(WIDGET, env.ns, "w")
    env.eventually("owner gone", lambda: env.gone(WIDGET, "w"))
    env.port.create(kinds.CONFIGMAP, configmap(env, "late", ownerReferences=owned_by(owner)))
    env.eventually("late dependent collected", lambda: env.gone(kinds.CONFIGMAP, "late"))


def test_dependent_with_a_remaining_owner_loses_only_the_dangling_reference(env: Env) -> None:
    a = env.port.create(WIDGET, widget(env, "a"))
    b = env.port.create(WIDGET, widget(env, "b"))
    refs = owned_by(a) + owned_by(b)
    env.port.create(kinds.CONFIGMAP, configmap(env, "dep", ownerReferences=refs))
    env.port.delete(WIDGET, env.ns, "a")

    def only_b() -> bool:
        dep = env.port.get(kinds.CONFIGMAP, env.ns, "dep")
        assert dep is not None, "a dependent with a live owner must survive"
        return [r["name"] for r in dep["metadata"]["ownerReferences"]] == ["b"]

    env.eventually("dangling reference removed", only_b)


# --- pod logs ------------------------------------------------------------------------------


def test_read_log(env: Env) -> None:
    with pytest.raises(NotFound):
        env.port.read_log(env.ns, "absent", "main")
    pod = {
        "metadata": {"name": "talker", "namespace": env.ns},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "main", "image": "ptah/ptah:dev", "command": ["sh", "-c", "echo hello"]}
            ],
        },
    }
    env.port.create(kinds.POD, pod)
    if isinstance(env.port, MemoryCluster):  # the simulation's kubelet writes the log
        env.port.set_log(env.ns, "talker", "main", "hello\n")

    def log() -> str:
        try:
            return env.port.read_log(env.ns, "talker", "main")
        except NotFound:
            return ""

    assert env.eventually("the pod's log", log) == "hello\n"
    with pytest.raises(NotFound):
        env.port.read_log(env.ns, "talker", "no-such-container")
    env.port.delete(kinds.POD, env.ns, "talker")
    env.eventually("pod gone", lambda: env.gone(kinds.POD, "talker"))
    with pytest.raises(NotFound):
        env.port.read_log(env.ns, "talker", "main")


# --- caller mistakes read the same on both ports -----------------------------------------------


def test_caller_mistakes(env: Env) -> None:
    with pytest.raises(Invalid):
        env.port.create(WIDGET, widget(env, resourceVersion="5"))
    env.port.create(WIDGET, widget(env))
    with pytest.raises(ApiError) as info:
        env.port.patch(WIDGET, env.ns, "w", {"metadata": {"name": "other"}})
    assert info.value.status == 400
    with pytest.raises(Invalid):
        env.port.patch(WIDGET, env.ns, "w", {"kind": "Gadget"})
    out = env.port.patch(WIDGET, env.ns, "w", {"metadata": {"generation": 9}})
    assert out["metadata"]["generation"] == 1
    assert "managedFields" not in out["metadata"]


def test_events_and_leases_round_trip(env: Env) -> None:
    event = env.port.create(
        kinds.EVENT,
        {
            "metadata": {"generateName": "w.", "namespace": env.ns},
            "involvedObject": {
                "apiVersion": WIDGET.api_version,
                "kind": WIDGET.kind,
                "name": "w",
                "namespace": env.ns,
            },
            "reason": "Claimed",
            "message": "operation claimed",
            "type": "Normal",
            "source": {"component": "ptah"},
        },
    )
    assert event["metadata"]["name"].startswith("w.")
    assert [e["reason"] for e in env.port.list(kinds.EVENT, env.ns)] == ["Claimed"]
    spec = {
        "holderIdentity": "ptah-0",
        "leaseDurationSeconds": 30,
        "acquireTime": "2026-11-30T00:00:00.000000Z",
        "renewTime": "2026-11-30T00:00:05.000000Z",
        "leaseTransitions": 1,
    }
    lease = env.port.create(
        kinds.LEASE, {"metadata": {"name": "t", "namespace": env.ns}, "spec": spec}
    )
    assert lease["spec"] == spec
    assert "generation" not in lease["metadata"]
