"""Version to version: a schema brought to version A by Ptah, then planned and applied to
version B (and back to A), must dump like B (and A) loaded by psql and re-plan empty.

Each pair is an edit a real migration makes that once broke a plan: an apply failure on
valid input, a lost object, or a plan that did not converge.
"""

from __future__ import annotations

import pytest
from pgcorpus import apply_plan, assert_same_dump, database, ensure_roles, psql_load

from ptah.engines import planner
from ptah.engines.connect import open_target
from ptah.engines.model import PlanError

pytestmark = pytest.mark.integration

# Indexes, a check and a default on a function whose argument type changes: the old
# function is dropped, not replaced, so the index (swapped in under online indexes when
# only its definition changes) must go before it, in the drops.
SIGNATURE = """
CREATE TABLE public.t (id integer PRIMARY KEY, v integer DEFAULT public.f(1), w integer);
CREATE INDEX t_f ON public.t (public.f(w));
"""
F_INT = "CREATE FUNCTION public.f(x integer) RETURNS integer LANGUAGE sql IMMUTABLE AS 'SELECT x';"
F_BIG = "CREATE FUNCTION public.f(x bigint) RETURNS integer LANGUAGE sql IMMUTABLE AS 'SELECT 1';"

# A value added to an enum and used in the same plan (a default, an index predicate):
# the server accepts the value only once the ALTER TYPE ... ADD VALUE has committed.
ENUM = """
CREATE TYPE public.state AS ENUM ('new', 'open');
CREATE TABLE public.ticket (id integer, s public.state DEFAULT 'new');
"""
ENUM_USED = (
    ENUM.replace("'new', 'open'", "'new', 'triage', 'open'").replace(
        "DEFAULT 'new'", "DEFAULT 'triage'"
    )
    + "CREATE INDEX ticket_triage ON public.ticket (id) WHERE s = 'triage';\n"
)

# A function dropped and created again (an argument renamed) that column defaults use,
# on a plain and on a partitioned table: the defaults are dropped and set again; the
# tables, which cannot be rebuilt, stay.
DEFAULTS = """
CREATE FUNCTION public.pick(x integer) RETURNS integer LANGUAGE sql AS 'SELECT 1';
CREATE TABLE public.plain (id integer DEFAULT public.pick(1), n integer);
CREATE TABLE public.log (at date NOT NULL, n integer DEFAULT public.pick(2))
  PARTITION BY RANGE (at);
CREATE TABLE public.log_1 PARTITION OF public.log FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
"""

PAIRS: dict[str, tuple[str, str]] = {
    "function argument type under an index": (F_INT + SIGNATURE, F_BIG + SIGNATURE),
    "function argument renamed under column defaults": (
        DEFAULTS,
        DEFAULTS.replace("pick(x integer)", "pick(y integer)"),
    ),
}
# A table-wide grant revoked where column grants of the same privilege stay: the
# server's REVOKE takes those with it, so the plan grants them again.
GRANTS = """
CREATE TABLE public.t (id integer, secret text);
GRANT SELECT (id) ON public.t TO ptah_corpus_reader;
"""
PAIRS["table grant over column grants"] = (
    GRANTS,
    GRANTS + "GRANT SELECT ON public.t TO ptah_corpus_reader;\n",
)

# A partition detached to a plain table keeps what it had from its parent (the primary
# key's copy, the check, the index attached to the parent's): the plan keeps what the
# desired has as it is and drops the rest after the DETACH.
PARTED = """
CREATE TABLE public.ev (id bigint NOT NULL, at date NOT NULL, kind text CHECK (kind <> ''),
  PRIMARY KEY (id, at)) PARTITION BY RANGE (at);
CREATE INDEX ev_kind ON public.ev (kind);
"""
ATTACHED = (
    "CREATE TABLE public.ev_1 PARTITION OF public.ev FOR VALUES FROM ('2024-01-01')"
    " TO ('2025-01-01');"
)
PLAIN = """
CREATE TABLE public.ev_1 (id bigint NOT NULL, at date NOT NULL, kind text,
  CONSTRAINT ev_1_pkey PRIMARY KEY (id, at));
CREATE INDEX ev_1_kind_idx ON public.ev_1 (kind);
"""

# Pairs whose way back is refused by design (an enum value removed), or fails for
# another reason (attaching a table that lacks the parent's check).
ONE_WAY: dict[str, tuple[str, str]] = {
    "enum value added and used": (ENUM, ENUM_USED),
    "partition detached to a plain table": (PARTED + ATTACHED, PARTED + PLAIN),
    "partition detached, its constraints dropped": (
        PARTED + ATTACHED,
        PARTED + "CREATE TABLE public.ev_1 (id bigint NOT NULL, at date NOT NULL, kind text);",
    ),
}


@pytest.mark.parametrize("name", [*PAIRS, *ONE_WAY])
def test_version_to_version(pg_url: str, name: str) -> None:
    ensure_roles(pg_url)
    a, b = PAIRS.get(name) or ONE_WAY[name]
    with database(pg_url) as db:
        apply_plan(db, a)
        for version in (b, a) if name in PAIRS else (b,):
            apply_plan(db, version)
            with database(pg_url) as psql_db:
                psql_load(psql_db, version)
                assert_same_dump(db, psql_db)


def test_stored_composite_attribute_type_change_is_refused(pg_db: str) -> None:
    """ALTER TYPE ... ALTER ATTRIBUTE fails on the server when a table stores the type:
    the plan says so, naming the table, instead of failing on apply."""
    a = "CREATE TYPE public.addr AS (zip varchar(5));\nCREATE TABLE public.cu (home public.addr);"
    apply_plan(pg_db, a)
    with open_target(pg_db) as t, pytest.raises(PlanError) as err:
        planner.plan(t, a.replace("varchar(5)", "varchar(9)"))
    assert err.value.reason == "Unsupported"
    assert "public.addr" in str(err.value) and "table public.cu" in str(err.value)
