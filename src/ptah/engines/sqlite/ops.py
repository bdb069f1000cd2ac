"""SQLite planner hooks: in-memory scratch, one IMMEDIATE transaction for apply."""

from __future__ import annotations

import re
import sqlite3

from ptah.engines import confine, deadline
from ptah.engines.base import DesiredSchemaInvalid, Target
from ptah.engines.model import (
    DEFAULT_POLICY,
    Online,
    Schema,
    SchemaPolicy,
    Statement,
    fingerprint,
)
from ptah.engines.ops import ONLINE, DriftedError, Progress, Timeouts
from ptah.engines.sqlite import confine as sqconfine
from ptah.engines.sqlite import diff as sqdiff
from ptah.engines.sqlite import inspect as sqinspect
from ptah.engines.urls import DbUrl


def _violations(conn: sqlite3.Connection) -> dict[tuple[str, str], int]:
    """Foreign-key violations per (table, parent): rowids change in a rebuild, these do not."""
    counts: dict[tuple[str, str], int] = {}
    for table, _rowid, parent, _fkid in conn.execute("PRAGMA foreign_key_check").fetchall():
        counts[(table, parent)] = counts.get((table, parent), 0) + 1
    return counts


# The scratch holds the desired file's schema, not data: a bound on its size and on any
# one value stops a file (INSERT ... SELECT of a recursive query, zeroblob) from
# filling the memory of the process that plans (the CLI, the runner's Pod) before the
# load's deadline. 10,000 tables with their indexes take some 20 MB. The size is the
# engines' one (deadline.SCRATCH_BYTES); the bound on a value is SQLite's own.
VALUE_BYTES = 16 * 1024 * 1024


def _scratch() -> sqlite3.Connection:
    """An in-memory database with those bounds (the file cannot lift them: ``PRAGMA
    max_page_count = ...`` writes a setting and is refused)."""
    scratch = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    scratch.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, VALUE_BYTES)
    scratch.execute("PRAGMA temp_store = MEMORY")
    page_size = scratch.execute("PRAGMA page_size").fetchone()[0]
    scratch.execute(f"PRAGMA max_page_count = {deadline.SCRATCH_BYTES // page_size}")
    return scratch


# SQLite's own tables as the sqlite3 shell's ``.schema`` prints them: ``CREATE TABLE
# sqlite_sequence(name,seq);`` (once a table is AUTOINCREMENT) and ``sqlite_stat1``..4
# (once ANALYZE ran). SQLite makes them itself and refuses them in a file ("object name
# reserved for internal use"; the shell reports it and goes on): left out of the load,
# with a warning, so such a file plans as it loads.
_OWN_TABLE = re.compile(
    r"(?:\s|--[^\n]*(?:\n|$)|/\*.*?\*/)*CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?"
    r"(?:(?:main|\"main\")\s*\.\s*)?[\"'`\[]?(sqlite_sequence|sqlite_stat[1-4])[\"'`\]]?\s*\(",
    re.IGNORECASE | re.DOTALL,
)


def own_table(text: str) -> str | None:
    """The SQLite table a statement of the desired file creates when it is one of
    SQLite's own (:data:`_OWN_TABLE`), else None."""
    m = _OWN_TABLE.match(text)
    return m.group(1).lower() if m else None


class SqliteOps:
    def version_key(self, target: Target) -> str:
        return f"sqlite-{sqlite3.sqlite_version}"

    def inspect(self, target: Target) -> Schema:
        conn: sqlite3.Connection = target.connection
        conn.execute("BEGIN DEFERRED")
        try:
            conn.execute("PRAGMA query_only = ON")
            return sqinspect.inspect(conn)
        finally:
            conn.execute("PRAGMA query_only = OFF")
            conn.execute("ROLLBACK")

    def normalise(
        self,
        target: Target,
        desired_sql: str,
        dev_url: DbUrl | None,
        policy: SchemaPolicy = DEFAULT_POLICY,
    ) -> tuple[Schema, list[str]]:
        """Load the desired source into an in-memory scratch, statement by statement.

        SQLite's authorizer enforces the confinement rules a second time while
        it loads; a load error names the desired file's line. The load has the
        scratch's deadline (:mod:`ptah.engines.deadline`): a statement that runs
        on (an unbounded recursive query) is interrupted and named. Foreign keys
        whose parent key is not a primary key or unique (``foreign key
        mismatch``) are refused here: every write to such a table fails, the
        apply's own check included.
        """
        scratch = _scratch()
        warnings: list[str] = []
        try:
            scratch.set_authorizer(sqconfine.authorizer)
            with deadline.bounded(scratch.interrupt) as bound:
                for statement in confine.split(desired_sql, "sqlite"):
                    own = own_table(statement.text)
                    if own is not None:
                        warnings.append(
                            f"line {statement.line}: CREATE TABLE {own} left out: SQLite"
                            " makes its own table itself (the sqlite3 shell's .schema"
                            " prints it)"
                        )
                        continue
                    try:
                        for _row in scratch.execute(statement.text):
                            pass  # a SELECT's rows are run through, not held
                    except sqlite3.Error as exc:
                        why = str(exc)
                        if bound.expired:
                            why = f"still running after {bound.seconds:g} s (interrupted)"
                        raise DesiredSchemaInvalid(
                            f"desired schema does not load: line {statement.line}: {why}"
                            f" (in: {confine.excerpt(statement.text)})"
                        ) from None
            scratch.set_authorizer(None)
            try:
                scratch.execute("PRAGMA foreign_key_check").fetchall()
            except sqlite3.Error as exc:
                raise DesiredSchemaInvalid(
                    f"desired schema is not usable: {exc} (a foreign key's parent columns"
                    " must be its primary key or have a unique index)"
                ) from None
            return sqinspect.inspect(scratch), warnings
        finally:
            scratch.close()

    def diff(self, current: Schema, desired: Schema, online: Online = ONLINE) -> list[Statement]:
        """SQLite has one writer at a time and no online forms: ``online`` changes nothing."""
        return sqdiff.diff(current, desired)

    def execute(
        self,
        target: Target,
        statements: list[Statement],
        expected_before: str,
        timeouts: Timeouts,
        progress: Progress,
    ) -> None:
        """One IMMEDIATE transaction; foreign keys checked before commit, not per step.

        SQLite's documented procedure for changes ALTER TABLE cannot make (the
        "12 steps"): ``foreign_keys`` off before the transaction (dropping the
        old table would otherwise cascade, and the pragma cannot change inside
        a transaction), the rebuild, ``PRAGMA foreign_key_check`` before
        commit, then ``foreign_keys`` restored. A violation the change brings
        fails the apply and rolls it back; violations that were there before
        it (possible while foreign keys are off) are not the change's doing.

        ``legacy_alter_table`` is off when the plan starts (SQLite's default: the plan's
        statements mean what they say, whatever the connection had), the plan may set it
        (a rebuild's rename aside does, and sets it off again), and it is set back to
        what it was whatever happens.
        """
        conn: sqlite3.Connection = target.connection
        fk_on = conn.execute("PRAGMA foreign_keys").fetchone()[0]
        legacy = conn.execute("PRAGMA legacy_alter_table").fetchone()[0]
        conn.execute(f"PRAGMA busy_timeout = {int(timeouts.lock_seconds * 1000)}")
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute("PRAGMA legacy_alter_table = OFF")
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                actual = fingerprint(sqinspect.inspect(conn))
                if actual != expected_before:
                    raise DriftedError(actual)
                violations_before = _violations(conn)
                # The plan's statements under the scratch's rules too: a plan file is
                # input (a forged one could ATTACH, load an extension, write settings).
                conn.set_authorizer(sqconfine.plan_authorizer)
                try:
                    for stmt in statements:
                        progress.failed_index = progress.executed
                        conn.execute(stmt.sql)
                        progress.executed += 1
                finally:
                    conn.set_authorizer(None)
                progress.failed_index = None
                after = _violations(conn)
                bad = sorted(k for k, n in after.items() if n > violations_before.get(k, 0))
                if bad:
                    pairs = ", ".join(f"{t} -> {p}" for t, p in bad[:5])
                    raise sqlite3.IntegrityError(f"foreign key violations after apply: {pairs}")
                conn.execute("COMMIT")
                progress.committed = progress.executed
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        finally:
            conn.execute(f"PRAGMA legacy_alter_table = {'ON' if legacy else 'OFF'}")
            conn.execute(f"PRAGMA foreign_keys = {'ON' if fk_on else 'OFF'}")
