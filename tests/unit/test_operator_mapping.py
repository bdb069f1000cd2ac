"""Events map back to the resources they concern."""

from __future__ import annotations

from typing import Any

from ptah.operator.main import families
from ptah.operator.mapping import Index, Key, keys_for

NS = "apps"
LOCK = "ptah-system"
FAMILIES = families()


def primary(
    name: str,
    uid: str,
    spec: dict[str, Any],
    status: dict[str, Any] | None = None,
    kind: str = "PtahSchema",
) -> dict[str, Any]:
    return {
        "kind": kind,
        "metadata": {"name": name, "namespace": NS, "uid": uid},
        "spec": spec,
        "status": status or {},
    }


def index() -> Index:
    idx = Index()
    idx.upsert(
        primary(
            "a",
            "uid-a",
            {
                "target": {"secretRef": {"name": "db-a"}},
                "source": {"configMapKeyRef": {"name": "schema-a", "key": "k"}},
            },
            {"activeOperation": {"lease": {"leaseName": "ptah-realm-x"}}},
        )
    )
    idx.upsert(
        primary(
            "b",
            "uid-b",
            {
                "target": {"secretRef": {"name": "db-b"}, "devSecretRef": {"name": "dev"}},
                "source": {"inline": "x"},
                "policy": {"verificationPolicy": "strict"},
            },
            {"activeOperation": {"lease": {"leaseName": "ptah-realm-y", "epoch": 3}}},
        )
    )
    idx.upsert(
        primary(
            "m",
            "uid-m",
            {"target": {"secretRef": {"name": "db-a"}}, "directory": {"configMaps": ["m1", "m2"]}},
            kind="PtahMigration",
        )
    )
    return idx


A, B, M = Key("PtahSchema", NS, "a"), Key("PtahSchema", NS, "b"), Key("PtahMigration", NS, "m")


def meta(name: str, ns: str = NS, **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, **extra}}


def test_owned_objects_by_owner_reference_and_by_label() -> None:
    idx = index()
    job = meta("j", ownerReferences=[{"kind": "PtahSchema", "name": "a", "uid": "uid-a"}])
    assert keys_for("Job", job, idx, LOCK, FAMILIES) == {A}
    pod = meta(
        "p", labels={"ptah.io/owner-uid": "uid-m"}, ownerReferences=[{"kind": "Job", "name": "j"}]
    )
    assert keys_for("Pod", pod, idx, LOCK, FAMILIES) == {M}
    plan = meta("plan", ownerReferences=[{"kind": "PtahSchema", "name": "b", "uid": "uid-b"}])
    assert keys_for("PtahPlan", plan, idx, LOCK, FAMILIES) == {B}
    assert keys_for("Pod", meta("stranger"), idx, LOCK, FAMILIES) == set()


def test_approvals_by_resource_ref() -> None:
    approval = {**meta("ap"), "spec": {"resourceRef": {"kind": "PtahSchema", "name": "b"}}}
    assert keys_for("PtahApproval", approval, index(), LOCK, FAMILIES) == {B}


def test_leases_wake_only_waiters_in_the_lock_namespace() -> None:
    idx = index()
    assert keys_for("Lease", meta("ptah-realm-x", LOCK), idx, LOCK, FAMILIES) == {A}
    assert keys_for("Lease", meta("ptah-realm-y", LOCK), idx, LOCK, FAMILIES) == set()  # b holds it
    assert keys_for("Lease", meta("ptah-realm-x", NS), idx, LOCK, FAMILIES) == set()
    assert keys_for("Lease", meta("ptah-operator-leader", LOCK), idx, LOCK, FAMILIES) == set()


def test_configmaps_and_secrets_by_reference() -> None:
    idx = index()
    assert keys_for("Secret", meta("db-a"), idx, LOCK, FAMILIES) == {A, M}
    assert keys_for("Secret", meta("dev"), idx, LOCK, FAMILIES) == {B}
    assert keys_for("Secret", meta("db-a", "elsewhere"), idx, LOCK, FAMILIES) == set()
    assert keys_for("ConfigMap", meta("schema-a"), idx, LOCK, FAMILIES) == {A}
    assert keys_for("ConfigMap", meta("m2"), idx, LOCK, FAMILIES) == {M}
    assert keys_for("ConfigMap", meta("strict"), idx, LOCK, FAMILIES) == {B}
    # Every resource without an explicit policy reads the default one.
    assert keys_for("ConfigMap", meta("ptah-verification-policy"), idx, LOCK, FAMILIES) == {A, M}


def test_primary_events_and_removal() -> None:
    idx = index()
    assert keys_for("PtahSchema", primary("a", "uid-a", {}), idx, LOCK, FAMILIES) == {A}
    idx.remove(primary("a", "uid-a", {}))
    assert idx.by_uid("uid-a") is None and A not in idx.all_keys()


def test_a_configmap_or_secret_maps_to_the_specs_that_read_it_as_last_watched() -> None:
    """The readers of a ConfigMap or Secret follow each primary's spec as it moves, and a
    removed primary reads nothing."""
    idx = Index()

    def schema(cm: str, secret: str) -> dict[str, Any]:
        spec = {
            "target": {"secretRef": {"name": secret}},
            "source": {"configMapKeyRef": {"name": cm, "key": "k"}},
        }
        return primary("a", "uid-a", spec)

    idx.upsert(schema("x", "s1"))
    assert keys_for("ConfigMap", meta("x"), idx, LOCK, FAMILIES) == {A}
    assert keys_for("Secret", meta("s1"), idx, LOCK, FAMILIES) == {A}
    idx.upsert(schema("y", "s1"))
    assert keys_for("ConfigMap", meta("x"), idx, LOCK, FAMILIES) == set()
    assert keys_for("ConfigMap", meta("y"), idx, LOCK, FAMILIES) == {A}
    assert keys_for("ConfigMap", meta("y", ns="other"), idx, LOCK, FAMILIES) == set()
    idx.remove(schema("y", "s1"))
    assert keys_for("ConfigMap", meta("y"), idx, LOCK, FAMILIES) == set()
    assert keys_for("Secret", meta("s1"), idx, LOCK, FAMILIES) == set()


def test_only_the_runners_jobs_and_pods_are_watched_and_whole() -> None:
    """Jobs and Pods are watched whole (their status says whether they moved), and only
    those carrying an operation's label; a kind two watches select differently is
    watched unselected."""
    from ptah.kube.kinds import CONFIGMAP, JOB, POD
    from ptah.lifecycle.family import Watch
    from ptah.lifecycle.watches import merge_watches
    from ptah.operator.main import drivers, watched
    from ptah.workload.job import LABEL_OPERATION

    by_kind = {w.kind.kind: w for w in watched(FAMILIES, drivers())}
    for kind in (JOB, POD):
        assert not by_kind[kind.kind].metadata_only
        assert by_kind[kind.kind].label_selector == LABEL_OPERATION
    assert by_kind["Secret"].metadata_only and not by_kind["Secret"].label_selector
    (merged,) = merge_watches([Watch(CONFIGMAP, label_selector="a")], [Watch(CONFIGMAP)])
    assert merged.label_selector == "" and merged.metadata_only
    (merged,) = merge_watches(
        [Watch(CONFIGMAP, label_selector="a")],
        [Watch(CONFIGMAP, metadata_only=False, label_selector="a")],
    )
    assert merged.label_selector == "a" and not merged.metadata_only
