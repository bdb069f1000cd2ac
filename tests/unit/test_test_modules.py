"""Test modules are imported by basename (pytest's default ``prepend`` import mode, no
``__init__.py`` in the tiers), so two tiers holding a module of one name stop the whole
run at collection: the CI of stop 30 failed that way when an e2e module took a unit
module's name. Checked here so a unit run catches it before the long tiers do."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_basename() -> None:
    by_name: defaultdict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        if "__pycache__" in path.parts:
            continue
        by_name[path.name].append(str(path.relative_to(TESTS)))
    shared = {name: sorted(paths) for name, paths in by_name.items() if len(paths) > 1}
    assert not shared, f"test modules sharing a basename: {shared}"
