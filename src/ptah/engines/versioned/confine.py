"""What a versioned migration may not do: leave its target database.

A migration is the user's SQL run on the target itself, so unlike a desired file
(loaded into a scratch, :mod:`ptah.engines.confine`) it may do anything DDL and DML do
in that database: create, alter and drop its tables, views, routines, triggers, events
and sequences, change its rows, name it (``USE app``, ``app.t``, ``ALTER DATABASE``
with no name or its own). What it may not do is reach past it: another database
(``USE other``, ``other.t``, ``CREATE``/``DROP DATABASE``), the server's accounts and
privileges (on MariaDB they live in the server's ``mysql`` schema, not the target's),
server-wide variables, files on the server, plugins, replication and the server's
administration, dynamic SQL (which no reader can vouch for), and on SQLite another
database file (``ATTACH``, ``VACUUM INTO``, other schemas, file functions and the
pragmas that reach past the file).

Each statement of every file that is to run is read by the engine's confinement rules
(the same reading as a desired file's: quotes, comments, ``DELIMITER``, MariaDB's
versioned comments, routine bodies) before the run writes anything: the History
reading refuses such a directory (``StatementRefused``, the file, the line and why), and
so does ``migrate``, under its fence, before it creates the history table or runs its
first file. While a file runs, a second line holds: SQLite's authorizer, and on MariaDB
the session's database checked after each statement (``Session.run_migration_sql``).
Files already applied are not read again: they do not run.

The check reads quotes and backslashes as MariaDB's default ``sql_mode`` does; a
session whose mode reads them otherwise (``ANSI_QUOTES``, ``NO_BACKSLASH_ESCAPES`` and
the modes that hold them) would run other statements than the check read, so such a
session is refused whole.

On PostgreSQL the rules are the desired file's (:mod:`ptah.engines.postgres.confine`: whole
databases, roles, tablespaces, subscriptions, foreign servers, ``ALTER SYSTEM``, server
files and programs, libraries, cluster maintenance, role switching, the functions that
act on other sessions, files or servers, secrets of the cluster, the system catalogs and
schemas a plan's inspection reads by) less what a migration's own database allows
(``ALTER DATABASE`` itself ``SET``/``RESET``, grants and comments on it, transaction
control, ``VACUUM`` but a ``VACUUM FULL`` of everything, temporary objects). Dynamic SQL
is read where it can be: a routine's body may hold any (it is stored, not run), a ``DO``
block may ``EXECUTE`` a constant string only (judged as its statements), and a routine of
the pending files that runs dynamic SQL, code of another language or what the rules
refuse may be defined but not run while the migrations run (called, or reached by a
trigger, operator or cast of the files and a later query), across files: every pending
file is read together, in order. The session reads SQL as the check does
(``standard_conforming_strings`` on, UTF-8: set when the session begins), and after each
statement its role must still be the one it began with (``Session.run_migration_sql``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # The check's reader (sqlglot) loads when a file is to be read, not before: a run
    # with nothing pending pays nothing for it (tests/unit/test_startup_imports.py).
    from ptah.engines.confine import Rule, Word
    from ptah.engines.splitter import Statement
    from ptah.engines.urls import EngineName
    from ptah.engines.versioned.dialects import Session

REASON = "StatementRefused"


class MigrationRefused(Exception):
    """A migration file reaches outside its database; the message is one line."""

    reason = REASON


def _database(session: Session) -> str:
    rows = session.query("SELECT DATABASE()")
    return str(rows[0][0]) if rows and rows[0][0] is not None else ""


def _unsafe_modes(session: Session) -> list[str]:
    from ptah.engines.mysql.modes import SAFE_MODES

    rows = session.query("SELECT @@SESSION.sql_mode")
    modes = [m for m in str(rows[0][0] if rows else "").split(",") if m]
    return [m for m in modes if m.upper() not in SAFE_MODES]


def check(session: Session, files: Sequence[tuple[str, Sequence[Statement]]]) -> None:
    """Raise :class:`MigrationRefused` for the first statement of ``files`` (name and
    statements, in the order they would run) that reaches outside the session's
    database; nothing is written."""
    if not any(stmts for _, stmts in files):
        return
    if session.dialect == "postgres":
        _check_postgres(session, files)
        return
    if session.dialect == "mysql":
        from ptah.engines.mysql import confine as myconfine

        unsafe = _unsafe_modes(session)
        if unsafe:
            raise MigrationRefused(
                f"the session's sql_mode holds {','.join(unsafe)}, which reads quotes or"
                " backslashes otherwise than the check that keeps each migration in its"
                " database; run migrations on a session without it"
            )
        rule = myconfine.migration_rule(_database(session))
        for name, stmts in files:
            read = _read(name, stmts, "mysql", rule)
            found = myconfine.file_refusal(read)
            if found is not None:
                k, why = found
                line, text, _ = read[k]
                raise MigrationRefused(_message(name, line, text, why))
        return
    from ptah.engines.sqlite import confine as sqconfine

    for name, stmts in files:
        _read(name, stmts, "sqlite", sqconfine.migration_refusal)


def _check_postgres(session: Session, files: Sequence[tuple[str, Sequence[Statement]]]) -> None:
    """PostgreSQL: each statement by the rules of its own database, then every pending
    file read together, in order, for what runs while they run (a routine one file
    defines with dynamic SQL and a later one calls: :func:`.postgres.confine.load_time_refusal`)."""
    from ptah.engines.postgres import confine as pgconfine

    rows = session.query("SELECT current_database()")
    rule = pgconfine.migration_rule(str(rows[0][0]))
    read: list[tuple[int, str, list[Word]]] = []
    owner: list[str] = []
    for name, stmts in files:
        got = _read(name, stmts, "postgres", rule)
        read.extend(got)
        owner.extend(name for _ in got)
    found = pgconfine.load_time_refusal(read)
    if found is not None:
        k, why = found
        line, text, _ = read[k]
        raise MigrationRefused(_message(owner[k], line, text, pgconfine.migration_wording(why)))


def _read(
    name: str, stmts: Sequence[Statement], engine: EngineName, rule: Rule
) -> list[tuple[int, str, list[Word]]]:
    """Each statement's words, after refusing the first its own rule refuses."""
    from sqlglot.errors import SqlglotError

    from ptah.engines.confine import read_words

    out: list[tuple[int, str, list[Word]]] = []
    for stmt in stmts:
        try:
            words = read_words(stmt.text, engine)
        except SqlglotError:
            unread = "the statement cannot be read to be checked"
            raise MigrationRefused(_message(name, stmt.line, stmt.text, unread)) from None
        why = rule(words, stmt.text)
        if why:
            raise MigrationRefused(_message(name, stmt.line, stmt.text, why))
        out.append((stmt.line, stmt.text, words))
    return out


def _message(name: str, line: int, text: str, why: str) -> str:
    from ptah.engines.confine import excerpt

    return f"migration refused: {name} line {line}: {why}: {excerpt(text)}"
