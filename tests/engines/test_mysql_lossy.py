"""MariaDB retypes that change values without an error are destructive.

A plan's ``MODIFY COLUMN`` was only data-dependent: the apply's data check refuses the
values the server would refuse, but others the server converts with a note only, and
the column keeps another value (1.234 as 1.23, 1.5 as 2, '012' as 12, a DATETIME's time
of day cut off, 'a  ' as 'a', a used ENUM member removed). Each case here converts a
value on the server under the apply's strict mode: where it comes back changed, the
classifier must name a loss; where it must not (a widening), the server must keep it.
Then whole plans: destructive where they change values, applied only when allowed; and
an apply on a server whose sql_mode is not strict refuses what strict mode refuses.
"""

from __future__ import annotations

import pymysql
import pytest

from ptah.engines import planner
from ptah.engines.connect import open_target
from ptah.engines.model import DESTRUCTIVE
from ptah.engines.mysql.diff import bare_type
from ptah.engines.mysql.inspect import parse_create
from ptah.engines.mysql.lossy import narrows

pytestmark = pytest.mark.integration

# (old type, new type, a value): the server changes the value without an error.
CHANGED = [
    ("DECIMAL(10,3)", "DECIMAL(10,2)", "1.234"),
    ("DOUBLE", "INT", "1.5"),
    ("DOUBLE", "FLOAT", "1.123456789"),
    ("FLOAT", "DECIMAL(5,1)", "1.25"),
    ("DOUBLE", "DECIMAL(65,30)", "1e-35"),
    ("DECIMAL(10,2)", "FLOAT(7,1)", "1.25"),
    ("BIGINT", "DOUBLE", "9007199254740993"),
    ("INT", "FLOAT", "16777217"),
    ("BIT(64)", "DOUBLE", "9007199254740993"),
    ("DATETIME(6)", "DATETIME", "'2020-01-01 10:00:00.7'"),
    ("TIME(3)", "TIME", "'10:00:00.600'"),
    ("DATETIME", "DATE", "'2020-01-01 10:00:00'"),
    ("TIME", "DATETIME", "'10:00:00'"),
    ("DATE", "TIME", "'2020-01-01'"),
    ("VARCHAR(10)", "DATE", "'2020-1-1'"),
    ("INT", "DATE", "20200101"),
    ("VARCHAR(10)", "INT", "'012'"),
    ("VARCHAR(10)", "INT", "' 12'"),
    ("VARCHAR(10)", "DOUBLE", "'1e1'"),
    ("INT", "YEAR", "5"),
    ("VARCHAR(5)", "CHAR(5)", "'a  '"),
    ("TEXT", "CHAR(10)", "'a  '"),
    ("VARBINARY(4)", "BINARY(4)", "'ab'"),
    ("VARCHAR(300)", "VARCHAR(10)", "CONCAT('a', REPEAT(' ', 20))"),
    ("TEXT", "TINYTEXT", "CONCAT('a', REPEAT(' ', 300))"),
    ("TEXT", "VARCHAR(10)", "CONCAT('a', REPEAT(' ', 30))"),
    (
        "VARCHAR(20) CHARACTER SET latin1",
        "VARCHAR(10) CHARACTER SET utf8mb4",
        "CONCAT('a', REPEAT(' ', 15))",
    ),
    ("VARCHAR(10)", "ENUM('a','b')", "'A'"),
    ("VARCHAR(10)", "ENUM('a','b')", "'a '"),
    ("ENUM('a','b')", "INT", "'b'"),
    ("ENUM('a','b')", "ENUM('A','b')", "'a'"),
]

# Kept (the value converted back is the one it was; a FLOAT's 1.1 reads as a DOUBLE's
# 1.100000023841858, the same number), or refused: no loss may be named.
KEPT = [
    ("FLOAT", "DOUBLE", "1.1"),
    ("MEDIUMINT", "FLOAT", "8388607"),
    ("FLOAT(30,2)", "FLOAT", "1.25"),
    ("BIT(20)", "FLOAT", "b'11111111111111111111'"),
    ("INT", "BIGINT", "5"),
    ("INT", "INT UNSIGNED", "5"),
    ("SMALLINT", "DECIMAL(10,2)", "123"),
    ("DECIMAL(10,2)", "DECIMAL(12,4)", "1.25"),
    ("DECIMAL(10,2)", "DOUBLE", "12345678.91"),
    ("FLOAT", "FLOAT", "1.5"),
    ("DOUBLE", "VARCHAR(40)", "1.1234567890123456"),
    ("DATE", "DATETIME", "'2020-01-01'"),
    ("DATETIME", "DATETIME(3)", "'2020-01-01 10:00:00'"),
    ("TIME", "TIME(6)", "'10:00:00'"),
    ("CHAR(5)", "VARCHAR(5)", "'a'"),
    ("CHAR(20)", "VARCHAR(5)", "'a'"),
    ("BINARY(4)", "VARBINARY(4)", "'ab'"),
    ("VARCHAR(10)", "VARCHAR(20)", "'a  '"),
    ("VARCHAR(20)", "VARCHAR(10)", "'abc'"),
    ("VARCHAR(10)", "TEXT", "'a  '"),
    ("VARCHAR(10) CHARACTER SET latin1", "VARCHAR(10) CHARACTER SET utf8mb4", "'é'"),
    ("VARCHAR(10) COLLATE utf8mb4_bin", "VARCHAR(10) COLLATE utf8mb4_general_ci", "'A'"),
    ("VARCHAR(10) CHARACTER SET utf8mb4", "VARCHAR(10) CHARACTER SET ascii", "'é'"),
    ("ENUM('a','b')", "ENUM('a','c','b')", "'b'"),
    ("ENUM('a','b')", "SET('a','b')", "'a'"),
    ("ENUM('a','b')", "VARCHAR(10)", "'b'"),
    ("SET('a','b')", "VARCHAR(10)", "'a,b'"),
    ("YEAR", "INT", "2020"),
    ("BIT(8)", "BIGINT", "b'101'"),
    ("TEXT", "JSON", "'{\"a\": 1}'"),
    ("INT", "TINYINT", "300"),
]


def _line(cur: pymysql.cursors.Cursor) -> tuple[str, str | None]:
    cur.execute("SHOW CREATE TABLE p")
    line = parse_create(cur.fetchone()[1])["elements"]["column a"]
    cur.execute(
        "SELECT collation_name FROM information_schema.columns"
        " WHERE table_schema = DATABASE() AND table_name = 'p' AND column_name = 'a'"
    )
    return line, cur.fetchone()[0]


def _convert(cur: pymysql.cursors.Cursor, old: str, new: str, value: str) -> tuple[str, bool, bool]:
    """What the classifier says of the retype; whether the server changed the value as
    it reads; and whether it changed it for good, converted back to the old type (for
    both, refused: not changed)."""
    cur.execute("DROP TABLE IF EXISTS p")
    cur.execute(f"CREATE TABLE p (a {old})")
    cur.execute(f"INSERT INTO p VALUES ({value})")
    old_line, old_collation = _line(cur)
    cur.execute("SELECT HEX(CAST(a AS CHAR)) FROM p")
    before = cur.fetchall()
    try:
        cur.execute(f"ALTER TABLE p MODIFY a {new}")
    except pymysql.MySQLError:
        changed = lost = False
    else:
        cur.execute("SELECT HEX(CAST(a AS CHAR)) FROM p")
        changed = cur.fetchall() != before
        try:
            cur.execute(f"ALTER TABLE p MODIFY a {old}")
        except pymysql.MySQLError:
            lost = True
        else:
            cur.execute("SELECT HEX(CAST(a AS CHAR)) FROM p")
            lost = cur.fetchall() != before
    cur.execute("DROP TABLE p")
    cur.execute(f"CREATE TABLE p (a {new})")
    new_line, new_collation = _line(cur)
    said = narrows(bare_type(old_line), bare_type(new_line), old_collation, new_collation)
    return said or "", changed, lost


def test_each_silent_change_is_named_and_no_widening_is(mysql_db: str) -> None:
    wrong = []
    with open_target(mysql_db) as t, t.connection.cursor() as cur:
        cur.execute("SET SESSION sql_mode = 'STRICT_ALL_TABLES'")
        for old, new, value in CHANGED:
            said, changed, _ = _convert(cur, old, new, value)
            if not changed or not said:
                wrong.append(f"{old} -> {new} ({value}): changed={changed}, named={said!r}")
        for old, new, value in KEPT:
            said, _, lost = _convert(cur, old, new, value)
            if lost or said:
                wrong.append(f"{old} -> {new} ({value}): lost={lost}, named={said!r}")
    assert wrong == [], "\n".join(wrong)


T = "CREATE TABLE t (id INT PRIMARY KEY, price DECIMAL(10,3), kind ENUM('a','b','c'))"


def _plan(url: str, sql: str) -> planner.Plan:
    with open_target(url) as t:
        return planner.plan(t, sql)


def test_a_rounding_retype_is_destructive_and_not_applied_unless_allowed(mysql_db: str) -> None:
    with open_target(mysql_db) as t, t.connection.cursor() as cur:
        cur.execute(T)
        cur.execute("INSERT INTO t VALUES (1, 1.234, 'b')")
    want = T.replace("DECIMAL(10,3)", "DECIMAL(10,2)")
    plan = _plan(mysql_db, want)
    assert [DESTRUCTIVE in s.hazards for s in plan.statements] == [True], plan.statements
    with open_target(mysql_db) as t:
        result = planner.apply(t, plan.statements, plan.fingerprint_before, False)
        assert result.reason == "DestructiveNotAllowed"
        with t.connection.cursor() as cur:
            cur.execute("SELECT price FROM t")
            assert str(cur.fetchone()[0]) == "1.234"


def test_removing_an_enum_member_is_destructive_adding_one_in_the_middle_is_not(
    mysql_db: str,
) -> None:
    with open_target(mysql_db) as t, t.connection.cursor() as cur:
        cur.execute(T)
    added = _plan(mysql_db, T.replace("'a','b','c'", "'a','x','b','c'"))
    assert len(added.statements) == 1 and not added.destructive, added.statements
    removed = _plan(mysql_db, T.replace("'a','b','c'", "'a','c'"))
    assert len(removed.statements) == 1 and removed.destructive, removed.statements


def test_a_server_without_strict_mode_refuses_what_strict_mode_refuses(mysql_db: str) -> None:
    """On a server whose sql_mode is not strict the ALTER blanked a used ENUM member
    (and cut a long string) with a warning, in a plan that was not destructive: the
    apply session is made strict, and the data check refuses the plan, nothing run."""
    with open_target(mysql_db) as t, t.connection.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20))")
        cur.execute("INSERT INTO t VALUES (1, 'a long name here')")
    want = "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(5))"
    with open_target(mysql_db) as t:
        with t.connection.cursor() as cur:
            cur.execute("SET SESSION sql_mode = ''")  # as a server configured so
        plan = planner.plan(t, want)
        assert not plan.destructive, plan.statements
        result = planner.apply(t, plan.statements, plan.fingerprint_before, False)
        assert result.outcome == "failed" and result.progress.executed == 0, result.message
        assert "do not convert to varchar(5)" in result.message, result.message
        with t.connection.cursor() as cur:
            cur.execute("SELECT name FROM t")
            assert cur.fetchone()[0] == "a long name here"


def test_a_traditional_server_applies_a_dumps_zero_date_default(mysql_db: str) -> None:
    """The apply's strict mode refuses values, never what the plan's load accepted: a
    dump's zero-date default (loaded under the dump's own sql_mode) applies on a server
    whose mode is TRADITIONAL (strict, and zero dates refused)."""
    dump = (
        "/*!40101 SET @OLD_SQL_MODE=@@SQL_MODE, SQL_MODE='NO_AUTO_VALUE_ON_ZERO' */;\n"
        "CREATE TABLE `wp_posts` (`ID` bigint(20) unsigned NOT NULL AUTO_INCREMENT,\n"
        "  `post_date` datetime NOT NULL DEFAULT '0000-00-00 00:00:00',\n"
        "  PRIMARY KEY (`ID`)) ENGINE=InnoDB;\n"
        "/*!40101 SET SQL_MODE=@OLD_SQL_MODE */;\n"
    )
    with open_target(mysql_db) as t:
        with t.connection.cursor() as cur:
            cur.execute("SET SESSION sql_mode = 'TRADITIONAL'")  # as a server configured so
        plan = planner.plan(t, dump)
        result = planner.apply(t, plan.statements, plan.fingerprint_before, False)
        assert result.outcome == "succeeded", result.message
        assert planner.plan(t, dump).statements == []


NULLS_FILLED = {
    "a TIMESTAMP's NULLs become the current time": (
        "CREATE TABLE t (id INT PRIMARY KEY, ts TIMESTAMP NULL DEFAULT NULL)",
        "INSERT INTO t VALUES (1, NULL)",
        "CREATE TABLE t (id INT PRIMARY KEY, ts TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)",
    ),
    "an AUTO_INCREMENT's NULLs are numbered": (
        "CREATE TABLE t (id INT NULL, v INT, KEY (id))",
        "INSERT INTO t VALUES (NULL, 1), (5, 2)",
        "CREATE TABLE t (id INT NOT NULL AUTO_INCREMENT, v INT, KEY (id))",
    ),
}


@pytest.mark.parametrize("name", sorted(NULLS_FILLED))
def test_nulls_the_server_fills_in_make_the_plan_destructive(mysql_db: str, name: str) -> None:
    """A column made NOT NULL over NULLs is refused by the data check, but for a
    TIMESTAMP (the current time) and an AUTO_INCREMENT (numbered): values that were not
    there, in a plan that was not destructive."""
    table, rows, want = NULLS_FILLED[name]
    with open_target(mysql_db) as t, t.connection.cursor() as cur:
        cur.execute(table)
        cur.execute(rows)
    with open_target(mysql_db) as t:
        plan = planner.plan(t, want)
        assert plan.destructive, plan.statements
        result = planner.apply(t, plan.statements, plan.fingerprint_before, False)
        assert result.reason == "DestructiveNotAllowed"
        column = "id" if "AUTO_INCREMENT" in want else "ts"
        with t.connection.cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM t WHERE {column} IS NULL")
            assert cur.fetchone()[0] == 1


def test_a_column_made_auto_increment_keeps_its_zeros(mysql_db: str) -> None:
    """The ALTER numbered a NOT NULL column's zeros (0 became 1) when it became
    AUTO_INCREMENT; the apply runs with NO_AUTO_VALUE_ON_ZERO, as a dump loads."""
    with open_target(mysql_db) as t, t.connection.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT NOT NULL, v INT, KEY (id))")
        cur.execute("INSERT INTO t VALUES (0, 1), (5, 2)")
    want = "CREATE TABLE t (id INT NOT NULL AUTO_INCREMENT, v INT, KEY (id))"
    with open_target(mysql_db) as t:
        plan = planner.plan(t, want)
        assert not plan.destructive, plan.statements
        result = planner.apply(t, plan.statements, plan.fingerprint_before, False)
        assert result.outcome == "succeeded", result.message
        with t.connection.cursor() as cur:
            cur.execute("SELECT id, v FROM t ORDER BY v")
            assert cur.fetchall() == ((0, 1), (5, 2))
        assert planner.plan(t, want).statements == []


def test_a_table_moved_to_the_memory_engine_is_destructive(mysql_db: str) -> None:
    """A MEMORY table loses its rows when the server restarts: the plan moving a table
    there kept them for now and was not destructive. Moved back, nothing is lost."""
    with open_target(mysql_db) as t, t.connection.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB")
        cur.execute("INSERT INTO t VALUES (1, 2)")
    memory = "CREATE TABLE t (id INT PRIMARY KEY, v INT) ENGINE=MEMORY"
    with open_target(mysql_db) as t:
        plan = planner.plan(t, memory)
        assert len(plan.statements) == 1 and plan.destructive, plan.statements
        result = planner.apply(t, plan.statements, plan.fingerprint_before, True)
        assert result.outcome == "succeeded", result.message
        back = planner.plan(t, memory.replace("MEMORY", "InnoDB"))
        assert len(back.statements) == 1 and not back.destructive, back.statements
