"""Hand edits per object kind: each gives the minimal plan with its hazards, applies, converges."""

from __future__ import annotations

import pytest
from pgcorpus import apply_plan, ensure_roles

from ptah.engines import planner
from ptah.engines.connect import open_target
from ptah.engines.model import (
    DATA_DEPENDENT,
    DESTRUCTIVE,
    HAZARDS,
    LOCK_HEAVY,
    Online,
    PlanError,
    SchemaPolicy,
)

pytestmark = pytest.mark.integration

BASE = """
CREATE SCHEMA s;
CREATE TYPE s.mood AS ENUM ('sad', 'ok');
CREATE DOMAIN s.pos AS integer DEFAULT 1 CONSTRAINT pos_check CHECK (VALUE > 0);
CREATE TYPE s.pair AS (a integer, b text);
CREATE FUNCTION s.norm(t text) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT lower(t) $$;
CREATE FUNCTION s.stamp() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TABLE s.item (
  id integer PRIMARY KEY,
  name text NOT NULL CHECK (s.norm(name) <> ''),
  qty s.pos,
  tenant integer NOT NULL DEFAULT 0,
  pair s.pair
) WITH (fillfactor = 80);
CREATE INDEX item_norm ON s.item (s.norm(name));
CREATE TRIGGER item_stamp BEFORE UPDATE ON s.item FOR EACH ROW EXECUTE FUNCTION s.stamp();
CREATE POLICY item_tenant ON s.item USING (tenant = 0);
ALTER TABLE s.item ENABLE ROW LEVEL SECURITY;
CREATE TABLE s.log (at date NOT NULL, msg text) PARTITION BY RANGE (at);
CREATE TABLE s.log_2024 PARTITION OF s.log FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
CREATE INDEX log_at ON s.log (at);
CREATE VIEW s.names AS SELECT s.norm(name) AS n FROM s.item;
GRANT SELECT ON s.item TO ptah_corpus_reader;
COMMENT ON FUNCTION s.norm(text) IS 'lower case';
"""


def _edit(url: str, sql: str, online: Online | None = None) -> dict[str, tuple[str, ...]]:
    """The plan's statements with their classic hazards (destructive, data-dependent,
    lock-heavy), planned the plain way unless ``online`` says; applied, converged."""
    with open_target(url) as t:
        plan = planner.plan(t, sql, policy=SchemaPolicy(online=online or Online.off()))
        got = {
            " ".join(s.sql.split()): tuple(h for h in s.hazards if h in HAZARDS)
            for s in plan.statements
        }
        result = planner.apply(
            t, plan.statements, plan.fingerprint_before, True, plan.fingerprint_after
        )
        assert result.outcome == "succeeded", (result.message, list(got))
        assert planner.plan(t, sql).statements == []
    return got


EDITS: dict[str, tuple[str, str, dict[str, tuple[str, ...]]]] = {
    "function body (replace in place)": (
        "SELECT lower(t) $$",
        "SELECT lower(trim(t)) $$",
        {
            "CREATE OR REPLACE FUNCTION s.norm(t text) RETURNS text LANGUAGE sql IMMUTABLE AS"
            " $function$ SELECT lower(trim(t)) $function$": (),
        },
    ),
    "function added": (
        "CREATE FUNCTION s.stamp()",
        "CREATE FUNCTION s.two() RETURNS integer LANGUAGE sql AS 'SELECT 2';\n"
        "CREATE FUNCTION s.stamp()",
        {
            "CREATE OR REPLACE FUNCTION s.two() RETURNS integer LANGUAGE sql AS $function$SELECT"
            " 2$function$": (),
        },
    ),
    "function result type (drop and recreate with what uses it)": (
        "CREATE FUNCTION s.norm(t text) RETURNS text",
        "CREATE FUNCTION s.norm(t text) RETURNS varchar",
        {
            "DROP VIEW s.names": (),
            "DROP INDEX s.item_norm": (),
            "ALTER TABLE s.item DROP CONSTRAINT item_name_check": (),
            "DROP FUNCTION s.norm(text)": (),
            "CREATE OR REPLACE FUNCTION s.norm(t text) RETURNS character varying LANGUAGE sql"
            " IMMUTABLE AS $function$ SELECT lower(t) $function$": (),
            "ALTER TABLE s.item ADD CONSTRAINT item_name_check CHECK (((s.norm(name))::text <>"
            " ''::text))": (DATA_DEPENDENT, LOCK_HEAVY),
            "CREATE INDEX item_norm ON s.item USING btree (s.norm(name))": (LOCK_HEAVY,),
            "CREATE VIEW s.names AS SELECT s.norm(item.name) AS n FROM s.item": (),
            "COMMENT ON FUNCTION s.norm(pg_catalog.text) IS 'lower case'": (),
        },
    ),
    "domain constraint and default": (
        "DEFAULT 1 CONSTRAINT pos_check CHECK (VALUE > 0)",
        "DEFAULT 2 CONSTRAINT pos_check CHECK (VALUE > 0) CONSTRAINT pos_small CHECK (VALUE < 100)",
        {
            "ALTER DOMAIN s.pos ADD CONSTRAINT pos_small CHECK ((VALUE < 100))": (DATA_DEPENDENT,),
            "ALTER DOMAIN s.pos SET DEFAULT 2": (),
        },
    ),
    "composite attribute added": (
        "(a integer, b text)",
        "(a integer, b text, c date)",
        {"ALTER TYPE s.pair ADD ATTRIBUTE c date": ()},
    ),
    "enum value added": (
        "('sad', 'ok')",
        "('sad', 'ok', 'happy')",
        {"ALTER TYPE s.mood ADD VALUE 'happy' AFTER 'ok'": ()},
    ),
    "trigger changed": (
        "BEFORE UPDATE ON s.item FOR EACH ROW",
        "BEFORE INSERT OR UPDATE ON s.item FOR EACH ROW",
        {
            "DROP TRIGGER item_stamp ON s.item": (),
            "CREATE TRIGGER item_stamp BEFORE INSERT OR UPDATE ON s.item FOR EACH ROW EXECUTE"
            " FUNCTION s.stamp()": (),
        },
    ),
    "policy changed and forced": (
        "USING (tenant = 0);",
        "USING (tenant > 0);\nALTER TABLE s.item FORCE ROW LEVEL SECURITY;",
        {
            "DROP POLICY item_tenant ON s.item": (),
            "CREATE POLICY item_tenant ON s.item FOR ALL TO PUBLIC USING ((tenant > 0))": (),
            "ALTER TABLE s.item FORCE ROW LEVEL SECURITY": (),
        },
    ),
    "reloptions, logging, statistics": (
        "WITH (fillfactor = 80);",
        "WITH (fillfactor = 60, autovacuum_enabled = false);\n"
        "ALTER TABLE s.item ALTER COLUMN tenant SET STATISTICS 200;\n"
        "ALTER TABLE s.item REPLICA IDENTITY FULL;",
        {
            "ALTER TABLE s.item SET (fillfactor=60, autovacuum_enabled=false)": (),
            "ALTER TABLE s.item ALTER COLUMN tenant SET STATISTICS 200": (),
            "ALTER TABLE s.item REPLICA IDENTITY FULL": (),
        },
    ),
    "grant and revoke": (
        "GRANT SELECT ON s.item TO ptah_corpus_reader;",
        "GRANT SELECT, UPDATE (name) ON s.item TO ptah_corpus_writer;\n"
        "ALTER DEFAULT PRIVILEGES IN SCHEMA s GRANT SELECT ON TABLES TO ptah_corpus_reader;",
        {
            "REVOKE SELECT ON TABLE s.item FROM ptah_corpus_reader": (),
            "GRANT SELECT, UPDATE (name) ON TABLE s.item TO ptah_corpus_writer": (),
            "ALTER DEFAULT PRIVILEGES IN SCHEMA s GRANT SELECT ON TABLES TO ptah_corpus_reader": (),
        },
    ),
    "partition added": (
        "CREATE INDEX log_at ON s.log (at);",
        "CREATE INDEX log_at ON s.log (at);\n"
        "CREATE TABLE s.log_2025 PARTITION OF s.log FOR VALUES FROM ('2025-01-01') TO"
        " ('2026-01-01');",
        {
            "CREATE TABLE s.log_2025 PARTITION OF s.log FOR VALUES FROM ('2025-01-01') TO"
            " ('2026-01-01')": (),
        },
    ),
    "partition bound changed (detach, attach)": (
        "FOR VALUES FROM ('2024-01-01') TO ('2025-01-01')",
        "FOR VALUES FROM ('2023-01-01') TO ('2025-01-01')",
        {
            "ALTER TABLE s.log DETACH PARTITION s.log_2024": (),
            "ALTER TABLE s.log ATTACH PARTITION s.log_2024 FOR VALUES FROM ('2023-01-01') TO"
            " ('2025-01-01')": (DATA_DEPENDENT, LOCK_HEAVY),
        },
    ),
    "partition dropped": (
        "CREATE TABLE s.log_2024 PARTITION OF s.log FOR VALUES FROM ('2024-01-01') TO"
        " ('2025-01-01');",
        "",
        {"DROP TABLE s.log_2024": (DESTRUCTIVE,)},
    ),
    "function comment": (
        "IS 'lower case'",
        "IS 'lower-cased'",
        {"COMMENT ON FUNCTION s.norm(pg_catalog.text) IS 'lower-cased'": ()},
    ),
    "function dropped with what used it": (
        "CREATE VIEW s.names AS SELECT s.norm(name) AS n FROM s.item;",
        "",
        {"DROP VIEW s.names": ()},
    ),
}


@pytest.mark.parametrize("name", list(EDITS))
def test_hand_edit_gives_minimal_plan(pg_url: str, pg_db: str, name: str) -> None:
    ensure_roles(pg_url)
    old, new, expected = EDITS[name]
    assert old in BASE
    apply_plan(pg_db, BASE)
    assert _edit(pg_db, BASE.replace(old, new)) == expected


# The edits whose plan has an online form (indexes and constraints rebuilt, partitions).
ONLINE_EDITS = [
    "function result type (drop and recreate with what uses it)",
    "partition added",
    "partition bound changed (detach, attach)",
]


@pytest.mark.parametrize("name", ONLINE_EDITS)
def test_hand_edit_converges_online(pg_url: str, pg_db: str, name: str) -> None:
    """The same edits planned online (concurrent indexes, NOT VALID then VALIDATE, steps
    outside one transaction) apply and converge too."""
    ensure_roles(pg_url)
    old, new, _ = EDITS[name]
    apply_plan(pg_db, BASE)
    got = _edit(pg_db, BASE.replace(old, new), Online())
    heavy = [sql for sql, h in got.items() if LOCK_HEAVY in h]
    assert all("ATTACH PARTITION" in sql for sql in heavy), heavy  # no online form


def test_partition_key_change_is_refused_with_the_reason(pg_url: str, pg_db: str) -> None:
    ensure_roles(pg_url)
    apply_plan(pg_db, BASE)
    changed = BASE.replace("PARTITION BY RANGE (at)", "PARTITION BY LIST (at)").replace(
        "FOR VALUES FROM ('2024-01-01') TO ('2025-01-01')", "FOR VALUES IN ('2024-01-01')"
    )
    with open_target(pg_db) as t, pytest.raises(PlanError) as err:
        planner.plan(t, changed)
    assert err.value.reason == "Unsupported"
    assert "partition key" in str(err.value) and "s.log" in str(err.value)


def test_domain_base_type_change_used_by_a_table_moves_its_columns(pg_url: str, pg_db: str) -> None:
    """No ALTER DOMAIN ... TYPE: the domain is renamed aside, created anew, its columns
    moved to it, the old one dropped (refused before: the domain was to be dropped under
    its column)."""
    ensure_roles(pg_url)
    apply_plan(pg_db, BASE)
    plan = apply_plan(pg_db, BASE.replace("s.pos AS integer", "s.pos AS bigint"))
    sqls = [s.sql for s in plan.statements]
    assert (
        sqls.index('ALTER DOMAIN s.pos RENAME TO "pos_ptah_was"')
        < sqls.index("ALTER TABLE s.item ALTER COLUMN qty TYPE s.pos")
        < sqls.index('DROP DOMAIN s."pos_ptah_was"')
    )


INHERIT = """
CREATE TABLE public.base (id integer PRIMARY KEY, at date NOT NULL);
CREATE TABLE public.child_a (CHECK (at < '2024-01-01')) INHERITS (public.base);
CREATE TABLE public.child_b (extra text) INHERITS (public.base);
CREATE RULE base_route AS ON INSERT TO public.base WHERE new.at < '2024-01-01'
  DO INSTEAD INSERT INTO public.child_a VALUES (new.id, new.at);
CREATE TABLE public.counter (
  id integer GENERATED BY DEFAULT AS IDENTITY (START WITH 10 INCREMENT BY 5) PRIMARY KEY
);
"""


def test_inheritance_rules_and_identity_edits(pg_db: str) -> None:
    apply_plan(pg_db, INHERIT)
    # A column added to the parent reaches its children: one statement, not three.
    added = INHERIT.replace("at date NOT NULL)", "at date NOT NULL, note text)")
    assert _edit(pg_db, added) == {"ALTER TABLE public.base ADD COLUMN note text": ()}
    # A rule changed is dropped and created again; an identity's options change in place.
    changed = (
        added.replace("DO INSTEAD INSERT", "DO INSTEAD INSERT")
        .replace("new.at < '2024-01-01'\n", "new.at < '2023-01-01'\n")
        .replace("INCREMENT BY 5", "INCREMENT BY 7")
    )
    got = _edit(pg_db, changed)
    assert got["DROP RULE base_route ON public.base"] == ()
    assert any(k.startswith("CREATE RULE base_route AS ON INSERT TO public.base") for k in got)
    assert got["ALTER TABLE public.counter ALTER COLUMN id SET INCREMENT BY 7"] == ()
    assert len(got) == 3
    # A child leaves its parent.
    alone = changed.replace(
        "(extra text) INHERITS (public.base)", "(id integer, at date NOT NULL, extra text)"
    )
    got = _edit(pg_db, alone)
    assert "ALTER TABLE public.child_b NO INHERIT public.base" in got


def test_partition_added_beside_a_default_one_is_data_dependent(pg_url: str, pg_db: str) -> None:
    """The server moves no row: a new partition whose bound takes rows the default
    partition holds fails. The plan said nothing of it (no hazard, no lock named)."""
    ensure_roles(pg_url)
    with_default = BASE + "CREATE TABLE s.log_rest PARTITION OF s.log DEFAULT;\n"
    apply_plan(pg_db, with_default)
    added = with_default + (
        "CREATE TABLE s.log_2025 PARTITION OF s.log FOR VALUES FROM ('2025-01-01') TO"
        " ('2026-01-01');\n"
    )
    with open_target(pg_db) as t:
        (stmt,) = planner.plan(t, added).statements
        assert stmt.sql.startswith("CREATE TABLE s.log_2025 PARTITION OF s.log")
        assert DATA_DEPENDENT in stmt.hazards and stmt.lock == "ACCESS EXCLUSIVE"
        t.connection.execute("INSERT INTO s.log VALUES ('2025-06-01', 'held by the default')")
        t.connection.commit()
        plan = planner.plan(t, added)
        result = planner.apply(
            t, plan.statements, plan.fingerprint_before, True, plan.fingerprint_after
        )
        assert result.outcome == "failed" and "default partition" in result.message


def test_serial_made_identity_goes_on_past_the_rows(pg_db: str) -> None:
    """ADD ... AS IDENTITY on a column with rows starts at 1: the next insert took an id a
    row had (a duplicate key). The plan moves the new sequence past the largest id."""
    v1 = 'CREATE TABLE public."Order" ("OrderID" serial PRIMARY KEY, v text);'
    v2 = (
        'CREATE TABLE public."Order" ("OrderID" integer GENERATED BY DEFAULT AS IDENTITY'
        " PRIMARY KEY, v text);"
    )
    apply_plan(pg_db, v1)
    with open_target(pg_db) as t:
        t.connection.execute(
            "INSERT INTO public.\"Order\" (v) SELECT 'x' FROM generate_series(1, 3)"
        )
        t.connection.commit()
    apply_plan(pg_db, v2)
    with open_target(pg_db) as t:
        row = t.connection.execute(
            'INSERT INTO public."Order" (v) VALUES (\'next\') RETURNING "OrderID"'
        ).fetchone()
        assert row == (4,)


def test_identity_made_serial_goes_on_past_the_rows(pg_db: str) -> None:
    """The serial's new sequence started at 1 under rows that had ids (a duplicate key)."""
    apply_plan(
        pg_db, "CREATE TABLE public.t (id integer GENERATED BY DEFAULT AS IDENTITY, v text);"
    )
    with open_target(pg_db) as t:
        t.connection.execute("INSERT INTO public.t (v) VALUES ('a'), ('b')")
        t.connection.commit()
    apply_plan(pg_db, "CREATE TABLE public.t (id serial, v text);")
    with open_target(pg_db) as t:
        row = t.connection.execute("INSERT INTO public.t (v) VALUES ('c') RETURNING id").fetchone()
        assert row == (3,)


LOSSY = {
    "numeric scale": ("numeric(12,2)", "numeric(12,0)"),
    "unconstrained numeric": ("numeric", "numeric(10,2)"),
    "float to integer": ("double precision", "integer"),
    "timestamp to date": ("timestamp with time zone", "date"),
    "seconds precision": ("timestamp(6) without time zone", "timestamp(0) without time zone"),
    "time zone dropped": ("timestamp with time zone", "timestamp without time zone"),
    "bigint to real": ("bigint", "real"),
    "json to jsonb": ("json", "jsonb"),
    "inet to cidr": ("inet", "cidr"),
    # INTERVAL DAY keeps '1 day 3 hours' as '1 day'; seconds rounded to the precision
    "interval fields": ("interval", "interval day"),
    "interval seconds precision": ("interval hour to second", "interval minute to second(0)"),
    "text to name": ("text", "name"),
    # float8_numeric prints 15 significant digits whatever the scale: 0.1 + 0.2 is 0.3
    "double to numeric": ("double precision", "numeric"),
    "double to a wide numeric": ("double precision", "numeric(40,20)"),
    "real to numeric": ("real", "numeric"),
    # '1 day 02:00' is 02:00: days, months and years are cut off
    "interval to time": ("interval", "time without time zone"),
    # money keeps the currency's fraction (two digits): 1.239 is $1.24
    "numeric to money": ("numeric", "money"),
    "money to whole numbers": ("money", "numeric(12,0)"),
    # a "char" keeps the first byte of 'abc'
    "text to char": ("text", '"char"'),
}
KEEPS = {
    "wider numeric": ("numeric(10,2)", "numeric(14,2)"),
    "integer to bigint": ("integer", "bigint"),
    "integer to numeric": ("integer", "numeric(12,2)"),
    "longer varchar": ("character varying(5)", "character varying(10)"),
    "shorter varchar (fails, not cut)": ("text", "character varying(5)"),
    "finer timestamp": ("timestamp(0) without time zone", "timestamp without time zone"),
    "money to numeric": ("money", "numeric(12,2)"),
    "real to double": ("real", "double precision"),
    "interval with more fields": ("interval year", "interval year to month"),
}


@pytest.mark.parametrize("name", sorted(LOSSY) + sorted(KEEPS))
def test_type_change_that_changes_values_is_destructive(pg_db: str, name: str) -> None:
    """The server's assignment cast rounds 1.55 to 2 and 2.5 to 2, cuts a timestamp to
    its date, reads a timestamptz again in the session's zone, all without an error:
    planned as if nothing were lost, the values changed silently."""
    old, new = LOSSY.get(name) or KEEPS[name]
    apply_plan(pg_db, f"CREATE TABLE public.t (v {old});")
    with open_target(pg_db) as t:
        (stmt,) = planner.plan(t, f"CREATE TABLE public.t (v {new});").statements
    assert stmt.sql == f"ALTER TABLE public.t ALTER COLUMN v TYPE {new}"
    assert (DESTRUCTIVE in stmt.hazards) == (name in LOSSY)


DOMAINS = (
    "CREATE DOMAIN public.cents AS numeric(12,2);\n"
    "CREATE DOMAIN public.price AS public.cents CHECK (VALUE >= 0);\n"
    "CREATE DOMAIN public.whole AS integer;\n"
)
DOMAIN_CHANGES = {
    # (old column type, new column type): destructive?
    "domain over numeric(12,2) to numeric(12,0)": ("public.cents", "numeric(12,0)", True),
    "domain over a domain to integer": ("public.price", "integer", True),
    "numeric(12,2) to a domain over integer": ("numeric(12,2)", "public.whole", True),
    "array of a domain to integer[]": ("public.cents[]", "integer[]", True),
    "domain to its own base type": ("public.cents", "numeric(12,2)", False),
    "domain to a wider numeric": ("public.price", "numeric(14,2)", False),
    "integer to a domain over integer": ("integer", "public.whole", False),
}


@pytest.mark.parametrize("name", sorted(DOMAIN_CHANGES))
def test_type_change_through_a_domain_is_destructive_as_its_base_type(
    pg_db: str, name: str
) -> None:
    """A domain converts as the type it stores: a numeric(12,2) domain column made
    numeric(12,0), or a numeric(12,2) column made a domain over integer, rounded its
    cents away with nothing said (the domain's name was compared, not its type)."""
    old, new, lossy = DOMAIN_CHANGES[name]
    apply_plan(pg_db, f"{DOMAINS}CREATE TABLE public.t (v {old});")
    with open_target(pg_db) as t:
        (stmt,) = planner.plan(t, f"{DOMAINS}CREATE TABLE public.t (v {new});").statements
    assert stmt.sql == f"ALTER TABLE public.t ALTER COLUMN v TYPE {new}"
    assert (DESTRUCTIVE in stmt.hazards) == lossy


def test_identity_sequence_grants_are_planned(pg_url: str, pg_db: str) -> None:
    """GRANT ... ON ALL SEQUENCES reaches identity columns' sequences, as do the default
    privileges for sequences, and a comment may name one: any such file was refused (an
    unmanaged grant or comment)."""
    ensure_roles(pg_url)
    v1 = "CREATE TABLE public.i (id integer GENERATED ALWAYS AS IDENTITY, v text);\n"
    granted = v1 + "GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO ptah_corpus_reader;\n"
    apply_plan(pg_db, v1)
    assert _edit(pg_db, granted) == {
        "GRANT SELECT, USAGE ON SEQUENCE public.i_id_seq TO ptah_corpus_reader": ()
    }
    assert _edit(pg_db, v1) == {
        "REVOKE SELECT, USAGE ON SEQUENCE public.i_id_seq FROM ptah_corpus_reader": ()
    }
    # Its comment, set and changed.
    commented = v1 + "COMMENT ON SEQUENCE public.i_id_seq IS 'ids';\n"
    assert _edit(pg_db, commented) == {"COMMENT ON SEQUENCE public.i_id_seq IS 'ids'": ()}
    assert _edit(pg_db, v1) == {"COMMENT ON SEQUENCE public.i_id_seq IS NULL": ()}
    # A table created under default privileges for sequences: its identity's grant
    # comes from them, and a new one planned beside it converges too.
    defaults = (
        "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE ON SEQUENCES"
        " TO ptah_corpus_writer;\n"
    )
    apply_plan(pg_db, defaults + granted)
    apply_plan(
        pg_db,
        defaults
        + granted
        + "CREATE TABLE public.j (id bigint GENERATED BY DEFAULT AS IDENTITY);\n",
    )
