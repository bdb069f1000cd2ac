"""Nothing silent: the census refuses what the planner does not manage, and the guard confines."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from pgcorpus import database

from ptah.engines import planner
from ptah.engines.connect import open_target
from ptah.engines.model import PlanError
from support.databases import with_database

pytestmark = pytest.mark.integration

BASE = "CREATE TABLE public.t (id integer PRIMARY KEY, a text, b integer);\n"

PARTED = """
CREATE TABLE public.p (id integer, at date, PRIMARY KEY (id, at), CHECK (id > 0))
  PARTITION BY RANGE (at);
CREATE TABLE public.p1 PARTITION OF public.p FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
CREATE FUNCTION public.tf() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$;
CREATE TRIGGER tr BEFORE INSERT ON public.p FOR EACH ROW EXECUTE FUNCTION public.tf();
"""

UNMANAGED = {
    "operator": (
        "CREATE FUNCTION public.t_eq(integer, integer) RETURNS boolean LANGUAGE sql"
        " IMMUTABLE AS 'SELECT $1 = $2';"
        " CREATE OPERATOR public.=== (LEFTARG = integer, RIGHTARG = integer,"
        " FUNCTION = public.t_eq);",
        "operator public.===(integer,integer)",
    ),
    "cast": (
        "CREATE TYPE public.wrapped AS (v integer);"
        " CREATE FUNCTION public.unwrap(public.wrapped) RETURNS integer LANGUAGE sql"
        " AS 'SELECT $1.v';"
        " CREATE CAST (public.wrapped AS integer) WITH FUNCTION public.unwrap(public.wrapped);",
        "cast (public.wrapped AS integer)",
    ),
    "access method": (
        "CREATE ACCESS METHOD heap2 TYPE TABLE HANDLER heap_tableam_handler;",
        "access method heap2",
    ),
    # Text search templates and parsers are C-level (superuser only); configurations and
    # dictionaries are managed, and one on an unmanaged template is refused by it.
    "text search template": (
        "CREATE TEXT SEARCH TEMPLATE public.my_simple (LEXIZE = dsimple_lexize);"
        " CREATE TEXT SEARCH DICTIONARY public.my_dict (TEMPLATE = public.my_simple);",
        "text search template public.my_simple",
    ),
    "column options": (
        "ALTER TABLE public.t ALTER COLUMN a SET (n_distinct = 100);",
        "column options",
    ),
    # Privileges an extension's member was created with, changed: left out silently too.
    "extension member grant": (
        "CREATE EXTENSION pgcrypto;"
        " REVOKE EXECUTE ON FUNCTION public.gen_random_bytes(integer) FROM PUBLIC;",
        "a grant on a member of extension pgcrypto (function public.gen_random_bytes(integer))",
    ),
    "plpgsql language grant": (
        "REVOKE USAGE ON LANGUAGE plpgsql FROM PUBLIC;",
        "a grant on a member of extension plpgsql (language plpgsql)",
    ),
    # Only a table's columns carry these in the plan: on a materialized view's they
    # were left out without a word.
    "materialized view column settings": (
        "CREATE MATERIALIZED VIEW public.mv AS SELECT id, a, a AS c FROM public.t;"
        " ALTER MATERIALIZED VIEW public.mv ALTER COLUMN a SET STATISTICS 200,"
        " ALTER COLUMN c SET STORAGE MAIN;",
        "materialized view column settings (statistics, storage, compression) on public.mv (a)",
    ),
    # GRANT/REVOKE ... ON TYPE of a table's row type: the server takes it, and the plan
    # left it out without a word.
    "row type grant": (
        "REVOKE USAGE ON TYPE public.t FROM PUBLIC;",
        "row type grant on public.t (t)",
    ),
    # A partition's copies of its parent's constraints and triggers are the parent's in
    # the plan: a comment on one, or one enabled otherwise, was left out without a word.
    "comment on a partition's constraint copy": (
        PARTED + "COMMENT ON CONSTRAINT p1_pkey ON public.p1 IS 'key';",
        "comment on a copy of its parent's constraint on public.p1 (p1_pkey)",
    ),
    "comment on a partition's constraint index copy": (
        PARTED + "COMMENT ON INDEX public.p1_pkey IS 'key';",
        "comment on a copy of its parent's constraint on public.p1 (p1_pkey)",
    ),
    "comment on a child's inherited check": (
        PARTED + "COMMENT ON CONSTRAINT p_id_check ON public.p1 IS 'positive';",
        "comment on a copy of its parent's constraint on public.p1 (p_id_check)",
    ),
    "comment on a partition's trigger copy": (
        PARTED + "COMMENT ON TRIGGER tr ON public.p1 IS 'x';",
        "comment on a copy of its parent's trigger on public.p1 (tr)",
    ),
    "partition's trigger copy disabled": (
        PARTED + "ALTER TABLE public.p1 DISABLE TRIGGER tr;",
        "a copy of its parent's trigger enabled otherwise on public.p1 (tr D)",
    ),
    # The owner's own privileges are left out of the plan (the owner is whoever loads
    # the file): one revoked from the owner was left out without a word.
    "owner's own privilege revoked": (
        "REVOKE UPDATE ON public.t FROM CURRENT_USER;",
        "owner's own privilege revoked on public.t (UPDATE)",
    ),
    "view column default": (
        "CREATE VIEW public.v AS SELECT id, a FROM public.t;"
        " ALTER VIEW public.v ALTER COLUMN a SET DEFAULT 'x';",
        "default value for public.v.a",
    ),
}


@pytest.mark.parametrize("kind", sorted(UNMANAGED))
def test_desired_unmanaged_object_is_refused_by_name(pg_db: str, kind: str) -> None:
    extra, named = UNMANAGED[kind]
    with open_target(pg_db) as t, pytest.raises(PlanError) as err:
        planner.plan(t, BASE + extra)
    assert err.value.reason == "Unmanaged"
    assert named in str(err.value)


def test_target_unmanaged_object_is_reported_and_kept(pg_db: str) -> None:
    sql = BASE + "CREATE TABLE public.u (id integer);"
    with open_target(pg_db) as t:
        plan = planner.plan(t, sql)
        planner.apply(t, plan.statements, plan.fingerprint_before, True, plan.fingerprint_after)
        t.connection.execute(
            "CREATE FUNCTION public.t_eq(integer, integer) RETURNS boolean LANGUAGE sql"
            " IMMUTABLE AS 'SELECT $1 = $2'; CREATE OPERATOR public.=== (LEFTARG = integer,"
            " RIGHTARG = integer, FUNCTION = public.t_eq);"
            "CREATE TEXT SEARCH TEMPLATE public.t_ts (LEXIZE = dsimple_lexize)"
        )
        # The hand-made function is managed (and not desired): it is dropped only with its
        # dependents named; the operator and the text search template are not managed:
        # reported, kept.
        again = planner.plan(
            t,
            sql + "CREATE FUNCTION public.t_eq(integer, integer) RETURNS"
            " boolean LANGUAGE sql IMMUTABLE AS 'SELECT $1 = $2';",
        )
        assert again.statements == []
        assert any("operator public.===(integer,integer)" in w for w in again.warnings)
        assert any("text search template public.t_ts" in w for w in again.warnings)
        with pytest.raises(PlanError) as err:  # t_eq is not desired, but the operator uses it
            planner.plan(t, sql)
        assert err.value.reason == "Unmanaged"
        assert "operator public.===(integer,integer)" in str(err.value)
        assert t.connection.execute(
            "SELECT count(*) FROM pg_operator WHERE oprname = '==='"
        ).fetchone() == (1,)


HOSTILE = [
    ("DROP DATABASE IF EXISTS {sentinel};", 2, "whole database"),
    ("CREATE DATABASE {sentinel}_copy;", 2, "whole database"),
    ("\\c {sentinel}\nDROP TABLE keep;", 2, "psql meta-command"),
    ("CREATE ROLE ptah_hostile_role;", 2, "role"),
    ("ALTER SYSTEM SET work_mem = '1GB';", 2, "server's configuration"),
    ("CREATE TABLESPACE hostile LOCATION '/tmp';", 2, "cluster-wide"),
    ("SELECT * FROM {sentinel}.public.keep;", 2, "another database"),
    ("DO $$ BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); END $$;", 2, "pg_terminate"),
    ("GRANT ptah_corpus_reader TO CURRENT_USER;", 2, "membership"),
    ("COPY public.t FROM '/etc/passwd';", 2, "files"),
    ("COMMIT;\nDROP TABLE IF EXISTS public.t;\nROLLBACK;", 4, "transaction control"),
]


@pytest.mark.parametrize("index", range(len(HOSTILE)))
def test_hostile_statement_refused_with_line_and_sentinel_untouched(
    pg_url: str, index: int
) -> None:
    template, line, why = HOSTILE[index]
    sentinel = "ptah_sentinel_" + uuid.uuid4().hex[:8]
    with database(pg_url) as target, open_target(pg_url) as admin:
        admin.connection.execute(f'CREATE DATABASE "{sentinel}"')
        try:
            s_url = with_database(pg_url, sentinel)
            with open_target(s_url) as s:
                s.connection.execute("CREATE TABLE keep (v text); INSERT INTO keep VALUES ('x')")
            before = _checksum(admin, s_url)
            sql = BASE + template.format(sentinel=sentinel) + "\nCREATE TABLE public.after (x int);"
            with open_target(target) as t, pytest.raises(PlanError) as err:
                planner.plan(t, sql)
            assert err.value.reason == "StatementRefused"
            assert f"line {line}:" in str(err.value), str(err.value)
            assert why in str(err.value)
            assert _checksum(admin, s_url) == before
            roles = admin.connection.execute(
                "SELECT count(*) FROM pg_roles WHERE rolname = 'ptah_hostile_role'"
            ).fetchone()
            assert roles == (0,)
        finally:
            admin.connection.execute(f'DROP DATABASE IF EXISTS "{sentinel}" WITH (FORCE)')


def _checksum(admin: object, url: str) -> tuple[object, ...]:
    with open_target(url) as s:
        rows = s.connection.execute(
            "SELECT md5(string_agg(v, ',' ORDER BY v)), count(*) FROM keep"
        ).fetchone()
        oid = s.connection.execute(
            "SELECT oid FROM pg_database WHERE datname = current_database()"
        ).fetchone()
    return (rows, oid)


def test_owner_to_a_missing_role_loads_under_the_default_policy(pg_db: str) -> None:
    sql = BASE + "ALTER TABLE public.t OWNER TO ptah_role_nobody_has;\n"
    with open_target(pg_db) as t:
        plan = planner.plan(t, sql)
    assert next(s.sql.split(" (")[0] for s in plan.statements) == "CREATE TABLE public.t"


def test_load_error_names_the_line(pg_db: str) -> None:
    sql = BASE + "\n\nCREATE TABLE public.v (y public.no_such_type);\n"
    with open_target(pg_db) as t, pytest.raises(Exception) as err:
        planner.plan(t, sql)
    assert "line 4 of the desired file" in str(err.value)
    assert 'type "public.no_such_type" does not exist' in str(err.value)


def test_matview_rebuilt_with_its_unique_index_and_comment(pg_db: str) -> None:
    v1 = (
        "CREATE TABLE public.t (id integer PRIMARY KEY, v integer);"
        "CREATE MATERIALIZED VIEW public.mv AS SELECT id, v FROM public.t;"
        "CREATE UNIQUE INDEX mv_id ON public.mv (id);"
        "COMMENT ON INDEX public.mv_id IS 'for concurrent refresh';"
        "GRANT SELECT ON public.mv TO PUBLIC;"
    )
    with open_target(pg_db) as t:
        plan = planner.plan(t, v1)
        planner.apply(t, plan.statements, plan.fingerprint_before, True, plan.fingerprint_after)
        v2 = v1.replace("v integer", "v bigint")
        plan = planner.plan(t, v2)
        sqls = [" ".join(s.sql.split()) for s in plan.statements]
        assert "CREATE UNIQUE INDEX mv_id ON public.mv USING btree (id)" in sqls
        assert "COMMENT ON INDEX public.mv_id IS 'for concurrent refresh'" in sqls
        assert "GRANT SELECT ON TABLE public.mv TO PUBLIC" in sqls
        result = planner.apply(
            t, plan.statements, plan.fingerprint_before, True, plan.fingerprint_after
        )
        assert result.outcome == "succeeded", result.message
        assert planner.plan(t, v2).statements == []


def test_apply_that_misses_the_expected_schema_is_not_a_success(pg_db: str) -> None:
    sql = "CREATE TABLE public.t (id integer PRIMARY KEY); CREATE INDEX t_id2 ON public.t (id);"
    with open_target(pg_db) as t:
        plan = planner.plan(t, sql)
        short = [s for s in plan.statements if "t_id2" not in s.sql]
        result = planner.apply(t, short, plan.fingerprint_before, True, plan.fingerprint_after)
    assert (result.outcome, result.reason) == ("failed", "ExpectedSchemaNotReached")
    assert result.to_json()["matchesExpected"] is False
    assert plan.fingerprint_after in result.message


def test_ownership_manage_plans_owners_and_ignore_leaves_them(pg_url: str, pg_db: str) -> None:
    from pgcorpus import ensure_roles

    from ptah.engines.base import DesiredSchemaInvalid
    from ptah.engines.model import SchemaPolicy

    ensure_roles(pg_url)
    sql = (
        BASE
        + "CREATE VIEW public.v AS SELECT id FROM public.t;\n"
        + "ALTER TABLE public.t OWNER TO ptah_corpus_writer;\n"
        + "ALTER VIEW public.v OWNER TO ptah_corpus_reader;\n"
    )
    manage = SchemaPolicy(ownership="manage")
    with open_target(pg_db) as t:
        ignored = planner.plan(t, sql)
        assert not any("OWNER TO" in s.sql for s in ignored.statements)
        assert _owners_set(t, sql, manage) == [
            "ALTER TABLE public.t OWNER TO ptah_corpus_writer",
            "ALTER VIEW public.v OWNER TO ptah_corpus_reader",
        ]
        assert t.connection.execute(
            "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'public.t'::regclass"
        ).fetchone() == ("ptah_corpus_writer",)
        with pytest.raises(DesiredSchemaInvalid) as err:
            planner.plan(
                t, BASE + "ALTER TABLE public.t OWNER TO ptah_no_such_role;", policy=manage
            )
        assert "line 2" in str(err.value) and "ptah_no_such_role" in str(err.value)


def test_ownership_manage_sets_text_search_owners(pg_url: str, pg_db: str) -> None:
    from pgcorpus import ensure_roles

    from ptah.engines.model import SchemaPolicy

    ensure_roles(pg_url)
    sql = (
        BASE
        + "CREATE TEXT SEARCH DICTIONARY public.dd (TEMPLATE = simple);\n"
        + "ALTER TEXT SEARCH DICTIONARY public.dd OWNER TO ptah_corpus_writer;\n"
        + "CREATE TEXT SEARCH CONFIGURATION public.cc (PARSER = default);\n"
        + "ALTER TEXT SEARCH CONFIGURATION public.cc OWNER TO ptah_corpus_reader;\n"
    )
    manage = SchemaPolicy(ownership="manage")
    with open_target(pg_db) as t:
        assert _owners_set(t, sql, manage) == [
            "ALTER TEXT SEARCH CONFIGURATION public.cc OWNER TO ptah_corpus_reader",
            "ALTER TEXT SEARCH DICTIONARY public.dd OWNER TO ptah_corpus_writer",
        ]
        assert t.connection.execute(
            "SELECT pg_get_userbyid(dictowner) FROM pg_ts_dict WHERE dictname = 'dd'"
        ).fetchone() == ("ptah_corpus_writer",)


def test_ownership_manage_sets_publication_owners(pg_url: str, pg_db: str) -> None:
    from pgcorpus import ensure_roles

    from ptah.engines.model import SchemaPolicy

    ensure_roles(pg_url)
    sql = (
        BASE
        + "CREATE PUBLICATION t_pub FOR TABLE public.t;\n"
        + "ALTER PUBLICATION t_pub OWNER TO ptah_corpus_writer;\n"
    )
    manage = SchemaPolicy(ownership="manage")
    with open_target(pg_db) as t:
        assert _owners_set(t, sql, manage) == [
            "ALTER PUBLICATION t_pub OWNER TO ptah_corpus_writer"
        ]
        assert t.connection.execute(
            "SELECT pg_get_userbyid(pubowner) FROM pg_publication WHERE pubname = 't_pub'"
        ).fetchone() == ("ptah_corpus_writer",)


def test_policy_ignore_lets_an_unmanaged_kind_through(pg_db: str) -> None:
    from ptah.engines.model import SchemaPolicy

    sql = BASE + "CREATE TEXT SEARCH TEMPLATE public.t_ts (LEXIZE = dsimple_lexize);"
    with open_target(pg_db) as t:
        plan = planner.plan(t, sql, policy=SchemaPolicy(ignore=("text search template",)))
    assert plan.statements and not any("TEXT SEARCH" in s.sql for s in plan.statements)


def test_create_index_concurrently_in_the_desired_file_loads(pg_db: str) -> None:
    """Hand-written schema files build indexes CONCURRENTLY; the scratch's loading
    transaction refused the word (the index is the same without it), and an error after
    it still names its own line."""
    sql = (
        BASE + "/* by hand */ create unique index concurrently t_a ON public.t (a);\n"
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS t_b ON public.t (b);\n"
    )
    with open_target(pg_db) as t:
        plan = planner.plan(t, sql)
        assert "CREATE UNIQUE INDEX t_a ON public.t USING btree (a)" in [
            s.sql for s in plan.statements
        ]
        with pytest.raises(Exception) as err:
            planner.plan(t, sql + "CREATE INDEX t_c ON public.t (no_such_column);\n")
    assert "line 4 of the desired file" in str(err.value)


def _owners_set(t: Any, sql: str, policy: Any) -> list[str]:
    """The plan's OWNER TO statements under ``policy``, after it applied and its re-plan
    came back empty."""
    plan = planner.plan(t, sql, policy=policy)
    result = planner.apply(
        t, plan.statements, plan.fingerprint_before, True, plan.fingerprint_after
    )
    assert result.outcome == "succeeded", result.message
    assert planner.plan(t, sql, policy=policy).statements == []
    return [s.sql for s in plan.statements if "OWNER TO" in s.sql]
