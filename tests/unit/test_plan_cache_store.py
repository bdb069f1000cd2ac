"""The re-plan cache's files: written whole under a writer's own name, and bounded."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ptah.engines import planner


def test_entries_past_the_bound_are_pruned_oldest_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(planner, "CACHE_ENTRIES", 3)
    for i in range(5):
        path = tmp_path / f"current-{i}.json"
        planner._store_cache(path, {"table": {}}, [], f"fp{i}")
        os.utime(path, (1000 + i, 1000 + i))  # distinct ages, oldest first
    planner._store_cache(tmp_path / "current-5.json", {}, [], "fp5")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "current-3.json",
        "current-4.json",
        "current-5.json",
    ]
    assert planner._load_cache(tmp_path / "current-5.json") == ({}, [], "fp5")


def test_two_writers_never_share_a_temporary_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runners are each PID 1 in their container and may share one volume."""
    names: list[str] = []
    real_replace = Path.replace

    def spy(self: Path, target: Path) -> Path:
        names.append(self.name)
        return real_replace(self, target)

    monkeypatch.setattr(Path, "replace", spy)
    for _ in range(2):
        planner._store_cache(tmp_path / "desired-k.json", {}, [], "fp")
    assert len(names) == 2 and names[0] != names[1]
    assert [p.name for p in tmp_path.iterdir()] == ["desired-k.json"]
