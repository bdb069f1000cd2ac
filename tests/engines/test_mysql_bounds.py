"""A MariaDB plan ends: the scratch's sessions are bounded and a file may not lift the bounds.

A desired file that sleeps, spins (an unbounded recursive CTE, an endless loop in a
stored function) or waits on a lock held the plan for as long as the server let it (a
day for a metadata lock, without end for a statement). Each session of the scratch
runs with :mod:`ptah.engines.mysql.bounds`; reached, a bound ends the plan with one
line naming the statement's line.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from ptah.engines import confine, deadline, planner
from ptah.engines.base import DesiredSchemaInvalid
from ptah.engines.connect import open_target
from ptah.engines.model import SchemaPolicy
from ptah.engines.mysql import bounds
from support.databases import mysql_session

pytestmark = pytest.mark.integration


def test_the_load_runs_with_the_plans_bounds(mysql_db: str) -> None:
    """The file's own CHECK reads the session's bounds: before, the server's defaults
    (no statement limit, a day's lock wait) failed the INSERT."""
    sql = (
        "CREATE TABLE b (m DOUBLE, l INT, i INT,\n"
        f"  CHECK (m = {bounds.STATEMENT_SECONDS} AND l = {bounds.LOCK_SECONDS}"
        f" AND i = {bounds.LOCK_SECONDS}));\n"
        "INSERT INTO b VALUES (@@max_statement_time, @@lock_wait_timeout,"
        " @@innodb_lock_wait_timeout);\n"
    )
    with open_target(mysql_db) as target:
        plan = planner.plan(target, sql)
    assert any("`b`" in st.sql for st in plan.statements), plan


@pytest.mark.parametrize(
    "endless",
    [
        # 40 iterations, each doubling the rows: 2^40 of them.
        "INSERT INTO n WITH RECURSIVE c (i) AS (SELECT 1 UNION ALL SELECT i + 1\n"
        "  FROM c, (SELECT 1 UNION ALL SELECT 2) d WHERE i < 40) SELECT COUNT(*) FROM c;\n",
        "DELIMITER //\nCREATE FUNCTION f() RETURNS INT NO SQL\nBEGIN\n  WHILE 1 DO SET @x = 1;"
        " END WHILE;\n  RETURN 1;\nEND//\nDELIMITER ;\nINSERT INTO n VALUES (f());\n",
        "DELIMITER //\nCREATE PROCEDURE p() BEGIN\n  WHILE 1 DO INSERT INTO n VALUES (1);"
        " DELETE FROM n; END WHILE;\nEND//\nDELIMITER ;\nCALL p();\n",
    ],
    ids=["recursive-cte", "endless-function", "endless-procedure"],
)
def test_an_endless_statement_ends_the_plan_at_its_bound(
    mysql_db: str, monkeypatch: pytest.MonkeyPatch, endless: str
) -> None:
    monkeypatch.setattr(bounds, "STATEMENT_SECONDS", 1.0)
    sql = f"CREATE TABLE n (i INT);\n{endless}"
    started = time.monotonic()
    policy = SchemaPolicy(ignore=("function", "procedure"))
    with open_target(mysql_db) as target, pytest.raises(DesiredSchemaInvalid) as caught:
        planner.plan(target, sql, policy=policy)
    # The server's bound (1 s here) or, should the server not stop the statement, the
    # client's own backstop: either way the plan ends with the bound's one line.
    assert time.monotonic() - started < 120
    message = str(caught.value)
    assert "ran longer than the plan's bound" in message, message
    lines = enumerate(sql.splitlines(), 1)
    line = max(i for i, text in lines if text.startswith(("INSERT", "CALL")))
    assert f"line {line}:" in message, message
    assert "\n" not in message


def test_the_whole_load_has_a_deadline(mysql_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deadline, "LOAD_SECONDS", -1.0)
    with open_target(mysql_db) as target, pytest.raises(DesiredSchemaInvalid, match="line 1:"):
        planner.plan(target, "CREATE TABLE n (i INT);\n")


@pytest.mark.parametrize(
    ("sql", "why"),
    [
        ("CREATE TABLE t (a INT DEFAULT (SLEEP(100)))", "SLEEP"),
        ("CREATE TABLE t (a INT, b INT AS (a + sleep (5)) VIRTUAL)", "sleep"),
        ("CREATE VIEW v AS SELECT BENCHMARK(1e12, MD5('x')) AS b", "BENCHMARK"),
        ("CREATE TRIGGER g BEFORE INSERT ON t FOR EACH ROW SET @x = SLEEP(9)", "SLEEP"),
        ("SELECT /*!50000 SLEEP(100) */", "SLEEP"),
        ("SELECT MASTER_GTID_WAIT('0-1-100')", "MASTER_GTID_WAIT"),
        ("SET max_statement_time = 0", "max_statement_time"),
        ("SET SESSION lock_wait_timeout = 86400", "lock_wait_timeout"),
        ("SET @@session.innodb_lock_wait_timeout = DEFAULT", "innodb_lock_wait_timeout"),
        ("SET STATEMENT max_statement_time = 0 FOR INSERT INTO t VALUES (1)", "max_statement"),
        ("SET sql_mode = '', max_statement_time = 1e9", "max_statement_time"),
        # A built-in is called quoted too.
        ("SELECT `SLEEP` (100)", "SLEEP"),
        ("SELECT `get_lock`('x', 100)", "named lock"),
    ],
)
def test_what_would_hold_the_plan_is_refused(sql: str, why: str) -> None:
    with pytest.raises(confine.StatementRefused, match=why):
        confine.check(sql + ";\n", "mysql")


@pytest.mark.parametrize(
    "sql",
    [
        "SET STATEMENT max_statement_time = 10 FOR INSERT INTO t VALUES (1)",
        "SET SESSION lock_wait_timeout = 5",
        "CREATE TABLE t (sleep INT, KEY k (sleep))",
        "CREATE TABLE t (a INT COMMENT 'SLEEP(100)')",
        # A column's prefix in an index is no call, whatever the column's name.
        "CREATE TABLE t (sleep VARCHAR(20), KEY k (sleep(10)), UNIQUE KEY (`benchmark` (4)))",
        "CREATE TABLE t (load_file TEXT, get_lock TEXT, KEY (load_file(10), get_lock(5)))",
        "CREATE INDEX i ON t (sleep(3))",
    ],
)
def test_bounded_settings_and_names_are_accepted(sql: str) -> None:
    confine.check(sql + ";\n", "mysql")


def test_an_event_of_the_file_never_fires(mysql_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An event runs in the server's scheduler thread, as its definer, beyond the load's
    bounds and after the plan: with the scheduler on, one ON SCHEDULE AT CURRENT_TIMESTAMP
    with a long loop was still running once the plan had returned. The load creates
    every event DISABLE (its kind is ignored here; the plan does not manage events)."""
    from ptah.engines.mysql import ops

    seen: list[tuple[str, str]] = []
    inspect = ops.myinspect.inspect

    def inspect_and_read_events(conn: object) -> object:
        with conn.cursor() as cur:  # type: ignore[attr-defined]
            cur.execute(
                "SELECT event_name, status FROM information_schema.events"
                " WHERE event_schema = DATABASE() ORDER BY 1"
            )
            seen.extend(cur.fetchall())
        return inspect(conn)

    monkeypatch.setattr(ops.myinspect, "inspect", inspect_and_read_events)
    sql = (
        "CREATE TABLE film (id INT PRIMARY KEY);\n"
        "CREATE EVENT a ON SCHEDULE AT CURRENT_TIMESTAMP + INTERVAL 1 HOUR\n"
        "  DO INSERT INTO film VALUES (1);\n"
        "/*!50106 CREATE*/ /*!50117 DEFINER=CURRENT_USER*/ /*!50106 EVENT `b` ON SCHEDULE"
        " EVERY 1 SECOND ON COMPLETION PRESERVE ENABLE DO INSERT INTO film VALUES (2) */;\n"
        "CREATE EVENT c ON SCHEDULE EVERY 1 DAY DISABLE DO DELETE FROM film;\n"
        "ALTER EVENT c ENABLE;\n"
        "CREATE EVENT d ON SCHEDULE EVERY 1 DAY DISABLE DO DELETE FROM film;\n"
        "DELIMITER //\nCREATE PROCEDURE p() BEGIN\n  ALTER EVENT d ENABLE;\nEND//\n"
        "DELIMITER ;\nCALL p();\n"
        "CREATE TABLE event (enable INT, `do` INT);\n"
    )
    policy = SchemaPolicy(ignore=("event", "procedure"))
    with open_target(mysql_db) as target:
        plan = planner.plan(target, sql, policy=policy)
    assert seen == [("a", "DISABLED"), ("b", "DISABLED"), ("c", "DISABLED"), ("d", "DISABLED")]
    created = "\n".join(st.sql for st in plan.statements)
    assert "`enable` int" in created and "`do` int" in created, created


@pytest.mark.parametrize(
    "blob",
    ["a" * 40_000, "a -- " * 10_000, "a # " * 10_000, "a /* " * 10_000, "`a` " * 10_000],
    ids=["word", "dash-comments", "hash-comments", "block-comments", "quoted"],
)
def test_the_udf_scan_is_linear_on_any_text(blob: str) -> None:
    """The scan for called names runs over the whole file before the load: its pattern
    backtracked, and a 40,000-character string in an INSERT took a minute (20 s at
    20,000), the plan hanging on its own check. Now a few hundredths of a second."""
    from ptah.engines.mysql.udf import _called_names
    from ptah.engines.splitter import split_statements

    statements = split_statements(f"INSERT INTO t VALUES ('{blob}');\n", "mysql")
    started = time.monotonic()
    _called_names(statements, frozenset())
    assert time.monotonic() - started < 20  # on HEAD: minutes


@pytest.mark.parametrize(
    "text",
    ["ALTER EVENT " * 20_000, "SELECT 1 FROM t " + "KEY " * 20_000],
    ids=["event-headers", "key-words"],
)
def test_the_load_rewrites_and_the_check_are_linear(text: str) -> None:
    """Each event header was read to its DO from every CREATE/ALTER, and each key list's
    header from every KEY word: quadratic on a file of repeated words."""
    from ptah.engines.mysql.confine import disable_events
    from ptah.engines.mysql.udf import calls

    started = time.monotonic()
    disable_events(text)
    calls(confine.read_words(text, "mysql"))
    assert time.monotonic() - started < 20  # on HEAD: minutes


def _wait_until_running(url: Any, session: int, statement: str) -> None:
    """Evidence, not a pause: the server's process list shows ``session`` running
    ``statement`` (so its table's metadata lock is held), within 20 s."""

    with (
        mysql_session(url) as conn,
        conn.cursor() as cur,
    ):
        ends = time.monotonic() + 20
        while time.monotonic() < ends:
            cur.execute(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = %s"
                " AND INFO LIKE %s",
                (session, statement + "%"),
            )
            row = cur.fetchone()
            if row and row[0]:
                return
        raise AssertionError(f"session {session} never showed {statement!r} running")


@pytest.mark.parametrize(
    "holder",
    [
        "CREATE TABLE being_made AS SELECT SLEEP({s}) AS s",
        "CREATE TABLE being_made ENGINE = Aria AS SELECT SLEEP({s}) AS s",
    ],
    ids=["innodb", "aria"],
)
def test_reading_the_target_waits_a_bounded_time_for_a_lock(
    mysql_db: str, monkeypatch: pytest.MonkeyPatch, holder: str
) -> None:
    """Another session's CREATE TABLE ... SELECT in the target's database holds its
    table's exclusive metadata lock while it runs; the target's inspection waited for
    it (the server's default wait is a day: here, the holder's 12 s, then the read went
    on). Now the read ends after READ_LOCK_SECONDS (1 s here) with the transient
    LockBusy, and the holder is not touched."""
    import threading

    from ptah.engines.base import EngineError
    from ptah.engines.mysql import ops as myops
    from ptah.engines.urls import parse_url

    monkeypatch.setattr(myops, "READ_LOCK_SECONDS", 1.0, raising=False)
    url = parse_url(mysql_db)
    other = mysql_session(url, url.database)
    held: list[object] = []

    def hold() -> None:
        with other.cursor() as cur:
            cur.execute("CREATE TABLE kept (id INT PRIMARY KEY)")
            held.append(True)
            cur.execute(holder.format(s=12))
            held.append(cur.fetchall())

    holder_id = other.thread_id()
    thread = threading.Thread(target=hold)
    thread.start()
    try:
        _wait_until_running(url, holder_id, "CREATE TABLE being_made")
        started = time.monotonic()
        with open_target(mysql_db) as target, pytest.raises(EngineError) as caught:
            myops.MysqlOps().inspect(target)
        elapsed = time.monotonic() - started
        assert caught.value.reason == "LockBusy", caught.value
        assert str(caught.value).startswith("reading the database's schema waited 1 s for a lock")
        assert elapsed < 8, f"waited {elapsed:.1f} s"
    finally:
        thread.join()
        other.close()
    assert len(held) == 2  # the holder ran to its end


def test_reading_the_target_does_not_wait_on_another_databases_lock(
    mysql_db: str, mysql_db2: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CREATE TABLE ... SELECT in another database on the same server holds that
    table's exclusive metadata lock while it runs. The census's trigger query, filtered
    by trigger_schema, opened every table of every database and waited on it: a plan
    here ended LockBusy because of work elsewhere. Now the plan reads its own database
    only, and finishes while the other one's statement is still running."""
    import threading

    import pymysql

    from ptah.engines.mysql import ops as myops
    from ptah.engines.urls import parse_url

    monkeypatch.setattr(myops, "READ_LOCK_SECONDS", 1.0, raising=False)
    elsewhere = parse_url(mysql_db2)
    other = mysql_session(elsewhere, elsewhere.database)
    holder_id = other.thread_id()
    ended: list[str] = []

    def hold() -> None:
        try:
            with other.cursor() as cur:
                cur.execute("CREATE TABLE being_made AS SELECT SLEEP(120) AS s")
        except pymysql.MySQLError as exc:  # ended below, once the plan is read
            ended.append(str(exc))

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        _wait_until_running(elsewhere, holder_id, "CREATE TABLE being_made")
        with open_target(mysql_db) as target:
            plan = planner.plan(target, "CREATE TABLE t (id INT PRIMARY KEY);\n")
        assert plan.statements, plan
        # The other database's statement still runs: the plan did not wait it out.
        _wait_until_running(elsewhere, holder_id, "CREATE TABLE being_made")
    finally:
        with (
            mysql_session(elsewhere) as admin,
            admin.cursor() as cur,
        ):
            cur.execute(f"KILL QUERY {int(holder_id)}")
        thread.join()
        other.close()
