"""Statement splitting: semicolons inside bodies, strings and comments stay put."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from ptah.engines.splitter import SplitError, split_statements


def texts(sql: str, dialect: str) -> list[str]:
    return [s.text for s in split_statements(sql, dialect)]  # type: ignore[arg-type]


def test_postgres_dollar_quoted_function_and_do_block() -> None:
    sql = """
CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1; RETURN 2;
END $$;
DO $body$ BEGIN RAISE NOTICE 'a;b'; END $body$;
SELECT $1$;
"""
    out = texts(sql, "postgres")
    assert len(out) == 3
    assert out[0].startswith("CREATE FUNCTION") and out[0].endswith("END $$")
    assert out[1].startswith("DO $body$")


def test_postgres_strings_comments_and_atomic_bodies() -> None:
    sql = """
-- leading; comment
INSERT INTO t VALUES ('a;''b', E'c\\'; d');  /* block; /* nested; */ still */
CREATE FUNCTION g(a int) RETURNS int LANGUAGE sql
BEGIN ATOMIC
  SELECT CASE WHEN a > 0 THEN 1 ELSE 2 END;
  SELECT 3;
END;
SELECT "we;ird" FROM t;
"""
    out = texts(sql, "postgres")
    assert len(out) == 3, out
    assert out[0].startswith("INSERT")
    assert out[1].startswith("CREATE FUNCTION") and out[1].endswith("END")
    assert out[2] == 'SELECT "we;ird" FROM t'


def test_line_numbers_point_at_statement_start() -> None:
    stmts = split_statements("-- c\n\nSELECT 1;\n\n  SELECT\n 2;", "postgres")
    assert [s.line for s in stmts] == [3, 5]


def test_mysql_backslashes_hash_comments_and_delimiter() -> None:
    sql = r"""
INSERT INTO t VALUES ('it\'s; fine', "dq\";x");  # hash; comment
DELIMITER //
CREATE PROCEDURE p() BEGIN SELECT 1; SELECT 2; END//
DELIMITER ;
SELECT `a;b` FROM t;
"""
    out = texts(sql, "mysql")
    assert len(out) == 3, out
    assert out[1] == "CREATE PROCEDURE p() BEGIN SELECT 1; SELECT 2; END"


def test_sqlite_trigger_body() -> None:
    sql = "CREATE TABLE a(x);\nCREATE TRIGGER t AFTER INSERT ON a BEGIN SELECT 1; SELECT 2; END;\n"
    out = texts(sql, "sqlite")
    assert len(out) == 2
    assert out[1].endswith("END")


def test_comment_only_file_has_no_statements() -> None:
    assert texts("-- nothing\n/* here */\n", "postgres") == []


@pytest.mark.parametrize(
    "sql", ["SELECT 'open;", "SELECT $$ open;", "/* open; SELECT 1;", 'SELECT "x;']
)
def test_unterminated_is_an_error_not_a_guess(sql: str) -> None:
    with pytest.raises(SplitError):
        split_statements(sql, "postgres")


@pytest.mark.parametrize("dialect", ["postgres", "mysql", "sqlite"])
def test_a_nul_character_is_an_error_with_its_line(dialect: str) -> None:
    # Not SQL text on any server; the C libraries would end the query there.
    with pytest.raises(SplitError, match="line 3: a NUL character"):
        split_statements("SELECT 1;\n-- c\nSELECT '\0';\n", dialect)  # type: ignore[arg-type]


@pytest.mark.parametrize("dialect", ["postgres", "mysql", "sqlite"])
def test_unquoted_names_of_any_script(dialect: str) -> None:
    # Each server takes letters of any script in a bare name (an internal error here before).
    sql = "CREATE TABLE naïve (é int, _x int);\nCREATE INDEX ïdx ON naïve (é);\n"
    got = split_statements(sql, dialect)  # type: ignore[arg-type]
    assert [(s.text.split()[2], s.line) for s in got] == [("naïve", 1), ("ïdx", 2)]


def _grows_linearly(make: Callable[[int], str], dialect: str, n: int) -> list[str]:
    """Split ``make(n)`` and ``make(8 * n)``: eight times the text must take well under
    the 64 times a quadratic reading takes (linear: 8). CPU time in one process, so a
    loaded machine stretches both alike. Returns the larger one's statements."""

    def cpu(sql: str) -> tuple[float, list[str]]:
        started = time.process_time()
        statements = split_statements(sql, dialect)  # type: ignore[arg-type]
        return time.process_time() - started, [st.text for st in statements]

    small, _ = cpu(make(n))
    large, texts_ = cpu(make(8 * n))
    assert large < 24 * max(small, 0.01), (small, large)
    return texts_


def test_a_long_sqlite_trigger_body_is_split_in_linear_time() -> None:
    """Each ``;`` of a trigger body asked sqlite3.complete_statement about the whole
    statement so far: quadratic (20,000 statements 3.8 s, 80,000 about a minute). Once a
    body is open only a ``;`` after END is asked about."""

    def trigger(n: int) -> str:
        return f"CREATE TRIGGER t AFTER INSERT ON a BEGIN {'SELECT 1; ' * n}END;\nSELECT 2;"

    sql = trigger(80_000)
    assert _grows_linearly(trigger, "sqlite", 10_000) == [sql.split("\n")[0][:-1], "SELECT 2"]


def test_a_statement_of_many_lines_is_split_in_linear_time() -> None:
    """At each line start (MySQL's DELIMITER lines) the statement was read again from its
    start: a 2 MB INSERT of 400,000 rows, one a line, took 14 s, 5 MB over a minute. Now
    a second or two."""

    def insert(n: int) -> str:
        return "INSERT INTO t VALUES\n" + "(1),\n" * n + "(2);\nSELECT 2;"

    statements = _grows_linearly(insert, "mysql", 125_000)
    assert [text[-3:] for text in statements] == ["(2)", "T 2"]
