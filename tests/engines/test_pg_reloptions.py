"""Storage parameters are a set: the same ones written in another order plan nothing."""

from __future__ import annotations

import pytest
from pgcorpus import apply_plan

from ptah.engines import planner
from ptah.engines.connect import open_target

pytestmark = pytest.mark.integration

WRITTEN = """
CREATE TABLE public.t (
  id integer PRIMARY KEY WITH (fillfactor = 80, deduplicate_items = off),
  v text,
  during tstzrange,
  EXCLUDE USING gist (during WITH &&) WITH (fillfactor = 70, buffering = off)
) WITH (fillfactor = 70, autovacuum_enabled = false);
CREATE INDEX t_v ON public.t (v) WITH (fillfactor = 60, deduplicate_items = off);
CREATE MATERIALIZED VIEW public.mv WITH (fillfactor = 50, autovacuum_enabled = false)
  AS SELECT id FROM public.t;
CREATE VIEW public.v WITH (security_barrier = true, check_option = local)
  AS SELECT id FROM public.t;
"""


def _reordered(sql: str) -> str:
    for a, b in (
        ("fillfactor = 80, deduplicate_items = off", "deduplicate_items = off, fillfactor = 80"),
        ("fillfactor = 70, buffering = off", "buffering = off, fillfactor = 70"),
        (
            "fillfactor = 70, autovacuum_enabled = false",
            "autovacuum_enabled = false, fillfactor = 70",
        ),
        ("fillfactor = 60, deduplicate_items = off", "deduplicate_items = off, fillfactor = 60"),
        (
            "fillfactor = 50, autovacuum_enabled = false",
            "autovacuum_enabled = false, fillfactor = 50",
        ),
        (
            "security_barrier = true, check_option = local",
            "check_option = local, security_barrier = true",
        ),
    ):
        assert a in sql
        sql = sql.replace(a, b)
    return sql


def test_options_in_another_order_plan_nothing(pg_db: str) -> None:
    apply_plan(pg_db, WRITTEN)
    with open_target(pg_db) as t:
        plan = planner.plan(t, _reordered(WRITTEN))
        assert [s.sql for s in plan.statements] == []
        assert plan.fingerprint_after == plan.fingerprint_before


def test_created_in_the_order_written(pg_db: str) -> None:
    """Created from empty, each object keeps the desired file's order (as psql's load
    does, so pg_dump prints the same), then plans nothing again."""
    plan = apply_plan(pg_db, _reordered(WRITTEN))
    sqls = " ".join(s.sql for s in plan.statements)
    assert "WITH (deduplicate_items='off', fillfactor='80')" in sqls
    assert "WITH (deduplicate_items=off, fillfactor='60')" in sqls
    with open_target(pg_db) as t:
        assert planner.plan(t, WRITTEN).statements == []


def test_toast_storage_parameters_are_planned(pg_db: str) -> None:
    """A table's TOAST parameters (toast.autovacuum_*, common in tuned databases) were
    refused as unmanaged; they are the table's storage parameters, set and reset so."""
    v1 = "CREATE TABLE public.t (id integer, v text) WITH (toast.autovacuum_enabled = false);"
    apply_plan(pg_db, v1)
    v2 = "CREATE TABLE public.t (id integer, v text) WITH (toast.vacuum_truncate = false);"
    plan = apply_plan(pg_db, v2)
    assert [s.sql for s in plan.statements] == [
        "ALTER TABLE public.t RESET (toast.autovacuum_enabled)",
        "ALTER TABLE public.t SET (toast.vacuum_truncate=false)",
    ]


def test_materialized_view_toast_parameters_are_planned(pg_db: str) -> None:
    base = "CREATE TABLE public.t (id integer, v text);\n"
    mv = "CREATE MATERIALIZED VIEW public.mv WITH ({}) AS SELECT id, v FROM public.t;\n"
    apply_plan(pg_db, base + mv.format("fillfactor = 50, toast.autovacuum_enabled = false"))
    apply_plan(pg_db, base + mv.format("fillfactor = 50"))
