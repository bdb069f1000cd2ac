"""What each engine supplies to the planner: inspect, normalise, diff, execute.

The planner (``ptah.engines.planner``) is engine-neutral; an :class:`EngineOps`
holds everything engine-specific about turning desired DDL into a plan and a
plan into executed statements.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Protocol

from ptah.engines.base import Target
from ptah.engines.model import DEFAULT_POLICY, Schema, SchemaPolicy, Statement
from ptah.engines.urls import DbUrl


@dataclass(frozen=True)
class Timeouts:
    """Defaults for apply: waiting for a lock fails fast, a runaway statement is bounded."""

    lock_seconds: int = 10
    statement_seconds: int = 1800


def timeouts_from_env() -> Timeouts:
    def num(name: str, default: int) -> int:
        try:
            return max(1, int(os.environ.get(name, default)))
        except ValueError:
            return default

    return Timeouts(
        lock_seconds=num("PTAH_LOCK_TIMEOUT_SECONDS", 10),
        statement_seconds=num("PTAH_STATEMENT_TIMEOUT_SECONDS", 1800),
    )


@dataclass
class Progress:
    """How far an apply got; reported in the frame whatever the outcome."""

    executed: int = 0
    committed: int = 0
    failed_index: int | None = None
    error: str = ""
    notes: list[str] = field(default_factory=list)


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

    def diff(self, current: Schema, desired: Schema) -> list[Statement]:
        """Ordered statements from ``current`` to ``desired``."""

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
