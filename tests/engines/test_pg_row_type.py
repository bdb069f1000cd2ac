"""A table whose row type another table stores: what would rewrite it is refused up front."""

from __future__ import annotations

import pytest
from pgcorpus import apply_plan

from ptah.engines import planner
from ptah.engines.connect import open_target
from ptah.engines.model import PlanError

pytestmark = pytest.mark.integration

V1 = """
CREATE TABLE public.b (id integer, v text);
CREATE TABLE public.a (id integer, r public.b, rs public.b[]);
"""

REWRITES = {
    "column type": ("v text", "v varchar(10)", "ALTER COLUMN v TYPE"),
    "column with a default": ("v text", "v text, n integer DEFAULT 5", "ADD COLUMN n"),
    "identity column": ("v text", "v text, n integer GENERATED ALWAYS AS IDENTITY", "ADD COLUMN n"),
    "set unlogged": ("CREATE TABLE public.b", "CREATE UNLOGGED TABLE public.b", "SET UNLOGGED"),
}


@pytest.mark.parametrize("name", sorted(REWRITES))
def test_rewrite_of_a_stored_row_type_is_refused(pg_db: str, name: str) -> None:
    """The server refuses these (cannot alter table "b" because column "a.r" uses its row
    type): the plan was made, its apply failed, and so did every plan after it."""
    old, new, said = REWRITES[name]
    apply_plan(pg_db, V1)
    with open_target(pg_db) as t, pytest.raises(PlanError) as err:
        planner.plan(t, V1.replace(old, new))
    assert err.value.reason == "Unsupported"
    assert str(err.value).startswith(f"table public.b: {said}")
    assert "public.a.r, public.a.rs store its row type" in str(err.value)


def test_what_the_server_does_in_place_is_still_planned(pg_db: str) -> None:
    apply_plan(pg_db, V1)
    plan = apply_plan(pg_db, V1.replace("v text", "v text NOT NULL, n integer"))
    assert [s.sql for s in plan.statements][-1] == "ALTER TABLE public.b ADD COLUMN n integer"
    # Once nothing stores it, the type change is planned.
    apply_plan(pg_db, "CREATE TABLE public.b (id integer, v varchar(10) NOT NULL, n integer);")
