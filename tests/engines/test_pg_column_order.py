"""Column and attribute order: a plan converges and is then empty, or is refused up front."""

from __future__ import annotations

import pytest
from pgcorpus import apply_plan

from ptah.engines import planner
from ptah.engines.connect import open_target
from ptah.engines.model import PlanError

pytestmark = pytest.mark.integration

V1 = "CREATE TABLE public.t (id integer PRIMARY KEY, b text);\n"
MIDDLE = "CREATE TABLE public.t (id integer PRIMARY KEY, a integer, b text);\n"


def test_column_added_in_the_middle_converges_and_says_the_order(pg_db: str) -> None:
    """ADD COLUMN puts it last: the plan says so; applied, every plan after it is empty
    (the order is not compared: never planned again) and still says the order differs,
    until the desired file lists the columns as the table has them."""
    apply_plan(pg_db, V1)
    plan = apply_plan(pg_db, MIDDLE)  # asserts: applied, reached its fingerprint, re-plans empty
    assert [s.sql for s in plan.statements] == ["ALTER TABLE public.t ADD COLUMN a integer"]
    (said,) = plan.warnings
    assert "table public.t" in said and "(b, a)" in said and "(a, b)" in said
    with open_target(pg_db) as t:
        for _ in range(2):
            again = planner.plan(t, MIDDLE)
            assert again.statements == [] and again.warnings == [said]
        in_step = planner.plan(t, V1.replace("b text", "b text, a integer"))
        assert in_step.statements == [] and in_step.warnings == []


TYPE_V1 = "CREATE TYPE public.pair AS (a integer, c text);\n"
TYPE_MIDDLE = "CREATE TYPE public.pair AS (a integer, b date, c text);\n"
USES = (
    "CREATE FUNCTION public.first(p public.pair) RETURNS integer LANGUAGE sql IMMUTABLE"
    " AS 'SELECT (p).a';\nCOMMENT ON TYPE public.pair IS 'two';\n"
)


def test_composite_attribute_in_the_middle_is_created_again_when_nothing_stores_it(
    pg_db: str,
) -> None:
    """ADD ATTRIBUTE appends, and the attribute order is the type's meaning: planned in
    place, the apply missed its fingerprint and every plan after it was refused."""
    apply_plan(pg_db, TYPE_V1 + USES)
    plan = apply_plan(pg_db, TYPE_MIDDLE + USES)
    sqls = [s.sql for s in plan.statements]
    assert "DROP TYPE public.pair" in sqls
    assert "CREATE TYPE public.pair AS (a integer, b date, c text)" in sqls
    assert "COMMENT ON TYPE public.pair IS 'two'" in sqls


def test_composite_attribute_in_the_middle_of_a_stored_type_is_refused(pg_db: str) -> None:
    table = "CREATE TABLE public.t (id integer, p public.pair);\n"
    apply_plan(pg_db, TYPE_V1 + table)
    with open_target(pg_db) as t, pytest.raises(PlanError) as err:
        planner.plan(t, TYPE_MIDDLE + table)
    assert err.value.reason == "Unsupported"
    assert "composite type public.pair" in str(err.value) and "table public.t" in str(err.value)
    assert "put new attributes last" in str(err.value)
    # At the end, it is added in place.
    at_end = apply_plan(pg_db, TYPE_V1.replace("c text", "c text, b date") + table)
    assert [s.sql for s in at_end.statements] == ["ALTER TYPE public.pair ADD ATTRIBUTE b date"]


def test_partition_in_another_order_than_its_parent_is_said(pg_db: str) -> None:
    """pg_dump writes a partition as a table of its own columns, then attaches it: a
    partition in another order than its parent's was created PARTITION OF in the
    parent's order without a word (only later plans said it)."""
    sql = (
        "CREATE TABLE public.p (id integer, at date, v text) PARTITION BY RANGE (at);\n"
        "CREATE TABLE public.p1 (v text, at date, id integer);\n"
        "ALTER TABLE public.p ATTACH PARTITION public.p1"
        " FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');\n"
    )
    plan = apply_plan(pg_db, sql)
    assert any(
        w.startswith("table public.p1: created as a partition of public.p") and "(v, at, id)" in w
        for w in plan.warnings
    ), plan.warnings
