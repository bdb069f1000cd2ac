"""MariaDB/MySQL planner hooks.

DDL commits implicitly on these engines, so apply runs statement by statement
and records progress; the fingerprint is checked immediately before the first
statement. The scratch is a temporary database on the dev server (or the
target's server), created and dropped around the load.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

import pymysql

from ptah.engines import confine, deadline
from ptah.engines.base import DesiredSchemaInvalid, EngineError, ScratchUnavailable, Target
from ptah.engines.model import (
    DEFAULT_POLICY,
    Online,
    Schema,
    SchemaPolicy,
    Statement,
    fingerprint,
    refuse_unmanaged,
)
from ptah.engines.mysql import bounds, datacheck, udf
from ptah.engines.mysql import confine as myconfine
from ptah.engines.mysql import diff as mydiff
from ptah.engines.mysql import ignore as myignore
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


# The client's own backstop past the server's bounds (a server without
# max_statement_time, a wait the server does not count).
_CLIENT_SECONDS = bounds.STATEMENT_SECONDS + bounds.LOCK_SECONDS + 10


def _scratch_session(url: DbUrl, database: str) -> Any:
    """A session on the scratch's server with the plan's bounds (:mod:`.bounds`)."""
    conn = connect(url, database=database, read_timeout=_CLIENT_SECONDS)
    try:
        bounds.bound(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def _bound_or_error(exc: pymysql.MySQLError) -> str | None:
    """A bound's reason for ``exc``; the client's own backstop (a lost answer) too."""
    why = bounds.bound_reached(exc)
    lost = isinstance(exc, pymysql.err.OperationalError) and exc.args[:1] == (2013,)
    if why is None and lost:  # the client stopped waiting (read_timeout)
        why = f"a statement ran longer than the plan's bound ({_CLIENT_SECONDS:g} s)"
    return why


def _drop_scratch(url: DbUrl, name: str, load_thread: int) -> None:
    """Drop the scratch; first end the load's session on the server, in case the client
    gave up on it while the server still runs its statement (its locks would hold the
    drop). Only the plan's own session, by its id."""
    fresh = _scratch_session(url, "")
    try:
        with contextlib.suppress(pymysql.MySQLError):  # already ended: the usual case
            _run_script(fresh, f"KILL CONNECTION {int(load_thread)}")
        _run_script(fresh, f"DROP DATABASE IF EXISTS `{name}`")
    finally:
        fresh.close()


def _scratch_bytes(admin: Any, name: str) -> int:
    """The scratch ``name``'s size on disk, read on ``admin`` (not the loading session).

    InnoDB's table sizes in information_schema.TABLES are its statistics, refreshed
    lazily (an INSERT ... SELECT of 370 MB showed 144 KB for ten seconds): its tablespace
    files' own sizes are read instead (INNODB_SYS_TABLESPACES on MariaDB,
    INNODB_TABLESPACES on MySQL: live, 0.2 ms; they need PROCESS), the other engines'
    (Aria, MyISAM, MEMORY) from TABLES, where they are exact. Without PROCESS, TABLES
    alone: InnoDB's part then counts once its statistics are refreshed.

    Not seen: a bulk insert into an empty table (InnoDB's and Aria's CREATE TABLE ...
    SELECT; InnoDB's INSERT ... SELECT with unique_checks and foreign_key_checks off)
    buffers its rows in the server's tmpdir, in unlinked files, until the statement
    ends; the statement's time bound (:data:`.bounds.STATEMENT_SECONDS`) bounds it, and
    what it wrote is seen once it ends."""
    prefix = f"{name}/"
    total = 0
    innodb = False
    with admin.cursor() as cur:
        for view in ("INNODB_SYS_TABLESPACES", "INNODB_TABLESPACES"):
            try:
                cur.execute(
                    f"SELECT COALESCE(SUM(FILE_SIZE), 0) FROM information_schema.{view}"
                    " WHERE LEFT(NAME, %s) = %s",
                    (len(prefix), prefix),
                )
            except pymysql.MySQLError:
                continue
            row = cur.fetchone()
            total += int(row[0]) if row else 0
            innodb = True
            break
        engines = " AND ENGINE <> 'InnoDB'" if innodb else ""
        cur.execute(
            "SELECT COALESCE(SUM(DATA_LENGTH + INDEX_LENGTH), 0) FROM information_schema.TABLES"
            f" WHERE TABLE_SCHEMA = %s{engines}",
            (name,),
        )
        row = cur.fetchone()
        total += int(row[0]) if row else 0
    return total


# How long reading the target's schema waits for a metadata lock another session holds
# (PostgreSQL's READ_LOCK_SECONDS): a CREATE TABLE ... SELECT or an ALTER running in
# the target's database held the plan for as long as it ran (the server's default wait
# is a day).
READ_LOCK_SECONDS = 10.0


@contextlib.contextmanager
def _read_lock_bound(url: DbUrl, thread: int, every: float = 0.5) -> Any:
    """While the block reads on session ``thread``, a session of its own ends the read
    (KILL QUERY, by its id) once it waited :data:`READ_LOCK_SECONDS` for a lock.

    Not ``lock_wait_timeout``: past it, information_schema gives a locked table's row
    with NULLs and a warning, and goes on; the inspection would read a schema without
    it. A statement ended this way fails, and the whole read with it. Yields a list
    that holds True once it ended one."""
    ended: list[bool] = []
    done = threading.Event()
    try:
        watcher = connect(url, database="", read_timeout=30)
    except pymysql.MySQLError:  # no second session (max_connections): read unwatched
        yield ended
        return

    def watch() -> None:
        # The wait is timed from the watcher's own sightings: PROCESSLIST's TIME counts
        # from the statement's start, so a read slow under load that then waits a moment
        # would count as a long wait.
        waiting: tuple[Any, ...] | None = None
        since = 0.0
        with watcher.cursor() as cur:
            while not done.wait(every):
                cur.execute(
                    "SELECT STATE, INFO FROM information_schema.PROCESSLIST WHERE ID = %s"
                    " AND STATE LIKE 'Waiting for%%lock%%'",
                    (thread,),
                )
                row = cur.fetchone()
                now = time.monotonic()
                if row is None:
                    waiting = None
                    continue
                if waiting != tuple(row):
                    waiting, since = tuple(row), now
                if now - since >= READ_LOCK_SECONDS and not done.is_set():
                    ended.append(True)
                    cur.execute(f"KILL QUERY {int(thread)}")

    def guarded() -> None:
        with contextlib.suppress(pymysql.MySQLError):
            watch()

    thread_ = threading.Thread(target=guarded, name="read-lock-bound", daemon=True)
    thread_.start()
    try:
        yield ended
    finally:
        done.set()
        thread_.join()
        watcher.close()


def strict(cur: Any) -> None:
    """Make the apply session's sql_mode strict (``STRICT_ALL_TABLES`` added to its
    own modes). A server whose default mode is not (``sql_mode=''``, common in older
    configurations) copies a value an ALTER cannot keep with a warning only: a used ENUM
    member removed became '', a NOT NULL column's NULLs 0, a shortened string was cut,
    in a plan that was not destructive. Strict, the server refuses such a value, and the
    data check (:mod:`.datacheck`, in this session) refuses the plan before anything
    runs; what strict mode still converts with a note only makes the plan destructive
    (:mod:`.lossy`). ``NO_AUTO_VALUE_ON_ZERO`` too, as a dump sets it: a column made
    AUTO_INCREMENT keeps its zeros (they were numbered, 0 became 1). The modes that
    strict mode makes refuse zero dates (which only refuse, never change a value) are
    left out: the plan's statements are what the scratch's load accepted under the
    file's own modes (a dump's ``DEFAULT '0000-00-00 00:00:00'``), and a table copy
    keeps the zero dates a table holds."""
    cur.execute("SELECT @@SESSION.sql_mode")
    row = cur.fetchone()
    now = [m for m in str(row[0] if row else "").split(",") if m]
    modes = [m for m in now if m.upper() not in _ZERO_DATE_MODES]
    for mode in ("STRICT_ALL_TABLES", "NO_AUTO_VALUE_ON_ZERO"):
        if mode not in (m.upper() for m in modes):
            modes.append(mode)
    if modes != now:
        cur.execute("SET SESSION sql_mode = %s", (",".join(modes),))


# Modes that refuse zero dates in strict mode (TRADITIONAL sets them again).
_ZERO_DATE_MODES = {"NO_ZERO_DATE", "NO_ZERO_IN_DATE", "TRADITIONAL"}


class MysqlOps:
    def version_key(self, target: Target) -> str:
        return f"mysql-{target.connection.get_server_info()}"

    def inspect(self, target: Target) -> Schema:
        """The target's schema, read in a read-only transaction; a read that waits
        :data:`READ_LOCK_SECONDS` for a lock ends the plan (``LockBusy``: transient)."""
        conn = target.connection
        with _read_lock_bound(target.url, int(conn.thread_id())) as ended:
            conn.query("START TRANSACTION READ ONLY")
            try:
                return myinspect.inspect(conn)
            except pymysql.MySQLError:
                if not ended:
                    raise
                raise EngineError(
                    f"reading the database's schema waited {READ_LOCK_SECONDS:g} s for a lock"
                    " another session holds (a long transaction, a running ALTER); nothing was"
                    " changed, and it is read again later",
                    reason="LockBusy",
                ) from None
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
        statements = confine.split(desired_sql, "mysql")
        conn = _scratch_session(url, "")
        load_thread = conn.thread_id()
        try:
            try:
                _run_script(conn, f"CREATE DATABASE `{name}`")
            except pymysql.MySQLError as exc:
                waited = _bound_or_error(exc)
                if waited:
                    raise ScratchUnavailable(
                        f"the temporary scratch database was not created: {waited}"
                    ) from None
                raise ScratchUnavailable(
                    f"user {url.user} may not create a temporary scratch database ({exc.args[0]});"
                    " give a dev database (PTAH_DEV_URL / --dev-url) or grant CREATE"
                ) from None
            try:
                try:
                    udf.refuse_udf_calls(conn, name, statements)
                    conn.select_db(name)
                    read_as_checked(conn)
                    _run_script(conn, "SET SESSION foreign_key_checks = 1")
                    self._load(conn, url, name, statements)
                finally:
                    # What the file left in its session ends with it: LOCK TABLES or a READ
                    # ONLY transaction kept the scratch from being dropped (left on the
                    # server), max_statement_time or sql_select_limit broke the inspection.
                    conn.close()
                fresh = _scratch_session(url, name)
                try:
                    desired = myinspect.inspect(fresh)
                except pymysql.MySQLError as exc:
                    waited = _bound_or_error(exc)
                    if waited is None:
                        raise
                    raise DesiredSchemaInvalid(
                        f"desired schema could not be inspected: {waited}"
                    ) from None
                finally:
                    fresh.close()
            finally:
                _drop_scratch(url, name, load_thread)
            refuse_unmanaged(desired, policy.ignore)
            return desired, []
        finally:
            if conn.open:
                conn.close()

    @staticmethod
    def _load(conn: Any, url: DbUrl, name: str, statements: list[SourceStatement]) -> None:
        """Run the file's statements in the bounded session, within the load's deadline
        and the scratch's size bound (:func:`deadline.scratch_limit`): a session of its
        own reads the scratch's size while the file loads and, past the bound, ends the
        loading session's statement (KILL QUERY, by its id)."""
        admin = _scratch_session(url, "")
        thread = int(conn.thread_id())
        try:
            # information_schema.TABLES waits for a table's metadata lock (a CREATE TABLE
            # ... SELECT holds it to its end): a short wait skips that table instead.
            _run_script(admin, "SET SESSION lock_wait_timeout = 1")

            limit = deadline.scratch_limit("mysql", len(statements))

            def grown() -> bool:
                return _scratch_bytes(admin, name) > limit

            def cancel() -> None:
                _run_script(admin, f"KILL QUERY {thread}")

            def end() -> None:  # a procedure's handler may catch KILL QUERY and go on
                _run_script(admin, f"KILL CONNECTION {thread}")

            with deadline.bounded(cancel, grown=grown, end=end, limit=limit) as bound:
                MysqlOps._load_bounded(conn, url, name, statements, bound)
        finally:
            admin.close()

    @staticmethod
    def _load_bounded(
        conn: Any,
        url: DbUrl,
        name: str,
        statements: list[SourceStatement],
        bound: deadline.Deadline,
    ) -> None:
        # Between statements: each is bounded by the session (bounds.STATEMENT_SECONDS).
        ends = time.monotonic() + deadline.LOAD_SECONDS
        previous: SourceStatement | None = None
        for statement in statements:
            if bound.outgrown:  # past it between statements: the one before grew it
                raise MysqlOps._outgrown(previous or statement, url, bound.limit)
            if time.monotonic() > ends:
                raise MysqlOps._late(statement)
            try:
                # DROP FUNCTION f: the scratch's f, never the server's UDF f; an event
                # never fires (the scheduler would run it beyond the plan).
                text = myconfine.qualify_function_drops(statement.text, name)
                _run_script(conn, myconfine.disable_events(text))
            except pymysql.MySQLError as exc:
                if bound.outgrown:
                    raise MysqlOps._outgrown(statement, url, bound.limit) from None
                if bound.expired:  # cancelled by the load's deadline (KILL QUERY)
                    raise MysqlOps._late(statement) from None
                waited = _bound_or_error(exc)
                message = (
                    f"desired schema does not load: line {statement.line}: {waited}"
                    f" (in: {confine.excerpt(statement.text)})"
                    if waited
                    else load_error(exc, name, statement)
                )
                raise DesiredSchemaInvalid(scrub(message, *url.secrets)) from None
            previous = statement
        if bound.outgrown:
            raise MysqlOps._outgrown(previous, url, bound.limit)
        bound.refuse_if_grown()

    @staticmethod
    def _late(statement: SourceStatement) -> DesiredSchemaInvalid:
        return DesiredSchemaInvalid(
            f"desired schema does not load: line {statement.line}: the load ran"
            f" longer than the plan's bound ({deadline.LOAD_SECONDS:g} s)"
            f" (in: {confine.excerpt(statement.text)})"
        )

    @staticmethod
    def _outgrown(
        statement: SourceStatement | None, url: DbUrl, limit: int
    ) -> DesiredSchemaInvalid:
        where = f" (line {statement.line} of the desired file)" if statement else ""
        return DesiredSchemaInvalid(scrub(deadline.past_size(where, limit), *url.secrets))

    def diff(self, current: Schema, desired: Schema, online: Online = ONLINE) -> list[Statement]:
        myignore.check_held(current, desired)
        return mydiff.diff(current, desired)

    def split_ignored(
        self, schema: Schema, covers: Callable[[str], str | None]
    ) -> tuple[Schema, Schema, list[str]]:
        return myignore.split(schema, covers)

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
            lambda: _scratch_session(url, ""), current, statements, online
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
            strict(cur)
        current = self.inspect(target)
        actual = fingerprint(current)
        if actual != expected_before:
            raise DriftedError(actual)
        # What the target's data would fail: before anything runs, not part-way.
        datacheck.refuse_data_failures(conn, current, statements)
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
