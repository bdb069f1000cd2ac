"""PostgreSQL confinement rules beyond the shared minimum, and the load's ownership policy."""

from __future__ import annotations

import pytest

from ptah.engines import confine
from ptah.engines.base import DesiredSchemaInvalid
from ptah.engines.confine import StatementRefused
from ptah.engines.postgres.prepare import prepare


def test_owner_to_and_transaction_control_are_left_out_keeping_lines() -> None:
    sql = "BEGIN;\nCREATE TABLE a (x int);\nALTER TABLE a OWNER TO nobody;\nCOMMIT;\n"
    load = prepare(confine.split(sql, "postgres"))
    assert "OWNER" not in load.sql and "BEGIN" not in load.sql and "COMMIT" not in load.sql
    assert len(load.warnings) == 2 and load.warnings[0].startswith("line 1:")
    assert load.line_of(load.sql.index("x int") + 1) == 2
    assert "OWNER TO nobody" in prepare(confine.split(sql, "postgres"), "manage").sql


def test_begin_atomic_body_is_not_transaction_control() -> None:
    sql = (
        "CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; END;\n"
        'ALTER FUNCTION f() OWNER TO "Some Role";\n'
    )
    load = prepare(confine.split(sql, "postgres"))
    assert "BEGIN ATOMIC" in load.sql and "OWNER" not in load.sql


def test_a_dump_with_rows_is_refused_at_its_copy_naming_the_line() -> None:
    # pg_dump without --schema-only: the rows after COPY ... FROM stdin are not SQL (the
    # load used to fail on the first row, "syntax error at or near 1").
    sql = "CREATE TABLE t (a int);\n\nCOPY public.t (a) FROM stdin;\n1\n2\n\\.\n"
    with pytest.raises(DesiredSchemaInvalid, match=r"line 3 .*COPY \.\.\. FROM STDIN brings rows"):
        prepare(confine.split(sql, "postgres"))
    assert "COPY" in prepare(confine.split("COPY t TO stdout;", "postgres")).sql


@pytest.mark.parametrize(
    "sql",
    [
        "SET ROLE postgres",
        "SET SESSION AUTHORIZATION postgres",
        # The same switches through the settings' own names or a scope word: each switched
        # the loading session's role on the server and passed the check.
        "SET LOCAL role postgres",
        "SET session_authorization = 'postgres'",
        'SET "role" TO postgres',
        "SET LOCAL SESSION AUTHORIZATION postgres",
        "RESET session_authorization",
        "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY",
        "REASSIGN OWNED BY a TO b",
        "DROP OWNED BY a",
        "GRANT CONNECT ON DATABASE x TO y",
        "GRANT SET ON PARAMETER work_mem TO y",
        "COMMENT ON ROLE x IS 'y'",
        "CREATE USER MAPPING FOR CURRENT_USER SERVER s",
        "CREATE FOREIGN DATA WRAPPER w",
        "IMPORT FOREIGN SCHEMA s FROM SERVER x INTO public",
        "SELECT lo_export(1, '/tmp/x')",
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity",
        "DO $$ BEGIN PERFORM pg_reload_conf(); END $$",
        "CREATE TABLE t AS SELECT pg_read_file('/etc/passwd') AS x",
        "ROLLBACK",
        "SAVEPOINT s",
        "PREPARE TRANSACTION 'x'",
        # What changes the server's reading of the statements after it (a plan ran a
        # program through a string that ended elsewhere for the server).
        "SET standard_conforming_strings = off",
        "SET LOCAL standard_conforming_strings TO false",
        "SET client_encoding TO 'SJIS'",
        "SET NAMES 'BIG5'",
        "SELECT set_config('standard_conforming_strings', 'off', false)",
        "SELECT set_config(E'standard\\_conforming_strings', 'off', false)",
        "SELECT set_config('client_' || 'encoding', 'GBK', false)",
        "SELECT set_config('role', 'postgres', false)",
        "UPDATE pg_catalog.pg_settings SET setting = 'off' WHERE name = 'x'",
        "CREATE FUNCTION f() RETURNS void LANGUAGE plpgsql AS $$ BEGIN"
        " SET standard_conforming_strings = off; END $$",
        "CREATE FUNCTION f() RETURNS text LANGUAGE sql AS"
        " 'SELECT set_config(''client_encoding'', ''GBK'', false)'",
        "DO $$ BEGIN PERFORM set_config('client_encoding', 'SJIS', false); END $$",
        # What acts outside, reached by another name: each wrote a server file in a plan.
        "SELECT U&\"lo\\005fexport\"(1, '/tmp/x')",
        "SELECT U&\"lo!005fexport\" UESCAPE '!' (1, '/tmp/x')",
        "DO $$ BEGIN PERFORM U&\"lo\\005fexport\"(1, '/tmp/x'); END $$",
        "SELECT * FROM ts_stat('SELECT to_tsvector(lo_export(1, ''/tmp/x'')::text)')",
        "CREATE OPERATOR ### (LEFTARG = oid, RIGHTARG = text, FUNCTION = lo_export)",
        "CREATE AGGREGATE a (text) (SFUNC = pg_read_file, STYPE = text)",
        "ALTER FUNCTION lo_export RENAME TO harmless",
        "ALTER TABLE ok ADD COLUMN z int DEFAULT lo_export(1, '/tmp/x')",
        "SELECT pg_stat_reset_slru(NULL)",
        # A line comment ends at a carriage return for the server: the COPY ran in a plan.
        "SELECT 1 -- note\r; COPY (SELECT 1) TO PROGRAM 'true'",
        # The cluster's own catalogs: a plan of more than one batch gave a role CREATEDB.
        "UPDATE pg_authid SET rolcreatedb = true WHERE rolname = 'r'",
        "LOCK TABLE pg_catalog.pg_authid IN ACCESS EXCLUSIVE MODE",
        "GRANT SELECT ON pg_authid TO PUBLIC",
        "CREATE FUNCTION h() RETURNS void LANGUAGE sql AS"
        " $$ DELETE FROM pg_database WHERE datname = 'x' $$",
        "WITH x AS (DELETE FROM pg_shdescription RETURNING 1) SELECT * FROM x",
        # The database's own catalogs: renaming lo_export in pg_proc let a plan write a file.
        "UPDATE pg_proc SET proname = 'harmless' WHERE proname = 'lo_export'",
        "LOCK TABLE ok, pg_catalog.pg_authid",
        "SELECT * FROM pg_authid FOR UPDATE",
        "DELETE FROM ONLY pg_catalog.pg_description",
        "UPDATE pg_catalog.pg_language SET lanpltrusted = true WHERE lanname = 'plperlu'",
        # The loading session's temporary schema, read by the inspection before pg_catalog.
        "CREATE TEMP TABLE pg_namespace (oid oid, nspname name)",
        "CREATE OR REPLACE TEMPORARY VIEW pg_class AS SELECT 1 AS oid",
        "SELECT 1 AS x INTO TEMP pg_type",
        "SET search_path = pg_temp, public",
        "SELECT set_config('search_path', 'pg_temp', false)",
        "ALTER TABLE t SET SCHEMA pg_temp_3",
        "CREATE FUNCTION f() RETURNS void LANGUAGE sql SET search_path = pg_temp"
        " AS 'CREATE TABLE pg_namespace (oid oid)'",
        # The server's log, statistics and libraries: "SET log_min_duration_statement = 0"
        # wrote the file's own text (a forged FATAL line) into the server's log.
        "SET log_min_duration_statement = 0",
        "SET LOCAL \"log_statement\" TO 'none'",
        "SET SESSION track_activities = off",
        "SELECT set_config('log_min_messages', 'panic', false)",
        "CREATE FUNCTION q() RETURNS int LANGUAGE sql SET log_statement = 'all' AS 'SELECT 1'",
        "ALTER FUNCTION q() SET debug_print_plan = on",
        "DO $$ BEGIN SET allow_system_table_mods = on; END $$",
        "SET dynamic_library_path = '/tmp'",
        # auto_explain logs the session's plans; pg_stat_statements keeps its statements.
        "SET auto_explain.log_min_duration = 0",
        "SET LOCAL auto_explain.log_analyze TO on",
        "SELECT set_config('auto_explain.log_min_duration', '0', false)",
        "SET pg_stat_statements.track = 'none'",
        # Up to PostgreSQL 14: an exclusive backup's backup_label in the data directory.
        "SELECT pg_start_backup('x')",
        "SELECT pg_ls_replslotdir('s')",
        # What the server keeps from other roles, read into an error the plan reports.
        "SELECT rolpassword::int FROM pg_authid WHERE rolname = 'other'",
        "CREATE VIEW v AS SELECT usename, passwd FROM pg_catalog.pg_shadow",
        "SELECT option_value::int FROM information_schema.user_mapping_options",
        "SELECT * FROM pg_hba_file_rules",
        "SELECT (SELECT string_agg(encode(t_data, 'escape'), '|') FROM"
        " heap_page_items(get_raw_page('pg_authid', 0)))::int",
        "SELECT * FROM pg_get_wal_records_info('0/1000000', '0/2000000')",
        "SELECT heap_force_kill('pg_authid'::regclass, ARRAY['(0,1)']::tid[])",
        # The schemas the inspection reads by: a redefined format_type forged the plan.
        "CREATE OR REPLACE FUNCTION pg_catalog.format_type(oid, integer) RETURNS text"
        " LANGUAGE sql AS $$ SELECT 'bigint'::text $$",
        "ALTER FUNCTION pg_catalog.pg_get_expr(pg_node_tree, oid) RENAME TO x",
        "CREATE VIEW information_schema.columns AS SELECT 1",
        "DROP SCHEMA app, information_schema CASCADE",
        "COMMENT ON FUNCTION pg_catalog.now() IS 'x'",
        "SET search_path = pg_catalog",
        "SELECT set_config('search_path', 'pg_catalog, public', false)",
        "ALTER FUNCTION public.format_type(oid, integer) SET SCHEMA pg_catalog",
        "SELECT query::int FROM pg_stat_activity WHERE query LIKE '%PASSWORD%'",
    ],
)
def test_out_of_database_statements_are_refused_with_their_line(sql: str) -> None:
    with pytest.raises(StatementRefused) as err:
        confine.check("CREATE TABLE ok (x int);\n\n" + sql + ";\n", "postgres")
    assert "line 3:" in str(err.value)
    assert err.value.reason == "StatementRefused"


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE FUNCTION f() RETURNS void LANGUAGE plpgsql AS $$ BEGIN"
        " PERFORM pg_terminate_backend(1); END $$",
        "COMMENT ON TABLE t IS 'DROP DATABASE x'",
        "GRANT SELECT ON t TO reader",
        "GRANT USAGE ON SCHEMA s TO reader",
        "ALTER DEFAULT PRIVILEGES FOR ROLE app IN SCHEMA s GRANT SELECT ON TABLES TO r",
        "SELECT pg_catalog.set_config('search_path', '', false)",
        "CREATE VIEW dbs AS SELECT datname, pg_database_size(datname) FROM pg_database",
        "CREATE VIEW rels AS SELECT relname FROM pg_class JOIN pg_namespace n ON true",
        "CREATE TABLE weather (temp int, temporary text)",
        "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'c') THEN"
        " ALTER TABLE ok ADD CONSTRAINT c CHECK (x > 0); END IF; END $$",
        "CREATE SCHEMA dblink;\nCREATE EXTENSION IF NOT EXISTS dblink SCHEMA dblink",
        "CREATE TABLE s (a text DEFAULT E'x\\''\n  -- a comment line\n  'y\\'z')",
        "CREATE FUNCTION sd() RETURNS int LANGUAGE sql SECURITY DEFINER"
        " SET search_path = pg_catalog, pg_temp AS 'SELECT 1'",
        "CREATE FUNCTION sd2() RETURNS int LANGUAGE sql SECURITY DEFINER"
        " SET search_path TO 'pg_catalog', 'pg_temp' AS 'SELECT 1'",
        "SET standard_conforming_strings = on;\nSET client_encoding = 'UTF8';\n"
        "RESET standard_conforming_strings;\nSELECT current_setting('client_encoding')",
        "CREATE POLICY p ON t FOR SELECT TO PUBLIC USING (true)",
        # A scope word before an ordinary setting is that setting (it read as a role switch).
        "SET SESSION statement_timeout = 0;\nSET LOCAL lock_timeout = '5s'",
        "CREATE EVENT TRIGGER e ON ddl_command_end EXECUTE FUNCTION f()",
        "CREATE TABLE audit (log_statement text, track_counts int);\n"
        "UPDATE audit SET track_counts = 1;\nRESET log_statement;\nSHOW log_min_messages;\n"
        "SELECT current_setting('log_statement');\nSET check_function_bodies = false",
        # A monitoring view or function over other sessions may be defined, not run.
        "CREATE VIEW act AS SELECT pid, query FROM pg_stat_activity;\n"
        "CREATE VIEW act2 AS SELECT * FROM act;\n"
        "CREATE FUNCTION n() RETURNS bigint LANGUAGE sql AS 'SELECT count(*) FROM act2'",
        "SELECT 'pg_authid'::regclass;\nCREATE VIEW r AS SELECT rolname FROM pg_roles",
        # pg_catalog's objects used, not defined (pg_dump writes these).
        "CREATE EXTENSION IF NOT EXISTS plpgsql WITH SCHEMA pg_catalog;\n"
        'CREATE TABLE public.u (a text COLLATE pg_catalog."default", b int DEFAULT'
        " pg_catalog.now());\n"
        "CREATE INDEX ui ON public.u USING btree (a pg_catalog.text_pattern_ops);\n"
        "CREATE FUNCTION public.g(a pg_catalog.int4) RETURNS pg_catalog.int4 LANGUAGE sql"
        " AS 'SELECT 1';\nDROP FUNCTION public.g(pg_catalog.int4);\n"
        "SET search_path = public, pg_catalog",
        # A custom setting of the application's own (read by an RLS policy).
        "SET app.tenant = 'a';\nSELECT set_config('app.tenant', 'b', false);\n"
        "CREATE POLICY t ON t USING (tenant = current_setting('app.tenant'))",
    ],
)
def test_schema_statements_pass(sql: str) -> None:
    assert confine.check(sql + ";", "postgres")


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE VIEW act AS SELECT query FROM pg_stat_activity;\nSELECT query::int FROM act;",
        "CREATE FUNCTION n() RETURNS int LANGUAGE sql AS"
        " 'SELECT query::int FROM pg_stat_activity';\nCREATE TABLE u (a int DEFAULT n());",
        "CREATE VIEW a1 AS SELECT query FROM pg_stat_activity;\n"
        "CREATE VIEW a2 AS SELECT * FROM a1;\nCREATE MATERIALIZED VIEW m AS SELECT * FROM a2;",
    ],
)
def test_other_sessions_queries_are_not_read_while_the_file_loads(sql: str) -> None:
    # Defined, a view or routine over pg_stat_activity is fine; run (selected, a default,
    # a materialized view over it), it puts another session's query into an error.
    with pytest.raises(StatementRefused) as err:
        confine.check(sql, "postgres")
    assert err.value.line == sql.count("\n") + 1
    assert "other sessions' queries" in err.value.why


def test_runner_plan_takes_the_schema_policy() -> None:
    from ptah.runner.main import build_parser

    args = build_parser().parse_args(
        [
            "plan",
            "--desired",
            "/d",
            "--operation-id",
            "op",
            "--ownership",
            "manage",
            "--ignore",
            "publication",
            "--ignore",
            "cast",
        ]
    )
    assert (args.ownership, args.ignore) == ("manage", ["publication", "cast"])
    default = build_parser().parse_args(["plan", "--desired", "/d", "--operation-id", "op"])
    assert (default.ownership, default.ignore) == ("ignore", [])


DYN = "CREATE FUNCTION d() RETURNS void LANGUAGE plpgsql AS $b$ BEGIN EXECUTE 'x'; END $b$;\n"


@pytest.mark.parametrize(
    ("sql", "why"),
    [
        # A plan ran this on the server: a program, through dynamic SQL in a DO block.
        (
            "DO $$ BEGIN EXECUTE 'COPY (SELECT 1) TO PROGRAM ''touch /tmp/x'''; END $$",
            "dynamic SQL",
        ),
        ("DO $$ BEGIN IF true THEN CREATE ROLE r; END IF; END $$", "cluster roles"),
        ("DO LANGUAGE plperlu $$ system('true') $$", "plperlu code"),
        ("PREPARE q AS SELECT pg_terminate_backend(1)", "pg_terminate_backend"),
        ("SELECT query_to_xml('SELECT pg_terminate_backend(1)', true, false, '')", "SQL text"),
        (
            "CREATE TABLE l (a int) PARTITION BY LIST (a);\n"
            "CREATE TABLE l1 PARTITION OF l FOR VALUES IN (pg_terminate_backend(1))",
            "pg_terminate_backend",
        ),
        ("CREATE FUNCTION lib(int) RETURNS int LANGUAGE c AS 'mylib', 'lib'", "server library"),
        (DYN + "SELECT d()", "calls d()"),
        (
            DYN + "CREATE FUNCTION s.g() RETURNS void LANGUAGE sql AS 'SELECT d()';\n"
            "DO $$ BEGIN PERFORM s.g(); END $$",
            "calls g()",
        ),
        (
            "CREATE FUNCTION p() RETURNS int LANGUAGE plpython3u AS 'return 1';\n"
            "CREATE TABLE l (a int) PARTITION BY LIST (a);\n"
            "CREATE TABLE l1 PARTITION OF l FOR VALUES IN (p())",
            "calls p()",
        ),
        (
            "CREATE FUNCTION tg() RETURNS trigger LANGUAGE plpgsql AS $b$ BEGIN EXECUTE 'x';"
            " RETURN NEW; END $b$;\nCREATE TRIGGER t BEFORE INSERT ON ok FOR EACH ROW"
            " EXECUTE FUNCTION tg();\nINSERT INTO ok VALUES (1)",
            "can run tg()",
        ),
        (
            "CREATE FUNCTION k() RETURNS trigger LANGUAGE plpgsql AS $b$ BEGIN"
            " PERFORM pg_terminate_backend(1); RETURN NEW; END $b$;\nCREATE TRIGGER t"
            " AFTER INSERT ON ok FOR EACH ROW EXECUTE FUNCTION k();\nINSERT INTO ok VALUES (1)",
            "can run k()",
        ),
        # A standard body (words, not a string) that calls what acts outside: SELECT f() wrote
        # a server file in a plan.
        ("CREATE FUNCTION f() RETURNS int RETURN lo_export(1, '/tmp/x');\nSELECT f()", "calls f()"),
        (
            "CREATE PROCEDURE p() BEGIN ATOMIC SELECT pg_terminate_backend(1); END;\nCALL p()",
            "calls p()",
        ),
        # A static statement of a PL/pgSQL body the file may not run: SELECT f() ran it.
        (
            "CREATE FUNCTION f() RETURNS void LANGUAGE plpgsql AS $b$ BEGIN"
            " COPY (SELECT 1) TO PROGRAM 'true'; END $b$;\nSELECT f()",
            "calls f()",
        ),
        (
            "CREATE PROCEDURE p() LANGUAGE plpgsql AS $b$ BEGIN IF true THEN CREATE ROLE r;"
            " END IF; END $b$;\nCALL p()",
            "calls p()",
        ),
        # An operator over a dynamic routine, run by CREATE TABLE ... AS: a plan ran a program.
        (
            "CREATE OR REPLACE FUNCTION d(a text, b text) RETURNS int LANGUAGE plpgsql AS"
            " $b$ BEGIN EXECUTE a; RETURN 1; END $b$;\n"
            "CREATE OPERATOR ### (LEFTARG = text, RIGHTARG = text, PROCEDURE = d);\n"
            "CREATE TABLE t AS SELECT 'x' ### 'y' AS z",
            "can run d()",
        ),
        (
            "CREATE FUNCTION g() RETURNS int LANGUAGE sql AS"
            " $b$ SELECT U&\"lo\\005fexport\"(1, '/tmp/x') $b$;\nSELECT g()",
            "calls g()",
        ),
        (
            "CREATE FUNCTION e() RETURNS event_trigger LANGUAGE plpgsql AS $b$ BEGIN"
            " EXECUTE 'x'; END $b$;\nCREATE EVENT TRIGGER et ON ddl_command_end"
            " EXECUTE FUNCTION e()",
            "fires e()",
        ),
    ],
)
def test_code_that_would_run_unread_while_the_file_loads_is_refused(sql: str, why: str) -> None:
    source = "CREATE TABLE ok (x int);\n\n" + sql + ";\n"
    with pytest.raises(StatementRefused, match=why) as err:
        confine.check(source, "postgres")
    assert err.value.line == source.rstrip("\n").count("\n") + 1, "the last statement's line"


@pytest.mark.parametrize(
    "sql",
    [
        # Idempotent creation in a DO block, a readable trigger, a defined-only dynamic
        # routine with its comment, grant and trigger but nothing that runs it.
        "DO $$ BEGIN CREATE TYPE mood AS ENUM ('a'); EXCEPTION WHEN duplicate_object"
        " THEN NULL; END $$",
        "CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $b$ BEGIN RETURN 1; END $b$;\n"
        "SELECT f();\nCREATE TABLE t (a int DEFAULT f())",
        "CREATE FUNCTION f() RETURNS int RETURN 1;\nSELECT f()",
        DYN + "COMMENT ON FUNCTION d() IS 'x';\nGRANT EXECUTE ON FUNCTION d() TO public;\n"
        "ALTER FUNCTION d() SET search_path = pg_catalog",
        "CREATE FUNCTION tg() RETURNS trigger LANGUAGE plpgsql AS $b$ BEGIN EXECUTE 'x';"
        " RETURN NEW; END $b$;\nCREATE TRIGGER t BEFORE INSERT ON ok FOR EACH ROW"
        " EXECUTE FUNCTION tg();\nSELECT pg_catalog.set_config('search_path', '', false)",
    ],
)
def test_code_the_check_reads_or_that_never_runs_at_load_passes(sql: str) -> None:
    confine.check("CREATE TABLE ok (x int);\n" + sql + ";\n", "postgres")


def test_an_escape_string_continued_on_the_next_line_reads_escapes_there_too() -> None:
    # The server reads the second part as escaped too: the COPY ran in a plan.
    sql = "CREATE TABLE ok (x int);\nSELECT E'a'\n'\\', ' ; COPY (SELECT 1) TO PROGRAM $$true$$ ;"
    with pytest.raises(StatementRefused, match="line 3: reads or writes files or programs"):
        confine.check(sql + " SELECT ' AS q --';\n;\n", "postgres")


@pytest.mark.parametrize(
    "text",
    [
        "SELECT lo_export(1, '/tmp/x')",
        "SELECT LO_EXPORT  (1, 'x')",
        "SELECT x.lo_export\n(1)",
        "SELECT xlo_export(1), lo_export_x(2), lo_exportx (3)",
        "SELECT \u212a(1), pg_read_\u017file('x')",  # case variants Python's re folds
        "SELECT pg_read_file ( 'x' ) , dblink('a')",
        "lo_export(",
        "SELECT (lo_export)(1)",
        "SELECT 1lo_export(2), _lo_export(3), \u00e9lo_export(4)",
        "SELECT lo_export -- x\n(1)",
        "",
    ],
)
def test_the_call_search_finds_what_the_call_pattern_finds(text: str) -> None:
    """The candidate search gives the same first call, name as written, as the pattern
    of every name (kept as the reference: it is the rule, the search its faster form)."""
    from ptah.engines.postgres.confine import _CALL, _call_search

    fast, rule = _call_search(text), _CALL.search(text)
    assert (fast and (fast.start(1), fast.group(1))) == (rule and (rule.start(1), rule.group(1)))
