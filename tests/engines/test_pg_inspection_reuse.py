"""A plan with a cache reuses the target's inspection only while the target's catalogs
have not moved: every kind of DDL on the target is seen by the next plan."""

from __future__ import annotations

from pathlib import Path

from ptah.engines import planner
from ptah.engines.connect import open_target

SCHEMAS = Path(__file__).parent / "schemas"
PG_V1 = (SCHEMAS / "pg_v1.sql").read_text()

# Changes made on the target behind the planner's back, each one of a different kind
# (a change visible only in another object's definition among them: a renamed column
# shows in the view that reads it).
CHANGES = (
    "ALTER TABLE app.orders ADD COLUMN extra int",
    "ALTER TABLE app.customers ALTER COLUMN name SET DEFAULT 'x'",
    "COMMENT ON TABLE app.orders IS 'Orders'",
    "GRANT SELECT ON app.orders TO PUBLIC",
    "CREATE TYPE app.mood AS ENUM ('calm')",
    "ALTER TYPE app.mood ADD VALUE 'busy'",
    "CREATE FUNCTION app.f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
    "CREATE OR REPLACE FUNCTION app.f() RETURNS int LANGUAGE sql AS 'SELECT 2'",
    "ALTER TABLE app.orders ENABLE ROW LEVEL SECURITY",
    "ALTER INDEX app.orders_open RENAME TO orders_pending",
    "ALTER TABLE app.customers RENAME COLUMN email TO login",
    "CLUSTER app.orders USING orders_customer",
    "ALTER TABLE app.orders ALTER COLUMN note SET (n_distinct = 5)",
    "CREATE OPERATOR app.=== (LEFTARG = int, RIGHTARG = int, FUNCTION = int4eq)",
    "DROP TABLE public.audit",
)


def test_pg_inspection_is_reused_only_while_the_target_is_unchanged(
    pg_db: str, tmp_path: Path
) -> None:
    cache = str(tmp_path)
    with open_target(pg_db) as t:
        plan = planner.plan(t, PG_V1)
        applied = planner.apply(t, plan.statements, plan.fingerprint_before)
        assert applied.outcome == "succeeded", applied.message
        first = planner.plan(t, PG_V1, cache_dir=cache)
        assert "inspectionReused" not in first.timings and first.statements == []
        again = planner.plan(t, PG_V1, cache_dir=cache)
        assert again.timings.get("inspectionReused") == 1.0
        assert again.timings.get("cacheHit") == 1.0
        assert again.to_json() == first.to_json()
        assert (first.cache, again.cache) == (
            {"desired": False, "inspection": False},
            {"desired": True, "inspection": True},
        )
        reused = again
        for ddl in CHANGES:
            previous = reused
            t.connection.execute(ddl)
            moved = planner.plan(t, PG_V1, cache_dir=cache)
            assert "inspectionReused" not in moved.timings, ddl
            assert moved.cache == {"desired": True, "inspection": False}, ddl
            assert moved.fingerprint_before == planner.current_fingerprint(t), ddl
            # what the change moved: the schema, or the census the plan reports
            seen = (moved.fingerprint_before, moved.warnings)
            assert seen != (previous.fingerprint_before, previous.warnings), ddl
            reused = planner.plan(t, PG_V1, cache_dir=cache)
            assert reused.timings.get("inspectionReused") == 1.0, ddl
            assert reused.to_json() == moved.to_json(), ddl
        fresh = planner.plan(t, PG_V1)
        assert fresh.to_json() == reused.to_json()
        assert fresh.warnings == reused.warnings  # the census (the operator) is reported
        assert any("operator" in w for w in fresh.warnings)
