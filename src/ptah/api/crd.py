"""CRD manifests generated from the pydantic models.

The models are the single source: this module turns their JSON Schema into
structural OpenAPI v3 (refs inlined, ``nullable`` instead of ``anyOf null``),
adds the status subresource, printer columns and CEL rules, and writes
``deploy/crds/*.yaml``. A test regenerates and compares, so the checked-in
manifests cannot drift from the models.

Run ``python -m ptah.api.crd`` after changing a model (it writes deploy/crds and the
Helm chart's copy).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from ptah.api.resources import (
    ApprovalSpec,
    ApprovalStatus,
    MigrationDirectory,
    MigrationSpec,
    MigrationStatus,
    PlanSpec,
    RolloutSpec,
    RolloutStatus,
    RolloutTargets,
    RolloutTemplate,
    SchemaSource,
    SchemaSpec,
    SchemaStatus,
)
from ptah.kube.kinds import APPROVAL, MIGRATION, PLAN, ROLLOUT, SCHEMA, Kind

Schema = dict[str, Any]

# CEL rules where a relation between fields must hold, keyed by model.
CEL_RULES: dict[type[BaseModel], list[dict[str, str]]] = {
    SchemaSource: [
        {
            "rule": "has(self.inline) != has(self.configMapKeyRef)",
            "message": "set exactly one of source.inline and source.configMapKeyRef",
        }
    ],
    MigrationDirectory: [
        {
            "rule": "has(self.configMaps) != has(self.volume)",
            "message": "set exactly one of directory.configMaps and directory.volume",
        },
        {
            "rule": "!has(self.configMaps) || size(self.configMaps) > 0",
            "message": "directory.configMaps must name at least one ConfigMap",
        },
    ],
    PlanSpec: [{"rule": "self == oldSelf", "message": "a PtahPlan is immutable"}],
    ApprovalSpec: [{"rule": "self == oldSelf", "message": "a PtahApproval's spec is immutable"}],
    RolloutTemplate: [
        {
            "rule": "has(self.schema) != has(self.migration)",
            "message": "set exactly one of template.schema and template.migration",
        }
    ],
    RolloutTargets: [
        {
            "rule": "has(self.selector) || (has(self.secrets) && size(self.secrets) > 0)",
            "message": "set targets.selector, targets.secrets, or both",
        }
    ],
}

_DROP = {"title", "$defs"}


def _structural(node: Any, defs: dict[str, Schema], titles: dict[str, type[BaseModel]]) -> Any:
    if isinstance(node, list):
        return [_structural(n, defs, titles) for n in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        name = node["$ref"].split("/")[-1]
        resolved = _structural(defs[name], defs, titles)
        extra = {k: v for k, v in node.items() if k not in {"$ref", "default"}}
        resolved.update(_structural(extra, defs, titles))
        return resolved
    any_of = node.get("anyOf")
    if any_of is not None:
        non_null = [s for s in any_of if s.get("type") != "null"]
        if len(non_null) == 1 and len(any_of) == 2:
            inner = _structural(non_null[0], defs, titles)
            rest = {k: v for k, v in node.items() if k not in {"anyOf", "default"}}
            inner.update(_structural(rest, defs, titles))
            inner["nullable"] = True
            return inner
    out: Schema = {}
    for key, value in node.items():
        if key in _DROP:
            continue
        if key == "const":
            out["enum"] = [value]
            continue
        if key in ("exclusiveMinimum", "exclusiveMaximum") and not isinstance(value, bool):
            # JSON Schema's numeric bound is OpenAPI v3's bound plus a boolean flag.
            out["minimum" if key == "exclusiveMinimum" else "maximum"] = value
            out[key] = True
            continue
        if key == "default" and isinstance(value, dict | list):
            continue
        if key == "additionalProperties" and value is True:
            out["x-kubernetes-preserve-unknown-fields"] = True
            continue
        if key == "additionalProperties" and value is False:
            continue  # structural schemas prune unknown fields; `false` is not allowed
        if key == "properties":
            out[key] = {k: _structural(v, defs, titles) for k, v in value.items()}
            continue
        out[key] = _structural(value, defs, titles)
    if "enum" in out and "type" not in out:
        out["type"] = "string"
    if (
        out.get("type") == "object"
        and "properties" not in out
        and ("additionalProperties" not in out)
    ):
        out["x-kubernetes-preserve-unknown-fields"] = True
    title = node.get("title")
    if title in titles:
        rules = CEL_RULES.get(titles[title])
        if rules:
            out["x-kubernetes-validations"] = rules
    return out


def _all_models(model: type[BaseModel]) -> dict[str, type[BaseModel]]:
    seen: dict[str, type[BaseModel]] = {}

    def walk(m: type[BaseModel]) -> None:
        if m.__name__ in seen:
            return
        seen[m.__name__] = m
        for field in m.model_fields.values():
            for arg in _model_args(field.annotation):
                walk(arg)

    walk(model)
    return seen


def _model_args(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in getattr(annotation, "__args__", ()) or ():
        found.extend(_model_args(arg))
    return found


def openapi_for(model: type[BaseModel]) -> Schema:
    """Structural OpenAPI v3 for one model, with its CEL rules attached."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.get("$defs", {})
    titles = _all_models(model)
    result = _structural(raw, defs, titles)
    assert isinstance(result, dict)
    return result


PRINTER_COLUMNS: dict[str, list[dict[str, str]]] = {
    "PtahSchema": [
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Plan", "type": "string", "jsonPath": ".status.currentPlan.name"},
        {"name": "Waiting", "type": "string", "jsonPath": ".status.waitingFor"},
        {
            "name": "Ready",
            "type": "string",
            "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
        },
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ],
    "PtahMigration": [
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Pending", "type": "string", "jsonPath": ".status.pendingVersions"},
        {"name": "Repeatables", "type": "string", "jsonPath": ".status.pendingRepeatables"},
        {"name": "Waiting", "type": "string", "jsonPath": ".status.waitingFor"},
        {
            "name": "Ready",
            "type": "string",
            "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
        },
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ],
    "PtahPlan": [
        {"name": "Owner", "type": "string", "jsonPath": ".spec.ownerName"},
        {"name": "Changes", "type": "boolean", "jsonPath": ".spec.changes"},
        {"name": "Destructive", "type": "boolean", "jsonPath": ".spec.destructive"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ],
    "PtahRollout": [
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Wave", "type": "integer", "jsonPath": ".status.currentWave"},
        {"name": "Targets", "type": "integer", "jsonPath": ".status.counts.total"},
        {"name": "Ready", "type": "integer", "jsonPath": ".status.counts.ready"},
        {"name": "Failed", "type": "integer", "jsonPath": ".status.counts.failed"},
        {"name": "Stopped", "type": "string", "jsonPath": ".status.stopped.target"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ],
    "PtahApproval": [
        {"name": "Resource", "type": "string", "jsonPath": ".spec.resourceRef.name"},
        {"name": "Digest", "type": "string", "jsonPath": ".spec.planDigest"},
        {
            "name": "Consumed",
            "type": "string",
            "jsonPath": '.status.conditions[?(@.type=="Consumed")].status',
        },
    ],
}

SHORT_NAMES = {
    "PtahSchema": ["pschema"],
    "PtahMigration": ["pmig"],
    "PtahPlan": ["pplan"],
    "PtahApproval": ["papproval"],
    "PtahRollout": ["prollout"],
}

RESOURCES: list[tuple[Kind, type[BaseModel], type[BaseModel] | None]] = [
    (SCHEMA, SchemaSpec, SchemaStatus),
    (MIGRATION, MigrationSpec, MigrationStatus),
    (PLAN, PlanSpec, None),
    (APPROVAL, ApprovalSpec, ApprovalStatus),
    (ROLLOUT, RolloutSpec, RolloutStatus),
]


def crd_for(kind: Kind, spec: type[BaseModel], status: type[BaseModel] | None) -> dict[str, Any]:
    properties: Schema = {"spec": openapi_for(spec)}
    if status is not None:
        properties["status"] = openapi_for(status)
    version: dict[str, Any] = {
        "name": kind.version,
        "served": True,
        "storage": True,
        "schema": {
            "openAPIV3Schema": {
                "type": "object",
                "required": ["spec"],
                "properties": {
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string"},
                    "metadata": {"type": "object"},
                    **properties,
                },
            }
        },
        "additionalPrinterColumns": PRINTER_COLUMNS[kind.kind],
    }
    if status is not None:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{kind.plural}.{kind.group}"},
        "spec": {
            "group": kind.group,
            "scope": "Namespaced",
            "names": {
                "kind": kind.kind,
                "listKind": f"{kind.kind}List",
                "plural": kind.plural,
                "singular": kind.kind.lower(),
                "shortNames": SHORT_NAMES[kind.kind],
                "categories": ["ptah"],
            },
            "versions": [version],
        },
    }


def all_crds() -> dict[str, dict[str, Any]]:
    """File name to manifest, for every resource."""
    return {f"{k.group}_{k.plural}.yaml": crd_for(k, sp, st) for k, sp, st in RESOURCES}


def render(manifest: dict[str, Any]) -> str:
    return yaml.safe_dump(manifest, sort_keys=False, width=100)


# The Helm chart renders its CRDs from its own copy (charts cannot read outside their
# directory), so the generator writes both; a test compares them.
HELM_COPY = Path("deploy/helm/ptah/files/crds")


def main(argv: list[str]) -> int:
    outs = [Path(argv[0])] if argv else [Path("deploy/crds"), HELM_COPY]
    for out in outs:
        out.mkdir(parents=True, exist_ok=True)
        for name, manifest in all_crds().items():
            (out / name).write_text(render(manifest))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
