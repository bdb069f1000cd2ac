"""docs/mutation-lifecycle.md names real symbols, and its safety-state table matches the models."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from pydantic.alias_generators import to_camel

from ptah.api.resources import MigrationStatus, SchemaStatus
from ptah.lifecycle.writes import DURABLE_WRITES

DOC = Path(__file__).resolve().parents[2] / "docs" / "mutation-lifecycle.md"


def _resolve(dotted: str) -> object:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


def test_every_named_symbol_exists() -> None:
    names = set(re.findall(r"`(ptah(?:\.[A-Za-z_][A-Za-z0-9_]*)+)`", DOC.read_text()))
    assert len(names) > 40
    missing = []
    for name in sorted(names):
        try:
            _resolve(name)
        except (ImportError, AttributeError):
            missing.append(name)
    assert missing == []


def test_every_durable_write_in_the_table_is_a_write_function() -> None:
    table = DOC.read_text().split("## Every durable write")[1].split("## Durable safety")[0]
    named = set(re.findall(r"`([a-z_]+)`", table))
    assert named <= set(DURABLE_WRITES)
    assert {"add_finalizer", "write_claim", "write_dispatch_started", "write_outcome"} <= named


def test_safety_state_table_matches_models() -> None:
    section = DOC.read_text().split("## Durable safety state")[1]
    rows = re.findall(r"^\| status\.(\w+) \| (yes|no) \| (yes|no) \|$", section, re.MULTILINE)
    assert len(rows) >= 4
    fields = {
        "PtahSchema": {to_camel(f) for f in SchemaStatus.model_fields},
        "PtahMigration": {to_camel(f) for f in MigrationStatus.model_fields},
    }
    for field, schema, migration in rows:
        assert (field in fields["PtahSchema"]) == (schema == "yes"), field
        assert (field in fields["PtahMigration"]) == (migration == "yes"), field
