"""Engine-specific SQL for migrations: the history table, transactions, locks, emptiness.

The engines package opens the connection (PostgreSQL and MariaDB in autocommit,
SQLite with ``isolation_level=None``); everything migration-specific lives here, so
the engines package knows nothing of history tables. Transactions are explicit
``BEGIN``/``COMMIT`` statements on all three, which keeps one code path and makes
the exact transaction boundaries visible in the SQL.

The lock a run holds against a second runner is not here: it is the realm's fence,
one home for schema Apply and Migrate alike (:mod:`ptah.engines.fence`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

Dialect = Literal["postgres", "mysql", "sqlite"]
HISTORY_TABLE = "ptah_schema_history"

_COLUMNS = (
    "version",
    "description",
    "script",
    "kind",
    "checksum",
    "transactional",
    "statements_total",
    "statements_applied",
    "statement_running",
    "installed_rank",
    "started_at",
    "finished_at",
    "error",
    "runner_version",
    "database_digest",
    "database_identity",
    "operation_id",
)
COLUMNS = _COLUMNS

_TS = {"postgres": "TIMESTAMPTZ", "mysql": "DATETIME(6)", "sqlite": "TEXT"}
_TEXT = {"postgres": "TEXT", "mysql": "LONGTEXT", "sqlite": "TEXT"}


def history_ddl(dialect: Dialect, table: str = HISTORY_TABLE) -> str:
    ts, text = _TS[dialect], _TEXT[dialect]
    return f"""CREATE TABLE IF NOT EXISTS {table} (
  version VARCHAR(64) NOT NULL PRIMARY KEY,
  description VARCHAR(512) NOT NULL,
  script VARCHAR(512) NOT NULL,
  kind VARCHAR(16) NOT NULL,
  checksum VARCHAR(64) NOT NULL,
  transactional SMALLINT NOT NULL,
  statements_total INTEGER NOT NULL,
  statements_applied INTEGER NOT NULL,
  statement_running INTEGER NULL,
  installed_rank INTEGER NOT NULL,
  started_at {ts} NOT NULL,
  finished_at {ts} NULL,
  error {text} NULL,
  runner_version VARCHAR(64) NOT NULL,
  database_digest VARCHAR(64) NOT NULL,
  database_identity {text} NOT NULL,
  operation_id VARCHAR(253) NOT NULL
)"""


class MigrationLeftDatabase(Exception):
    """A migration's statement left the session in another database than the target's."""


class MigrationSwitchedRole(Exception):
    """A migration's statement left the PostgreSQL session under another role, or reading
    SQL otherwise than the check that read the files."""


# How a PostgreSQL migration session reads SQL: as the check that read each file before it
# ran (ptah.engines.versioned.confine) reads it, whatever a role's or the database's
# defaults say (standard_conforming_strings off made a backslash escape a quote, and a
# string the check read hid a statement the server ran).
_PG_AS_CHECKED = ("SET standard_conforming_strings = on", "SET client_encoding = 'UTF8'")


class Session:
    """One migration session over an opened connection, speaking the engine's SQL.

    ``log`` takes every line the session has to say besides its results (a server's
    NOTICE, a rollback that failed): the runner's escapes and scrubs them (a migration
    that RAISEs a forged frame line prints an escaped one), ``ptah migrate``'s shows them
    to a person. The session never prints on its own.
    """

    def __init__(self, connection: Any, dialect: Dialect, log: Callable[[str], None]) -> None:
        self.conn = connection
        self.dialect: Dialect = dialect
        self.log = log
        self._target_database: str | None = None
        self._roles: tuple[Any, ...] | None = None
        self._history: str | None = None
        if dialect == "postgres":
            connection.autocommit = True
            connection.add_notice_handler(self._notice)
            for setting in _PG_AS_CHECKED:
                self.execute(setting)
        elif dialect == "mysql":
            connection.autocommit(True)
        else:
            connection.isolation_level = None

    # -- plumbing ---------------------------------------------------------------

    def _sql(self, sql: str) -> str:
        return sql.replace("%s", "?") if self.dialect == "sqlite" else sql

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if self.dialect == "sqlite":
            return [tuple(r) for r in self.conn.execute(self._sql(sql), params).fetchall()]
        with self.conn.cursor() as cur:
            cur.execute(sql, params or None)
            if cur.description is None:
                return []
            return [tuple(r) for r in cur.fetchall()]

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        self.query(sql, params)

    def run_migration_sql(self, text: str) -> None:
        """Run one statement of a migration verbatim (no parameter interpolation), held
        to its database a second time, past the check that read it beforehand
        (:mod:`ptah.engines.versioned.confine`): on SQLite by the library's authorizer,
        on MariaDB by its session's database, which must still be the target's after
        the statement (the history row is written there next), and by ``DROP FUNCTION``
        qualified with it (unqualified, it drops the server's loadable function of that
        name first); on PostgreSQL by its session's role, which must still be the one it
        began with (``SET ROLE``, ``SET SESSION AUTHORIZATION``, in a ``DO`` block or a
        routine's ``set_config`` too: nothing more runs under another role)."""
        if self.dialect == "postgres":
            self._run_postgres(text)
            return
        if self.dialect == "sqlite":
            from ptah.engines.sqlite.confine import migration_authorizer

            self.conn.set_authorizer(migration_authorizer)
            try:
                self.conn.execute(text).fetchall()
            finally:
                self.conn.set_authorizer(None)
            return
        if self.dialect == "mysql":
            from ptah.engines.mysql.confine import qualify_function_drops

            database = self._database()
            if database:
                text = qualify_function_drops(text, database)
        with self.conn.cursor() as cur:
            cur.execute(text)
            if self.dialect == "mysql":
                while True:
                    if cur.description is not None:
                        cur.fetchall()
                    if not cur.nextset():
                        break
        if self.dialect == "mysql":
            now = self.query("SELECT DATABASE()")
            target = self._database()
            if (now[0][0] if now else None) != (target or None):
                if target:  # back, so the history row is written in the target
                    self.execute(f"USE `{target.replace('`', '``')}`")
                raise MigrationLeftDatabase(
                    "the statement switched the session to another database"
                )

    def _run_postgres(self, text: str) -> None:
        who = (
            "SELECT current_user, session_user, current_setting('standard_conforming_strings'),"
            " current_setting('client_encoding')"
        )
        if self._roles is None:
            self._roles = self.query(who)[0]
        with self.conn.cursor() as cur:
            cur.execute(text)
        now = self.query(who)[0]
        if now[:2] != self._roles[:2]:
            for reset in ("RESET SESSION AUTHORIZATION", "RESET ROLE"):
                self.execute(reset)  # back, so the history row is written as the runner
            raise MigrationSwitchedRole("the statement switched the session to another role")
        if now[2:] != self._roles[2:]:
            for setting in _PG_AS_CHECKED:
                self.execute(setting)
            raise MigrationSwitchedRole(
                "the statement changed how the server reads the statements that follow"
            )

    def _database(self) -> str:
        """The MariaDB session's database when the session began (the target's)."""
        if self._target_database is None:
            rows = self.query("SELECT DATABASE()")
            self._target_database = str(rows[0][0]) if rows and rows[0][0] is not None else ""
        return self._target_database

    def now(self) -> Any:
        moment = datetime.now(UTC)
        if self.dialect == "postgres":
            return moment
        if self.dialect == "mysql":
            return moment.replace(tzinfo=None)
        return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")

    def begin(self, read_only: bool = False) -> None:
        if self.dialect == "postgres":
            self.execute("BEGIN READ ONLY" if read_only else "BEGIN")
        elif self.dialect == "mysql":
            self.execute("START TRANSACTION READ ONLY" if read_only else "START TRANSACTION")
        else:
            if read_only:
                self.execute("PRAGMA query_only = ON")
            self.execute("BEGIN")

    def begin_exclusive(self) -> None:
        """SQLite only: take the database's write lock now, waiting up to busy_timeout."""
        self.execute("BEGIN EXCLUSIVE")

    def commit(self) -> None:
        self.execute("COMMIT")
        if self.dialect == "sqlite":
            self.execute("PRAGMA query_only = OFF")

    def rollback(self) -> None:
        try:
            if self.dialect == "sqlite":
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                self.conn.execute("PRAGMA query_only = OFF")
            else:
                self.execute("ROLLBACK")
        except Exception as exc:  # the connection may be gone; the caller reports the cause
            self.log(f"rollback failed: {type(exc).__name__}")

    # -- history table ----------------------------------------------------------

    def _table(self) -> str:
        """The history table's name as the runner's statements write it: on PostgreSQL
        qualified with the schema the session's search_path found it in (or would create
        it in) before any migration ran, so that a migration's own ``SET search_path``
        does not move the runner's history rows (a table not found, the file rolled back)."""
        if self.dialect != "postgres":
            return HISTORY_TABLE
        if self._history is None:
            rows = self.query(
                "SELECT coalesce((SELECT relnamespace::regnamespace::text FROM pg_class"
                " WHERE oid = to_regclass(%s)), quote_ident(current_schema()))",
                (HISTORY_TABLE,),
            )
            schema = rows[0][0] if rows else None
            if schema is None:  # no schema to create it in: as before, unqualified
                return HISTORY_TABLE
            self._history = f"{schema}.{HISTORY_TABLE}"
        return self._history

    def history_exists(self) -> bool:
        if self.dialect == "postgres":
            rows = self.query("SELECT to_regclass(%s) IS NOT NULL", (self._table(),))
        elif self.dialect == "mysql":
            rows = self.query(
                "SELECT COUNT(*) FROM information_schema.tables"
                " WHERE table_schema = DATABASE() AND table_name = %s",
                (HISTORY_TABLE,),
            )
        else:
            rows = self.query(
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = %s",
                (HISTORY_TABLE,),
            )
        return bool(rows and rows[0][0])

    def create_history(self) -> None:
        self.execute(history_ddl(self.dialect, self._table()))

    def read_history(self) -> list[dict[str, Any]]:
        cols = ", ".join(COLUMNS)
        rows = self.query(f"SELECT {cols} FROM {self._table()} ORDER BY installed_rank")
        return [dict(zip(COLUMNS, row, strict=True)) for row in rows]

    def insert_history(self, values: dict[str, Any]) -> None:
        cols = ", ".join(COLUMNS)
        marks = ", ".join(["%s"] * len(COLUMNS))
        params = tuple(values[c] for c in COLUMNS)
        self.execute(f"INSERT INTO {self._table()} ({cols}) VALUES ({marks})", params)

    def update_history(self, version: str, **values: Any) -> None:
        sets = ", ".join(f"{k} = %s" for k in values)
        params = (*values.values(), version)
        self.execute(f"UPDATE {self._table()} SET {sets} WHERE version = %s", params)

    def delete_history(self, version: str) -> None:
        self.execute(f"DELETE FROM {self._table()} WHERE version = %s", (version,))

    def database_is_empty(self) -> bool:
        """No user objects besides the history table: a first run may start at version 1."""
        if self.dialect == "postgres":
            sql = """
SELECT (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE c.relkind IN ('r','v','m','S','f','p') AND c.relname <> %s
           AND n.nspname NOT IN ('pg_catalog','information_schema')
           AND n.nspname NOT LIKE 'pg\\_toast%%' AND n.nspname NOT LIKE 'pg\\_temp%%')
     + (SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
         WHERE n.nspname NOT IN ('pg_catalog','information_schema')
           AND NOT EXISTS (SELECT 1 FROM pg_depend d
                           WHERE d.objid = p.oid AND d.deptype = 'e'))"""
            rows = self.query(sql, (HISTORY_TABLE,))
        elif self.dialect == "mysql":
            rows = self.query(
                "SELECT (SELECT COUNT(*) FROM information_schema.tables"
                "  WHERE table_schema = DATABASE() AND table_name <> %s)"
                " + (SELECT COUNT(*) FROM information_schema.routines"
                "  WHERE routine_schema = DATABASE())",
                (HISTORY_TABLE,),
            )
        else:
            rows = self.query(
                "SELECT COUNT(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
                " AND name <> %s AND tbl_name <> %s",
                (HISTORY_TABLE, HISTORY_TABLE),
            )
        return not (rows and rows[0][0])

    def _notice(self, diag: Any) -> None:
        """PostgreSQL NOTICE/WARNING text, as one log line."""
        severity = getattr(diag, "severity", None) or "NOTICE"
        message = getattr(diag, "message_primary", None) or ""
        self.log(f"{severity}: {message}")
