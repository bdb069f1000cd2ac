"""Edits whose change reaches what depends on it (an index, a view, a function body, a
sequence's owner): each from its first version to its second must dump like psql's load
of the second and re-plan empty, or be refused naming the object, never fail on apply."""

from __future__ import annotations

import re
from pathlib import Path

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

from ptah.engines import planner
from ptah.engines.connect import open_target
from ptah.engines.model import DESTRUCTIVE

pytestmark = pytest.mark.integration

DOMAIN_V1 = """
CREATE SCHEMA "S x";
CREATE DOMAIN "S x".code AS varchar(10) COLLATE "C" DEFAULT 'x' CONSTRAINT code_ne
    CHECK (VALUE <> '');
COMMENT ON DOMAIN "S x".code IS 'a code';
GRANT USAGE ON DOMAIN "S x".code TO ptah_corpus_reader;
CREATE FUNCTION public.norm(c "S x".code) RETURNS text LANGUAGE sql IMMUTABLE
    AS 'SELECT lower(c)';
CREATE TABLE public.t (id integer PRIMARY KEY, c "S x".code NOT NULL,
    d "S x".code DEFAULT 'y'::"S x".code);
CREATE INDEX t_c ON public.t (c);
CREATE INDEX t_norm ON public.t (public.norm(c));
CREATE VIEW public.v AS SELECT id, c, public.norm(d) AS nd FROM public.t;
ALTER TABLE public.t ENABLE ROW LEVEL SECURITY;
CREATE POLICY tp ON public.t USING (c <> 'z');
CREATE TABLE public.p (k "S x".code, at date) PARTITION BY RANGE (at);
CREATE TABLE public.p1 PARTITION OF public.p FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
CREATE TABLE public.par (k "S x".code);
CREATE TABLE public.ch (z integer) INHERITS (public.par);
"""

EDITS: dict[str, tuple[str, str]] = {
    # DROP ATTRIBUTE left ROW(1, NULL)::c in the view and the body: never converged.
    "composite attribute renamed under a SQL-standard body and a view": (
        """
        CREATE TYPE public.c AS (a integer, b text);
        CREATE FUNCTION public.fc() RETURNS public.c LANGUAGE sql
            RETURN ROW(1, 'x')::public.c;
        CREATE VIEW public.cv AS SELECT ROW(2, 'y')::public.c AS r;
        """,
        """
        CREATE TYPE public.c AS (a integer, bb text);
        CREATE FUNCTION public.fc() RETURNS public.c LANGUAGE sql
            RETURN ROW(1, 'x')::public.c;
        CREATE VIEW public.cv AS SELECT ROW(2, 'y')::public.c AS r;
        """,
    ),
    # DROP COLUMN dropped the sequence it owned; OWNED BY the new column then failed.
    "sequence owned by a dropped column": (
        """
        CREATE TABLE public.t (a integer, b integer);
        CREATE SEQUENCE public.s OWNED BY public.t.a;
        CREATE TABLE public.u (x integer DEFAULT nextval('public.s'));
        """,
        """
        CREATE TABLE public.t (b integer);
        CREATE SEQUENCE public.s OWNED BY public.t.b;
        CREATE TABLE public.u (x integer DEFAULT nextval('public.s'));
        """,
    ),
    # Swapped online, the old index was gone with its column: DROP INDEX failed.
    "index on a dropped column, changed": (
        """
        CREATE TABLE public.t (a integer, b integer);
        CREATE INDEX t_ab ON public.t (b, a);
        """,
        """
        CREATE TABLE public.t (b integer);
        CREATE INDEX t_ab ON public.t (b);
        """,
    ),
    # The index reads the same in both files (the overload is called by name): it stayed,
    # and DROP FUNCTION failed under it.
    "function overload's argument type changes under an index": (
        """
        CREATE FUNCTION public.lower_all(arr text[]) RETURNS text[] LANGUAGE sql IMMUTABLE
            RETURN arr;
        CREATE TABLE public.t (tags text[]);
        CREATE INDEX t_tags ON public.t USING gin (public.lower_all(tags));
        """,
        """
        CREATE FUNCTION public.lower_all(arr character varying[]) RETURNS text[]
            LANGUAGE sql IMMUTABLE RETURN arr;
        CREATE TABLE public.t (tags character varying(30)[]);
        CREATE INDEX t_tags ON public.t USING gin (public.lower_all(tags));
        """,
    ),
    # ALTER COLUMN ... TYPE built the index again without its statistics target.
    "expression index's statistics under a column type change": (
        """
        CREATE TABLE public.t (a integer);
        CREATE INDEX t_e ON public.t ((a * 2));
        ALTER INDEX public.t_e ALTER COLUMN 1 SET STATISTICS 300;
        """,
        """
        CREATE TABLE public.t (a bigint);
        CREATE INDEX t_e ON public.t ((a * 2));
        ALTER INDEX public.t_e ALTER COLUMN 1 SET STATISTICS 300;
        """,
    ),
    # NO INHERIT made the parent's check the child's own (conislocal): it stayed, and
    # every plan after the apply dropped it again.
    "child leaves its parent, whose check it had": (
        """
        CREATE TABLE public.p (a integer CHECK (a > 0));
        CREATE TABLE public.c (b integer) INHERITS (public.p);
        """,
        """
        CREATE TABLE public.p (a integer CHECK (a > 0));
        CREATE TABLE public.q (a integer);
        CREATE TABLE public.c (a integer CHECK (a > 0), b integer) INHERITS (public.q);
        """,
    ),
    "child leaves its parent and names the parent's check as its own": (
        """
        CREATE TABLE public.p (a integer CONSTRAINT pos CHECK (a > 0));
        CREATE TABLE public.c (b integer) INHERITS (public.p);
        """,
        """
        CREATE TABLE public.p (a integer CONSTRAINT pos CHECK (a > 0));
        CREATE TABLE public.c (a integer CONSTRAINT pos CHECK (a > 1), b integer);
        """,
    ),
    # The domain was to be dropped and created again under its column: refused.
    "function renamed argument under a domain's check and default": (
        """
        CREATE FUNCTION public.ok(v integer) RETURNS boolean LANGUAGE sql IMMUTABLE
            AS 'SELECT $1 > 0';
        CREATE FUNCTION public.five() RETURNS integer LANGUAGE sql AS 'SELECT 5';
        CREATE DOMAIN public.d AS integer DEFAULT public.five()
            CONSTRAINT d_ok CHECK (public.ok(VALUE)) CONSTRAINT d_small CHECK (VALUE < 100);
        COMMENT ON CONSTRAINT d_ok ON DOMAIN public.d IS 'positive';
        CREATE TABLE public.t (x public.d);
        CREATE VIEW public.v AS SELECT x FROM public.t;
        """,
        """
        CREATE FUNCTION public.ok(w integer) RETURNS boolean LANGUAGE sql IMMUTABLE
            AS 'SELECT $1 > 0';
        CREATE FUNCTION public.five(OUT r integer) LANGUAGE sql AS 'SELECT 5';
        CREATE DOMAIN public.d AS integer DEFAULT public.five()
            CONSTRAINT d_ok CHECK (public.ok(VALUE)) CONSTRAINT d_small CHECK (VALUE < 100);
        COMMENT ON CONSTRAINT d_ok ON DOMAIN public.d IS 'positive';
        CREATE TABLE public.t (x public.d);
        CREATE VIEW public.v AS SELECT x FROM public.t;
        """,
    ),
    # A domain's base type change was refused (the domain dropped and created again
    # under its columns): now renamed aside, created anew, its columns moved to it.
    "domain's base type widened under columns, a view, a function, an index, a policy": (
        DOMAIN_V1,
        DOMAIN_V1.replace("varchar(10)", "varchar(20)"),
    ),
    "domain's base type and collation changed, on a partitioned and an inherited table": (
        DOMAIN_V1,
        DOMAIN_V1.replace('varchar(10) COLLATE "C"', "text"),
    ),
    # The server appends what a SET names, a changed option included: the table listed
    # its options in another order than a direct load (pg_dump's WITH differed).
    "a storage option added before one the table has": (
        "CREATE TABLE public.t (a integer) WITH (autovacuum_vacuum_scale_factor = 0.05);",
        "CREATE TABLE public.t (a integer)"
        " WITH (fillfactor = 80, autovacuum_vacuum_scale_factor = 0.05);",
    ),
    "a storage option changed before another, and a TOAST one": (
        "CREATE TABLE public.t (a text) WITH (fillfactor = 80, autovacuum_enabled = false,"
        " toast.autovacuum_enabled = false, toast.vacuum_truncate = false);",
        "CREATE TABLE public.t (a text) WITH (fillfactor = 70, autovacuum_enabled = false,"
        " toast.autovacuum_enabled = true, toast.vacuum_truncate = false);",
    ),
    "a constraint index's option changed before another": (
        "CREATE TABLE public.t (a integer,"
        " CONSTRAINT t_a UNIQUE (a) WITH (fillfactor = 70, deduplicate_items = off));",
        "CREATE TABLE public.t (a integer,"
        " CONSTRAINT t_a UNIQUE (a) WITH (fillfactor = 80, deduplicate_items = off));",
    ),
    # SET UNLOGGED made the sequence the table owns unlogged too (PostgreSQL 15): the
    # apply ended on the fingerprint check, the sequence not as declared.
    "a table owning a logged sequence made unlogged": (
        "CREATE TABLE public.t (id bigint);\n"
        "CREATE SEQUENCE public.s OWNED BY public.t.id;\n"
        "CREATE UNLOGGED SEQUENCE public.u OWNED BY public.t.id;",
        "CREATE UNLOGGED TABLE public.t (id bigint);\n"
        "CREATE SEQUENCE public.s OWNED BY public.t.id;\n"
        "CREATE UNLOGGED SEQUENCE public.u OWNED BY public.t.id;",
    ),
    # SET LOGGED in name order: the referencing table first, under an unlogged one.
    "tables referencing one another made logged": (
        "CREATE UNLOGGED TABLE public.a (id integer PRIMARY KEY);\n"
        "CREATE UNLOGGED TABLE public.b (id integer PRIMARY KEY, a integer REFERENCES public.a);\n"
        "CREATE UNLOGGED TABLE public.aa (id integer PRIMARY KEY, b integer REFERENCES public.b,"
        " s integer REFERENCES public.aa);",
        "CREATE TABLE public.a (id integer PRIMARY KEY);\n"
        "CREATE TABLE public.b (id integer PRIMARY KEY, a integer REFERENCES public.a);\n"
        "CREATE TABLE public.aa (id integer PRIMARY KEY, b integer REFERENCES public.b,"
        " s integer REFERENCES public.aa);",
    ),
    "tables referencing one another made unlogged": (
        "CREATE TABLE public.a (id integer PRIMARY KEY);\n"
        "CREATE TABLE public.b (id integer PRIMARY KEY, a integer REFERENCES public.a);\n"
        "CREATE TABLE public.aa (id integer PRIMARY KEY, b integer REFERENCES public.b);",
        "CREATE UNLOGGED TABLE public.a (id integer PRIMARY KEY);\n"
        "CREATE UNLOGGED TABLE public.b (id integer PRIMARY KEY, a integer REFERENCES public.a);\n"
        "CREATE UNLOGGED TABLE public.aa (id integer PRIMARY KEY, b integer REFERENCES public.b);",
    ),
    "an unlogged table owning an unlogged sequence made logged": (
        "CREATE UNLOGGED TABLE public.t (id bigint);\n"
        "CREATE UNLOGGED SEQUENCE public.s OWNED BY public.t.id;",
        "CREATE TABLE public.t (id bigint);\n"
        "CREATE UNLOGGED SEQUENCE public.s OWNED BY public.t.id;",
    ),
    # REVOKE SELECT (pid) ran after DROP COLUMN pid: column "pid" does not exist.
    "a column with grants renamed (dropped, another added) under a view, a key, a policy": (
        """
        CREATE TABLE public.p (id integer PRIMARY KEY);
        CREATE TABLE public.t (id integer PRIMARY KEY, pid integer REFERENCES public.p,
            "User Id" integer, note text);
        CREATE INDEX t_pid ON public.t (pid);
        COMMENT ON COLUMN public.t.pid IS 'parent';
        GRANT SELECT (pid, "User Id", note), UPDATE ("User Id") ON public.t TO ptah_corpus_reader;
        ALTER TABLE public.t ENABLE ROW LEVEL SECURITY;
        CREATE POLICY pp ON public.t USING (pid > 0);
        CREATE VIEW public.v AS SELECT id, pid FROM public.t;
        CREATE TABLE public.c (x integer) INHERITS (public.t);
        GRANT SELECT (pid) ON public.c TO ptah_corpus_writer;
        """,
        """
        CREATE TABLE public.p (id integer PRIMARY KEY);
        CREATE TABLE public.t (id integer PRIMARY KEY, note text,
            parent_id integer REFERENCES public.p);
        CREATE INDEX t_pid ON public.t (parent_id);
        COMMENT ON COLUMN public.t.parent_id IS 'parent';
        GRANT SELECT (parent_id, note) ON public.t TO ptah_corpus_reader;
        ALTER TABLE public.t ENABLE ROW LEVEL SECURITY;
        CREATE POLICY pp ON public.t USING (parent_id > 0);
        CREATE VIEW public.v AS SELECT id, parent_id AS pid FROM public.t;
        CREATE TABLE public.c (x integer) INHERITS (public.t);
        """,
    ),
    # A table's trigger, policy, rule or statistics object goes with the table, but was not
    # ordered by what it uses: the function was dropped first, under it.
    "a table dropped with the functions its trigger, policy, rule, statistics call": (
        """
        CREATE FUNCTION public.tf() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$;
        CREATE FUNCTION public.ok(integer) RETURNS boolean LANGUAGE sql IMMUTABLE RETURN $1 > 0;
        CREATE FUNCTION public.me() RETURNS boolean LANGUAGE sql STABLE RETURN true;
        CREATE FUNCTION public.dbl(integer) RETURNS integer LANGUAGE sql IMMUTABLE RETURN $1 * 2;
        CREATE TABLE public.t (a integer, b integer);
        CREATE TRIGGER tr BEFORE UPDATE ON public.t FOR EACH ROW EXECUTE FUNCTION public.tf();
        ALTER TABLE public.t ENABLE ROW LEVEL SECURITY;
        CREATE POLICY p ON public.t USING (public.me() AND a > 0);
        CREATE RULE r AS ON INSERT TO public.t WHERE NOT public.ok(NEW.a) DO INSTEAD NOTHING;
        CREATE STATISTICS public.st ON public.dbl(a), b FROM public.t;
        CREATE TABLE public.p (k integer) PARTITION BY LIST (k);
        CREATE TABLE public.p1 PARTITION OF public.p FOR VALUES IN (1);
        CREATE TRIGGER ptr BEFORE UPDATE ON public.p FOR EACH ROW EXECUTE FUNCTION public.tf();
        CREATE TABLE public.kept (a integer);
        """,
        "CREATE TABLE public.kept (a integer);",
    ),
    # DROP TABLE in name order: the referenced table first, under the other's key.
    "tables dropped with foreign keys between them, and to each other": (
        """
        CREATE TABLE public.a (id integer PRIMARY KEY, b integer);
        CREATE TABLE public.b (id integer PRIMARY KEY, a integer REFERENCES public.a);
        ALTER TABLE public.a ADD CONSTRAINT a_b FOREIGN KEY (b) REFERENCES public.b;
        CREATE TABLE public.c (id integer PRIMARY KEY, b integer REFERENCES public.b);
        CREATE TABLE public.d (id integer REFERENCES public.c);
        """,
        "CREATE TABLE public.d (id integer);",
    ),
    # DROP TABLE took the sequence it owns, still another dropped table's default.
    "a table dropped with the sequence it owns, another dropped table's default": (
        """
        CREATE TABLE public.a (id integer, x integer);
        CREATE SEQUENCE public.s OWNED BY public.a.id;
        CREATE TABLE public.b (id integer DEFAULT nextval('public.s'));
        CREATE TABLE public.o (id integer, x integer);
        CREATE SEQUENCE public.so OWNED BY public.o.id;
        CREATE TABLE public.p (id integer DEFAULT nextval('public.so'));
        """,
        "CREATE TABLE public.o (x integer);",
    ),
    # Each table's policy reads the other table: each drop waits on the other's.
    "tables dropped whose policies read each other, a materialized view's function index": (
        """
        CREATE FUNCTION public.f(integer) RETURNS integer LANGUAGE sql IMMUTABLE RETURN $1 * 2;
        CREATE TABLE public.members (id integer);
        CREATE TABLE public.t (a integer);
        ALTER TABLE public.t ENABLE ROW LEVEL SECURITY;
        CREATE POLICY p ON public.t USING (a IN (SELECT id FROM public.members));
        CREATE POLICY q ON public.members USING (id IN (SELECT a FROM public.t));
        CREATE TABLE public.k (a integer);
        CREATE MATERIALIZED VIEW public.m AS SELECT a FROM public.k;
        CREATE INDEX m_f ON public.m (public.f(a));
        """,
        "CREATE TABLE public.k (a integer);",
    ),
    # A rule on the parent inserting into its inheriting child: each waits on the other.
    "parent and child dropped, the parent's rule inserting into the child": (
        """
        CREATE TABLE public.p (id integer, at date);
        CREATE TABLE public.c1 (CHECK (at < '2020-01-01')) INHERITS (public.p);
        CREATE RULE r1 AS ON INSERT TO public.p WHERE NEW.at < '2020-01-01'
            DO INSTEAD INSERT INTO public.c1 VALUES (NEW.*);
        """,
        "CREATE SCHEMA keep;",
    ),
    # The target's default privileges were left until the plan's end: the extension's
    # functions were created under them (EXECUTE revoked), unlike the desired file's.
    "an extension created where the default privileges revoke EXECUTE": (
        """
        CREATE SCHEMA app;
        ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
        ALTER DEFAULT PRIVILEGES IN SCHEMA app GRANT SELECT ON TABLES TO ptah_corpus_reader;
        """,
        """
        CREATE SCHEMA app;
        CREATE EXTENSION citext WITH SCHEMA app;
        CREATE EXTENSION hstore;
        CREATE TABLE app.t (a app.citext);
        ALTER DEFAULT PRIVILEGES IN SCHEMA app GRANT SELECT ON TABLES TO ptah_corpus_reader;
        """,
    ),
    "the same, the default privileges staying": (
        """
        CREATE SCHEMA app;
        ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
        ALTER DEFAULT PRIVILEGES IN SCHEMA app GRANT EXECUTE ON FUNCTIONS TO ptah_corpus_reader;
        """,
        """
        CREATE SCHEMA app;
        CREATE EXTENSION citext WITH SCHEMA app;
        CREATE FUNCTION app.f() RETURNS integer LANGUAGE sql RETURN 1;
        ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
        ALTER DEFAULT PRIVILEGES IN SCHEMA app GRANT EXECUTE ON FUNCTIONS TO ptah_corpus_reader;
        """,
    ),
    # REVOKE of a default privilege in a schema DROP SCHEMA had taken: schema does not exist.
    "a schema dropped with default privileges in it": (
        """
        CREATE SCHEMA app;
        CREATE TABLE app.t (a integer);
        ALTER DEFAULT PRIVILEGES IN SCHEMA app GRANT SELECT ON TABLES TO ptah_corpus_reader;
        """,
        "CREATE SCHEMA keep;",
    ),
    # A sub-partition's own trigger, index, check and default went with its parent's
    # DROP TABLE, which came after the functions they use: cannot drop function.
    "partitioned table dropped under its partitions' own users of functions": (
        """
        CREATE FUNCTION public.f() RETURNS trigger LANGUAGE plpgsql
            AS $$BEGIN RETURN NEW; END$$;
        CREATE FUNCTION public.g(x integer) RETURNS integer LANGUAGE sql IMMUTABLE
            RETURN x + 1;
        CREATE FUNCTION public.h(x integer) RETURNS boolean LANGUAGE sql IMMUTABLE
            RETURN x > -1;
        CREATE FUNCTION public.d() RETURNS integer LANGUAGE sql RETURN 7;
        CREATE TABLE public.p (a integer, b integer) PARTITION BY RANGE (a);
        CREATE TABLE public.p1 PARTITION OF public.p FOR VALUES FROM (0) TO (10)
            PARTITION BY LIST (b);
        CREATE TABLE public.p11 PARTITION OF public.p1 FOR VALUES IN (1);
        CREATE TRIGGER t BEFORE UPDATE ON public.p11 FOR EACH ROW
            EXECUTE FUNCTION public.f();
        CREATE INDEX p11_g ON public.p11 (public.g(a));
        ALTER TABLE public.p11 ADD CONSTRAINT p11_h CHECK (public.h(b));
        ALTER TABLE public.p11 ALTER COLUMN b SET DEFAULT public.d();
        CREATE TABLE public.q (a integer, b integer) PARTITION BY RANGE (a);
        CREATE TABLE public.q1 PARTITION OF public.q FOR VALUES FROM (0) TO (10)
            PARTITION BY LIST (b);
        CREATE TABLE public.q11 PARTITION OF public.q1 FOR VALUES IN (1);
        CREATE TRIGGER t BEFORE UPDATE ON public.q11 FOR EACH ROW
            EXECUTE FUNCTION public.f();
        """,
        # q stays, its sub-partitioned q1 goes (with q11 and its trigger).
        """
        CREATE TABLE public.q (a integer, b integer) PARTITION BY RANGE (a);
        """,
    ),
    # The column a generated column read was dropped before the generated one (kept as
    # a plain column, or computed again from another column): cannot drop column x.
    "generated column kept or computed again, the column it read dropped": (
        """
        CREATE TABLE public.t (x integer, y integer GENERATED ALWAYS AS (x * 2) STORED);
        CREATE TABLE public.u (x integer, z integer, y integer GENERATED ALWAYS AS (x * 2)
            STORED);
        CREATE TABLE public.p (x integer, y integer GENERATED ALWAYS AS (x * 2) STORED,
            k integer) PARTITION BY LIST (k);
        CREATE TABLE public.p1 PARTITION OF public.p FOR VALUES IN (1);
        CREATE TABLE public.w (x integer, y integer GENERATED ALWAYS AS (x * 2) STORED);
        CREATE TABLE public.wc (q integer) INHERITS (public.w);
        """,
        """
        CREATE TABLE public.t (y integer);
        CREATE TABLE public.u (z integer, y integer GENERATED ALWAYS AS (z * 3) STORED);
        CREATE TABLE public.p (y integer, k integer) PARTITION BY LIST (k);
        CREATE TABLE public.p1 PARTITION OF public.p FOR VALUES IN (1);
        CREATE TABLE public.w (y integer);
        CREATE TABLE public.wc (q integer) INHERITS (public.w);
        """,
    ),
    # What the plan drops for good under a user that stays and reads otherwise: a
    # function body replaced in place came after DROP EXTENSION; a domain's new default
    # was set after DROP FUNCTION or DROP TEXT SEARCH CONFIGURATION (cannot drop).
    "extension, function and configuration dropped under the kept users that read them": (
        """
        CREATE EXTENSION IF NOT EXISTS pg_trgm;
        CREATE FUNCTION public.sim(a text, b text) RETURNS real LANGUAGE sql IMMUTABLE
            RETURN similarity(a, b);
        CREATE FUNCTION public.sim2(a text, b text) RETURNS real LANGUAGE sql IMMUTABLE
            BEGIN ATOMIC SELECT word_similarity(a, b); END;
        CREATE FUNCTION public.three() RETURNS integer LANGUAGE sql RETURN 3;
        CREATE DOMAIN public.d AS integer DEFAULT public.three() CHECK (VALUE > 0);
        CREATE TEXT SEARCH CONFIGURATION public.c2 (COPY = pg_catalog.simple);
        CREATE DOMAIN public.cfg AS regconfig DEFAULT 'public.c2'::regconfig;
        CREATE TABLE public.t (d public.d, c public.cfg);
        """,
        """
        CREATE FUNCTION public.sim(a text, b text) RETURNS real LANGUAGE sql IMMUTABLE
            RETURN 0.5;
        CREATE FUNCTION public.sim2(a text, b text) RETURNS real LANGUAGE sql IMMUTABLE
            BEGIN ATOMIC SELECT 0.25::real; END;
        CREATE DOMAIN public.d AS integer DEFAULT 3 CHECK (VALUE > 0);
        CREATE DOMAIN public.cfg AS regconfig DEFAULT 'simple'::regconfig;
        CREATE TABLE public.t (d public.d, c public.cfg);
        """,
    ),
    # The types' and extension's drops wait for the columns and attributes moving off
    # them; their schema's DROP SCHEMA did not (other objects depend on it).
    "schema dropped with the types and extension kept columns move off": (
        """
        CREATE SCHEMA ext;
        CREATE EXTENSION citext SCHEMA ext;
        CREATE SCHEMA ty;
        CREATE TYPE ty.mood AS ENUM ('a', 'b');
        CREATE DOMAIN ty.pos AS integer CHECK (VALUE > 0);
        CREATE TABLE public.p (e ext.citext, m ty.mood, n ty.pos);
        CREATE TYPE public.pair AS (a ext.citext, b integer);
        """,
        """
        CREATE TABLE public.p (e text, m text, n integer);
        CREATE TYPE public.pair AS (a text, b integer);
        """,
    ),
}


@pytest.mark.parametrize(("first", "second"), EDITS.values(), ids=EDITS.keys())
def test_edit_dumps_like_psql(pg_url: str, first: str, second: str) -> None:
    assert_edit_like_psql(pg_url, first, second)


REFUSED: dict[str, tuple[str, str, str]] = {
    # Detached, altered: the server refused to alter a partition key column.
    "partition key column's type": (
        """
        CREATE TABLE public.p (k integer, v integer) PARTITION BY RANGE (k);
        CREATE TABLE public.p1 PARTITION OF public.p FOR VALUES FROM (0) TO (10);
        """,
        """
        CREATE TABLE public.p (k bigint, v integer) PARTITION BY RANGE (k);
        CREATE TABLE public.p1 PARTITION OF public.p FOR VALUES FROM (0) TO (10);
        """,
        "table public.p: column k changes from integer to bigint, and it is in the partition key",
    ),
    "partition key expression column's collation": (
        """
        CREATE TABLE public.p (k text, v integer) PARTITION BY LIST (lower(k));
        CREATE TABLE public.p1 PARTITION OF public.p FOR VALUES IN ('a');
        """,
        """
        CREATE TABLE public.p (k text COLLATE "C", v integer) PARTITION BY LIST (lower(k));
        CREATE TABLE public.p1 PARTITION OF public.p FOR VALUES IN ('a');
        """,
        "table public.p: column k changes from text to text COLLATE",
    ),
    "sub-partition key column's type, changed on the parent": (
        """
        CREATE TABLE public.p (k integer, v integer) PARTITION BY LIST (k);
        CREATE TABLE public.p1 PARTITION OF public.p FOR VALUES IN (1) PARTITION BY RANGE (v);
        """,
        """
        CREATE TABLE public.p (k integer, v bigint) PARTITION BY LIST (k);
        CREATE TABLE public.p1 PARTITION OF public.p FOR VALUES IN (1) PARTITION BY RANGE (v);
        """,
        "table public.p1: column v changes from integer to bigint, and it is in the partition key",
    ),
    # cannot alter inherited column "id" of relation "c", half-way through the apply.
    "column merged from two parents changes type": (
        """
        CREATE TABLE public.a (id integer);
        CREATE TABLE public.b (id integer);
        CREATE TABLE public.c () INHERITS (public.a, public.b);
        """,
        """
        CREATE TABLE public.a (id bigint);
        CREATE TABLE public.b (id bigint);
        CREATE TABLE public.c () INHERITS (public.a, public.b);
        """,
        "table public.c: column id changes from integer to bigint, and it is merged from",
    ),
    "domain's base type without an assignment cast from the old one": (
        "CREATE DOMAIN public.d AS text;\nCREATE TABLE public.t (x public.d);",
        "CREATE DOMAIN public.d AS integer;\nCREATE TABLE public.t (x public.d);",
        "domain public.d: its base type changes from text to integer, and PostgreSQL has no"
        " assignment cast",
    ),
    "domain's base type, stored in an array": (
        "CREATE DOMAIN public.d AS integer;\nCREATE TABLE public.t (x public.d[]);",
        "CREATE DOMAIN public.d AS bigint;\nCREATE TABLE public.t (x public.d[]);",
        "domain public.d: its base type changes from integer to bigint, and column public.t.x"
        " stores it",
    ),
    "domain's base type, under another domain": (
        "CREATE DOMAIN public.d AS integer;\nCREATE DOMAIN public.d2 AS public.d;\n"
        "CREATE TABLE public.t (x public.d);",
        "CREATE DOMAIN public.d AS bigint;\nCREATE DOMAIN public.d2 AS public.d;\n"
        "CREATE TABLE public.t (x public.d);",
        "domain public.d: its base type changes from integer to bigint, and domain public.d2",
    ),
}


@pytest.mark.parametrize(("first", "second", "said"), REFUSED.values(), ids=REFUSED.keys())
def test_refused_naming_the_object(pg_url: str, first: str, second: str, said: str) -> None:
    assert said in refusal(pg_url, first, second)


STATISTICS = """
CREATE SCHEMA s;
CREATE TABLE public.t (a integer, b integer, c text, d date);
CREATE STATISTICS public.t_ab (dependencies, ndistinct) ON a, b FROM public.t;
CREATE STATISTICS s.t_expr ON a, lower(c), (d + 1) FROM public.t;
CREATE STATISTICS public."T bc" (mcv) ON b, c FROM public.t;
ALTER STATISTICS public."T bc" SET STATISTICS 500;
COMMENT ON STATISTICS s.t_expr IS 'expressions';
CREATE TABLE public.p (k integer, v integer) PARTITION BY RANGE (k);
CREATE TABLE public.p1 PARTITION OF public.p FOR VALUES FROM (0) TO (10);
CREATE STATISTICS public.p_kv ON k, v FROM public.p;
"""


def test_statistics_objects_round_trip(pg_url: str) -> None:
    """Extended statistics objects were refused as unmanaged (any desired file with a
    CREATE STATISTICS): now created, changed and dropped like indexes."""
    assert_edit_like_psql(pg_url, "CREATE SCHEMA s;", STATISTICS)


@pytest.mark.parametrize(
    "second",
    [
        # kinds, target and comment change; one dropped
        STATISTICS.replace("(dependencies, ndistinct) ON", "(dependencies) ON")
        .replace("SET STATISTICS 500", "SET STATISTICS 50")
        .replace("'expressions'", "'changed'")
        .replace("CREATE STATISTICS public.p_kv ON k, v FROM public.p;\n", ""),
        # its columns dropped or retyped under it
        STATISTICS.replace("c text, d date", "d date")
        .replace("ON b, c FROM", "ON b, d FROM")
        .replace("lower(c)", "(a * 2)")
        .replace("a integer, b integer", "a bigint, b integer"),
        # the target back to the default
        STATISTICS.replace('ALTER STATISTICS public."T bc" SET STATISTICS 500;\n', ""),
        "CREATE SCHEMA s;",
    ],
    ids=["changed", "columns-changed", "target-reset", "dropped"],
)
def test_statistics_objects_edits(pg_url: str, second: str) -> None:
    assert_edit_like_psql(pg_url, STATISTICS, second)


TEXT_SEARCH = """
CREATE SCHEMA s;
CREATE TEXT SEARCH DICTIONARY public.my_stem (TEMPLATE = snowball, Language = english,
    StopWords = english);
CREATE TEXT SEARCH DICTIONARY s."My simple" (TEMPLATE = pg_catalog.simple, STOPWORDS = english,
    ACCEPT = false);
COMMENT ON TEXT SEARCH DICTIONARY public.my_stem IS 'stems';
CREATE TEXT SEARCH CONFIGURATION public.my_en (COPY = pg_catalog.english);
ALTER TEXT SEARCH CONFIGURATION public.my_en ALTER MAPPING FOR asciiword, word
    WITH s."My simple", public.my_stem;
ALTER TEXT SEARCH CONFIGURATION public.my_en DROP MAPPING FOR email, url, int;
COMMENT ON TEXT SEARCH CONFIGURATION public.my_en IS 'mine';
CREATE TEXT SEARCH CONFIGURATION s.bare (PARSER = "default");
CREATE TABLE public.doc (id integer PRIMARY KEY, body text, lang regconfig
    DEFAULT 'public.my_en'::regconfig,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('public.my_en', coalesce(body, ''))) STORED);
CREATE INDEX doc_fts ON public.doc USING gin (to_tsvector('public.my_en'::regconfig, body));
CREATE VIEW public.doc_v AS SELECT id, to_tsvector('public.my_en', body) AS v FROM public.doc;
CREATE FUNCTION public.fts(q text) RETURNS tsquery LANGUAGE sql IMMUTABLE
    RETURN plainto_tsquery('public.my_en', q);
"""


def test_text_search_round_trip(pg_url: str) -> None:
    """Text search configurations and dictionaries were refused as unmanaged (any
    desired file with one): now created, with what uses them after them."""
    assert_edit_like_psql(pg_url, "CREATE SCHEMA s;", TEXT_SEARCH)


@pytest.mark.parametrize(
    "second",
    [
        # a mapping changes: the configuration and what uses it are rebuilt
        TEXT_SEARCH.replace("DROP MAPPING FOR email, url, int", "DROP MAPPING FOR email"),
        # a dictionary's options change: the configurations that map to it go with it
        TEXT_SEARCH.replace("StopWords = english", "StopWords = russian").replace(
            "'stems'", "'changed'"
        ),
        TEXT_SEARCH.replace("ACCEPT = false", "ACCEPT = true"),
        # the column, index and view move to another configuration; the old one dropped
        TEXT_SEARCH.replace("'public.my_en'", "'s.bare'")
        .replace("CREATE TEXT SEARCH CONFIGURATION public.my_en (COPY = pg_catalog.english);", "")
        .replace(
            """ALTER TEXT SEARCH CONFIGURATION public.my_en ALTER MAPPING FOR asciiword, word
    WITH s."My simple", public.my_stem;
ALTER TEXT SEARCH CONFIGURATION public.my_en DROP MAPPING FOR email, url, int;
COMMENT ON TEXT SEARCH CONFIGURATION public.my_en IS 'mine';
""",
            "",
        ),
        "CREATE SCHEMA s;",
    ],
    ids=["mapping-changed", "dictionary-changed", "simple-dictionary-changed", "moved", "dropped"],
)
def test_text_search_edits(pg_url: str, second: str) -> None:
    assert_edit_like_psql(pg_url, TEXT_SEARCH, second)


def test_text_search_change_computes_stored_columns_again(pg_url: str) -> None:
    """A configuration whose mapping changes is created again: a generated column over it
    is added again, so its stored values are those of the new mapping."""
    first = """
    CREATE TEXT SEARCH CONFIGURATION public.c (COPY = pg_catalog.simple);
    CREATE TABLE public.d (body text, tsv tsvector
        GENERATED ALWAYS AS (to_tsvector('public.c', body)) STORED);
    """
    second = first + "ALTER TEXT SEARCH CONFIGURATION public.c DROP MAPPING FOR asciiword;"
    with database(pg_url) as url:
        apply_plan(url, first)
        with open_target(url) as t:
            t.connection.execute("INSERT INTO public.d VALUES ('the cats')")
            t.connection.commit()
        apply_plan(url, second)
        with open_target(url) as t:
            row = t.connection.execute("SELECT tsv::text FROM public.d").fetchone()
        assert row == ("",)


def test_text_search_change_under_a_domain_is_refused(pg_url: str) -> None:
    """A domain check that names the configuration cannot be kept while it is created
    again (the domain is not dropped): refused naming both."""
    first = """
    CREATE TEXT SEARCH CONFIGURATION public.c (COPY = pg_catalog.simple);
    CREATE DOMAIN public.words AS text CHECK (to_tsvector('public.c', VALUE) <> '');
    CREATE TABLE public.d (w public.words);
    """
    second = first + "ALTER TEXT SEARCH CONFIGURATION public.c DROP MAPPING FOR asciiword;"
    said = refusal(pg_url, first, second)
    assert "domain public.words depends on" in said and "ts_config:public.c" in said


PUBLICATIONS = """
CREATE SCHEMA s;
CREATE SCHEMA r;
CREATE TABLE public.t (id integer PRIMARY KEY, a integer, b text, c text, d date);
CREATE TABLE public.u (id integer PRIMARY KEY, v integer);
CREATE TABLE s.w (id integer PRIMARY KEY);
CREATE TABLE r.x (id integer PRIMARY KEY);
CREATE TABLE public.p (k integer, v integer) PARTITION BY RANGE (k);
CREATE TABLE public.p1 PARTITION OF public.p FOR VALUES FROM (0) TO (10);
CREATE PUBLICATION pub_t FOR TABLE public.t (id, a, b) WHERE (a > 0 AND b <> 'x'),
    public.u WITH (publish = 'insert, update');
CREATE PUBLICATION "Pub s" FOR TABLES IN SCHEMA s, TABLE public.p
    WITH (publish_via_partition_root = true);
COMMENT ON PUBLICATION pub_t IS 'some tables';
CREATE PUBLICATION pub_all FOR ALL TABLES WITH (publish = 'insert, delete, truncate');
"""


def test_publications_round_trip(pg_url: str) -> None:
    """Publications were refused as unmanaged (any desired file with a CREATE
    PUBLICATION): now created after the tables and schemas they name."""
    assert_edit_like_psql(pg_url, "CREATE SCHEMA s;", PUBLICATIONS)


@pytest.mark.parametrize(
    "second",
    [
        # options set in place; a member's column list and row filter change; a member,
        # a schema added and dropped; the comment changes
        PUBLICATIONS.replace("publish = 'insert, update'", "publish = ''")
        .replace("publish_via_partition_root = true", "publish_via_partition_root = false")
        .replace("(id, a, b) WHERE (a > 0 AND b <> 'x')", "(id, a) WHERE (a > 1)")
        .replace("    public.u WITH", "    public.u, r.x WITH")
        .replace("TABLES IN SCHEMA s, TABLE public.p", "TABLES IN SCHEMA r")
        .replace("'some tables'", "'changed'"),
        # FOR ALL TABLES either way
        PUBLICATIONS.replace("pub_all FOR ALL TABLES", "pub_all FOR TABLE public.u").replace(
            '"Pub s" FOR TABLES IN SCHEMA s, TABLE public.p', '"Pub s" FOR ALL TABLES'
        ),
        # a member's columns dropped or retyped under its column list and row filter
        PUBLICATIONS.replace("b text, c text", "b varchar(10), c text").replace(
            "a integer, b", "a bigint, b"
        ),
        PUBLICATIONS.replace(
            "d date);", "d date, e integer GENERATED ALWAYS AS (a + 1) STORED);"
        ).replace("(id, a, b) WHERE (a > 0 AND b <> 'x')", "(id, a, b) WHERE (a > 0 AND e > 1)"),
        PUBLICATIONS.replace("a integer, b text, c text", "a integer, c text").replace(
            "(id, a, b) WHERE (a > 0 AND b <> 'x')", "(id, a) WHERE (a > 0)"
        ),
        # member tables and a member schema dropped; a publication dropped
        PUBLICATIONS.replace("CREATE TABLE public.u (id integer PRIMARY KEY, v integer);\n", "")
        .replace(",\n    public.u WITH", " WITH")
        .replace("CREATE TABLE s.w (id integer PRIMARY KEY);\n", "")
        .replace("CREATE SCHEMA s;\n", "")
        .replace("TABLES IN SCHEMA s, TABLE public.p", "TABLE public.p")
        .replace(
            "CREATE PUBLICATION pub_all FOR ALL TABLES WITH (publish = 'insert, delete,"
            " truncate');\n",
            "",
        ),
        "CREATE SCHEMA s;",
    ],
    ids=[
        "changed",
        "all-tables",
        "columns-retyped",
        "filter-reads-generated",
        "column-dropped",
        "members-dropped",
        "dropped",
    ],
)
def test_publications_edits(pg_url: str, second: str) -> None:
    assert_edit_like_psql(pg_url, PUBLICATIONS, second)


def test_publication_filter_on_a_generated_column_added_again(pg_url: str) -> None:
    """A generated column a row filter reads, dropped and added again (its expression
    changes): the table leaves the publication around it and comes back."""
    first = PUBLICATIONS.replace(
        "d date);", "d date, e integer GENERATED ALWAYS AS (a + 1) STORED);"
    ).replace("(id, a, b) WHERE (a > 0 AND b <> 'x')", "(id, a, b) WHERE (a > 0 AND e > 1)")
    assert_edit_like_psql(pg_url, first, first.replace("(a + 1) STORED", "(a + 2) STORED"))


SCHEMAS = Path(__file__).parent / "schemas" / "pg"


def _edited(text: str, *changes: tuple[str, str]) -> str:
    for old, new in changes:
        assert old in text, old
        text = text.replace(old, new)
    return text


HELPDESK_EDITS = (
    # enum values added in the middle and at the end, then used by a policy
    ("ENUM ('low', 'normal', 'high')", "ENUM ('low', 'normal', 'elevated', 'high', 'urgent')"),
    ("USING (team_id > 0) WITH CHECK", "USING (team_id > 0 AND prio <> 'urgent') WITH CHECK"),
    ("FOR INSERT TO ptah_corpus_writer, ptah_corpus_reader", "FOR INSERT TO ptah_corpus_writer"),
    # a domain's check and another's default
    ("CHECK (length(VALUE) < 255)", "CHECK (length(VALUE) < 320)"),
    ("numeric(12,2) DEFAULT 0 NOT NULL", "numeric(12,2) DEFAULT 1 NOT NULL"),
    # a composite attribute added
    ('"order" integer);', '"order" integer, email text);'),
    # a column dropped, one added; a column retyped under a view, an index, a statistics
    # object, a SQL-standard body's RETURNS TABLE
    (
        "    secret bytea DEFAULT gen_random_bytes(16),\n",
        "    active boolean NOT NULL DEFAULT true,\n",
    ),
    ("subject text NOT NULL,", "subject varchar(300) NOT NULL,"),
    # a function's body under a view; the view gains a column under a dependent view
    ("RETURN prefix || id::text;", "RETURN prefix || lpad(id::text, 6, '0');"),
    (
        "SELECT id, team_id, assignee_id, prio, subject,",
        "SELECT id, team_id, assignee_id, prio, state, subject,",
    ),
    # a partition added
    (
        'CREATE TABLE "HelpDesk".comment_rest',
        'CREATE TABLE "HelpDesk".comment_2026 PARTITION OF "HelpDesk".comment\n'
        "    FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');\n"
        'CREATE TABLE "HelpDesk".comment_rest',
    ),
    # a constraint trigger's WHEN
    (
        "WHEN (NEW.assignee_id IS NOT NULL)",
        "WHEN (NEW.assignee_id IS NOT NULL AND NEW.state <> 'closed')",
    ),
    # identity options, column grants, a comment, a statistics object's kinds and columns
    (
        "START WITH 10 INCREMENT BY 5 MAXVALUE 100000 CACHE 4 CYCLE",
        "START WITH 10 INCREMENT BY 5 MAXVALUE 200000 CACHE 8",
    ),
    (
        'GRANT SELECT (id, "user", display), UPDATE (display)',
        'GRANT SELECT (id, "user", display, active), UPDATE (display, email)',
    ),
    ("'the queue'", "'the work queue'"),
    ("(dependencies, mcv) ON team_id, state", "(ndistinct) ON team_id, state, prio"),
)


def test_helpdesk_edits(pg_url: str) -> None:
    """The corpus's helpdesk schema, edited as an application grows, dumps like the
    edited file loaded by psql and re-plans empty."""
    first = (SCHEMAS / "helpdesk.sql").read_text()
    assert_edit_like_psql(pg_url, first, _edited(first, *HELPDESK_EDITS))


BOOKING_EDITS = (
    # the guest table renamed (dropped, created: destructive) under a deferrable key
    ("CREATE TABLE booking.guest (", "CREATE TABLE booking.customer ("),
    ("REFERENCES booking.guest (id)", "REFERENCES booking.customer (id)"),
    # identity options, an enum value at the end, a composite attribute, a wider check
    ("(START WITH 100 INCREMENT BY 5 CACHE 10)", "(START WITH 100 INCREMENT BY 1 CYCLE)"),
    ("('pending', 'confirmed', 'cancelled')", "('pending', 'confirmed', 'cancelled', 'gone')"),
    ("zip varchar(10));", "zip varchar(10), country char(2));"),
    ("CHECK (capacity > 0)", "CHECK (capacity > 0 AND capacity < 100)"),
    # a domain over a domain's check, the money domain widened under its column
    ("CHECK (VALUE !~* 'gmail\\.com$')", "CHECK (VALUE !~* '(gmail|yahoo)\\.com$')"),
    ("numeric(12,2) NOT NULL", "numeric(14,2) NOT NULL"),
    # a partition beside the default one; the exclusion constraint without its WHERE
    (
        'CREATE TABLE "Audit Log"."Événement_def"',
        'CREATE TABLE "Audit Log"."Événement_2025" PARTITION OF "Audit Log"."Événement"'
        " FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');\n"
        'CREATE TABLE "Audit Log"."Événement_def"',
    ),
    (" WHERE (status <> 'cancelled'),", ","),
    # the trigger's column list, a policy's roles, the view's options, the matview's query
    ("UPDATE OF room_id, during", "UPDATE OF room_id"),
    (
        "TO ptah_corpus_reader USING (true)",
        "TO ptah_corpus_reader, ptah_corpus_writer USING (true)",
    ),
    ("WITH (security_barrier = true)", "WITH (security_barrier = true, security_invoker = true)"),
    ("count(*) AS n FROM", "count(*) AS n, max(id) AS last FROM"),
    # grants, the publication's columns, the statistics kinds, a function's settings
    ("GRANT SELECT (id, name, capacity)", "GRANT SELECT (id, name)"),
    ("booking.room (id, name)", "booking.room (id, name, capacity)"),
    ("(dependencies, ndistinct)", "(mcv)"),
    ("SET search_path = pg_catalog, pg_temp", 'SET search_path = pg_catalog, "Audit Log", pg_temp'),
)


def test_booking_edits(pg_url: str) -> None:
    """The booking schema's next version (a table renamed, an enum, domain, identity,
    partition, trigger, policy, view and publication changed) dumps like the edited file
    loaded by psql and re-plans empty; the renamed table's drop is destructive."""
    first = (SCHEMAS / "booking.sql").read_text()
    second = _edited(first, *BOOKING_EDITS)
    assert_edit_like_psql(pg_url, first, second)
    ensure_roles(pg_url)
    with database(pg_url) as url:
        apply_plan(url, first)
        with open_target(url) as t:
            plan = planner.plan(t, second)
    destructive = [s.sql for s in plan.statements if DESTRUCTIVE in s.hazards]
    assert destructive == ["DROP TABLE booking.guest"], destructive


FORUM_EDITS = (
    # a list partition split in two (detached, its bound changed, attached again)
    (
        "FOR VALUES IN ('members', 'staff');",
        "FOR VALUES IN ('members');\n"
        "CREATE TABLE forum.post_staff PARTITION OF forum.post FOR VALUES IN ('staff');",
    ),
    # a trigger's columns and WHEN; a policy made restrictive, for a role
    (
        "BEFORE UPDATE ON forum.member\n    FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*)",
        "BEFORE UPDATE OF handle, profile ON forum.member\n"
        "    FOR EACH ROW WHEN (OLD.handle IS DISTINCT FROM NEW.handle)",
    ),
    (
        "CREATE POLICY post_read ON forum.post FOR SELECT USING",
        "CREATE POLICY post_read ON forum.post AS RESTRICTIVE FOR SELECT TO ptah_corpus_reader"
        " USING",
    ),
    # a function under a view and a policy; an aggregate's final function
    ("IN ('member', 'staff');", "IN ('member', 'staff', 'admin');"),
    ("LIMIT 2 - cardinality(state) % 2) s;", "LIMIT 1) s;"),
    # a domain's check dropped, another added
    (
        "    CONSTRAINT handle_chars CHECK (VALUE OPERATOR(ext.~) '^[a-z0-9_]+$')\n",
        "    CONSTRAINT handle_no_admin CHECK (VALUE <> 'admin')\n",
    ),
    # a partitioned table's column retyped under views; a column added at its end
    ("    title text COLLATE forum.german,", "    title varchar(200) COLLATE forum.german,"),
    (
        "    posted_at timestamptz NOT NULL DEFAULT now(),\n",
        "    posted_at timestamptz NOT NULL DEFAULT now(),\n"
        "    edited boolean NOT NULL DEFAULT false,\n",
    ),
    ("title, score FROM forum.post WHERE", "title, score, edited FROM forum.post WHERE"),
    # columns dropped, added, made NOT NULL, defaults
    ("    banned_until timestamptz\n", "    bio text\n"),
    ("karma integer NOT NULL DEFAULT 0", "karma integer NOT NULL DEFAULT 1"),
    ("profile ext.hstore,", "profile ext.hstore NOT NULL DEFAULT '',"),
    (",\n    opening_hours tstzmultirange\n", "\n"),
    # grants, default privileges, comments
    (
        "GRANT SELECT (id, handle, karma), REFERENCES (id)",
        "GRANT SELECT (id, handle), REFERENCES (id)",
    ),
    (
        "GRANT SELECT ON TABLES TO ptah_corpus_reader;",
        "GRANT SELECT, INSERT ON TABLES TO ptah_corpus_reader;",
    ),
    ("COMMENT ON STATISTICS forum.post_board_vis IS 'correlated';\n", ""),
    ("'ranked'", "'ranked by score'"),
)


@pytest.mark.parametrize("back", [False, True], ids=["edited", "and-back"])
def test_forum_edits(pg_url: str, back: bool) -> None:
    """The corpus's forum schema edited, then (the second case) brought back: each dumps
    like its file loaded by psql and re-plans empty."""
    first = (SCHEMAS / "forum.sql").read_text()
    second = _edited(first, *FORUM_EDITS)
    if back:
        first, second = second, first
    assert_edit_like_psql(pg_url, first, second)


# Whole files to whole files: everything of the first the second lacks is dropped (in an
# order the server takes), the rest created or changed.
MIGRATIONS = [
    ("helpdesk", "saas_large"),
    ("saas_large", "helpdesk"),
    ("storage_rls_grants", "realworld_mix"),
    ("pagila_style", "structure_large"),
    ("inheritance_rules", "more_features"),
    ("app_features", "pagila_style"),
    ("forum", "saas_large"),
    # A partition's own trigger went with its parent's DROP TABLE, after DROP FUNCTION.
    ("shop_partitions", "booking"),
    ("booking", "shop_partitions"),
]


@pytest.mark.parametrize(("first", "second"), MIGRATIONS, ids=[f"{a}-{b}" for a, b in MIGRATIONS])
def test_corpus_file_to_another(pg_url: str, first: str, second: str) -> None:
    ensure_roles(pg_url)
    owners = re.compile(r"OWNER TO [\w\"]+;")
    a = owners.sub("OWNER TO CURRENT_USER;", (SCHEMAS / f"{first}.sql").read_text())
    b = owners.sub("OWNER TO CURRENT_USER;", (SCHEMAS / f"{second}.sql").read_text())
    with database(pg_url) as ptah_db, database(pg_url) as psql_db:
        apply_plan(ptah_db, a)
        plan = apply_plan(ptah_db, b)
        psql_load(psql_db, b)
        assert_same_dump(ptah_db, psql_db)
    # Every table of the first the second lacks is dropped, and flagged destructive.
    for stmt in plan.statements:
        if stmt.sql.startswith(("DROP TABLE", "DROP SCHEMA", "DROP TYPE", "DROP DOMAIN")):
            assert DESTRUCTIVE in stmt.hazards, stmt.sql
    assert plan.destructive
