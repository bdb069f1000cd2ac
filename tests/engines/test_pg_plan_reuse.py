"""A re-plan from the cache reuses the whole plan kept for the same source, the same
probe of the target, the same online policy and the same engines' code, and only then."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptah.engines import planner
from ptah.engines.connect import open_target
from ptah.engines.model import Online, SchemaPolicy

DESIRED = (
    "CREATE SCHEMA app;\n"
    "CREATE TABLE app.t (id bigint PRIMARY KEY, name text NOT NULL);\n"
    "CREATE INDEX t_name ON app.t (name);\n"
)


def test_a_kept_plan_is_reused_only_for_its_source_target_policy_and_code(
    pg_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = str(tmp_path)
    with open_target(pg_db) as t:
        t.connection.execute("CREATE SCHEMA app; CREATE TABLE app.t (id bigint PRIMARY KEY)")
        first = planner.plan(t, DESIRED, cache_dir=cache)
        assert first.statements and "planReused" not in first.timings
        again = planner.plan(t, DESIRED, cache_dir=cache)
        assert again.timings.get("planReused") == 1.0
        assert again.to_json() == first.to_json() and again.warnings == first.warnings
        assert again.statements == first.statements  # hazards, transactions, locks too
        assert again.cache == {"desired": True, "inspection": True}

        # Another online policy diffs otherwise: not the kept plan.
        offline = SchemaPolicy(online=Online(indexes=False))
        other = planner.plan(t, DESIRED, cache_dir=cache, policy=offline)
        assert "planReused" not in other.timings
        assert other.to_json() == planner.plan(t, DESIRED, policy=offline).to_json()

        # Another engines' code (a changed differ): planned in full.
        monkeypatch.setattr(planner, "_engines_digest", lambda: "another")
        assert "planReused" not in planner.plan(t, DESIRED, cache_dir=cache).timings
        monkeypatch.undo()

        # The target moved: planned in full against what it is now.
        t.connection.execute("ALTER TABLE app.t ADD COLUMN name text")
        moved = planner.plan(t, DESIRED, cache_dir=cache)
        assert "planReused" not in moved.timings
        assert moved.to_json() == planner.plan(t, DESIRED).to_json()
        assert moved.to_json() != first.to_json()
