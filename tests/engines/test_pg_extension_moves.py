"""An extension that moves to another schema: refused first, with the statement to run."""

from __future__ import annotations

import pytest
from pgcorpus import apply_plan

from ptah.engines import planner
from ptah.engines.connect import open_target
from ptah.engines.model import PlanError

pytestmark = pytest.mark.integration

V1 = """
CREATE SCHEMA extensions;
CREATE EXTENSION citext WITH SCHEMA extensions;
CREATE TABLE public.t (id integer PRIMARY KEY, e extensions.citext);
"""
V2 = """
CREATE SCHEMA extensions;
CREATE EXTENSION citext WITH SCHEMA public;
CREATE TABLE public.t (id integer PRIMARY KEY, e public.citext);
"""


def test_extension_moved_to_another_schema_is_refused_with_the_statement(pg_db: str) -> None:
    """Planned before as a retype of the column to public.citext (not there: the apply
    failed, and every plan after it); the refusal names ALTER EXTENSION ... SET SCHEMA,
    after which the same file plans nothing."""
    apply_plan(pg_db, V1)
    with open_target(pg_db) as t:
        with pytest.raises(PlanError) as err:
            planner.plan(t, V2)
        assert err.value.reason == "Unsupported"
        assert "ALTER EXTENSION citext SET SCHEMA public" in str(err.value)
        t.connection.execute("ALTER EXTENSION citext SET SCHEMA public")
        t.connection.commit()
        assert planner.plan(t, V2).statements == []
