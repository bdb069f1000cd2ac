"""Comments an extension's own script sets on its members when the plan creates it."""

from __future__ import annotations

import pytest
from pgcorpus import apply_plan

pytestmark = pytest.mark.integration

BASE = "CREATE TABLE public.t (id integer PRIMARY KEY);\n"


def test_script_comments_are_not_set_again_and_changes_to_them_converge(pg_db: str) -> None:
    """cube's and seg's scripts comment their types and functions (and each extension
    has its control file's comment): the plan that creates them sets none of those
    again, sets the one the desired file changes, and clears the one it removes (the
    script would have left it, and the target never reached the plan's fingerprint)."""
    apply_plan(pg_db, BASE)
    desired = (
        BASE
        + "CREATE EXTENSION cube;\n"
        + "CREATE EXTENSION seg;\n"
        + "COMMENT ON FUNCTION public.cube_cmp(public.cube, public.cube) IS 'mine';\n"
        + "COMMENT ON TYPE public.seg IS NULL;\n"
    )
    plan = apply_plan(pg_db, desired)
    assert [" ".join(s.sql.split()) for s in plan.statements] == [
        "CREATE EXTENSION IF NOT EXISTS cube WITH SCHEMA public",
        "CREATE EXTENSION IF NOT EXISTS seg WITH SCHEMA public",
        "COMMENT ON FUNCTION public.cube_cmp(public.cube,public.cube) IS 'mine'",
        "COMMENT ON TYPE public.seg IS NULL",
    ]


def test_extension_dropped_with_its_commented_members(pg_db: str) -> None:
    desired = BASE + "CREATE EXTENSION cube;\n"
    apply_plan(pg_db, desired)
    plan = apply_plan(pg_db, BASE)
    assert [s.sql for s in plan.statements] == ["DROP EXTENSION cube"]
