"""Normalise desired PostgreSQL DDL: load it into a scratch database and inspect it.

Nothing of the desired file runs before the confinement check passed it
(:mod:`ptah.engines.confine`): a file that acts outside the database is refused, and
the statements it refuses run nowhere. The ownership policy and transaction control are
applied next (:mod:`.prepare`). The scratch is either the dev database given by its
own URL (checked whole first, then loaded inside a transaction that is always rolled
back, so it is left as found) or a temporary database created on the target's server
and dropped afterwards, which needs a role that may create databases. A temporary
scratch loads the file part by part as the check lets each part through, while the
check reads the next (:func:`_load_checked`): a refusal stops the load, and the scratch
is dropped with the part it ran. Each part goes to the server in one simple-protocol
round trip; only when it fails without a position is it replayed statement by
statement (rolled back) to name the line.

A temporary database is created while the planner confines the source (empty, it runs
nothing of it: :class:`Reserved`) and dropped afterwards (on a thread of its own, beside the
plan's diff: the planner waits for it, through :func:`settle`, before it returns), so
nothing needs rolling back there (the loading transaction is rolled back on the drop's
thread, off the plan's path: ending a load of thousands of relations truncates each
one's files); a large file (more than ``BATCH`` statements) is
loaded into it in committed batches, because one transaction holds a lock on every
relation it creates until it ends, and ten thousand tables with their indexes outgrow
the server's lock table (``max_locks_per_transaction``); so is a file that adds a value
to an enum, committed after each addition (:meth:`prepare.Load.commits`), so the rest
of the file may use the value, as with psql. A dev database keeps the single rolled-back
transaction (it must be left as found).

After the load, the census of the scratch (:mod:`ptah.engines.postgres.graph`)
must be empty: an object the planner does not manage stops the plan
(``Unmanaged``), naming each object, unless the policy ignores its kind.
"""

from __future__ import annotations

import bisect
import contextlib
import queue
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from ptah.engines import confine, deadline
from ptah.engines.base import DesiredSchemaInvalid, ScratchUnavailable
from ptah.engines.model import Schema, refuse_unmanaged
from ptah.engines.postgres import inspect, prepare
from ptah.engines.postgres.target import connect
from ptah.engines.urls import DbUrl, scrub

# A file of more statements than this loads into a temporary database in committed
# batches (smaller ones in one transaction, as a dev database's).
BATCH = 2000
# Statements per committed batch (at most BATCH). The batch's transaction holds a lock on
# every relation it made, and the server scans all of a transaction's locks at the end of
# each statement of it (the portal's release), so a batch's cost grows with its square:
# at 10,000 tables batches of 2,000 cost the server 14.5 s of CPU, of 500 11.9 s; at
# 1,000 tables 1.3 s against 1.1 s. Smaller batches gain no more (each commit costs):
# batches of 100 against 500 on bench/plan.py's 1,000-table file, alternating, gave the
# loading backend 3.26-4.44 s of CPU against 3.63-4.59 s at load ~8, then 3.50-4.54 s
# against 3.69-4.45 s at load ~11, and whole plans at load ~11-12 spent more with 100:
# no difference the machine's noise leaves standing.
CHUNK = 500
# Statements of the first part the check lets through to the load: few, so that the
# server starts loading at once (the first 500 of a 1,000-table file cost the check
# 0.07 s on an idle machine, 0.27 s on a loaded one, before anything was sent).
FIRST = 64


def _locate(conn: Any, load: prepare.Load, bound: deadline.Deadline) -> int | None:
    """The line of the first statement that fails when the file is replayed one by one.

    When the load ran past its bound, the bound's cancels stop and each statement of the
    replay gets a timeout of its own instead, set again before each (the file may set
    another): the one that computes or waits fails there, and none of the quick ones
    before it is cancelled by a cancel that happened to arrive while it ran."""
    slow = None
    if bound.outgrown and bound.grown():  # past the size still (a committed part): no
        return None  # replay can tell which statement grew it
    if bound.expired:
        bound.disarm()
        slow = f"SET LOCAL statement_timeout = '{int(min(bound.seconds, 5.0) * 1000)}ms'"
    with conn.transaction(force_rollback=True), conn.cursor() as cur:
        cur.execute("SET LOCAL lock_timeout = '10s'")
        for stmt in load.statements:
            try:
                with conn.transaction():
                    if slow:
                        cur.execute(slow)
                    cur.execute(prepare.loadable(stmt.text).encode())
            except psycopg.Error:
                return stmt.line
    return None


def _failed(
    failure: psycopg.Error, line: int | None, bound: deadline.Deadline
) -> DesiredSchemaInvalid:
    where = f" (line {line} of the desired file)" if line else ""
    if bound.outgrown:
        return DesiredSchemaInvalid(deadline.past_size(where, bound.limit), line)
    if bound.expired:
        return DesiredSchemaInvalid(
            f"desired schema did not load within {bound.seconds:g} s{where}: a statement"
            " computes or waits while the file loads, and a desired file holds definitions",
            line,
        )
    first = str(failure).strip().splitlines()[0] if str(failure).strip() else "error"
    return DesiredSchemaInvalid(f"desired schema does not load{where}: {first}", line)


def _bound(
    conn: Any,
    grown: Callable[[], bool] | None = None,
    end: Callable[[], None] | None = None,
    load: prepare.Load | None = None,
) -> contextlib.AbstractContextManager[deadline.Deadline]:
    """The load's bounds (:mod:`ptah.engines.deadline`) on the session ``conn``: its time,
    and its scratch's size when ``grown`` reads it (:func:`_grown`); ``end`` ends the
    session if it ignores the cancels (:func:`_ender`)."""
    limit = _limit(load) if load is not None else None
    return deadline.bounded(
        lambda: conn.cancel_safe(timeout=5.0), grown=grown, end=end, limit=limit
    )


def _limit(load: prepare.Load) -> int:
    """The scratch's size bound for ``load`` (:func:`ptah.engines.deadline.scratch_limit`)."""
    return deadline.scratch_limit("postgres", len(load.statements))


def _ender(admin: Any, pid: int) -> Callable[[], None]:
    """Ends the loading backend ``pid`` from ``admin`` (its own role's: no privilege)."""
    return lambda: admin.execute("SELECT pg_terminate_backend(%s)", (pid,))


def _replay(conn: Any, load: prepare.Load, bound: deadline.Deadline) -> int | None:
    """:func:`_locate` once the failed transaction is rolled back."""
    conn.rollback()
    return _locate(conn, load, bound)


def _where(conn: Any, locate: Callable[[], int | None]) -> int | None:
    """The failing line, or None once the session was ended (nothing left to replay on)."""
    if conn.closed:
        return None
    try:
        return locate()
    except psycopg.Error:
        if conn.closed:
            return None
        raise


def _grown(admin: Any, name: str, pid: int, limit: int) -> Callable[[], bool]:
    """Whether the temporary scratch ``name`` is past ``limit`` bytes, read
    on ``admin`` (a session of its own, idle while the file loads).

    ``pg_database_size`` sums the database's files in every tablespace, which grow as
    rows are written, committed or not, whatever wrote them (a CTAS, an INSERT ...
    SELECT, a routine or a trigger of the file, a materialized view, the session's
    temporary tables); it costs a directory listing (about 1 ms for 1,000 tables). The
    loading backend ``pid``'s temporary files count too (a set-returning function's
    rows are spilled there before a CTAS writes them: a billion of them fill the disk
    as well), where the role may list them (``pg_ls_tmpdir``: a superuser or pg_monitor);
    else the database's size alone is read."""
    spill = [True]

    def grown() -> bool:
        row = admin.execute("SELECT pg_database_size(%s)", (name,)).fetchone()
        size = int(row[0]) if row else 0
        if spill[0] and size <= limit:
            try:
                row = admin.execute(
                    "SELECT coalesce(sum(size), 0) FROM pg_ls_tmpdir() WHERE name LIKE %s",
                    (f"pgsql_tmp{int(pid)}.%",),
                ).fetchone()
                size += int(row[0]) if row else 0
            except psycopg.errors.InsufficientPrivilege:
                spill[0] = False
        return size > limit

    return grown


def _inspect(
    conn: Any, bound: deadline.Deadline, committed: bool, helper: _Helper | None = None
) -> Schema:
    """Inspect the loaded scratch (``committed``: in autocommit, so in transactions of
    its own); cancelled past the bound, the plan is refused as a load past it is.

    ``helper``: a second session of the scratch (committed only: it sees what is
    committed), which reads some of the inspection's queries while ``conn`` reads the
    others (:class:`inspect.ReadAhead`): the server has the two cores the load left
    idle, and the inspection after the load is on the plan's path."""
    try:
        if not committed:
            schema = inspect.inspect(conn)
            inspect.script_comments(conn, schema)
            return schema
        with conn.transaction():
            schema = inspect.inspect(conn, helper.session() if helper is not None else None)
        with conn.transaction(force_rollback=True):
            inspect.script_comments(conn, schema)
        return schema
    except psycopg.Error as exc:
        if not (bound.expired or bound.outgrown):
            raise
        raise _failed(exc, None, bound) from None


# What a committed part is sent between (see :class:`_Loader`); a position the server
# reports in it is shifted by the opening's length.
_OPEN = "BEGIN;\n"
_CLOSE = "\n;COMMIT"


class _Loader:
    """Sends the statements the check let through to a temporary scratch, on a thread of
    its own: the server loads one part of the file while the client checks the next
    (:class:`ptah.engines.confine.Check`). Nothing is sent before :meth:`allow` names it.

    ``committed``: each part of at most ``size`` statements is a transaction of its own
    (``conn`` is in autocommit; see :data:`BATCH`); else all run in the connection's one
    transaction, which the caller ends by rolling it back."""

    def __init__(self, conn: Any, load: prepare.Load, committed: bool, size: int) -> None:
        self.conn = conn
        self.load = load
        self.committed = committed
        self.size = size
        # Where a committed part must end besides its size (prepare.Load.commits).
        self.commits = load.commits() if committed else []
        self.sent = 0  # statements run so far
        # The server's error and the part it failed in (its positions are that part's).
        self.failure: tuple[psycopg.Error, prepare.Load] | None = None
        self._error: BaseException | None = None
        self._allowed: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="scratch-load")
        self._thread.start()

    def allow(self, count: int) -> None:
        """The first ``count`` statements passed the check: they may run."""
        self._allowed.put(count)

    def finish(self) -> None:
        """Wait until every statement allowed has run (or one failed)."""
        self._allowed.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        """Run nothing more; what runs now is cancelled (the scratch is dropped after)."""
        self._stopped = True
        self._allowed.put(None)
        if self._thread.is_alive():
            with contextlib.suppress(Exception):
                self.conn.cancel_safe()
        self._thread.join()

    def _run(self) -> None:
        try:
            with self.conn.cursor() as cur:
                scope = "" if self.committed else "LOCAL "
                cur.execute(f"SET {scope}lock_timeout = '10s'")
                while (count := self._allowed.get()) is not None:
                    while self.sent < count and not self._stopped:
                        last = min(self.sent + self.size, count)
                        k = bisect.bisect_right(self.commits, self.sent)
                        if k < len(self.commits):
                            last = min(last, self.commits[k])
                        part = self.load.part(self.sent, last)
                        try:
                            # One simple-query round trip each (a committed part opens and
                            # ends its transaction in it: a BEGIN and a COMMIT of their own
                            # were two more, each waiting for the interpreter).
                            cur.execute(
                                f"{_OPEN}{part.sql}{_CLOSE}".encode()
                                if self.committed
                                else part.sql.encode()
                            )
                        except psycopg.Error as exc:
                            if self.committed:  # the part's transaction, failed, is ended
                                with contextlib.suppress(psycopg.Error):
                                    cur.execute("ROLLBACK")
                            self.failure = (exc, part)
                            return
                        self.sent = last
        except BaseException as exc:  # raised by finish(), on the plan's own thread
            self._error = exc


def _load_checked(
    conn: Any,
    load: prepare.Load,
    checking: confine.Check | None,
    committed: bool,
    seconds: dict[str, float],
    confined: Callable[[], None],
    grown: Callable[[], bool] | None = None,
    end: Callable[[], None] | None = None,
    helper: _Helper | None = None,
) -> Schema:
    """Load the file into a temporary scratch as the check lets its statements through,
    then inspect it; ``grown``: the scratch's size bound (:func:`_grown`); ``end``: ends
    the loading session if it ignores the bounds' cancels (:func:`_ender`); ``helper``:
    a second session the inspection may read with (:func:`_inspect`).

    ``checking``: the source's check, not run yet (None: checked already). It reads the
    file in growing prefixes (the first :data:`FIRST` statements, then half as many
    again as it has read each time: the file rules read the whole prefix, so they read
    a few times the file in all, never its square); each prefix's statements are handed
    to the loader once it passed, and the server loads them while the next prefix is
    read. A refusal stops the load (the caller drops the scratch); ``confined`` is
    called once the whole file passed. A failure of the load is reported after the
    whole file is checked, as when the check came first: a refusal anywhere in the file
    is the plan's outcome before any load error."""
    size = min(BATCH, CHUNK)
    with _bound(conn, grown, end, load) as bound:
        t0 = time.perf_counter()
        loader = _Loader(conn, load, committed, size)
        try:
            if checking is None:
                loader.allow(len(load.statements))
            else:
                _check_in_prefixes(checking, load, loader, size, seconds)
            if loader.failure is None:
                confined()
        except BaseException:
            loader.stop()
            raise
        loader.finish()
        t1 = time.perf_counter()
        if loader.failure is not None:
            exc, part = loader.failure
            position = getattr(exc.diag, "statement_position", None)
            at = int(position) - (len(_OPEN) if committed else 0) if position else 0
            line: int | None
            if at > 0:
                line = part.line_of(at)
            elif committed:  # the parts before it are committed: replay this one alone
                line = _where(conn, lambda: _locate(conn, part, bound))
            else:  # the transaction is gone: replay the file up to the part that failed
                upto = load.part(0, loader.sent + len(part.statements))
                line = _where(conn, lambda: _replay(conn, upto, bound))
            raise _failed(exc, line, bound)
        bound.refuse_if_grown()
        schema = _inspect(conn, bound, committed, helper)
    seconds.update(load=t1 - t0, inspect=time.perf_counter() - t1)
    return schema


def _check_in_prefixes(
    checking: confine.Check,
    load: prepare.Load,
    loader: _Loader,
    size: int,
    seconds: dict[str, float],
) -> None:
    """Check the source in growing prefixes, allowing the loader each one that passed
    (counted in the load's statements: those :mod:`.prepare` kept)."""
    index = {id(s): i for i, s in enumerate(checking.statements)}
    kept = [index[id(s)] for s in load.statements]  # each loaded statement's place
    total = len(checking.statements)
    spent = 0.0
    first = min(FIRST, size)
    count = first
    while True:
        count = min(count, total)
        tc = time.perf_counter()
        checking.upto(count)
        spent += time.perf_counter() - tc
        loader.allow(bisect.bisect_left(kept, count))
        if count == total:
            break
        count += max(first, count // 2)
    seconds["confine"] = spent


def _load_and_inspect(
    conn: Any,
    load: prepare.Load,
    seconds: dict[str, float],
    grown: Callable[[], bool] | None = None,
    end: Callable[[], None] | None = None,
) -> Schema:
    """Load the file and inspect it in the connection's open transaction (not in
    autocommit), which the caller ends by rolling it back.

    On success the transaction is left open: a temporary scratch hands it to the thread
    that drops the database (rolling back a load of thousands of relations truncates
    each one's files, which the plan need not wait for). On failure it is rolled back
    here, the failing line located, and :class:`DesiredSchemaInvalid` raised. ``grown``:
    the database's size bound (:func:`_grown`)."""
    with _bound(conn, grown, end, load) as bound, conn.cursor() as cur:
        cur.execute("SET LOCAL lock_timeout = '10s'")
        t0 = time.perf_counter()
        try:
            with conn.transaction():  # a savepoint: the failure is caught, not the end
                cur.execute(load.sql.encode())  # no parameters: one simple-query round trip
        except psycopg.Error as exc:
            position = getattr(exc.diag, "statement_position", None)
            if position:
                conn.rollback()
                line: int | None = load.line_of(int(position))
            else:
                line = _where(conn, lambda: _replay(conn, load, bound))
            raise _failed(exc, line, bound) from None
        t1 = time.perf_counter()
        bound.refuse_if_grown()
        schema = _inspect(conn, bound, False)
    seconds.update(load=t1 - t0, inspect=time.perf_counter() - t1)
    return schema


# The lexing the confinement check reads a desired file with: the server's default
# (standard_conforming_strings on, UTF-8 from the client). A role or a database may set
# other defaults (ALTER ROLE ... SET standard_conforming_strings = off): then
# "SELECT 'a\\''; COPY ... TO PROGRAM ...; -- '" is one string to the check and a program
# run to the server. The file itself may only set values that read alike (confine.py).
AS_CHECKED = "-c standard_conforming_strings=on -c client_encoding=UTF8"


# A temporary scratch's loading session does not wait for its commits to reach the disk:
# the database is dropped after the plan, and a crash loses nothing a plan needs. Nor does
# it plan parallel index builds (each CREATE INDEX otherwise runs the planner to size its
# workers: 3% of a 1,000-table load, for tables that are all empty); neither changes
# what the inspection reads.
SCRATCH_ONLY = " -c synchronous_commit=off -c max_parallel_maintenance_workers=0"


def _load_connection(
    url: DbUrl, database: str | None = None, autocommit: bool = False, scratch: bool = False
) -> Any:
    """A session that loads the desired file: it reads SQL as the check read it."""
    options = AS_CHECKED + (SCRATCH_ONLY if scratch else "")
    return connect(url, database=database, autocommit=autocommit, options=options)


def _load_dev(dev_url: DbUrl, load: prepare.Load, seconds: dict[str, float]) -> Schema:
    """Load into the dev database given by its URL, in one transaction always rolled
    back: the database is left as found. It must be empty to begin with. Its size is
    bounded as a temporary scratch's is (read on a session of its own): a dev server's
    disk is someone's too."""
    conn = _load_connection(dev_url)
    admin: Any = None
    try:
        # The emptiness check runs in a savepoint rolled back after it, so that the
        # inspection's SET LOCAL search_path = pg_catalog does not reach the load (where
        # every unqualified name would be created in pg_catalog).
        with conn.transaction(force_rollback=True):
            before = inspect.inspect(conn)
        if before["table"] or before["view"] or before["enum"] or before["function"]:
            raise ScratchUnavailable(
                "the dev database is not empty; give an empty database as the dev URL"
            )
        admin = connect(dev_url, autocommit=True)
        name = conn.info.dbname
        pid = conn.info.backend_pid
        grown, end = _grown(admin, name, pid, _limit(load)), _ender(admin, pid)
        return _load_and_inspect(conn, load, seconds, grown, end)
    finally:
        with contextlib.suppress(psycopg.Error):
            conn.rollback()
        conn.close()
        if admin is not None:
            admin.close()


def normalise(
    target_url: DbUrl,
    desired_sql: str,
    dev_url: DbUrl | None,
    ownership: str = "ignore",
    ignore: Sequence[str] = (),
    reserved: Reserved | None = None,
    confined: Callable[[], None] | None = None,
) -> tuple[Schema, list[str]]:
    """The inspected form of ``desired_sql`` and warnings; refuses what must not run.

    ``reserved``: the temporary scratch created while the source was confined (see
    :class:`Reserved`); without it, and without a dev database, one is created here.
    ``confined``: None when the source was checked already; else it is checked here
    (:class:`ptah.engines.confine.Check`), and ``confined`` is called once all of it
    passed. A temporary scratch then loads each part of the file once the check let it
    through, while the check reads the next (:func:`_load_checked`); a dev database is
    loaded only after the whole check."""
    t0 = time.perf_counter()
    checking: confine.Check | None = None
    try:
        if confined is not None:
            checking = confine.Check(desired_sql, "postgres")
            statements = checking.statements
        else:
            statements = confine.split(desired_sql, "postgres")
        try:
            load = prepare.prepare(statements, ownership)
        except DesiredSchemaInvalid:
            if checking is not None:  # a refusal comes first, as when checked first
                checking.upto(len(statements))
            raise
        if checking is not None and dev_url is not None:  # left as found: nothing to stop
            checking.upto(len(statements))
            checking = None
            confined()  # type: ignore[misc]
    except BaseException:
        if reserved is not None:  # created for this load, which never comes
            reserved.release()
        raise
    seconds: dict[str, float] = {"prepare": time.perf_counter() - t0}
    secrets_ = (*target_url.secrets, *(dev_url.secrets if dev_url else ()))
    try:
        if dev_url is not None:
            schema = _load_dev(dev_url, load, seconds)
        else:
            schema = _temporary_database(
                target_url, load, seconds, reserved, checking, confined or (lambda: None)
            )
    except psycopg.Error as exc:
        raise DesiredSchemaInvalid(
            scrub(f"desired schema does not load: {exc}", *secrets_)
        ) from None
    except DesiredSchemaInvalid as exc:
        raise DesiredSchemaInvalid(scrub(str(exc), *secrets_)) from None
    schema["_meta"]["ownership"] = ownership
    # Where the scratch's time went (bench/plan.py prints it; fingerprints skip "_meta").
    schema["_meta"]["scratchSeconds"] = seconds
    refuse_unmanaged(schema, ignore)
    return schema, list(load.warnings)


def _temporary_database(
    url: DbUrl,
    load: prepare.Load,
    seconds: dict[str, float],
    reserved: Reserved | None,
    checking: confine.Check | None,
    confined: Callable[[], None],
) -> Schema:
    conn: Any = None
    helper: _Helper | None = None
    try:
        if reserved is not None:
            admin, name, conn = reserved.take(seconds)
        else:
            name = "ptah_scratch_" + secrets.token_hex(6)
            admin = _create(url, name, seconds)
    except BaseException:
        if checking is not None:  # a refusal comes first, as when checked first
            checking.upto(len(checking.statements))
        raise
    try:
        if conn is None:
            conn = _load_connection(url, database=name, scratch=True)
        # Committed parts for a large file, or one that uses an enum value it adds.
        committed = len(load.statements) > BATCH or bool(load.commits())
        if committed:
            conn.autocommit = True  # a fresh session: no transaction open yet
            helper = _Helper(url, name)  # opened while the file loads
        pid = conn.info.backend_pid
        grown, end = _grown(admin, name, pid, _limit(load)), _ender(admin, pid)
        return _load_checked(conn, load, checking, committed, seconds, confined, grown, end, helper)
    finally:
        if helper is not None:
            helper.close()  # idle by now (the inspection is over), or never used
        _drop_behind(admin, name, seconds, conn)


class _Helper:
    """A second session of a temporary scratch, opened on a thread of its own while the
    file loads, for the inspection after it (:func:`_inspect`). It only speeds the
    inspection: one that could not be opened (the role's or the server's connection
    limit) leaves the inspection to the loading session alone."""

    def __init__(self, url: DbUrl, name: str) -> None:
        self._conn: Any = None
        self._thread = threading.Thread(target=self._open, args=(url, name), name=f"helper-{name}")
        self._thread.start()

    def _open(self, url: DbUrl, name: str) -> None:
        with contextlib.suppress(Exception):
            self._conn = _load_connection(url, database=name, autocommit=True, scratch=True)

    def session(self) -> Any:
        """The session, once opened; None if it could not be."""
        self._thread.join()
        return self._conn

    def close(self) -> None:
        self._thread.join()
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()


def _create(url: DbUrl, name: str, seconds: dict[str, float]) -> Any:
    """Create the empty scratch ``name``: the admin connection that drops it after."""
    admin = connect(url, autocommit=True)
    try:
        row = admin.execute(
            "SELECT rolcreatedb OR rolsuper, current_user FROM pg_roles"
            " WHERE rolname = current_user"
        ).fetchone()
        if not row or not row[0]:
            role = row[1] if row else "the target's role"
            raise ScratchUnavailable(
                f"role {role} may not create a temporary scratch database on the target's server;"
                " give a dev database (PTAH_DEV_URL / --dev-url) or grant CREATEDB"
            )
        t0 = time.perf_counter()
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
        seconds["create"] = time.perf_counter() - t0
    except BaseException:
        admin.close()
        raise
    return admin


class Reserved:
    """A temporary scratch created on a thread of its own while the planner confines the
    desired source: an empty database runs nothing of the source, and creating one (a
    copy of ``template0``) costs the server about as long as the check costs the client.
    The session that will load it is opened there too (an idle session, nothing sent: a
    connection costs 20-50 ms, off the plan's path). One plan owns it: its load takes it
    (:meth:`take`); one never taken (the source was refused, or the plan failed before
    its load) is dropped by :meth:`release`, and its creation's own failure is then not
    the plan's to report."""

    def __init__(self, url: DbUrl) -> None:
        self.name = "ptah_scratch_" + secrets.token_hex(6)
        self.seconds: dict[str, float] = {}
        self._admin: Any = None
        self._loader: Any = None
        self._error: BaseException | None = None
        self._taken = False
        self._thread = threading.Thread(
            target=self._create, args=(url,), name=f"create-{self.name}"
        )
        self._thread.start()

    def _create(self, url: DbUrl) -> None:
        try:
            self._admin = _create(url, self.name, self.seconds)
            self._loader = _load_connection(url, database=self.name, scratch=True)
        except BaseException as exc:  # raised by take(), on the plan's own thread
            self._error = exc

    def take(self, seconds: dict[str, float]) -> tuple[Any, str, Any]:
        """The admin connection, the name and the loading session, once created; its
        creation's error (the database, if made, is then dropped behind)."""
        self._thread.join()
        if self._taken:
            raise ScratchUnavailable(f"the scratch database {self.name} was taken already")
        self._taken = True
        seconds.update(self.seconds)
        if self._error is not None:
            if self._admin is not None:  # created, but its session could not be opened
                _drop_behind(self._admin, self.name, self.seconds)
            raise self._error
        return self._admin, self.name, self._loader

    def release(self) -> None:
        """Drop it behind (:func:`settle` waits for that), if no load took it."""
        self._thread.join()
        if not self._taken:
            self._taken = True
            if self._admin is not None:
                _drop_behind(self._admin, self.name, self.seconds, self._loader)


# Scratch databases being dropped behind the plan (see :func:`settle`).
_dropping: list[threading.Thread] = []
_failed_drops: list[ScratchUnavailable] = []
_dropping_lock = threading.Lock()


def _drop_behind(admin: Any, name: str, seconds: dict[str, float], loaded: Any = None) -> None:
    """Drop the scratch on its own thread: dropping a database waits for a checkpoint
    (and, at 10,000 tables, for tens of thousands of files to go), which the plan need
    not wait for while it still diffs and fingerprints. :func:`settle` joins it.

    ``loaded``: the connection that loaded the scratch, its transaction maybe still
    open: it is rolled back and closed first, here (the drop waits for its backend)."""

    def drop() -> None:
        t0 = time.perf_counter()
        if loaded is not None:
            with contextlib.suppress(psycopg.Error):
                loaded.rollback()  # a failure is the drop's to clean up (FORCE)
            loaded.close()
        try:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        except psycopg.Error as exc:
            with _dropping_lock:
                _failed_drops.append(
                    ScratchUnavailable(f"the scratch database {name} was not dropped: {exc}")
                )
        finally:
            seconds["drop"] = time.perf_counter() - t0
            admin.close()

    # The key exists before the thread sets it: the seconds are the normalised schema's
    # "_meta" too, which the plan may be writing to its cache meanwhile (a dict that
    # grows during that serialisation would fail it; one whose value changes does not).
    seconds.setdefault("drop", 0.0)
    thread = threading.Thread(target=drop, name=f"drop-{name}")  # not a daemon: it finishes
    with _dropping_lock:
        _dropping.append(thread)
    thread.start()


def settle() -> None:
    """Wait until every scratch database this process made is dropped; a drop that failed
    raises here, as the drop did before it moved off the plan's path."""
    with _dropping_lock:
        threads = list(_dropping)
    for thread in threads:
        thread.join()
        with _dropping_lock:
            if thread in _dropping:
                _dropping.remove(thread)
    with _dropping_lock:
        failed, _failed_drops[:] = list(_failed_drops), []
    if failed:
        raise failed[0]
