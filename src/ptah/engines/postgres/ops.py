"""PostgreSQL planner hooks: read-only inspection, scratch normalisation, apply in steps."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psycopg

from ptah.engines.base import EngineError, Target
from ptah.engines.model import (
    DEFAULT_POLICY,
    NEW,
    Online,
    Schema,
    SchemaPolicy,
    Statement,
    fingerprint,
)
from ptah.engines.ops import ONLINE, DriftedError, Progress, Timeouts
from ptah.engines.postgres import diff as pgdiff
from ptah.engines.postgres import ignore as pgignore
from ptah.engines.postgres import inspect as pginspect
from ptah.engines.postgres import online as pgonline
from ptah.engines.postgres import probe as pgprobe
from ptah.engines.postgres import scratch
from ptah.engines.urls import DbUrl

# How long a reading of the target waits for a lock another session holds on one of its
# relations (some catalog functions lock what they describe: pg_get_indexdef). Unbounded,
# a reading behind a long transaction waited for as long, holding the locks it took
# before: an ALTER queued behind those would stop the application's queries too.
READ_LOCK_SECONDS = 10.0


class PostgresOps:
    # The target is read on its own connection; normalising opens others (the scratch).
    concurrent_inspect = True
    # The source is checked by normalise, part by part as the scratch loads (scratch.py).
    confines_while_loading = True
    _reserved: scratch.Reserved | None = None

    def version_key(self, target: Target) -> str:
        return f"postgres-{target.connection.info.server_version}"

    # The code a reused inspection must have come from (the planner digests it).
    inspect_modules = (
        "ptah.engines.postgres.inspect",
        "ptah.engines.postgres.graph",
        "ptah.engines.postgres.probe",
    )

    def inspect(self, target: Target) -> Schema:
        return self.probed_inspect(target, None)[0]

    def probed_inspect(
        self, target: Target, reuse: Callable[[str], Schema | None] | None
    ) -> tuple[Schema, str | None]:
        """The target's schema and the digest it was read under (:mod:`.probe`); with
        ``reuse``, the digest is read first, in the same snapshot, and what ``reuse``
        gives for it is returned instead of reading the schema again."""
        conn = target.connection
        try:
            with conn.transaction(force_rollback=True):
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                conn.execute(f"SET LOCAL lock_timeout = '{int(READ_LOCK_SECONDS * 1000)}ms'")
                if reuse is None:
                    return pginspect.inspect(conn), None
                digest = pgprobe.probe(conn)
                cached = reuse(digest)
                return (cached if cached is not None else pginspect.inspect(conn)), digest
        except psycopg.errors.LockNotAvailable:
            raise EngineError(
                f"reading the database's schema waited {READ_LOCK_SECONDS:g} s for a lock another"
                " session holds (a long transaction, a running ALTER); nothing was changed, and"
                " it is read again later",
                reason="LockBusy",
            ) from None

    def reserve_scratch(self, target: Target, dev_url: DbUrl | None) -> None:
        """Create the temporary scratch while the planner confines the source (without a
        dev database); :meth:`normalise` loads it, :meth:`settle` drops it if not."""
        if dev_url is None:
            self._reserved = scratch.Reserved(target.url)

    def normalise(
        self,
        target: Target,
        desired_sql: str,
        dev_url: DbUrl | None,
        policy: SchemaPolicy = DEFAULT_POLICY,
        confined: Callable[[], None] | None = None,
    ) -> tuple[Schema, list[str]]:
        reserved, self._reserved = self._reserved, None
        return scratch.normalise(
            target.url, desired_sql, dev_url, policy.ownership, policy.ignore, reserved, confined
        )

    def settle(self) -> None:
        """Wait for the scratch databases still being dropped behind the plan (one this
        plan created and never loaded is dropped first)."""
        reserved, self._reserved = self._reserved, None
        if reserved is not None:
            reserved.release()
        scratch.settle()

    def diff(self, current: Schema, desired: Schema, online: Online = ONLINE) -> list[Statement]:
        return pgdiff.diff(current, desired, online)

    def split_ignored(
        self, schema: Schema, covers: Callable[[str], str | None]
    ) -> tuple[Schema, Schema, list[str]]:
        return pgignore.split(schema, covers)

    def caveats(self, current: Schema, desired: Schema, online: Online = ONLINE) -> list[str]:
        return pgdiff.caveats(current, desired, online)

    def execute(
        self,
        target: Target,
        statements: list[Statement],
        expected_before: str,
        timeouts: Timeouts,
        progress: Progress,
    ) -> None:
        """The plan in steps: a transaction per run of statements that share one, and
        each statement PostgreSQL runs only alone (``CONCURRENTLY``) outside any.

        The fingerprint is checked inside the first step, so nothing is written when
        the target drifted. Each step commits on its own and progress says how far the
        plan got. A step whose statement gave up waiting for a lock (``lock_timeout``,
        SQLSTATE 55P03) rolled back whole (a statement alone did nothing, or left an
        invalid index that is dropped first) and is run again after a back-off, at most
        ``timeouts.lock_retries`` times; each retry is recorded in ``progress.retries``.
        """
        conn = target.connection
        for number, (start, group) in enumerate(steps(statements)):
            attempt = 1
            while True:
                try:
                    if attempt > 1 and group and not group[0].transactional:
                        self._drop_failed_build(conn, group[0])
                    self._step(conn, group, number == 0, expected_before, timeouts, progress)
                    break
                except psycopg.errors.LockNotAvailable as exc:
                    if attempt > timeouts.lock_retries:
                        raise
                    wait = timeouts.backoff(attempt)
                    failed = progress.failed_index if progress.failed_index is not None else start
                    error = target.scrub(str(exc).splitlines()[0] if str(exc) else "")
                    progress.retried(failed, attempt, wait, error[:200])
                    progress.executed = start
                    progress.failed_index = None
                    time.sleep(wait)
                    attempt += 1
            progress.committed = progress.executed

    def _step(
        self,
        conn: Any,
        group: list[Statement],
        first: bool,
        expected_before: str,
        timeouts: Timeouts,
        progress: Progress,
    ) -> None:
        if group and not group[0].transactional:
            self._set_timeouts(conn, timeouts, local=False)
            if first:
                self._check(conn, expected_before)
            self._run(conn, group[0], progress)
            return
        with conn.transaction():
            self._set_timeouts(conn, timeouts, local=True)
            # As pg_dump does: bodies were checked when the desired file was loaded,
            # and a body may name objects the plan creates later in the same run.
            conn.execute("SET LOCAL check_function_bodies = false")
            if first:
                self._check(conn, expected_before)
            for stmt in group:
                self._run(conn, stmt, progress)

    @staticmethod
    def _drop_failed_build(conn: Any, stmt: Statement) -> None:
        """Before a concurrent build is tried again: the invalid index its failed try
        left under the same name goes (a valid one is left, and the build then fails)."""
        name = pgonline.built_index(stmt.sql)
        if name is None:
            return
        row = conn.execute(
            "SELECT NOT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s)",
            (name,),
        ).fetchone()
        if row and row[0]:
            conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}".encode())

    @staticmethod
    def _set_timeouts(conn: Any, timeouts: Timeouts, local: bool) -> None:
        scope = "LOCAL " if local else ""
        conn.execute(f"SET {scope}lock_timeout = '{max(1, int(timeouts.lock_seconds * 1000))}ms'")
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
        t0 = time.perf_counter()
        conn.execute(stmt.sql.encode())
        progress.seconds[progress.executed] = time.perf_counter() - t0
        progress.executed += 1
        progress.failed_index = None


def steps(statements: list[Statement]) -> list[tuple[int, list[Statement]]]:
    """The plan cut where apply commits: (index of the first statement, statements).

    A statement that runs outside a transaction is a step alone; one that starts a new
    transaction begins a step that the shared statements after it join.
    """
    out: list[tuple[int, list[Statement]]] = []
    for index, stmt in enumerate(statements):
        alone = not stmt.transactional
        if alone or stmt.transaction == NEW or not out or not out[-1][1][0].transactional:
            out.append((index, [stmt]))
        else:
            out[-1][1].append(stmt)
    return out or [(0, [])]
