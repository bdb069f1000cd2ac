"""MariaDB: an apply whose ALTER the target's data would fail part-way fails before its
first statement (:mod:`ptah.engines.mysql.datacheck`), and the same plan applies once the
data is fixed; data that is fine is not refused.

Each case is a schema A, rows that B's ALTER cannot take, a fix of those rows, and B. A
second table ``a`` gains a column in B; its ALTER comes first (name order), so an apply
that failed at the ALTER of ``t`` instead would have left ``a`` changed: the case's
``without the check`` run shows that it does (the server refuses that ALTER on those
rows), so each refusal here is one the check made.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from ptah.engines import planner
from ptah.engines.connect import open_target
from ptah.engines.model import Schema, Statement
from ptah.engines.mysql import datacheck

pytestmark = pytest.mark.integration

SECRET = "s3cr3t"
A_TABLE = "CREATE TABLE a (id INT PRIMARY KEY);"
B_TABLE = "CREATE TABLE a (id INT PRIMARY KEY, extra INT);"


def _run(url: str, sql: str) -> None:
    with open_target(url) as t, t.connection.cursor() as cur:
        cur.execute(sql)
        while cur.nextset():
            pass


def _shown(url: str) -> dict[str, str]:
    out: dict[str, str] = {}
    with open_target(url) as t, t.connection.cursor() as cur:
        cur.execute(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = DATABASE() ORDER BY 1"
        )
        for (name,) in cur.fetchall():
            cur.execute(f"SHOW CREATE TABLE `{name}`")
            out[name] = cur.fetchone()[1]
    return out


def _apply(url: str, sql: str) -> planner.ApplyResult:
    with open_target(url) as t:
        plan = planner.plan(t, sql)
        return planner.apply(
            t, plan.statements, plan.fingerprint_before, True, plan.fingerprint_after
        )


def _converges(url: str, sql: str) -> None:
    result = _apply(url, sql)
    assert result.outcome == "succeeded", result.message
    with open_target(url) as t:
        assert planner.plan(t, sql).statements == []


# name: (A, rows B cannot take, the fix, B, what the message says)
CASES = {
    "text to INT": (
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20));",
        f"INSERT INTO t VALUES (1, '12'), (2, '{SECRET}');",
        "UPDATE t SET v = '7' WHERE id = 2;",
        "CREATE TABLE t (id INT PRIMARY KEY, v INT);",
        "column `t`.`v` holds values that do not convert to int(11)",
    ),
    "text with a fraction to INT (the copy reads an integer; a store would round)": (
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20));",
        "INSERT INTO t VALUES (1, '1.5');",
        "UPDATE t SET v = '2';",
        "CREATE TABLE t (id INT PRIMARY KEY, v INT);",
        "column `t`.`v` holds values that do not convert to int(11)",
    ),
    "text to DECIMAL": (
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20));",
        f"INSERT INTO t VALUES (1, '{SECRET}');",
        "UPDATE t SET v = '1.25';",
        "CREATE TABLE t (id INT PRIMARY KEY, v DECIMAL(6,2));",
        "column `t`.`v` holds values that do not convert to decimal(6,2)",
    ),
    "text to DATE": (
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20));",
        "INSERT INTO t VALUES (1, '2024-02-30');",
        "UPDATE t SET v = '2024-02-29';",
        "CREATE TABLE t (id INT PRIMARY KEY, v DATE);",
        "column `t`.`v` holds values that do not convert to date",
    ),
    "VARCHAR shortened below its data": (
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20));",
        f"INSERT INTO t VALUES (1, 'abc'), (2, 'x{SECRET}');",
        "UPDATE t SET v = 'ok' WHERE id = 2;",
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(5));",
        "column `t`.`v` holds values that do not convert to varchar(5)",
    ),
    "VARCHAR shortened over trailing spaces (the copy refuses any cut)": (
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20));",
        "INSERT INTO t VALUES (1, 'ab      ');",
        "UPDATE t SET v = 'ab';",
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(3));",
        "column `t`.`v` holds values that do not convert to varchar(3)",
    ),
    "CHAR shortened": (
        "CREATE TABLE t (id INT PRIMARY KEY, v CHAR(10));",
        f"INSERT INTO t VALUES (1, '{SECRET}');",
        "UPDATE t SET v = 'ab';",
        "CREATE TABLE t (id INT PRIMARY KEY, v CHAR(3));",
        "column `t`.`v` holds values that do not convert to char(3)",
    ),
    "VARBINARY shortened": (
        "CREATE TABLE t (id INT PRIMARY KEY, v VARBINARY(20));",
        f"INSERT INTO t VALUES (1, '{SECRET}');",
        "UPDATE t SET v = 'ab';",
        "CREATE TABLE t (id INT PRIMARY KEY, v VARBINARY(3));",
        "column `t`.`v` holds values that do not convert to varbinary(3)",
    ),
    "TEXT to TINYTEXT over 255 bytes": (
        "CREATE TABLE t (id INT PRIMARY KEY, v TEXT);",
        "INSERT INTO t VALUES (1, REPEAT('x', 300));",
        "UPDATE t SET v = 'short';",
        "CREATE TABLE t (id INT PRIMARY KEY, v TINYTEXT);",
        "column `t`.`v` holds values that do not convert to tinytext",
    ),
    "INT narrowed to TINYINT": (
        "CREATE TABLE t (id INT PRIMARY KEY, v INT);",
        "INSERT INTO t VALUES (1, 300);",
        "UPDATE t SET v = 100;",
        "CREATE TABLE t (id INT PRIMARY KEY, v TINYINT);",
        "column `t`.`v` holds values that do not convert to tinyint(4)",
    ),
    "DECIMAL precision reduced": (
        "CREATE TABLE t (id INT PRIMARY KEY, v DECIMAL(10,2));",
        "INSERT INTO t VALUES (1, 12345.67);",
        "UPDATE t SET v = 123.45;",
        "CREATE TABLE t (id INT PRIMARY KEY, v DECIMAL(5,2));",
        "column `t`.`v` holds values that do not convert to decimal(5,2)",
    ),
    "signed to unsigned over a negative": (
        "CREATE TABLE t (id INT PRIMARY KEY, v INT);",
        "INSERT INTO t VALUES (1, -5);",
        "UPDATE t SET v = 5;",
        "CREATE TABLE t (id INT PRIMARY KEY, v INT UNSIGNED);",
        "column `t`.`v` holds values that do not convert to int(10) unsigned",
    ),
    "ENUM losing a used value": (
        "CREATE TABLE t (id INT PRIMARY KEY, v ENUM('a','b','c'));",
        "INSERT INTO t VALUES (1, 'a'), (2, 'c');",
        "UPDATE t SET v = 'b' WHERE id = 2;",
        "CREATE TABLE t (id INT PRIMARY KEY, v ENUM('a','b'));",
        "column `t`.`v` holds values that do not convert to enum('a','b')",
    ),
    "SET losing a used value": (
        "CREATE TABLE t (id INT PRIMARY KEY, v SET('a','b','c'));",
        "INSERT INTO t VALUES (1, 'a,c');",
        "UPDATE t SET v = 'a';",
        "CREATE TABLE t (id INT PRIMARY KEY, v SET('a','b'));",
        "column `t`.`v` holds values that do not convert to set('a','b')",
    ),
    "charset that cannot hold a stored character": (
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20)) DEFAULT CHARSET=utf8mb4;",
        "INSERT INTO t VALUES (1, 'x\U0001f600');",
        "UPDATE t SET v = 'caf\u00e9';",
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20) CHARACTER SET latin1)"
        " DEFAULT CHARSET=utf8mb4;",
        "column `t`.`v` holds values that do not convert to varchar(20)",
    ),
    "NOT NULL over NULLs": (
        "CREATE TABLE t (id INT PRIMARY KEY, v INT);",
        "INSERT INTO t VALUES (1, 1), (2, NULL);",
        "UPDATE t SET v = 0 WHERE v IS NULL;",
        "CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL);",
        "column `v` of table `t` holds NULLs where it becomes NOT NULL",
    ),
    "UNIQUE over values equal by the column's collation": (
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20) COLLATE utf8mb4_general_ci);",
        f"INSERT INTO t VALUES (1, '{SECRET}'), (2, '{SECRET.upper()} ');",
        "UPDATE t SET v = 'other' WHERE id = 2;",
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20) COLLATE utf8mb4_general_ci,"
        " UNIQUE KEY v (v));",
        "unique key `v` of table `t` would have duplicate values on existing rows",
    ),
    "a unique column's collation made case-insensitive": (
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20) COLLATE utf8mb4_bin, UNIQUE KEY v (v));",
        "INSERT INTO t VALUES (1, 'abc'), (2, 'ABC');",
        "UPDATE t SET v = 'other' WHERE id = 2;",
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20) COLLATE utf8mb4_general_ci,"
        " UNIQUE KEY v (v));",
        "unique key `v` of table `t` would have duplicate values on existing rows",
    ),
    "PRIMARY KEY over duplicates": (
        "CREATE TABLE t (id INT NOT NULL, v INT);",
        "INSERT INTO t VALUES (1, 1), (1, 2);",
        "UPDATE t SET id = 2 WHERE v = 2;",
        "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, v INT);",
        "primary key of table `t` would have duplicate values on existing rows",
    ),
    "FOREIGN KEY over orphan rows": (
        "CREATE TABLE p (id INT PRIMARY KEY); CREATE TABLE t (id INT PRIMARY KEY, pid INT);",
        "INSERT INTO p VALUES (1); INSERT INTO t VALUES (1, 1), (2, 9);",
        "INSERT INTO p VALUES (9);",
        "CREATE TABLE p (id INT PRIMARY KEY); CREATE TABLE t (id INT PRIMARY KEY, pid INT,"
        " CONSTRAINT t_p FOREIGN KEY (pid) REFERENCES p (id));",
        "foreign key `t_p` of table `t` has rows with no parent row in `p`",
    ),
    "FOREIGN KEY to a table the plan creates": (
        "CREATE TABLE t (id INT PRIMARY KEY, pid INT);",
        "INSERT INTO t VALUES (1, 1);",
        "UPDATE t SET pid = NULL;",
        "CREATE TABLE p (id INT PRIMARY KEY); CREATE TABLE t (id INT PRIMARY KEY, pid INT,"
        " CONSTRAINT t_p FOREIGN KEY (pid) REFERENCES p (id));",
        "foreign key `t_p` of table `t` has rows with no parent row in `p`",
    ),
    "CHECK over violating rows": (
        "CREATE TABLE t (id INT PRIMARY KEY, v INT);",
        "INSERT INTO t VALUES (1, 1), (2, -1);",
        "UPDATE t SET v = 1;",
        "CREATE TABLE t (id INT PRIMARY KEY, v INT, CONSTRAINT positive CHECK (v > 0));",
        "check constraint `positive` of table `t` fails on existing rows",
    ),
    "column CHECK over violating rows, the ALTER copying": (
        "CREATE TABLE t (id INT PRIMARY KEY, v INT);",
        "INSERT INTO t VALUES (1, -1);",
        "UPDATE t SET v = 1;",
        "CREATE TABLE t (id INT PRIMARY KEY, v BIGINT CHECK (v > 0));",
        "CHECK of column `v` of table `t` fails on existing rows",
    ),
    "a row an existing CHECK refuses, under an ALTER that copies the table": (
        "CREATE TABLE t (id INT PRIMARY KEY, v INT, w INT, CONSTRAINT positive CHECK (v > 0));",
        "SET SESSION check_constraint_checks = 0; INSERT INTO t VALUES (1, -1, 1);",
        "UPDATE t SET v = 1;",
        "CREATE TABLE t (id INT PRIMARY KEY, v INT, w BIGINT, CONSTRAINT positive CHECK (v > 0));",
        "check constraint `positive` of table `t` fails on existing rows",
    ),
    "text to JSON that is not JSON": (
        "CREATE TABLE t (id INT PRIMARY KEY, v LONGTEXT);",
        f"INSERT INTO t VALUES (1, '{{\"{SECRET}\": ');",
        "UPDATE t SET v = '{}';",
        "CREATE TABLE t (id INT PRIMARY KEY, v JSON);",
        "CHECK of column `v` of table `t` fails on existing rows",
    ),
    "added column and UNIQUE over it: one value on every row": (
        "CREATE TABLE t (id INT PRIMARY KEY);",
        "INSERT INTO t VALUES (1), (2);",
        "DELETE FROM t WHERE id = 2;",
        "CREATE TABLE t (id INT PRIMARY KEY, code INT NOT NULL DEFAULT 7, UNIQUE KEY code (code));",
        "unique key `code` of table `t` would have duplicate values on existing rows",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_data_failure_is_found_before_the_first_statement(mysql_db: str, case: str) -> None:
    a, rows, fix, b, said = CASES[case]
    _converges(mysql_db, A_TABLE + a)
    _run(mysql_db, rows)
    before = _shown(mysql_db)
    result = _apply(mysql_db, B_TABLE + b)
    assert result.outcome == "failed", result.message
    assert result.reason in ("DataNotConvertible", "DataViolatesConstraint"), result.reason
    assert result.progress.executed == 0, result.message
    assert said in result.message, result.message
    assert "nothing was changed" in result.message, result.message
    assert "\n" not in result.message and SECRET not in result.message.lower(), result.message
    assert _shown(mysql_db) == before
    _run(mysql_db, fix)
    _converges(mysql_db, B_TABLE + b)


@pytest.mark.parametrize("case", list(CASES))
def test_without_the_check_the_server_refuses_part_way(
    mysql_db: str, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rows of each case do fail B's ALTER (so each refusal above is the check's):
    with the check off, the apply stops at that ALTER, the table before it changed."""
    a, rows, _, b, _ = CASES[case]
    monkeypatch.setattr(datacheck, "refuse_data_failures", lambda *_: None)
    _converges(mysql_db, A_TABLE + a)
    _run(mysql_db, rows)
    before = _shown(mysql_db)
    result = _apply(mysql_db, B_TABLE + b)
    assert result.outcome == "failed", result.message
    assert result.progress.executed >= 1, result.message
    assert _shown(mysql_db)["a"] != before["a"]


# Rows that B takes: nothing is refused.
FINE = {
    "case-sensitive collation: values differing in case are distinct": (
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20) COLLATE utf8mb4_bin);",
        "INSERT INTO t VALUES (1, 'abc'), (2, 'ABC'), (3, NULL), (4, NULL);",
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20) COLLATE utf8mb4_bin, UNIQUE KEY v (v));",
    ),
    "NO PAD collation: a trailing space makes another value": (
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20) COLLATE utf8mb4_nopad_bin);",
        "INSERT INTO t VALUES (1, 'abc'), (2, 'abc ');",
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20) COLLATE utf8mb4_nopad_bin,"
        " UNIQUE KEY v (v));",
    ),
    "text that converts, NOT NULL without NULLs, a CHECK that is NULL or true": (
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), w INT, d VARCHAR(20));",
        "INSERT INTO t VALUES (1, ' 12', 1, '2024-02-29'), (2, '-3', NULL, NULL);",
        "CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL, w INT CHECK (w > 0), d DATE);",
    ),
    "CHAR shortened over trailing spaces (the copy drops them)": (
        "CREATE TABLE t (id INT PRIMARY KEY, v CHAR(10));",
        "INSERT INTO t VALUES (1, 'ab');",
        "CREATE TABLE t (id INT PRIMARY KEY, v CHAR(3));",
    ),
    "a foreign key over NULLs and rows with a parent": (
        "CREATE TABLE p (id VARCHAR(10) COLLATE utf8mb4_general_ci PRIMARY KEY);"
        " CREATE TABLE t (id INT PRIMARY KEY, pid VARCHAR(10) COLLATE utf8mb4_general_ci);",
        "INSERT INTO p VALUES ('abc'); INSERT INTO t VALUES (1, 'ABC'), (2, NULL);",
        "CREATE TABLE p (id VARCHAR(10) COLLATE utf8mb4_general_ci PRIMARY KEY);"
        " CREATE TABLE t (id INT PRIMARY KEY, pid VARCHAR(10) COLLATE utf8mb4_general_ci,"
        " CONSTRAINT t_p FOREIGN KEY (pid) REFERENCES p (id));",
    ),
    "a NOT NULL TIMESTAMP over NULLs (they become the current time)": (
        "CREATE TABLE t (id INT PRIMARY KEY, v TIMESTAMP NULL);",
        "INSERT INTO t VALUES (1, NULL);",
        "CREATE TABLE t (id INT PRIMARY KEY, v TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP);",
    ),
    "a column CHECK the server adds in place (it checks no row)": (
        "CREATE TABLE t (id INT PRIMARY KEY, v INT);",
        "INSERT INTO t VALUES (1, -1);",
        "CREATE TABLE t (id INT PRIMARY KEY, v INT CHECK (v > 0));",
    ),
    "an added nullable column under a UNIQUE key": (
        "CREATE TABLE t (id INT PRIMARY KEY);",
        "INSERT INTO t VALUES (1), (2);",
        "CREATE TABLE t (id INT PRIMARY KEY, code INT, UNIQUE KEY code (code));",
    ),
}


@pytest.mark.parametrize("case", list(FINE))
def test_data_that_fits_is_not_refused(mysql_db: str, case: str) -> None:
    a, rows, b = FINE[case]
    _converges(mysql_db, A_TABLE + a)
    _run(mysql_db, rows)
    _converges(mysql_db, B_TABLE + b)


# Retypes compared with the server's own ALTER: the check refuses exactly the values the
# ALTER's copy refuses.
TYPES = [
    "varchar(20)",
    "char(5)",
    "varchar(3)",
    "int",
    "tinyint",
    "int unsigned",
    "bigint unsigned",
    "decimal(5,2)",
    "double",
    "float",
    "date",
    "datetime(3)",
    "time",
    "year",
    "enum('a','b')",
    "set('a','b')",
    "varbinary(3)",
    "bit(3)",
    "varchar(20) character set latin1",
    "tinytext",
    "text",
    "uuid",
    "inet4",
]
VALUES = [
    "'12abc'", "'300'", "-5", "70000", "' 12'", "'12 '", "''", "'1e3'", "'1.005'",
    "123.456", "'2024-02-30'", "'ab   '", "'x\U0001f600'", "'a,b'", "0", "'10:00:00'",
    "'123e4567-e89b-12d3-a456-426614174000'", "'1.2.3.4'", "b'101'", "18446744073709551615",
    "REPEAT('a', 300)", "999.996", "CONCAT(REPEAT('b', 150), REPEAT(' ', 200))",
]  # fmt: skip


def _column_line(cur: object, type_: str) -> str:
    cur.execute("DROP TABLE IF EXISTS ptah_shape")  # type: ignore[attr-defined]
    cur.execute(f"CREATE TABLE ptah_shape (c {type_})")  # type: ignore[attr-defined]
    cur.execute("SHOW CREATE TABLE ptah_shape")  # type: ignore[attr-defined]
    shown = cur.fetchone()[1]  # type: ignore[attr-defined]
    return next(ln.strip().rstrip(",") for ln in shown.split("\n") if ln.strip().startswith("`c`"))


def _matrix(url: str, source: str) -> Iterator[tuple[str, str, str, bool, int | None]]:
    import pymysql

    from ptah.engines.base import EngineError
    from ptah.engines.mysql import inspect as myinspect

    with open_target(url) as t, t.connection.cursor() as cur:
        for target in TYPES:
            if target == source:
                continue
            line = _column_line(cur, target)
            cur.execute("DROP TABLE ptah_shape")
            for value in VALUES:
                cur.execute("DROP TABLE IF EXISTS d")
                cur.execute(f"CREATE TABLE d (c {source})")
                try:
                    cur.execute(f"INSERT INTO d VALUES ({value})")
                except pymysql.MySQLError:
                    continue
                current: Schema = myinspect.inspect(t.connection)
                alter = Statement(f"ALTER TABLE `d`\n  MODIFY COLUMN {line} FIRST")
                try:
                    datacheck.refuse_data_failures(t.connection, current, [alter])
                    refused = False
                except EngineError:
                    refused = True
                try:
                    cur.execute(f"ALTER TABLE d MODIFY c {target}")
                    error = None
                except pymysql.MySQLError as exc:
                    error = exc.args[0]
                yield target, value, line, refused, error


@pytest.mark.parametrize("source", TYPES)
def test_the_check_refuses_what_the_alter_refuses(mysql_db: str, source: str) -> None:
    """For each source type, target type and stored value: the check refuses exactly
    when the server's ALTER fails (JSON's validity is a CHECK, tested above)."""
    wrong = [
        f"{source} {value} -> {target}: check {'refused' if refused else 'passed'},"
        f" ALTER {'failed ' + str(error) if error else 'succeeded'}"
        for target, value, _, refused, error in _matrix(mysql_db, source)
        if refused != (error is not None)
    ]
    assert not wrong, "\n".join(wrong)


class _Recording:
    """A connection whose cursors record the SQL they run."""

    def __init__(self, conn: Any) -> None:
        self.conn, self.sql = conn, []

    @contextlib.contextmanager
    def cursor(self) -> Iterator[Any]:
        with self.conn.cursor() as cur:
            outer = self

            class Cursor:
                def __getattr__(self, name: str) -> Any:
                    return getattr(cur, name)

                def execute(self, sql: str, *args: Any) -> Any:
                    outer.sql.append(sql)
                    return cur.execute(sql, *args)

            yield Cursor()


def test_a_table_is_read_only_for_what_its_alter_asks(mysql_db: str) -> None:
    """A table the plan only adds a plain index to is not read; one it retypes is read
    for that, once; a table the plan does not change is never named."""
    schema = "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20)); CREATE TABLE u (w INT);"
    _converges(mysql_db, A_TABLE + schema)
    _run(mysql_db, "INSERT INTO t VALUES (1, '1'); INSERT INTO u VALUES (NULL);")
    indexed = schema.replace("v VARCHAR(20))", "v VARCHAR(20), KEY v (v))")
    retyped = schema.replace("v VARCHAR(20))", "v INT)")
    for desired, reads in ((indexed, 0), (retyped, 1)):
        with open_target(mysql_db) as t:
            plan = planner.plan(t, B_TABLE + desired)
            recording = _Recording(t.connection)
            datacheck.refuse_data_failures(
                recording, planner.ops_for(t).inspect(t), plan.statements
            )
        touching = [sql for sql in recording.sql if "`t`" in sql or "`u`" in sql or "`a`" in sql]
        assert len(touching) == reads, touching
        assert all("`u`" not in sql and "`a`" not in sql for sql in touching), touching


# (table, rows, a partitioning that leaves a row out, one with room for every row)
PARTITIONED = {
    "a LIST value no partition lists": (
        "CREATE TABLE t (id INT NOT NULL, r INT NOT NULL, PRIMARY KEY (id, r))"
        " PARTITION BY LIST (r) (PARTITION p1 VALUES IN (1, 2), PARTITION p2 VALUES IN (3))",
        "INSERT INTO t VALUES (1, 3)",
        "PARTITION BY LIST (r) (PARTITION p1 VALUES IN (1, 2))",
        "PARTITION BY LIST (r) (PARTITION p1 VALUES IN (1, 2, 3))",
    ),
    "a NULL where LIST lists no NULL": (
        "CREATE TABLE t (id INT NOT NULL, r INT, KEY (id)) PARTITION BY HASH (id)",
        "INSERT INTO t VALUES (1, NULL)",
        "PARTITION BY LIST (r) (PARTITION p1 VALUES IN (1, 2))",
        "PARTITION BY LIST (r) (PARTITION p1 VALUES IN (1, 2), PARTITION pn VALUES IN (NULL))",
    ),
    "a RANGE past its last bound": (
        "CREATE TABLE t (id INT NOT NULL PRIMARY KEY)",
        "INSERT INTO t VALUES (5), (50)",
        "PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (10),"
        " PARTITION p1 VALUES LESS THAN (20))",
        "PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (10),"
        " PARTITION p1 VALUES LESS THAN MAXVALUE)",
    ),
    "a RANGE of an expression": (
        "CREATE TABLE t (id INT NOT NULL, d DATE NOT NULL, PRIMARY KEY (id, d))",
        "INSERT INTO t VALUES (1, '2024-05-01')",
        "PARTITION BY RANGE (YEAR(d)) (PARTITION p0 VALUES LESS THAN (2021),"
        " PARTITION p1 VALUES LESS THAN (2024))",
        "PARTITION BY RANGE (YEAR(d)) (PARTITION p0 VALUES LESS THAN (2021),"
        " PARTITION p1 VALUES LESS THAN (2025))",
    ),
    "RANGE COLUMNS past a MAXVALUE's prefix": (
        "CREATE TABLE t (a INT NOT NULL, b INT NOT NULL, PRIMARY KEY (a, b))",
        "INSERT INTO t VALUES (10, 7), (11, 0)",
        "PARTITION BY RANGE COLUMNS (a, b) (PARTITION p0 VALUES LESS THAN (10, MAXVALUE))",
        "PARTITION BY RANGE COLUMNS (a, b) (PARTITION p0 VALUES LESS THAN (11, MAXVALUE))",
    ),
    "LIST COLUMNS of strings": (
        "CREATE TABLE t (id INT NOT NULL, c VARCHAR(5) NOT NULL, PRIMARY KEY (id, c))",
        "INSERT INTO t VALUES (1, 'fr')",
        "PARTITION BY LIST COLUMNS (c) (PARTITION eu VALUES IN ('de', 'nl'))",
        "PARTITION BY LIST COLUMNS (c) (PARTITION eu VALUES IN ('de', 'nl', 'fr'))",
    ),
}


@pytest.mark.parametrize("name", sorted(PARTITIONED))
def test_a_partitioning_that_leaves_a_row_out_is_refused_before_anything_runs(
    mysql_db: str, name: str
) -> None:
    """The repartitioning ALTER failed on a row no partition takes (error 1526), after
    the plan's statements before it committed (here: a column added to another table).
    The data check refuses it first; a partitioning with room for every row applies."""
    table, rows, narrow, wide = PARTITIONED[name]
    with open_target(mysql_db) as t, t.connection.cursor() as cur:
        cur.execute("CREATE TABLE a (id INT PRIMARY KEY)")
        cur.execute(table)
        cur.execute(rows)
    body = table.split(" PARTITION BY ", 1)[0]
    other = "CREATE TABLE a (id INT PRIMARY KEY, x INT);\n"
    with open_target(mysql_db) as t:
        before = planner.current_fingerprint(t)
        plan = planner.plan(t, f"{other}{body} {narrow};")
        assert len(plan.statements) >= 2, plan.statements
        result = planner.apply(t, plan.statements, plan.fingerprint_before, True)
        assert result.outcome == "failed" and result.progress.executed == 0, result.message
        assert "no partition of its new partitioning takes" in result.message, result.message
        assert planner.current_fingerprint(t) == before
        plan = planner.plan(t, f"{other}{body} {wide};")
        result = planner.apply(t, plan.statements, plan.fingerprint_before, True)
        assert result.outcome == "succeeded", result.message
        assert planner.plan(t, f"{other}{body} {wide};").statements == []
