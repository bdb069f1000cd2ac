"""The resource guides describe every spec field and every status field of the models
(the CRD source), so a field added to a model without a word in its guide fails here."""

from __future__ import annotations

import typing
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from ptah.api.resources import (
    MigrationSpec,
    MigrationStatus,
    RolloutSpec,
    RolloutStatus,
    SchemaSpec,
    SchemaStatus,
)

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _models(annotation: object) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _models(arg)


def spec_paths(model: type[BaseModel], prefix: str = "spec") -> Iterator[str]:
    """Every field path under ``model``, in wire names (``spec.target.secretRef.key``)."""
    for name, field in model.model_fields.items():
        path = f"{prefix}.{field.alias or name}"
        yield path
        for sub in _models(field.annotation):
            yield from spec_paths(sub, path)


def status_fields(model: type[BaseModel]) -> Iterator[str]:
    for name, field in model.model_fields.items():
        yield f"status.{field.alias or name}"


CASES = [
    ("guide-ptahschema.md", SchemaSpec, SchemaStatus),
    ("guide-ptahmigration.md", MigrationSpec, MigrationStatus),
    ("guide-ptahrollout.md", RolloutSpec, RolloutStatus),
]


@pytest.mark.parametrize(("guide", "spec", "status"), CASES)
def test_every_spec_field_is_described(
    guide: str, spec: type[BaseModel], status: type[BaseModel]
) -> None:
    text = (DOCS / guide).read_text()
    missing = [p for p in spec_paths(spec) if f"`{p}`" not in text]
    assert not missing, f"{guide} does not describe {missing}"


@pytest.mark.parametrize(("guide", "spec", "status"), CASES)
def test_every_status_field_is_described(
    guide: str, spec: type[BaseModel], status: type[BaseModel]
) -> None:
    text = (DOCS / guide).read_text()
    missing = [p for p in status_fields(status) if f"`{p}`" not in text]
    assert not missing, f"{guide} does not describe {missing}"


def test_the_walk_sees_nested_fields() -> None:
    paths = set(spec_paths(SchemaSpec))
    assert "spec.target.secretRef.key" in paths
    assert "spec.source.configMapKeyRef.name" in paths
    assert "spec.runner.activeDeadlineSeconds" in paths
