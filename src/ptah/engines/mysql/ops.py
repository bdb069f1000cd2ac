"""MariaDB/MySQL planner hooks.

DDL commits implicitly on these engines, so apply runs statement by statement
and records progress; the fingerprint is checked immediately before the first
statement. The scratch is a temporary database on the dev server (or the
target's server), created and dropped around the load.
"""

from __future__ import annotations

import re
import secrets
import time
from typing import Any

import pymysql

from ptah.engines import confine
from ptah.engines.base import DesiredSchemaInvalid, ScratchUnavailable, Target
from ptah.engines.model import (
    DEFAULT_POLICY,
    Online,
    Schema,
    SchemaPolicy,
    Statement,
    fingerprint,
    refuse_unmanaged,
)
from ptah.engines.mysql import confine as myconfine
from ptah.engines.mysql import diff as mydiff
from ptah.engines.mysql import inspect as myinspect
from ptah.engines.mysql import online as myonline
from ptah.engines.mysql.target import connect, read_as_checked
from ptah.engines.ops import ONLINE, DriftedError, Progress, Timeouts
from ptah.engines.splitter import Statement as SourceStatement
from ptah.engines.urls import DbUrl, scrub


def load_error(exc: pymysql.MySQLError, scratch: str, statement: SourceStatement) -> str:
    """The server's error as the client shows it, at the desired file's line.

    The scratch database's name is the runner's detail, not the user's: a
    qualifier ``scratch.`` is dropped, leaving the object's own name.
    """
    code, message = (*exc.args, "", "")[:2] if exc.args else ("", str(exc))
    text = str(message)
    text = re.sub(rf"`?{re.escape(scratch)}`?\.", "", text)
    text = text.replace(scratch, "the desired schema")
    error = f"ERROR {code}: {text}" if code else text
    return (
        f"desired schema does not load: line {statement.line}: {error}"
        f" (in: {confine.excerpt(statement.text)})"
    )


def _run_script(conn: Any, sql: str) -> None:
    with conn.cursor() as cur:
        cur.execute(sql)
        while cur.nextset():
            pass


def _udf_names(conn: Any) -> frozenset[str]:
    """The server's loadable functions (mysql.func), lower-cased; none when the plan's
    user may not read the table (it may not create one either)."""
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT name FROM mysql.func")
            return frozenset(str(row[0]).lower() for row in cur.fetchall())
    except pymysql.MySQLError:
        return frozenset()


def _refuse_udf_calls(conn: Any, statements: list[SourceStatement]) -> None:
    """Refuse a statement that calls one of the server's UDFs (:func:`.confine.udf_call`):
    the check knows no server's UDFs, so the load asks before anything runs."""
    udfs = _udf_names(conn)
    if not udfs:
        return
    for statement in statements:
        lowered = statement.text.lower()
        if not any(udf in lowered for udf in udfs):
            continue
        why = myconfine.udf_call(confine.read_words(statement.text, "mysql"), udfs)
        if why:
            raise confine.StatementRefused(statement.line, statement.text, why)


class MysqlOps:
    def version_key(self, target: Target) -> str:
        return f"mysql-{target.connection.get_server_info()}"

    def inspect(self, target: Target) -> Schema:
        conn = target.connection
        conn.query("START TRANSACTION READ ONLY")
        try:
            return myinspect.inspect(conn)
        finally:
            conn.rollback()

    def normalise(
        self,
        target: Target,
        desired_sql: str,
        dev_url: DbUrl | None,
        policy: SchemaPolicy = DEFAULT_POLICY,
    ) -> tuple[Schema, list[str]]:
        """Load the desired source into a temporary scratch database as the client would.

        Statement by statement (the client's DELIMITER handled by the splitter),
        with ``foreign_key_checks`` on as a fresh client session has it, so a
        source the native client refuses is refused here too; a file may still
        turn the checks off itself, as dumps do.
        """
        url = dev_url or target.url
        name = "ptah_scratch_" + secrets.token_hex(6)
        conn = connect(url, database="")
        try:
            _refuse_udf_calls(conn, confine.split(desired_sql, "mysql"))
            try:
                _run_script(conn, f"CREATE DATABASE `{name}`")
            except pymysql.MySQLError as exc:
                raise ScratchUnavailable(
                    f"user {url.user} may not create a temporary scratch database ({exc.args[0]});"
                    " give a dev database (PTAH_DEV_URL / --dev-url) or grant CREATE"
                ) from None
            try:
                try:
                    conn.select_db(name)
                    read_as_checked(conn)
                    _run_script(conn, "SET SESSION foreign_key_checks = 1")
                    for statement in confine.split(desired_sql, "mysql"):
                        try:
                            # DROP FUNCTION f: the scratch's f, never the server's UDF f.
                            _run_script(
                                conn, myconfine.qualify_function_drops(statement.text, name)
                            )
                        except pymysql.MySQLError as exc:
                            raise DesiredSchemaInvalid(
                                scrub(load_error(exc, name, statement), *url.secrets)
                            ) from None
                finally:
                    # What the file left in its session ends with it: LOCK TABLES or a READ
                    # ONLY transaction kept the scratch from being dropped (left on the
                    # server), max_statement_time or sql_select_limit broke the inspection.
                    conn.close()
                fresh = connect(url, database=name)
                try:
                    desired = myinspect.inspect(fresh)
                finally:
                    fresh.close()
            finally:
                fresh = connect(url, database="")
                try:
                    _run_script(fresh, f"DROP DATABASE IF EXISTS `{name}`")
                finally:
                    fresh.close()
            refuse_unmanaged(desired, policy.ignore)
            return desired, []
        finally:
            if conn.open:
                conn.close()

    def diff(self, current: Schema, desired: Schema, online: Online = ONLINE) -> list[Statement]:
        return mydiff.diff(current, desired)

    def refine(
        self,
        target: Target,
        current: Schema,
        statements: list[Statement],
        online: Online,
        dev_url: DbUrl | None,
    ) -> tuple[list[Statement], list[str]]:
        """Each ALTER as the server can do it: INSTANT, INPLACE without a lock, or a copy
        (lock-heavy, with the server's reason), probed on empty copies of the tables."""
        url = dev_url or target.url
        statements, warnings = myonline.probe(
            lambda: connect(url, database=""), current, statements, online
        )
        return statements, [scrub(w, *url.secrets) for w in warnings]

    def execute(
        self,
        target: Target,
        statements: list[Statement],
        expected_before: str,
        timeouts: Timeouts,
        progress: Progress,
    ) -> None:
        conn = target.connection
        with conn.cursor() as cur:
            cur.execute(f"SET SESSION lock_wait_timeout = {max(1, round(timeouts.lock_seconds))}")
            try:
                cur.execute(f"SET SESSION max_statement_time = {int(timeouts.statement_seconds)}")
            except pymysql.MySQLError:
                progress.notes.append("server has no max_statement_time (MySQL): not bounded")
            # The checks the plan's scratch load had (a fresh session's): the same here.
            cur.execute("SET SESSION foreign_key_checks = 1")
        actual = fingerprint(self.inspect(target))
        if actual != expected_before:
            raise DriftedError(actual)
        progress.notes.append("MariaDB/MySQL DDL commits per statement: progress is per statement")
        for stmt in statements:
            progress.failed_index = progress.executed
            t0 = time.perf_counter()
            self._run(target, stmt, timeouts, progress)
            progress.seconds[progress.executed] = time.perf_counter() - t0
            progress.executed += 1
            progress.committed = progress.executed
        progress.failed_index = None

    @staticmethod
    def _run(target: Target, stmt: Statement, timeouts: Timeouts, progress: Progress) -> None:
        """One statement; one that gave up waiting for a lock (``lock_wait_timeout``,
        error 1205: a DDL statement that did nothing) is tried again after a back-off,
        at most ``timeouts.lock_retries`` times, each retry recorded."""
        attempt = 1
        while True:
            try:
                _run_script(target.connection, stmt.sql)
                return
            except pymysql.MySQLError as exc:
                if not exc.args or exc.args[0] != 1205 or attempt > timeouts.lock_retries:
                    raise
                wait = timeouts.backoff(attempt)
                error = target.scrub(str(exc.args[-1]))[:200]
                progress.retried(progress.executed, attempt, wait, error)
                time.sleep(wait)
                attempt += 1
