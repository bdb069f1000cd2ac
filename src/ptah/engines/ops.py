"""What each engine supplies to the planner: inspect, normalise, diff, execute.

The planner (``ptah.engines.planner``) is engine-neutral; an :class:`EngineOps`
holds everything engine-specific about turning desired DDL into a plan and a
plan into executed statements.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Protocol

from ptah.engines.base import Target
from ptah.engines.model import DEFAULT_POLICY, Online, Schema, SchemaPolicy, Statement
from ptah.engines.urls import DbUrl

ONLINE = Online()


@dataclass(frozen=True)
class Timeouts:
    """Defaults for apply: waiting for a lock fails fast, a runaway statement is bounded.

    A statement that waits longer than ``lock_seconds`` for a lock gives up (so it never
    queues the table's other users behind it for longer) and is tried again up to
    ``lock_retries`` times, after ``backoff_seconds``, doubled each time (at most 30 s).
    """

    lock_seconds: float = 10
    statement_seconds: int = 1800
    lock_retries: int = 3
    backoff_seconds: float = 1.0

    def backoff(self, attempt: int) -> float:
        """Seconds to wait before try ``attempt + 1`` (``attempt`` counts from 1)."""
        return float(min(30.0, self.backoff_seconds * (2 ** (attempt - 1))))


def timeouts_from_env(
    lock_seconds: float | None = None, lock_retries: int | None = None
) -> Timeouts:
    """The environment's timeouts, with the apply's own lock settings over them."""

    def num(name: str, default: float) -> float:
        try:
            return max(0.0, float(os.environ.get(name, default)))
        except ValueError:
            return default

    return Timeouts(
        lock_seconds=lock_seconds or max(0.1, num("PTAH_LOCK_TIMEOUT_SECONDS", 10)),
        statement_seconds=max(1, int(num("PTAH_STATEMENT_TIMEOUT_SECONDS", 1800))),
        lock_retries=(
            lock_retries if lock_retries is not None else int(num("PTAH_LOCK_RETRIES", 3))
        ),
        backoff_seconds=num("PTAH_LOCK_BACKOFF_SECONDS", 1.0),
    )


@dataclass
class Progress:
    """How far an apply got; reported in the frame whatever the outcome."""

    executed: int = 0
    committed: int = 0
    failed_index: int | None = None
    error: str = ""
    notes: list[str] = field(default_factory=list)
    # One entry per lock timeout that was tried again: statement index (0-based), the
    # try that timed out, seconds waited before the next.
    retries: list[dict[str, Any]] = field(default_factory=list)
    # Seconds each statement ran, by index: where an apply's time (and its locks) went.
    seconds: dict[int, float] = field(default_factory=dict)

    def retried(self, index: int, attempt: int, wait: float, error: str) -> None:
        """Statement ``index`` timed out waiting for a lock on try ``attempt``; it runs
        again after ``wait`` seconds."""
        self.retries.append(
            {"statement": index, "attempt": attempt, "backoffSeconds": wait, "error": error}
        )
        self.notes.append(
            f"statement {index + 1} timed out waiting for a lock (try {attempt});"
            f" tried again after {wait:g} s"
        )


class DriftedError(Exception):
    """The target's fingerprint is not the one the plan starts from."""

    def __init__(self, actual: str) -> None:
        super().__init__(f"target fingerprint is {actual}")
        self.actual = actual


class EngineOps(Protocol):
    """One engine's planner hooks."""

    def version_key(self, target: Target) -> str:
        """Server version: part of the normalised-desired cache key."""

    def inspect(self, target: Target) -> Schema:
        """The target's schema, read in a read-only transaction."""

    def normalise(
        self,
        target: Target,
        desired_sql: str,
        dev_url: DbUrl | None,
        policy: SchemaPolicy = DEFAULT_POLICY,
    ) -> tuple[Schema, list[str]]:
        """The desired schema as the engine itself would store it, plus warnings."""

    def diff(self, current: Schema, desired: Schema, online: Online = ONLINE) -> list[Statement]:
        """Ordered statements from ``current`` to ``desired``, online where ``online`` says."""

    def execute(
        self,
        target: Target,
        statements: list[Statement],
        expected_before: str,
        timeouts: Timeouts,
        progress: Progress,
    ) -> None:
        """Run ``statements`` after checking the fingerprint; raise DriftedError if it differs."""


def ops_for(target: Target) -> EngineOps:
    if target.engine == "postgres":
        from ptah.engines.postgres.ops import PostgresOps

        return PostgresOps()
    if target.engine == "mysql":
        from ptah.engines.mysql.ops import MysqlOps

        return MysqlOps()
    from ptah.engines.sqlite.ops import SqliteOps

    return SqliteOps()
