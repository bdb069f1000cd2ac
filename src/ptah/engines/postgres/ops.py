"""PostgreSQL planner hooks: read-only inspection, scratch normalisation, transactional apply."""

from __future__ import annotations

from typing import Any

from ptah.engines.base import Target
from ptah.engines.model import DEFAULT_POLICY, Schema, SchemaPolicy, Statement, fingerprint
from ptah.engines.ops import DriftedError, Progress, Timeouts
from ptah.engines.postgres import diff as pgdiff
from ptah.engines.postgres import inspect as pginspect
from ptah.engines.postgres import scratch
from ptah.engines.urls import DbUrl


class PostgresOps:
    # The target is read on its own connection; normalising opens others (the scratch).
    concurrent_inspect = True

    def version_key(self, target: Target) -> str:
        return f"postgres-{target.connection.info.server_version}"

    def inspect(self, target: Target) -> Schema:
        conn = target.connection
        with conn.transaction(force_rollback=True):
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            return pginspect.inspect(conn)

    def normalise(
        self,
        target: Target,
        desired_sql: str,
        dev_url: DbUrl | None,
        policy: SchemaPolicy = DEFAULT_POLICY,
    ) -> tuple[Schema, list[str]]:
        return scratch.normalise(target.url, desired_sql, dev_url, policy.ownership, policy.ignore)

    def diff(self, current: Schema, desired: Schema) -> list[Statement]:
        return pgdiff.diff(current, desired)

    def execute(
        self,
        target: Target,
        statements: list[Statement],
        expected_before: str,
        timeouts: Timeouts,
        progress: Progress,
    ) -> None:
        """One transaction for everything, except statements PostgreSQL runs only alone.

        The fingerprint is checked inside the first transaction, so nothing is
        written when the target drifted. ``CONCURRENTLY`` statements break the
        run into groups; each group commits on its own and progress says how far
        it got.
        """
        conn = target.connection
        groups: list[list[Statement]] = []
        for stmt in statements:
            if not stmt.transactional or not groups or not groups[-1][0].transactional:
                groups.append([stmt])
            else:
                groups[-1].append(stmt)
        if not groups:
            groups = [[]]
        for number, group in enumerate(groups):
            if group and not group[0].transactional:
                self._set_timeouts(conn, timeouts, local=False)
                if number == 0:
                    self._check(conn, expected_before)
                self._run(conn, group[0], progress)
                progress.committed = progress.executed
                continue
            with conn.transaction():
                self._set_timeouts(conn, timeouts, local=True)
                # As pg_dump does: bodies were checked when the desired file was loaded,
                # and a body may name objects the plan creates later in the same run.
                conn.execute("SET LOCAL check_function_bodies = false")
                if number == 0:
                    self._check(conn, expected_before)
                for stmt in group:
                    self._run(conn, stmt, progress)
            progress.committed = progress.executed

    @staticmethod
    def _set_timeouts(conn: Any, timeouts: Timeouts, local: bool) -> None:
        scope = "LOCAL " if local else ""
        conn.execute(f"SET {scope}lock_timeout = '{int(timeouts.lock_seconds)}s'")
        conn.execute(f"SET {scope}statement_timeout = '{int(timeouts.statement_seconds)}s'")

    @staticmethod
    def _check(conn: Any, expected: str) -> None:
        # A savepoint rolled back: the inspection's SET LOCAL search_path does not leak.
        with conn.transaction(force_rollback=True):
            actual = fingerprint(pginspect.inspect(conn))
        if actual != expected:
            raise DriftedError(actual)

    @staticmethod
    def _run(conn: Any, stmt: Statement, progress: Progress) -> None:
        progress.failed_index = progress.executed
        conn.execute(stmt.sql.encode())
        progress.executed += 1
        progress.failed_index = None
