"""Ptah's generated CRDs on the real apiserver: accepted, structural, validating."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ptah.kube import errors
from ptah.kube.kinds import ROLLOUT, SCHEMA
from ptah.kube.real import RealCluster

CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds"


def _schema(name: str, source: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "ptah.io/v1alpha1",
        "kind": "PtahSchema",
        "metadata": {"name": name},
        "spec": {"target": {"engine": "sqlite", "secretRef": {"name": "db"}}, "source": source},
    }


def test_crds_install_and_validate(cluster: Any, namespace: str) -> None:
    cluster.kubectl("apply", "--server-side", "-f", str(CRDS))
    for crd in ("ptahschemas", "ptahmigrations", "ptahplans", "ptahapprovals"):
        cluster.kubectl(
            "wait", "--for=condition=Established", f"crd/{crd}.ptah.io", "--timeout=60s"
        )
    port = RealCluster.from_kubeconfig(str(cluster.kubeconfig))
    good = _schema("good", {"inline": "CREATE TABLE a (id int);"})
    good["metadata"]["namespace"] = namespace
    created = port.create(SCHEMA, good)
    assert created["spec"]["driftCheckIntervalSeconds"] == 600  # a default from the models

    bad = _schema("bad", {"inline": "x", "configMapKeyRef": {"name": "c", "key": "k"}})
    bad["metadata"]["namespace"] = namespace
    try:
        port.create(SCHEMA, bad)
    except errors.Invalid as exc:
        assert "exactly one of source.inline and source.configMapKeyRef" in str(exc)
    else:
        raise AssertionError("the CEL rule did not refuse two sources")

    wrong = _schema("wrong", {"inline": "x"})
    wrong["metadata"]["namespace"] = namespace
    wrong["spec"]["target"]["engine"] = "oracle"
    try:
        port.create(SCHEMA, wrong)
    except errors.Invalid as exc:
        assert "oracle" in str(exc)
    else:
        raise AssertionError("the enum did not refuse an unknown engine")

    out = cluster.kubectl("get", "ptahschemas", "-o", "json", namespace=namespace)
    assert [i["metadata"]["name"] for i in json.loads(out.stdout)["items"]] == ["good"]


def test_rollout_crd_refuses_two_templates_and_no_targets(cluster: Any, namespace: str) -> None:
    cluster.kubectl("apply", "--server-side", "-f", str(CRDS))
    cluster.kubectl(
        "wait", "--for=condition=Established", "crd/ptahrollouts.ptah.io", "--timeout=60s"
    )
    port = RealCluster.from_kubeconfig(str(cluster.kubeconfig))

    def rollout(name: str, template: dict[str, Any], targets: dict[str, Any]) -> Any:
        return port.create(
            ROLLOUT,
            {
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"template": {"engine": "sqlite", **template}, "targets": targets},
            },
        )

    schema = {"schema": {"source": {"inline": "CREATE TABLE a (id int);"}}}
    migration = {"migration": {"directory": {"configMaps": ["m"]}}}
    created = rollout("good", schema, {"selector": {"matchLabels": {"fleet": "x"}}})
    assert created["spec"]["targets"]["secretKey"] == "url"  # a default from the models
    for name, template, targets, message in (
        ("two", {**schema, **migration}, {"secrets": [{"secretRef": {"name": "a"}}]},
         "exactly one of template.schema and template.migration"),
        ("none", schema, {}, "set targets.selector, targets.secrets, or both"),
    ):  # fmt: skip
        try:
            rollout(name, template, targets)
        except errors.Invalid as exc:
            assert message in str(exc)
        else:
            raise AssertionError(f"the CEL rule did not refuse {name}")
