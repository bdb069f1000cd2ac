"""MariaDB/MySQL planner hooks.

DDL commits implicitly on these engines, so apply runs statement by statement
and records progress; the fingerprint is checked immediately before the first
statement. The scratch is a temporary database on the dev server (or the
target's server), created and dropped around the load.
"""

from __future__ import annotations

import secrets
from typing import Any

import pymysql

from ptah.engines.base import ScratchUnavailable, Target
from ptah.engines.model import Schema, Statement, fingerprint
from ptah.engines.mysql import diff as mydiff
from ptah.engines.mysql import inspect as myinspect
from ptah.engines.mysql.target import connect
from ptah.engines.ops import DriftedError, Progress, Timeouts
from ptah.engines.urls import DbUrl, scrub


def _run_script(conn: Any, sql: str) -> None:
    with conn.cursor() as cur:
        cur.execute(sql)
        while cur.nextset():
            pass


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
        self, target: Target, desired_sql: str, dev_url: DbUrl | None
    ) -> tuple[Schema, list[str]]:
        url = dev_url or target.url
        name = "ptah_scratch_" + secrets.token_hex(6)
        conn = connect(url, database="")
        try:
            try:
                _run_script(conn, f"CREATE DATABASE `{name}`")
            except pymysql.MySQLError as exc:
                raise ScratchUnavailable(
                    f"user {url.user} may not create a temporary scratch database ({exc.args[0]});"
                    " give a dev database (PTAH_DEV_URL / --dev-url) or grant CREATE"
                ) from None
            try:
                conn.select_db(name)
                _run_script(conn, "SET SESSION foreign_key_checks = 0;\n" + desired_sql)
                return myinspect.inspect(conn), []
            except pymysql.MySQLError as exc:
                err = ScratchUnavailable(
                    scrub(f"desired schema does not load: {exc}", *url.secrets)
                )
                err.reason = "DesiredSchemaInvalid"
                raise err from None
            finally:
                _run_script(conn, f"DROP DATABASE IF EXISTS `{name}`")
        finally:
            conn.close()

    def diff(self, current: Schema, desired: Schema) -> list[Statement]:
        return mydiff.diff(current, desired)

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
            cur.execute(f"SET SESSION lock_wait_timeout = {int(timeouts.lock_seconds)}")
            try:
                cur.execute(f"SET SESSION max_statement_time = {int(timeouts.statement_seconds)}")
            except pymysql.MySQLError:
                progress.notes.append("server has no max_statement_time (MySQL): not bounded")
            cur.execute("SET SESSION foreign_key_checks = 0")
        actual = fingerprint(self.inspect(target))
        if actual != expected_before:
            raise DriftedError(actual)
        progress.notes.append("MariaDB/MySQL DDL commits per statement: progress is per statement")
        for stmt in statements:
            progress.failed_index = progress.executed
            _run_script(conn, stmt.sql)
            progress.executed += 1
            progress.committed = progress.executed
        progress.failed_index = None
