"""The checked-in CRDs are exactly what the models generate, and they are structural."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from ptah.api.crd import all_crds, render
from ptah.api.resources import PtahMigration, PtahSchema

CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds"


def test_checked_in_manifests_match_the_models() -> None:
    generated = all_crds()
    on_disk = {p.name for p in CRDS.glob("*.yaml")}
    assert on_disk == set(generated)
    for name, manifest in generated.items():
        assert (CRDS / name).read_text() == render(manifest), (
            f"{name} is stale: run python -m ptah.api.crd deploy/crds"
        )


def _walk(node: Any, path: str = "") -> list[str]:
    problems = []
    if isinstance(node, dict):
        for bad in ("$ref", "anyOf", "oneOf", "allOf", "additionalProperties"):
            if bad in node and not (bad == "additionalProperties" and isinstance(node[bad], dict)):
                problems.append(f"{path}: {bad}")
        if "properties" in node and node.get("type") != "object":
            problems.append(f"{path}: properties without type object")
        for k, v in node.items():
            problems += _walk(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            problems += _walk(v, f"{path}[{i}]")
    return problems


@pytest.mark.parametrize("name", sorted(all_crds()))
def test_schemas_are_structural(name: str) -> None:
    crd = yaml.safe_load((CRDS / name).read_text())
    version = crd["spec"]["versions"][0]
    assert _walk(version["schema"]["openAPIV3Schema"]) == []
    assert version["additionalPrinterColumns"]


def test_cel_rules_are_attached_where_fields_relate() -> None:
    schema = all_crds()["ptah.io_ptahschemas.yaml"]["spec"]["versions"][0]
    source = schema["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["source"]
    assert "has(self.inline) != has(self.configMapKeyRef)" in str(
        source["x-kubernetes-validations"]
    )


def test_models_refuse_what_the_crd_refuses() -> None:
    spec = {"target": {"engine": "oracle", "secretRef": {"name": "x"}}, "source": {"inline": "x"}}
    with pytest.raises(ValidationError):
        PtahSchema.model_validate({"spec": spec})
    with pytest.raises(ValidationError):
        PtahMigration.model_validate(
            {"spec": {"target": {"engine": "postgres", "secretRef": {"name": "x"}}, "bogus": 1}}
        )
