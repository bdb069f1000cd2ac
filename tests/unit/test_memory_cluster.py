"""MemoryCluster keeps the apiserver semantics the lifecycle's safety argument rests on."""

from __future__ import annotations

from typing import Any

import pytest

from ptah.kube import kinds
from ptah.kube.clock import SimClock
from ptah.kube.errors import (
    AlreadyExists,
    ApiError,
    Conflict,
    Invalid,
    NotFound,
    Unavailable,
)
from ptah.kube.port import Cluster, Obj
from ptah.testing.memory import (
    PROCEED,
    ApplyThenFail,
    FailBefore,
    FaultDecision,
    MemoryCluster,
    ReadRequest,
    WriteRequest,
)

NS = "ns"


def schema(name: str = "s", **meta: Any) -> Obj:
    return {
        "metadata": {"name": name, "namespace": NS, **meta},
        "spec": {"engine": "postgres"},
    }


def owner_ref(owner: Obj, block: bool = False) -> dict[str, Any]:
    ref = {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
    }
    if block:
        ref["blockOwnerDeletion"] = True
    return ref


def job(name: str, *owners: dict[str, Any], finalizers: list[str] | None = None) -> Obj:
    meta: dict[str, Any] = {"name": name, "namespace": NS, "ownerReferences": list(owners)}
    if finalizers:
        meta["finalizers"] = finalizers
    return {"metadata": meta, "spec": {"template": {}}}


@pytest.fixture
def c() -> MemoryCluster:
    return MemoryCluster(seed=7)


def rv(obj: Obj) -> int:
    return int(obj["metadata"]["resourceVersion"])


def test_is_a_cluster_port() -> None:
    port: Cluster = MemoryCluster()
    assert port.get(kinds.SCHEMA, NS, "x") is None


# --- create ---------------------------------------------------------------------------


def test_create_assigns_server_fields(c: MemoryCluster) -> None:
    clock = c.clock
    assert isinstance(clock, SimClock)
    clock.advance(90)
    out = c.create(kinds.SCHEMA, schema(uid="caller-made-up"))
    meta = out["metadata"]
    assert meta["uid"] != "caller-made-up" and len(meta["uid"]) == 36
    assert meta["creationTimestamp"] == "2026-01-01T00:01:30Z"
    assert meta["generation"] == 1
    assert out["apiVersion"] == "ptah.io/v1alpha1" and out["kind"] == "PtahSchema"
    second = c.create(kinds.SCHEMA, schema("t"))
    assert rv(second) > rv(out)


def test_create_is_deterministic_per_seed() -> None:
    a, b, other = MemoryCluster(seed=3), MemoryCluster(seed=3), MemoryCluster(seed=4)
    objs = [
        m.create(kinds.JOB, {"metadata": {"generateName": "j-", "namespace": NS}})
        for m in (a, b, other)
    ]
    assert objs[0]["metadata"]["uid"] == objs[1]["metadata"]["uid"]
    assert objs[0]["metadata"]["name"] == objs[1]["metadata"]["name"]
    assert objs[0]["metadata"]["uid"] != objs[2]["metadata"]["uid"]


def test_create_already_exists(c: MemoryCluster) -> None:
    c.create(kinds.SCHEMA, schema())
    with pytest.raises(AlreadyExists):
        c.create(kinds.SCHEMA, schema())


def test_same_name_in_other_namespace_or_kind_is_fine(c: MemoryCluster) -> None:
    c.create(kinds.SCHEMA, schema())
    other = schema()
    other["metadata"]["namespace"] = "elsewhere"
    c.create(kinds.SCHEMA, other)
    c.create(kinds.MIGRATION, schema())


def test_generate_name(c: MemoryCluster) -> None:
    out = c.create(kinds.JOB, {"metadata": {"generateName": "ptah-plan-", "namespace": NS}})
    name = out["metadata"]["name"]
    assert name.startswith("ptah-plan-") and len(name) == len("ptah-plan-") + 5
    assert c.get(kinds.JOB, NS, name) is not None


def test_create_needs_a_name(c: MemoryCluster) -> None:
    with pytest.raises(Invalid):
        c.create(kinds.JOB, {"metadata": {"namespace": NS}})


def test_namespace_required_for_namespaced_kinds(c: MemoryCluster) -> None:
    with pytest.raises(Invalid):
        c.create(kinds.SCHEMA, {"metadata": {"name": "x"}, "spec": {}})


def test_invalid_name_and_label_value(c: MemoryCluster) -> None:
    with pytest.raises(Invalid):
        c.create(kinds.SCHEMA, schema("Not_A_Name"))
    with pytest.raises(Invalid):
        c.create(kinds.SCHEMA, schema(labels={"ptah.io/digest": "a" * 64}))


def test_create_drops_status_of_status_subresource_kinds(c: MemoryCluster) -> None:
    body = schema()
    body["status"] = {"activeOperation": {"id": "x"}}
    assert "status" not in c.create(kinds.SCHEMA, body)
    cm = c.create(kinds.CONFIGMAP, {"metadata": {"name": "p", "namespace": NS}, "data": {"a": "b"}})
    assert cm["data"] == {"a": "b"}
    assert "generation" not in cm["metadata"]


def test_create_rejects_a_resource_version(c: MemoryCluster) -> None:
    with pytest.raises(Invalid):
        c.create(kinds.SCHEMA, schema(resourceVersion="5"))


def test_create_rejects_non_json_values(c: MemoryCluster) -> None:
    body = schema()
    body["spec"]["when"] = object()
    with pytest.raises(TypeError):
        c.create(kinds.SCHEMA, body)


# --- patch ----------------------------------------------------------------------------


def test_merge_patch_semantics(c: MemoryCluster) -> None:
    c.create(
        kinds.CONFIGMAP,
        {"metadata": {"name": "p", "namespace": NS}, "data": {"a": "1", "b": "2"}, "x": [1, 2]},
    )
    out = c.patch(kinds.CONFIGMAP, NS, "p", {"data": {"a": None, "c": "3"}, "x": [9]})
    assert out["data"] == {"b": "2", "c": "3"}
    assert out["x"] == [9]


def test_stale_resource_version_conflicts(c: MemoryCluster) -> None:
    created = c.create(kinds.SCHEMA, schema())
    stale = created["metadata"]["resourceVersion"]
    c.patch(kinds.SCHEMA, NS, "s", {"metadata": {"labels": {"a": "b"}}})
    with pytest.raises(Conflict):
        c.patch(
            kinds.SCHEMA,
            NS,
            "s",
            {"metadata": {"resourceVersion": stale}, "status": {"x": 1}},
            "status",
        )
    with pytest.raises(Conflict):
        c.patch(kinds.SCHEMA, NS, "s", {"metadata": {"resourceVersion": stale}, "spec": {"x": 1}})
    cur = c.get(kinds.SCHEMA, NS, "s")
    assert cur is not None and "status" not in cur and "x" not in cur["spec"]


def test_current_resource_version_passes(c: MemoryCluster) -> None:
    created = c.create(kinds.SCHEMA, schema())
    out = c.patch(
        kinds.SCHEMA,
        NS,
        "s",
        {
            "metadata": {"resourceVersion": created["metadata"]["resourceVersion"]},
            "status": {"x": 1},
        },
        "status",
    )
    assert out["status"] == {"x": 1}
    assert rv(out) > rv(created)


def test_uid_in_patch_is_immutable(c: MemoryCluster) -> None:
    c.create(kinds.SCHEMA, schema())
    with pytest.raises(Invalid):
        c.patch(kinds.SCHEMA, NS, "s", {"metadata": {"uid": "other"}, "spec": {"x": 1}})


def test_status_ignored_on_main_resource(c: MemoryCluster) -> None:
    c.create(kinds.SCHEMA, schema())
    out = c.patch(kinds.SCHEMA, NS, "s", {"spec": {"x": 1}, "status": {"y": 2}})
    assert out["spec"]["x"] == 1 and "status" not in out


def test_main_patch_keeps_existing_status(c: MemoryCluster) -> None:
    c.create(kinds.SCHEMA, schema())
    c.patch(kinds.SCHEMA, NS, "s", {"status": {"phase": "Ready"}}, "status")
    out = c.patch(kinds.SCHEMA, NS, "s", {"spec": {"x": 1}, "status": {"phase": None, "y": 2}})
    assert out["status"] == {"phase": "Ready"}
    out = c.patch(kinds.SCHEMA, NS, "s", {"status": None})
    assert out["status"] == {"phase": "Ready"}


def test_status_only_patch_is_a_noop_on_main_resource(c: MemoryCluster) -> None:
    created = c.create(kinds.SCHEMA, schema())
    out = c.patch(kinds.SCHEMA, NS, "s", {"status": {"y": 2}})
    assert rv(out) == rv(created) and "status" not in out


def test_status_subresource_changes_only_status(c: MemoryCluster) -> None:
    created = c.create(kinds.SCHEMA, schema())
    out = c.patch(
        kinds.SCHEMA,
        NS,
        "s",
        {
            "metadata": {"labels": {"a": "b"}, "finalizers": ["f"]},
            "spec": {"x": 1},
            "status": {"y": 2},
        },
        "status",
    )
    assert out["status"] == {"y": 2}
    assert "x" not in out["spec"]
    assert "labels" not in out["metadata"] and "finalizers" not in out["metadata"]
    assert out["metadata"]["generation"] == created["metadata"]["generation"]


def test_status_subresource_missing_for_kinds_without_it(c: MemoryCluster) -> None:
    c.create(kinds.LEASE, {"metadata": {"name": "l", "namespace": NS}, "spec": {}})
    with pytest.raises(NotFound):
        c.patch(kinds.LEASE, NS, "l", {"status": {}}, "status")


def test_generation_bumps_on_spec_change_only(c: MemoryCluster) -> None:
    c.create(kinds.SCHEMA, schema())

    def g() -> int:
        got = c.get(kinds.SCHEMA, NS, "s")
        assert got is not None
        return int(got["metadata"]["generation"])

    c.patch(kinds.SCHEMA, NS, "s", {"metadata": {"labels": {"a": "b"}, "annotations": {"c": "d"}}})
    c.patch(kinds.SCHEMA, NS, "s", {"status": {"observedGeneration": 1}}, "status")
    assert g() == 1
    c.patch(kinds.SCHEMA, NS, "s", {"spec": {"engine": "mysql"}})
    assert g() == 2
    c.patch(kinds.SCHEMA, NS, "s", {"spec": {"engine": "mysql"}})
    assert g() == 2


def test_noop_patch_keeps_resource_version_but_counts_as_a_request(c: MemoryCluster) -> None:
    created = c.create(kinds.SCHEMA, schema(labels={"a": "b"}))
    c.requests.reset()
    out = c.patch(
        kinds.SCHEMA, NS, "s", {"metadata": {"labels": {"a": "b"}}, "spec": {"engine": "postgres"}}
    )
    assert rv(out) == rv(created)
    assert c.requests.total_writes == 1 and c.requests.effective_writes == 0


def test_server_owned_metadata_cannot_be_patched(c: MemoryCluster) -> None:
    created = c.create(kinds.SCHEMA, schema())
    out = c.patch(
        kinds.SCHEMA,
        NS,
        "s",
        {
            "metadata": {
                "generation": 40,
                "creationTimestamp": None,
                "deletionTimestamp": "2020-01-01T00:00:00Z",
            }
        },
    )
    assert out["metadata"]["generation"] == 1
    assert out["metadata"]["creationTimestamp"] == created["metadata"]["creationTimestamp"]
    assert "deletionTimestamp" not in out["metadata"]


def test_patch_missing_object(c: MemoryCluster) -> None:
    with pytest.raises(NotFound):
        c.patch(kinds.SCHEMA, NS, "nope", {"spec": {}})


def test_empty_finalizers_vanish_like_omitempty(c: MemoryCluster) -> None:
    c.create(kinds.SCHEMA, schema(finalizers=["ptah.io/claim"]))
    out = c.patch(kinds.SCHEMA, NS, "s", {"metadata": {"finalizers": []}})
    assert "finalizers" not in out["metadata"]


# --- finalizers and deletion ----------------------------------------------------------


def test_delete_without_finalizers_removes(c: MemoryCluster) -> None:
    c.create(kinds.SCHEMA, schema())
    c.delete(kinds.SCHEMA, NS, "s")
    assert c.get(kinds.SCHEMA, NS, "s") is None


def test_delete_missing_raises_not_found(c: MemoryCluster) -> None:
    with pytest.raises(NotFound):
        c.delete(kinds.SCHEMA, NS, "s")


def test_delete_with_finalizer_sets_deletion_timestamp_once(c: MemoryCluster) -> None:
    c.create(kinds.SCHEMA, schema(finalizers=["ptah.io/claim"]))
    c.delete(kinds.SCHEMA, NS, "s")
    first = c.get(kinds.SCHEMA, NS, "s")
    assert first is not None
    assert first["metadata"]["deletionTimestamp"] == "2026-01-01T00:00:00Z"
    assert first["metadata"]["generation"] == 2  # the real server bumps it when deletion starts
    assert isinstance(c.clock, SimClock)
    c.clock.advance(60)
    c.delete(kinds.SCHEMA, NS, "s")
    again = c.get(kinds.SCHEMA, NS, "s")
    assert again == first


def test_removing_last_finalizer_deletes(c: MemoryCluster) -> None:
    c.create(kinds.SCHEMA, schema(finalizers=["ptah.io/claim", "other"]))
    c.delete(kinds.SCHEMA, NS, "s")
    c.patch(kinds.SCHEMA, NS, "s", {"metadata": {"finalizers": ["other"]}})
    assert c.get(kinds.SCHEMA, NS, "s") is not None
    c.patch(kinds.SCHEMA, NS, "s", {"metadata": {"finalizers": None}})
    assert c.get(kinds.SCHEMA, NS, "s") is None


def test_removing_finalizers_without_deletion_keeps_object(c: MemoryCluster) -> None:
    c.create(kinds.SCHEMA, schema(finalizers=["ptah.io/claim"]))
    c.patch(kinds.SCHEMA, NS, "s", {"metadata": {"finalizers": None}})
    assert c.get(kinds.SCHEMA, NS, "s") is not None


def test_no_new_finalizers_while_deleting(c: MemoryCluster) -> None:
    c.create(kinds.SCHEMA, schema(finalizers=["a"]))
    c.delete(kinds.SCHEMA, NS, "s")
    with pytest.raises(Invalid):
        c.patch(kinds.SCHEMA, NS, "s", {"metadata": {"finalizers": ["a", "b"]}})
    c.patch(kinds.SCHEMA, NS, "s", {"metadata": {"labels": {"still": "writable"}}})


def test_delete_uid_precondition(c: MemoryCluster) -> None:
    created = c.create(kinds.SCHEMA, schema())
    with pytest.raises(Conflict):
        c.delete(kinds.SCHEMA, NS, "s", uid="not-the-uid")
    assert c.get(kinds.SCHEMA, NS, "s") is not None
    c.delete(kinds.SCHEMA, NS, "s", uid=created["metadata"]["uid"])
    assert c.get(kinds.SCHEMA, NS, "s") is None


def test_uid_precondition_protects_a_recreated_object(c: MemoryCluster) -> None:
    old = c.create(kinds.JOB, job("j"))
    c.delete(kinds.JOB, NS, "j")
    c.create(kinds.JOB, job("j"))
    with pytest.raises(Conflict):
        c.delete(kinds.JOB, NS, "j", uid=old["metadata"]["uid"])


# --- garbage collection ---------------------------------------------------------------


def test_background_gc_deletes_dependents_recursively(c: MemoryCluster) -> None:
    owner = c.create(kinds.SCHEMA, schema())
    j = c.create(kinds.JOB, job("j", owner_ref(owner)))
    c.create(
        kinds.POD, {"metadata": {"name": "p", "namespace": NS, "ownerReferences": [owner_ref(j)]}}
    )
    c.set_log(NS, "p", "runner", "hello")
    c.delete(kinds.SCHEMA, NS, "s")
    assert c.get(kinds.JOB, NS, "j") is None
    assert c.get(kinds.POD, NS, "p") is None
    with pytest.raises(NotFound):
        c.read_log(NS, "p", "runner")


def test_gc_waits_for_owner_finalizers(c: MemoryCluster) -> None:
    owner = c.create(kinds.SCHEMA, schema(finalizers=["ptah.io/claim"]))
    c.create(kinds.JOB, job("j", owner_ref(owner)))
    c.delete(kinds.SCHEMA, NS, "s")
    assert c.get(kinds.JOB, NS, "j") is not None
    c.patch(kinds.SCHEMA, NS, "s", {"metadata": {"finalizers": None}})
    assert c.get(kinds.JOB, NS, "j") is None


def test_gc_respects_dependent_finalizers(c: MemoryCluster) -> None:
    owner = c.create(kinds.SCHEMA, schema())
    c.create(kinds.JOB, job("j", owner_ref(owner), finalizers=["keep"]))
    c.delete(kinds.SCHEMA, NS, "s")
    left = c.get(kinds.JOB, NS, "j")
    assert left is not None and "deletionTimestamp" in left["metadata"]
    c.patch(kinds.JOB, NS, "j", {"metadata": {"finalizers": None}})
    assert c.get(kinds.JOB, NS, "j") is None


def test_gc_keeps_dependent_with_a_remaining_owner(c: MemoryCluster) -> None:
    a = c.create(kinds.SCHEMA, schema("a"))
    b = c.create(kinds.SCHEMA, schema("b"))
    c.create(kinds.JOB, job("j", owner_ref(a), owner_ref(b)))
    c.delete(kinds.SCHEMA, NS, "a")
    left = c.get(kinds.JOB, NS, "j")
    assert left is not None
    assert [r["name"] for r in left["metadata"]["ownerReferences"]] == ["b"]


def test_dependent_created_for_a_gone_owner_is_collected(c: MemoryCluster) -> None:
    owner = c.create(kinds.SCHEMA, schema())
    c.delete(kinds.SCHEMA, NS, "s")
    created = c.create(kinds.JOB, job("j", owner_ref(owner)))
    assert created["metadata"]["name"] == "j"
    assert c.get(kinds.JOB, NS, "j") is None


def test_orphan_removes_owner_reference(c: MemoryCluster) -> None:
    owner = c.create(kinds.SCHEMA, schema())
    c.create(kinds.JOB, job("j", owner_ref(owner)))
    c.delete(kinds.SCHEMA, NS, "s", propagation="Orphan")
    assert c.get(kinds.SCHEMA, NS, "s") is None
    left = c.get(kinds.JOB, NS, "j")
    assert left is not None and "ownerReferences" not in left["metadata"]


def test_foreground_waits_for_blocking_dependents(c: MemoryCluster) -> None:
    owner = c.create(kinds.SCHEMA, schema())
    c.create(kinds.JOB, job("j", owner_ref(owner, block=True), finalizers=["keep"]))
    c.delete(kinds.SCHEMA, NS, "s", propagation="Foreground")
    held = c.get(kinds.SCHEMA, NS, "s")
    assert held is not None
    assert held["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert "deletionTimestamp" in held["metadata"]
    c.patch(kinds.JOB, NS, "j", {"metadata": {"finalizers": None}})
    assert c.get(kinds.JOB, NS, "j") is None
    assert c.get(kinds.SCHEMA, NS, "s") is None


def test_foreground_without_blockers_is_immediate(c: MemoryCluster) -> None:
    owner = c.create(kinds.SCHEMA, schema())
    c.create(kinds.JOB, job("j", owner_ref(owner)))
    c.delete(kinds.SCHEMA, NS, "s", propagation="Foreground")
    assert c.get(kinds.SCHEMA, NS, "s") is None
    assert c.get(kinds.JOB, NS, "j") is None


def test_foreground_owner_cycle_terminates(c: MemoryCluster) -> None:
    a = c.create(kinds.SCHEMA, schema("a"))
    b = c.create(kinds.SCHEMA, schema("b", ownerReferences=[owner_ref(a, block=True)]))
    c.patch(kinds.SCHEMA, NS, "a", {"metadata": {"ownerReferences": [owner_ref(b, block=True)]}})
    c.delete(kinds.SCHEMA, NS, "a", propagation="Foreground")
    # Both wait on each other, as on a real cluster: no crash, no recursion blow-up.
    assert c.get(kinds.SCHEMA, NS, "a") is not None


# --- list, logs, leases, events ---------------------------------------------------------


def test_list_by_labels_and_namespace(c: MemoryCluster) -> None:
    c.create(
        kinds.JOB,
        {"metadata": {"name": "b", "namespace": NS, "labels": {"app": "ptah", "op": "plan"}}},
    )
    c.create(
        kinds.JOB,
        {"metadata": {"name": "a", "namespace": NS, "labels": {"app": "ptah", "op": "apply"}}},
    )
    c.create(
        kinds.JOB, {"metadata": {"name": "c", "namespace": "other", "labels": {"app": "ptah"}}}
    )

    def names(objs: list[Obj]) -> list[str]:
        return [o["metadata"]["name"] for o in objs]

    assert names(c.list(kinds.JOB, NS)) == ["a", "b"]
    assert names(c.list(kinds.JOB, NS, {"app": "ptah", "op": "plan"})) == ["b"]
    assert names(c.list(kinds.JOB, NS, {"app": "nope"})) == []
    assert names(c.list(kinds.JOB, "", {"app": "ptah"})) == ["a", "b", "c"]


def test_logs(c: MemoryCluster) -> None:
    with pytest.raises(NotFound):
        c.set_log(NS, "p", "runner", "x")
    c.create(kinds.POD, {"metadata": {"name": "p", "namespace": NS}})
    with pytest.raises(NotFound):
        c.read_log(NS, "p", "runner")
    c.set_log(NS, "p", "runner", "a\n")
    c.append_log(NS, "p", "runner", "b\n")
    assert c.read_log(NS, "p", "runner") == "a\nb\n"
    c.delete(kinds.POD, NS, "p")
    with pytest.raises(NotFound):
        c.read_log(NS, "p", "runner")


def test_lease_is_plain_spec_object(c: MemoryCluster) -> None:
    spec = {
        "holderIdentity": "ptah-0",
        "leaseDurationSeconds": 30,
        "acquireTime": "2026-01-01T00:00:00.000000Z",
        "renewTime": "2026-01-01T00:00:00.000000Z",
        "leaseTransitions": 0,
    }
    lease = c.create(kinds.LEASE, {"metadata": {"name": "t", "namespace": NS}, "spec": spec})
    assert lease["spec"] == spec and "generation" not in lease["metadata"]
    with pytest.raises(Conflict):
        c.patch(
            kinds.LEASE,
            NS,
            "t",
            {"metadata": {"resourceVersion": "0"}, "spec": {"holderIdentity": "x"}},
        )
    out = c.patch(
        kinds.LEASE,
        NS,
        "t",
        {
            "metadata": {"resourceVersion": lease["metadata"]["resourceVersion"]},
            "spec": {"holderIdentity": "x"},
        },
    )
    assert out["spec"]["holderIdentity"] == "x"


def test_events_are_listable(c: MemoryCluster) -> None:
    c.create(
        kinds.EVENT,
        {
            "metadata": {"generateName": "s.", "namespace": NS},
            "involvedObject": {"kind": "PtahSchema", "name": "s", "namespace": NS},
            "reason": "Claimed",
            "message": "claimed",
            "type": "Normal",
        },
    )
    events = c.list(kinds.EVENT, NS)
    assert [e["reason"] for e in events] == ["Claimed"]


# --- isolation, clock, snapshots ------------------------------------------------------


def test_returned_objects_are_copies(c: MemoryCluster) -> None:
    body = schema(labels={"a": "b"})
    out = c.create(kinds.SCHEMA, body)
    body["spec"]["engine"] = "changed-by-caller"
    out["metadata"]["labels"]["a"] = "mutated"
    got = c.get(kinds.SCHEMA, NS, "s")
    assert got is not None
    got["spec"]["engine"] = "mutated"
    c.list(kinds.SCHEMA, NS)[0]["metadata"]["labels"]["a"] = "mutated"
    again = c.get(kinds.SCHEMA, NS, "s")
    assert again is not None
    assert again["spec"]["engine"] == "postgres" and again["metadata"]["labels"] == {"a": "b"}


def test_patch_values_are_copied_in(c: MemoryCluster) -> None:
    c.create(kinds.SCHEMA, schema())
    p: Obj = {"spec": {"list": [1, {"a": 1}]}}
    c.patch(kinds.SCHEMA, NS, "s", p)
    p["spec"]["list"][1]["a"] = 2
    got = c.get(kinds.SCHEMA, NS, "s")
    assert got is not None and got["spec"]["list"] == [1, {"a": 1}]


def test_clock_drives_timestamps() -> None:
    clock = SimClock()
    c = MemoryCluster(clock=clock)
    t0 = c.now()
    clock.advance(3600)
    assert (c.now() - t0).total_seconds() == 3600
    assert c.now().tzinfo is not None
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_snapshot_and_restore(c: MemoryCluster) -> None:
    c.create(kinds.SCHEMA, schema())
    snap = c.snapshot()
    assert [o["metadata"]["name"] for o in snap.of(kinds.SCHEMA)] == ["s"]
    c.patch(kinds.SCHEMA, NS, "s", {"spec": {"x": 1}})
    c.create(kinds.SCHEMA, schema("t"))
    after = c.create(kinds.SCHEMA, schema("u"))
    c.restore(snap)
    got = c.get(kinds.SCHEMA, NS, "s")
    assert got is not None and "x" not in got["spec"]
    assert c.get(kinds.SCHEMA, NS, "t") is None
    again = c.create(kinds.SCHEMA, schema("t"))
    assert again["metadata"]["uid"] != after["metadata"]["uid"]
    assert c.snapshot().resource_version == rv(again)


# --- faults and counters ----------------------------------------------------------------


def test_fail_before_writes_nothing(c: MemoryCluster) -> None:
    seen: list[WriteRequest] = []

    def faults(req: WriteRequest) -> FaultDecision:
        seen.append(req)
        return FailBefore(Unavailable("boom", uncertain=True))

    c.faults = faults
    with pytest.raises(Unavailable):
        c.create(kinds.SCHEMA, schema())
    c.faults = None
    assert c.get(kinds.SCHEMA, NS, "s") is None
    assert seen[0].verb == "create" and seen[0].name == "s" and seen[0].kind == kinds.SCHEMA


def test_apply_then_fail_writes_and_raises_uncertain(c: MemoryCluster) -> None:
    c.create(kinds.SCHEMA, schema())
    c.faults = lambda req: ApplyThenFail() if req.subresource == "status" else PROCEED
    with pytest.raises(Unavailable) as info:
        c.patch(kinds.SCHEMA, NS, "s", {"status": {"activeOperation": {"id": "op"}}}, "status")
    assert info.value.uncertain
    got = c.get(kinds.SCHEMA, NS, "s")
    assert got is not None and got["status"] == {"activeOperation": {"id": "op"}}


def test_apply_then_fail_hides_the_servers_own_error(c: MemoryCluster) -> None:
    c.create(kinds.SCHEMA, schema())
    c.faults = lambda req: ApplyThenFail()
    with pytest.raises(Unavailable):
        c.create(kinds.SCHEMA, schema())  # AlreadyExists on the server, lost on the wire


def test_write_request_summary(c: MemoryCluster) -> None:
    c.create(kinds.SCHEMA, schema())
    seen: list[WriteRequest] = []

    def record(req: WriteRequest) -> FaultDecision:
        seen.append(req)
        return PROCEED

    c.faults = record
    c.patch(kinds.SCHEMA, NS, "s", {"metadata": {"finalizers": ["f"]}, "spec": {"a": 1}})
    c.delete(kinds.SCHEMA, NS, "s", propagation="Orphan")
    assert seen[0].fields == ("metadata.finalizers", "spec.a")
    assert seen[1].verb == "delete" and seen[1].propagation == "Orphan"


def test_read_faults(c: MemoryCluster) -> None:
    c.create(kinds.SCHEMA, schema())
    reads: list[ReadRequest] = []

    def read_faults(req: ReadRequest) -> ApiError | None:
        reads.append(req)
        return Unavailable("read failed") if req.verb == "list" else None

    c.read_faults = read_faults
    assert c.get(kinds.SCHEMA, NS, "s") is not None
    with pytest.raises(Unavailable):
        c.list(kinds.SCHEMA, NS)
    assert [r.verb for r in reads] == ["get", "list"]


def test_request_counters(c: MemoryCluster) -> None:
    c.create(kinds.SCHEMA, schema())
    c.get(kinds.SCHEMA, NS, "s")
    c.get(kinds.SCHEMA, NS, "s")
    c.list(kinds.JOB, NS)
    c.patch(kinds.SCHEMA, NS, "s", {"spec": {"x": 1}})
    assert c.requests.reads[("get", "PtahSchema")] == 2
    assert c.requests.reads[("list", "Job")] == 1
    assert c.requests.writes[("create", "PtahSchema")] == 1
    assert c.requests.total_reads == 3 and c.requests.total_writes == 2
    assert c.requests.effective_writes == 2
    c.requests.reset()
    assert c.requests.total == 0


def test_system_client_skips_faults_and_counters(c: MemoryCluster) -> None:
    c.faults = lambda req: FailBefore(Unavailable("no"))
    c.read_faults = lambda req: Unavailable("no")
    c.system.create(kinds.POD, {"metadata": {"name": "p", "namespace": NS}})
    c.system.patch(kinds.POD, NS, "p", {"status": {"phase": "Succeeded"}}, "status")
    got = c.system.get(kinds.POD, NS, "p")
    assert got is not None and got["status"]["phase"] == "Succeeded"
    assert c.requests.total == 0


def test_patch_cannot_change_kind_or_drop_metadata(c: MemoryCluster) -> None:
    c.create(kinds.SCHEMA, schema())
    with pytest.raises(Invalid):
        c.patch(kinds.SCHEMA, NS, "s", {"kind": "PtahMigration"})
    with pytest.raises(ApiError) as info:
        c.patch(kinds.SCHEMA, NS, "s", {"metadata": None})
    assert info.value.status == 400
    with pytest.raises(ApiError) as info:
        c.patch(kinds.SCHEMA, NS, "s", {"metadata": {"name": "other"}})
    assert info.value.status == 400


def test_preconditions_are_told_where_the_api_decides(c: MemoryCluster) -> None:
    """A patch carrying a resourceVersion is told whether it held against the version
    stored before the write: what a faults hook did first counts (another writer got in
    between), what the write itself leaves behind does not."""
    created = c.create(kinds.SCHEMA, schema())
    told: list[tuple[str, bool]] = []
    c.preconditions = lambda req, held: told.append((str(req.body), held))
    first = created["metadata"]["resourceVersion"]

    # Held: applied, though the version it carried is no longer stored afterwards.
    out = c.patch(kinds.SCHEMA, NS, "s", {"metadata": {"resourceVersion": first}, "spec": {"a": 1}})
    assert told[-1][1] is True and out["metadata"]["resourceVersion"] != first
    # Stale: refused (409) and told so; nothing written.
    with pytest.raises(Conflict):
        c.patch(kinds.SCHEMA, NS, "s", {"metadata": {"resourceVersion": first}, "spec": {"a": 2}})
    assert told[-1][1] is False
    # No precondition: not told.
    before = len(told)
    c.patch(kinds.SCHEMA, NS, "s", {"spec": {"a": 3}})
    assert len(told) == before

    # Another writer gets in between the request and the store: the precondition fails.
    current = c.get(kinds.SCHEMA, NS, "s")
    assert current is not None
    version = current["metadata"]["resourceVersion"]

    def race(req: WriteRequest) -> FaultDecision:
        c.faults = None
        c.patch(kinds.SCHEMA, NS, "s", {"spec": {"a": 4}})
        return PROCEED

    c.faults = race
    with pytest.raises(Conflict):
        c.patch(kinds.SCHEMA, NS, "s", {"metadata": {"resourceVersion": version}, "spec": {"a": 5}})
    assert told[-1][1] is False

    # Applied with its response lost: held. Refused before the store: told as it stands.
    current = c.get(kinds.SCHEMA, NS, "s")
    assert current is not None
    version = current["metadata"]["resourceVersion"]
    c.faults = lambda req: ApplyThenFail()
    with pytest.raises(Unavailable):
        c.patch(kinds.SCHEMA, NS, "s", {"metadata": {"resourceVersion": version}, "spec": {"a": 6}})
    assert told[-1][1] is True
    c.faults = lambda req: FailBefore(Unavailable("boom", uncertain=True))
    with pytest.raises(Unavailable):
        c.patch(kinds.SCHEMA, NS, "s", {"metadata": {"resourceVersion": version}, "spec": {"a": 7}})
    assert told[-1][1] is False  # the ApplyThenFail write moved it
    # The system door is not observed.
    c.faults = None
    before = len(told)
    current = c.system.get(kinds.SCHEMA, NS, "s")
    assert current is not None
    version = current["metadata"]["resourceVersion"]
    c.system.patch(kinds.SCHEMA, NS, "s", {"metadata": {"resourceVersion": version}, "spec": {}})
    assert len(told) == before
