"""Schema shapes that did not round-trip: each from empty (or from a first version) must
dump like psql's load of the desired file and re-plan empty, or be refused naming the
object."""

from __future__ import annotations

import pytest
from pgcorpus import (
    apply_plan,
    assert_edit_like_psql,
    assert_same_dump,
    database,
    ensure_roles,
    psql_load,
    refusal,
)

pytestmark = pytest.mark.integration

FROM_EMPTY: dict[str, str] = {
    # Created INHERITS, the child had its parents' default and NULLs: never converged.
    "inheriting child's own default and NOT NULL": """
        CREATE TABLE public.a (id integer NOT NULL DEFAULT 1, x text);
        CREATE TABLE public.b (id integer NOT NULL, y text);
        CREATE TABLE public.c (z integer, id integer DEFAULT 2) INHERITS (public.a, public.b);
        ALTER TABLE public.c ALTER COLUMN x SET DEFAULT 'q';
        ALTER TABLE public.c ALTER COLUMN y SET NOT NULL;
        CREATE TABLE public.d () INHERITS (public.c);
        ALTER TABLE public.d ALTER COLUMN id DROP NOT NULL;
    """,
    # Its SET NOT NULL was planned again on every plan.
    "partition's own NOT NULL": """
        CREATE TABLE public.m (d date NOT NULL, v integer) PARTITION BY RANGE (d);
        CREATE TABLE public.m1 PARTITION OF public.m FOR VALUES FROM ('2020-01-01')
            TO ('2021-01-01');
        ALTER TABLE public.m1 ALTER COLUMN v SET NOT NULL;
    """,
    # CREATE DOMAIN ... CONSTRAINT ... NOT VALID: a syntax error on apply.
    "domain's NOT VALID check": """
        CREATE DOMAIN public.code AS text NOT NULL CONSTRAINT code_set CHECK (VALUE <> '');
        ALTER DOMAIN public.code ADD CONSTRAINT code_not_y CHECK (VALUE <> 'y') NOT VALID;
        CREATE TABLE public.t (c public.code);
    """,
    # Granted by name, the ACL (and pg_dump's GRANTs) stood in another order.
    "grants in the order the file gives them": """
        CREATE TABLE public.t (a integer);
        GRANT SELECT ON public.t TO ptah_corpus_writer;
        GRANT SELECT ON public.t TO PUBLIC;
        GRANT SELECT ON public.t TO ptah_corpus_reader;
        GRANT UPDATE (a) ON public.t TO ptah_corpus_writer;
        GRANT UPDATE (a) ON public.t TO ptah_corpus_reader;
        CREATE FUNCTION public.f() RETURNS integer LANGUAGE sql RETURN 1;
        REVOKE ALL ON FUNCTION public.f() FROM PUBLIC;
        GRANT EXECUTE ON FUNCTION public.f() TO ptah_corpus_writer;
        GRANT EXECUTE ON FUNCTION public.f() TO ptah_corpus_reader;
    """,
    "identity sequence's grants in the order the file gives them": """
        CREATE TABLE public.t (id integer GENERATED ALWAYS AS IDENTITY);
        GRANT USAGE ON SEQUENCE public.t_id_seq TO ptah_corpus_writer;
        GRANT USAGE ON SEQUENCE public.t_id_seq TO ptah_corpus_reader;
    """,
    # LIKE copies an identity under a bigint sequence: its MAXVALUE was lost silently.
    "identity copied by LIKE": """
        CREATE TABLE public.src (i integer GENERATED ALWAYS AS IDENTITY);
        CREATE TABLE public.dst (LIKE public.src INCLUDING ALL);
    """,
    # "unsafe use of new value": the scratch loaded the file in one transaction, where
    # psql commits each statement.
    "enum value used in the file that adds it": """
        CREATE TYPE public.mood AS ENUM ('sad', 'ok');
        ALTER TYPE public.mood ADD VALUE 'happy' AFTER 'ok';
        CREATE TABLE public.person (
            name text,
            mood public.mood DEFAULT 'happy' CHECK (mood <> 'happy' OR name IS NOT NULL)
        );
        ALTER TYPE public.mood ADD VALUE IF NOT EXISTS 'meh' BEFORE 'sad';
        CREATE VIEW public.cheerful AS SELECT * FROM public.person WHERE mood IN ('happy', 'meh');
    """,
}


@pytest.mark.parametrize("sql", FROM_EMPTY.values(), ids=FROM_EMPTY.keys())
def test_from_empty_dumps_like_psql(pg_url: str, sql: str) -> None:
    ensure_roles(pg_url)
    with database(pg_url) as ptah_db, database(pg_url) as psql_db:
        apply_plan(ptah_db, sql)
        psql_load(psql_db, sql)
        assert_same_dump(ptah_db, psql_db)


EDITS: dict[str, tuple[str, str]] = {
    # Planned nothing: the child's default on its inherited column never changed.
    "child's own default on an inherited column": (
        """
        CREATE TABLE public.a (id integer NOT NULL DEFAULT 1, x text);
        CREATE TABLE public.c (z integer) INHERITS (public.a);
        """,
        """
        CREATE TABLE public.a (id integer NOT NULL DEFAULT 1, x text);
        CREATE TABLE public.c (z integer) INHERITS (public.a);
        ALTER TABLE public.c ALTER COLUMN x SET DEFAULT 'q';
        ALTER TABLE public.c ALTER COLUMN id DROP NOT NULL;
        """,
    ),
    # The parent's SET DEFAULT reaches the child, whose own default is set back after it.
    "parent's change under a child's own default": (
        """
        CREATE TABLE public.a (id integer, x text);
        CREATE TABLE public.c (z integer) INHERITS (public.a);
        ALTER TABLE public.c ALTER COLUMN x SET DEFAULT 'q';
        """,
        """
        CREATE TABLE public.a (id integer DEFAULT 2, x text DEFAULT 'p' NOT NULL);
        CREATE TABLE public.c (z integer) INHERITS (public.a);
        ALTER TABLE public.c ALTER COLUMN x SET DEFAULT 'q';
        """,
    ),
    # ADD GENERATED ... AS IDENTITY before SET NOT NULL: the server refused it.
    "identity added to a nullable column": (
        "CREATE TABLE public.i (a integer, b integer);",
        "CREATE TABLE public.i (a integer, b integer GENERATED ALWAYS AS IDENTITY);",
    ),
    # The new sub-partition's index was created by the server and again by the plan.
    "sub-partitioned partition under a partitioned index": (
        """
        CREATE TABLE public.m (d date NOT NULL, v integer) PARTITION BY RANGE (d);
        CREATE TABLE public.m1 PARTITION OF public.m FOR VALUES FROM ('2020-01-01')
            TO ('2021-01-01');
        CREATE INDEX m_v ON public.m (v);
        """,
        """
        CREATE TABLE public.m (d date NOT NULL, v integer) PARTITION BY RANGE (d);
        CREATE TABLE public.m1 PARTITION OF public.m FOR VALUES FROM ('2020-01-01')
            TO ('2021-01-01');
        CREATE TABLE public.m2 PARTITION OF public.m FOR VALUES FROM ('2021-01-01')
            TO ('2022-01-01')
            PARTITION BY LIST (v);
        CREATE TABLE public.m2a PARTITION OF public.m2 FOR VALUES IN (1);
        CREATE INDEX m_v ON public.m (v);
        """,
    ),
}


@pytest.mark.parametrize(("first", "second"), EDITS.values(), ids=EDITS.keys())
def test_edit_dumps_like_psql(pg_url: str, first: str, second: str) -> None:
    assert_edit_like_psql(pg_url, first, second)


REFUSED: dict[str, tuple[str, str, str]] = {
    # A plain CREATE INDEX made it valid (and indexed the partition): never converged.
    "invalid partitioned index": (
        "",
        """
        CREATE TABLE public.pp (id integer, k integer) PARTITION BY LIST (k);
        CREATE TABLE public.pp1 PARTITION OF public.pp FOR VALUES IN (1);
        CREATE INDEX pp_k ON ONLY public.pp (k);
        """,
        "index public.pp_k on public.pp is invalid",
    ),
    # INHERIT failed on apply (child table is missing column "y").
    "inheriting a parent's column the child lacks": (
        """
        CREATE TABLE public.b (id integer, y text);
        CREATE TABLE public.c (id integer, z integer);
        """,
        """
        CREATE TABLE public.b (id integer, y text);
        CREATE TABLE public.c (id integer, z integer) INHERITS (public.b);
        """,
        "table public.c: column y would stay its own",
    ),
}


@pytest.mark.parametrize(("first", "second", "said"), REFUSED.values(), ids=REFUSED.keys())
def test_refused_naming_the_object(pg_url: str, first: str, second: str, said: str) -> None:
    assert said in refusal(pg_url, first, second)
