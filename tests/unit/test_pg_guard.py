"""The PostgreSQL desired-file guard: psql's statement boundaries, refusals, the ownership policy."""

from __future__ import annotations

import pytest

from ptah.engines.postgres.guard import StatementRefused, confine, split


def test_split_follows_psql_quoting_and_atomic_bodies() -> None:
    sql = (
        "CREATE TABLE a (x int); -- c ;\n"
        "CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; "
        "SELECT CASE WHEN true THEN 1 END; END;\n"
        "CREATE FUNCTION g() RETURNS text AS $x$ select 'DROP DATABASE; '; $x$ LANGUAGE sql;\n"
        "SELECT E'it\\'s;', 'a''b;', \"odd;name\" /* ; /* nested ; */ */ FROM a;\n"
    )
    stmts = split(sql)
    assert [s.line for s in stmts] == [1, 2, 3, 4]
    assert sql[stmts[1].start : stmts[1].end].endswith("END")


def test_owner_to_and_transaction_control_are_blanked_keeping_lines() -> None:
    sql = "BEGIN;\nCREATE TABLE a (x int);\nALTER TABLE a OWNER TO nobody;\nCOMMIT;\n"
    confined = confine(sql)
    assert confined.sql.count("\n") == sql.count("\n")
    assert "OWNER" not in confined.sql and "BEGIN" not in confined.sql
    assert len(confined.warnings) == 2
    assert "OWNER TO nobody" in confine(sql, "manage").sql


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE ROLE r",
        "ALTER USER r WITH PASSWORD 'x'",
        "DROP DATABASE x",
        "ALTER DATABASE x SET work_mem = 1",
        "ALTER SYSTEM SET x = 1",
        "CREATE TABLESPACE t LOCATION '/x'",
        "\\connect other",
        "GRANT r TO s",
        "REVOKE r FROM s",
        "GRANT CONNECT ON DATABASE x TO y",
        "CREATE SUBSCRIPTION s CONNECTION 'host=x' PUBLICATION p",
        "CREATE SERVER s FOREIGN DATA WRAPPER postgres_fdw",
        "CREATE USER MAPPING FOR CURRENT_USER SERVER s",
        "SET ROLE postgres",
        "SET SESSION AUTHORIZATION postgres",
        "COPY t TO PROGRAM 'rm -rf /'",
        "SELECT lo_export(1, '/tmp/x')",
        "CREATE VIEW v AS SELECT * FROM otherdb.public.t",
        "CREATE TABLE otherdb.public.t (x int)",
        "COMMENT ON DATABASE x IS 'y'",
        "ROLLBACK",
    ],
)
def test_out_of_database_statements_are_refused_with_their_line(sql: str) -> None:
    with pytest.raises(StatementRefused) as err:
        confine("CREATE TABLE ok (x int);\n\n" + sql + ";\n")
    assert str(err.value).startswith("line 3:")
    assert err.value.reason == "StatementRefused"


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE FUNCTION f() RETURNS void LANGUAGE plpgsql AS $$ BEGIN"
        " EXECUTE 'CREATE ROLE x'; END $$",
        "COMMENT ON TABLE t IS 'DROP DATABASE x; \\c y'",
        "CREATE VIEW v AS SELECT t.a, s.t.b FROM s.t, t",
        "SELECT pg_catalog.set_config('search_path', '', false)",
        "GRANT SELECT ON t TO reader",
        "ALTER DEFAULT PRIVILEGES FOR ROLE app IN SCHEMA s GRANT SELECT ON TABLES TO r",
    ],
)
def test_schema_statements_pass(sql: str) -> None:
    assert confine(sql + ";").sql == sql + ";"
