"""spec.policy.ignore on a kind Ptah manages: publications a change-data-capture tool
makes and edits (Debezium's ``dbz_publication``) are left alone, never dropped, altered
or counted as drift; the managed ones beside them are planned as ever, and dropping one
is destructive."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from ptah.engines import planner
from ptah.engines.connect import open_target
from ptah.engines.model import DESTRUCTIVE, PlanError, SchemaPolicy

pytestmark = pytest.mark.integration

TABLES = """
CREATE TABLE public.t (id integer PRIMARY KEY, a integer, b text);
CREATE TABLE public.u (id integer PRIMARY KEY, v integer);
"""
# What Debezium runs (publication.autocreate.mode = filtered), as its own role would.
DEBEZIUM = "CREATE PUBLICATION dbz_publication FOR TABLE public.t (id, a) WHERE (a > 0);"
IGNORE = SchemaPolicy(ignore=("publication dbz_*",))


@pytest.fixture
def db(pg_db: str) -> Iterator[tuple[str, Any]]:
    """The target's URL and a third party's autocommit session on it."""
    with psycopg.connect(pg_db, autocommit=True) as third:
        yield pg_db, third


def _pub(third: Any, name: str) -> tuple[Any, ...]:
    """A publication as the catalogs hold it: options, tables with columns and filters."""
    row = third.execute(
        "SELECT puballtables, pubinsert, pubupdate, pubdelete, pubtruncate, pubviaroot,"
        " obj_description(oid, 'pg_publication') FROM pg_publication WHERE pubname = %s",
        (name,),
    ).fetchone()
    tables = third.execute(
        "SELECT schemaname || '.' || tablename, attnames::text, rowfilter"
        " FROM pg_publication_tables WHERE pubname = %s ORDER BY 1",
        (name,),
    ).fetchall()
    return row, tuple(tables)


def _converge(url: str, sql: str, policy: SchemaPolicy = IGNORE) -> list[str]:
    """Plan ``sql`` under ``policy``, apply it (reaching the fingerprint the plan expects),
    and plan again: nothing left. The applied plan's statements."""
    with open_target(url) as t:
        plan = planner.plan(t, sql, policy=policy)
        result = planner.apply(
            t, plan.statements, plan.fingerprint_before, True, plan.fingerprint_after
        )
        assert result.outcome == "succeeded", (result.message, [s.sql for s in plan.statements])
        again = planner.plan(t, sql, policy=policy)
        assert again.statements == [], [s.sql for s in again.statements]
    return [s.sql for s in plan.statements]


def test_ignored_publication_survives_plan_and_apply(db: tuple[str, Any]) -> None:
    url, third = db
    _converge(url, TABLES)
    third.execute(DEBEZIUM)
    before = _pub(third, "dbz_publication")
    desired = TABLES.replace("v integer", "v integer, w text")
    with open_target(url) as t:
        # Not ignored, the managed kind drops it: the test below would see that.
        unguarded = planner.plan(t, desired)
        assert "DROP PUBLICATION dbz_publication" in [s.sql for s in unguarded.statements]
        plan = planner.plan(t, desired, policy=IGNORE)
    assert [s.sql for s in plan.statements] == ["ALTER TABLE public.u ADD COLUMN w text"]
    assert (
        "ignored by spec.policy.ignore, left as it is on the target:"
        " publication dbz_publication (publication dbz_*)"
    ) in plan.warnings
    _converge(url, desired)
    assert _pub(third, "dbz_publication") == before
    for _ in range(2):  # repeated plans: no drift
        with open_target(url) as t:
            assert planner.plan(t, desired, policy=IGNORE).statements == []
    assert _pub(third, "dbz_publication") == before


def test_publication_edited_by_a_third_party_is_untouched(db: tuple[str, Any]) -> None:
    url, third = db
    _converge(url, TABLES)
    third.execute(DEBEZIUM)
    # The connector's configuration changed: its publication changes under Ptah.
    third.execute("ALTER PUBLICATION dbz_publication ADD TABLE public.u")
    third.execute("ALTER PUBLICATION dbz_publication SET TABLE public.t (id, a, b), public.u")
    third.execute("ALTER PUBLICATION dbz_publication SET (publish = 'insert, update')")
    third.execute("COMMENT ON PUBLICATION dbz_publication IS 'debezium'")
    edited = _pub(third, "dbz_publication")
    with open_target(url) as t:
        assert planner.plan(t, TABLES, policy=IGNORE).statements == []
    # Edited between a plan and its apply: the apply refuses (the plan was computed on
    # another target) and touches nothing; planned again, it applies.
    desired = TABLES.replace("v integer", "v integer, w text")
    with open_target(url) as t:
        plan = planner.plan(t, desired, policy=IGNORE)
        third.execute("ALTER PUBLICATION dbz_publication DROP TABLE public.u")
        edited = _pub(third, "dbz_publication")
        result = planner.apply(
            t, plan.statements, plan.fingerprint_before, False, plan.fingerprint_after
        )
        assert (result.outcome, result.reason) == ("refused", "TargetDrifted")
    assert _converge(url, desired) == ["ALTER TABLE public.u ADD COLUMN w text"]
    assert _pub(third, "dbz_publication") == edited


APP_V1 = TABLES + "CREATE PUBLICATION app_pub FOR TABLE public.t;\n"
APP_V2 = TABLES + (
    "CREATE PUBLICATION app_pub FOR TABLE public.t (id, a) WHERE (a > 1), public.u"
    " WITH (publish = 'insert, update, delete, truncate', publish_via_partition_root = true);\n"
    "COMMENT ON PUBLICATION app_pub IS 'app';\n"
)


def test_managed_publication_round_trips_beside_an_ignored_one(db: tuple[str, Any]) -> None:
    url, third = db
    third.execute(TABLES + DEBEZIUM)
    dbz = _pub(third, "dbz_publication")
    assert _converge(url, APP_V1) == [
        "CREATE PUBLICATION app_pub WITH (publish = 'insert, update, delete, truncate',"
        " publish_via_partition_root = false)",
        "ALTER PUBLICATION app_pub ADD TABLE public.t",
    ]
    v1 = _pub(third, "app_pub")
    _converge(url, APP_V2)
    assert _pub(third, "app_pub")[1] == (
        ("public.t", "{id,a}", "(a > 1)"),
        ("public.u", "{id,v}", None),
    )
    _converge(url, APP_V1)
    assert _pub(third, "app_pub") == v1
    assert _pub(third, "dbz_publication") == dbz


def test_desired_file_naming_an_ignored_publication_is_refused(db: tuple[str, Any]) -> None:
    url, _ = db
    for policy, sql, named in [
        (IGNORE, TABLES + DEBEZIUM, "publication dbz_publication (publication dbz_*)"),
        (SchemaPolicy(ignore=("publication",)), APP_V1, "publication app_pub (publication)"),
    ]:
        with open_target(url) as t, pytest.raises(PlanError) as refused:
            planner.plan(t, sql, policy=policy)
        said = str(refused.value)
        assert refused.value.reason == "IgnoredInDesired" and named in said, said
        assert "\n" not in said
    # A name the entry does not cover is managed.
    with open_target(url) as t:
        plan = planner.plan(t, APP_V1, policy=IGNORE)
    assert "ALTER PUBLICATION app_pub ADD TABLE public.t" in [s.sql for s in plan.statements]


def test_ignore_by_kind_leaves_every_publication_alone(db: tuple[str, Any]) -> None:
    url, third = db
    _converge(url, APP_V1, SchemaPolicy())
    third.execute(DEBEZIUM)
    kind = SchemaPolicy(ignore=("publication",))
    with open_target(url) as t:
        plan = planner.plan(t, TABLES, policy=kind)
    assert plan.statements == []
    assert {w.rsplit(": ", 1)[1] for w in plan.warnings if "spec.policy.ignore" in w} == {
        "publication app_pub (publication)",
        "publication dbz_publication (publication)",
    }


@pytest.mark.parametrize(
    ("desired", "said"),
    [
        (
            TABLES.replace(
                "CREATE TABLE public.t (id integer PRIMARY KEY, a integer, b text);", ""
            ),
            "table public.t would be dropped",
        ),
        (TABLES.replace("a integer,", "a bigint,"), "column a of public.t"),
        (TABLES.replace("a integer,", ""), "column a of public.t"),
    ],
    ids=["table-dropped", "column-retyped", "column-dropped"],
)
def test_what_an_ignored_publication_uses_is_held(
    db: tuple[str, Any], desired: str, said: str
) -> None:
    """Dropping a table takes it out of the publication without a word from the server;
    a column its filter or list uses cannot be retyped or dropped. Both are refused at
    the plan, naming the publication, instead of changing it or failing the apply."""
    url, third = db
    _converge(url, TABLES)
    third.execute(DEBEZIUM)
    with open_target(url) as t, pytest.raises(PlanError) as refused:
        planner.plan(t, desired, policy=IGNORE)
    assert said in str(refused.value) and "public.t in publication dbz_publication" in str(
        refused.value
    ), str(refused.value)
    # b is in neither its column list nor its filter: it changes.
    _converge(url, TABLES.replace("b text", "b varchar(10)"))


@pytest.mark.parametrize(
    ("second", "destructive"),
    [
        (TABLES, ["DROP PUBLICATION app_pub"]),
        (
            TABLES + "CREATE PUBLICATION app_pub FOR TABLE public.u;",
            ["ALTER PUBLICATION app_pub DROP TABLE public.t"],
        ),
        (
            APP_V1.replace("public.t;", "public.t WITH (publish = 'insert');"),
            [
                "ALTER PUBLICATION app_pub SET (publish = 'insert',"
                " publish_via_partition_root = false)"
            ],
        ),
        (TABLES + "CREATE PUBLICATION app_pub FOR ALL TABLES;", ["DROP PUBLICATION app_pub"]),
        # a member's row filter changes: dropped and added again, still published
        (APP_V1.replace("public.t;", "public.t WHERE (a > 0);"), []),
        (APP_V1.replace("public.t;", "public.t, public.u;"), []),
    ],
    ids=["dropped", "table-leaves", "publishes-less", "rebuilt", "filter-changes", "table-joins"],
)
def test_dropping_a_publication_is_destructive(
    db: tuple[str, Any], second: str, destructive: list[str]
) -> None:
    url, _ = db
    _converge(url, APP_V1, SchemaPolicy())
    with open_target(url) as t:
        plan = planner.plan(t, second)
    assert [s.sql for s in plan.statements if DESTRUCTIVE in s.hazards] == destructive
    assert plan.statements
    _converge(url, second, SchemaPolicy())


def test_ignored_publication_with_the_replan_cache(db: tuple[str, Any], tmp_path: Any) -> None:
    """A Plan Job with a cache volume reuses the target's inspection and whole plans: an
    edit of the ignored publication moves the probe, so the plan is read again (and is
    still empty), and what a kept plan expects after apply is what apply reaches."""
    url, third = db
    cache = str(tmp_path)
    _converge(url, TABLES)
    third.execute(DEBEZIUM)
    desired = TABLES.replace("v integer", "v integer, w text")
    with open_target(url) as t:
        assert planner.plan(t, TABLES, cache_dir=cache, policy=IGNORE).statements == []
        kept = planner.plan(t, TABLES, cache_dir=cache, policy=IGNORE)
        assert kept.timings.get("planReused") == 1.0 and kept.statements == []
        assert any("publication dbz_publication" in w for w in kept.warnings)
        third.execute("ALTER PUBLICATION dbz_publication ADD TABLE public.u")
        moved = planner.plan(t, TABLES, cache_dir=cache, policy=IGNORE)
        assert "planReused" not in moved.timings and moved.statements == []
        planner.plan(t, desired, cache_dir=cache, policy=IGNORE)
        plan = planner.plan(t, desired, cache_dir=cache, policy=IGNORE)
        assert plan.timings.get("planReused") == 1.0
        result = planner.apply(
            t, plan.statements, plan.fingerprint_before, False, plan.fingerprint_after
        )
        assert result.outcome == "succeeded", result.message
        assert planner.plan(t, desired, cache_dir=cache, policy=IGNORE).statements == []
    assert ("public.u", "{id,v,w}", None) in _pub(third, "dbz_publication")[1]


# Other managed kinds other tools own, each created by the tool on the target; the
# entries of spec.policy.ignore that leave them alone.
OTHERS = {
    "history-table": (
        "CREATE TABLE public.flyway_schema_history (installed_rank integer PRIMARY KEY,"
        " version varchar(50), script text NOT NULL);"
        " CREATE INDEX flyway_schema_history_s_idx ON public.flyway_schema_history (script);"
        " COMMENT ON TABLE public.flyway_schema_history IS 'flyway';",
        ("table public.flyway_*",),
    ),
    # a serial column's sequence goes with its table (OWNED BY)
    "heartbeat-table": (
        "CREATE TABLE public.debezium_heartbeat (id serial PRIMARY KEY, ts timestamptz);",
        ("table public.debezium_heartbeat",),
    ),
    # partitions, a policy, grants, an identity column, column comments, a foreign key
    # to a managed table, a materialized view and its index over it
    "partitioned-table": (
        "CREATE TABLE public.cdc_events (id bigint GENERATED ALWAYS AS IDENTITY, at date,"
        " t_id integer REFERENCES public.t (id), PRIMARY KEY (id, at)) PARTITION BY RANGE (at);"
        " CREATE TABLE public.cdc_events_2026 PARTITION OF public.cdc_events"
        " FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');"
        " ALTER TABLE public.cdc_events ENABLE ROW LEVEL SECURITY;"
        " CREATE POLICY mine ON public.cdc_events USING (true);"
        " GRANT SELECT ON public.cdc_events TO PUBLIC;"
        " COMMENT ON COLUMN public.cdc_events.at IS 'day';"
        " CREATE MATERIALIZED VIEW public.cdc_daily AS SELECT at, count(*) FROM"
        " public.cdc_events GROUP BY at;"
        " CREATE INDEX cdc_daily_at ON public.cdc_daily (at);",
        ("table public.cdc_*", "materialized view public.cdc_*"),
    ),
    # types and a sequence of their own
    "types": (
        "CREATE TYPE public.tool_state AS ENUM ('a', 'b'); CREATE DOMAIN public.tool_pos"
        " AS integer CHECK (VALUE > 0); CREATE TYPE public.tool_pair AS (a integer, b text);"
        " CREATE SEQUENCE public.tool_ids;",
        ("type public.tool_*", "domain public.tool_*", "sequence public.tool_*"),
    ),
    "schema": (
        "CREATE SCHEMA audit; CREATE TABLE audit.log (at timestamptz, what text);"
        " CREATE FUNCTION audit.note() RETURNS trigger LANGUAGE plpgsql AS"
        " $$BEGIN INSERT INTO audit.log VALUES (now(), TG_OP); RETURN NULL; END$$;"
        " CREATE VIEW audit.recent AS SELECT * FROM audit.log;",
        ("schema audit",),
    ),
    "trigger-on-a-managed-table": (
        "CREATE SCHEMA audit; CREATE TABLE audit.log (at timestamptz, what text);"
        " CREATE FUNCTION audit.note() RETURNS trigger LANGUAGE plpgsql AS"
        " $$BEGIN INSERT INTO audit.log VALUES (now(), TG_OP); RETURN NULL; END$$;"
        " CREATE TRIGGER audit_t AFTER INSERT ON public.t FOR EACH ROW"
        " EXECUTE FUNCTION audit.note();",
        ("schema audit", "trigger audit_* on public.t"),
    ),
    "event-trigger": (
        "CREATE FUNCTION public.ddl_note() RETURNS event_trigger LANGUAGE plpgsql AS"
        " $$BEGIN NULL; END$$;"
        " CREATE EVENT TRIGGER ddl_note ON ddl_command_end EXECUTE FUNCTION public.ddl_note();",
        ("event trigger ddl_note", "function public.ddl_note()"),
    ),
}

_OBJECTS = """
SELECT 'rel ' || oid::regclass::text || ' ' || relkind::text FROM pg_class
 WHERE relnamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)
   AND relnamespace::regnamespace::text NOT LIKE 'pg_toast%'
UNION ALL SELECT 'proc ' || oid::regprocedure::text || md5(prosrc) FROM pg_proc WHERE oid >= 16384
UNION ALL SELECT 'trigger ' || pg_get_triggerdef(oid) || tgenabled::text FROM pg_trigger
 WHERE NOT tgisinternal
UNION ALL SELECT 'event trigger ' || evtname || evtenabled::text FROM pg_event_trigger
UNION ALL SELECT 'schema ' || nspname FROM pg_namespace WHERE oid >= 16384
UNION ALL SELECT 'constraint ' || conname || pg_get_constraintdef(oid) FROM pg_constraint
 WHERE oid >= 16384
UNION ALL SELECT 'comment ' || description FROM pg_description WHERE objoid >= 16384
UNION ALL SELECT 'view ' || pg_get_viewdef(oid) FROM pg_class WHERE relkind = 'v'
   AND oid >= 16384
"""


@pytest.mark.parametrize("case", sorted(OTHERS))
def test_other_managed_kinds_a_tool_owns_are_left_alone(db: tuple[str, Any], case: str) -> None:
    url, third = db
    tool, entries = OTHERS[case]
    policy = SchemaPolicy(ignore=entries)
    _converge(url, TABLES)
    third.execute(tool)
    objects = sorted(row[0] for row in third.execute(_OBJECTS).fetchall())
    desired = TABLES.replace("v integer", "v integer, w text")
    with open_target(url) as t:
        unguarded = planner.plan(t, desired)
        assert any(s.sql.startswith("DROP ") for s in unguarded.statements)
        plan = planner.plan(t, desired, policy=policy)
    assert [s.sql for s in plan.statements] == ["ALTER TABLE public.u ADD COLUMN w text"]
    assert sum("spec.policy.ignore" in w for w in plan.warnings) >= 1
    _converge(url, desired, policy)
    assert sorted(row[0] for row in third.execute(_OBJECTS).fetchall()) == objects


def test_what_an_ignored_object_calls_is_not_dropped_from_under_it(db: tuple[str, Any]) -> None:
    """An event trigger left alone, its function not: the plan would drop the function
    (the server would refuse, or cascade into the event trigger); it is refused instead,
    naming both."""
    url, third = db
    _converge(url, TABLES)
    third.execute(OTHERS["event-trigger"][0])
    with open_target(url) as t, pytest.raises(PlanError) as refused:
        planner.plan(t, TABLES, policy=SchemaPolicy(ignore=("event trigger ddl_note",)))
    said = str(refused.value)
    assert "function public.ddl_note() would be dropped" in said, said
    assert "event trigger ddl_note (ignored)" in said, said


def test_a_column_an_ignored_view_reads_is_not_retyped(db: tuple[str, Any]) -> None:
    """The plan rebuilds the views it manages around a column's new type; one it leaves
    alone would stop the ALTER in the middle of the apply: refused at the plan."""
    url, third = db
    _converge(url, TABLES)
    third.execute("CREATE VIEW public.report_v AS SELECT id, a FROM public.t")
    policy = SchemaPolicy(ignore=("view public.report_v",))
    with open_target(url) as t, pytest.raises(PlanError) as refused:
        planner.plan(t, TABLES.replace("a integer,", "a bigint,"), policy=policy)
    assert "column a of public.t" in str(refused.value) and "view public.report_v" in str(
        refused.value
    ), str(refused.value)
    _converge(url, TABLES.replace("b text", "b varchar(10)"), policy)


def test_ptah_plan_and_apply_take_ignore_entries(
    db: tuple[str, Any], tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """`ptah plan`/`ptah apply` by hand say what the operator's plan would: without
    --ignore the tool's publication is dropped, with it it is left alone."""
    from ptah.cli.main import main

    url, third = db
    _converge(url, TABLES)
    third.execute(DEBEZIUM)
    desired = tmp_path / "desired.sql"
    desired.write_text(TABLES.replace("v integer", "v integer, w text"))
    assert main(["plan", "--url", url, "--desired", str(desired)]) == 0
    assert "DROP PUBLICATION dbz_publication" in capsys.readouterr().out
    entry = ["--ignore", "publication dbz_*"]
    assert main(["plan", "--url", url, "--desired", str(desired), *entry]) == 0
    shown = capsys.readouterr().out
    assert "DROP PUBLICATION" not in shown and "left as it is on the target" in shown
    assert main(["apply", "--url", url, "--desired", str(desired), "--yes", *entry]) == 0
    assert third.execute("SELECT count(*) FROM pg_publication").fetchone() == (1,)
