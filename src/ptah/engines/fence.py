"""The realm fence: a lock in the database itself that every mutating run holds.

The realm Lease (:mod:`ptah.targetlock`) serialises mutating operations on one
physical database through the Kubernetes API, and it rests on clocks and on the
operator's own bookkeeping. The fence is the second wall, where the writes happen:
a schema Apply and a Migrate (in a Job's Pod or from ``ptah apply`` / ``ptah
migrate``) take the fence before their first write and hold it until their last,
and a run that cannot take it refuses to start (:class:`RealmBusy`, frame outcome
``fenced``): nothing ran, so the refusal is certain.

The fence is keyed by the realm: the coordination digest of the database, i.e. the
digest of the identity the database itself reports
(:attr:`ptah.runner.frame.DatabaseIdentity.digest`), the same key the realm Lease is
named after. Two spellings of one database therefore meet at one fence.

* PostgreSQL: a session-level advisory lock on a 64-bit key derived from the realm,
  polled with ``pg_try_advisory_lock`` with no transaction open. A blocking
  ``pg_advisory_lock`` would sit in an open statement, and ``CREATE INDEX
  CONCURRENTLY`` in the holder waits for every open transaction, so the two would
  wait on each other forever; a transaction-scoped lock could not outlive the
  commits of non-transactional statements. A session lock is released by the
  server when the session ends, however the runner died.
* MariaDB/MySQL: ``GET_LOCK('ptah-realm-<digest>', 0)``: session-level, kept across
  ``COMMIT`` and DDL's implicit commits, released when the session dies.
* SQLite: the database's own write lock is taken at the start (``BEGIN
  IMMEDIATE``, so a run never starts while another connection is writing), but
  SQLite releases it at every ``COMMIT`` and a migration run commits file by
  file. So for the whole run the fence is an exclusive ``flock`` on
  ``<database file>-ptah-fence`` beside the file (beside it like SQLite's own
  ``-journal``/``-wal``), a lock the kernel drops when the process dies. It never
  touches the database file's own locks, which SQLite takes with ``fcntl``.

The fence lives on the run's own connection (PostgreSQL, MariaDB) or process
(SQLite): whatever kills the run releases it, and nothing else does.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Iterator
from typing import Any, Protocol

from ptah.engines.base import EngineError
from ptah.engines.urls import EngineName

__all__ = [
    "REALM_ENV",
    "RealmBusy",
    "WrongRealm",
    "held",
    "lock_name",
    "pg_key",
    "realm_of",
    "sqlite_fence_path",
]

LOCK_PREFIX = "ptah-realm-"
# The realm the claim bound (its Lease's coordination digest), given to a mutating Job.
REALM_ENV = "PTAH_REALM"
POLL_SECONDS = 0.25


class RealmBusy(EngineError):
    """Another run holds the realm's fence: this one refuses to start."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "RealmBusy")


class WrongRealm(EngineError):
    """The opened database is not the realm the claim bound: nothing may be written."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "WrongDatabase")


def realm_of(opened: str, expected: str | None) -> str:
    """The fence key for a run on the database whose identity digest is ``opened``.

    ``expected`` is the realm the operator's claim bound (``$PTAH_REALM``); a run
    that opened another database refuses before it writes, since its fence and
    the claim's Lease would guard two different things.
    """
    if expected and expected != opened:
        raise WrongRealm(
            f"opened database {opened[:12]} is not the claim's realm {expected[:12]}; "
            "nothing was run"
        )
    return opened


def lock_name(realm: str) -> str:
    """The MariaDB/MySQL lock name (at most 64 characters): the Lease's own prefix."""
    return (LOCK_PREFIX + realm)[:64]


def pg_key(realm: str) -> int:
    """The PostgreSQL advisory-lock key: 64 bits of a hash of the realm."""
    import hashlib  # after the connection: see ptah.runner.main.AFTER_CONNECT

    digest = hashlib.sha256((LOCK_PREFIX + realm).encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def sqlite_fence_path(database_path: str) -> str:
    return database_path + "-ptah-fence"


class _Lock(Protocol):
    def try_take(self) -> bool: ...

    def release(self) -> None: ...


class _PostgresLock:
    def __init__(self, conn: Any, realm: str) -> None:
        self.conn, self.key = conn, pg_key(realm)

    def try_take(self) -> bool:
        with self.conn.cursor() as cur:
            cur.execute("SELECT pg_try_advisory_lock(%s)", (self.key,))
            row = cur.fetchone()
        return bool(row and row[0])

    def release(self) -> None:
        with self.conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_unlock(%s)", (self.key,))


class _MysqlLock:
    def __init__(self, conn: Any, realm: str) -> None:
        self.conn, self.name = conn, lock_name(realm)

    def try_take(self) -> bool:
        with self.conn.cursor() as cur:
            cur.execute("SELECT GET_LOCK(%s, 0)", (self.name,))
            row = cur.fetchone()
        return bool(row and row[0] == 1)

    def release(self) -> None:
        with self.conn.cursor() as cur:
            cur.execute("SELECT RELEASE_LOCK(%s)", (self.name,))


class _SqliteLock:
    """``flock`` on the fence file for the run, after probing SQLite's write lock."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        rows = conn.execute("PRAGMA database_list").fetchall()
        path = next((r[2] for r in rows if r[1] == "main"), "")
        self.path = sqlite_fence_path(path) if path else None  # "" for :memory:
        self.fd: int | None = None

    def _open(self) -> int:
        assert self.path is not None
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except PermissionError:
            try:  # created by another user: a read-only descriptor can still be locked
                return os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError as exc:
                raise EngineError(
                    f"cannot open the fence file {self.path}: {exc.strerror}", "FenceUnavailable"
                ) from None
        except OSError as exc:
            raise EngineError(
                f"cannot open the fence file {self.path}: {exc.strerror}", "FenceUnavailable"
            ) from None

    def try_take(self) -> bool:
        if self.path is not None:
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    return False
                raise EngineError(
                    f"cannot lock the fence file {self.path}: {exc.strerror}", "FenceUnavailable"
                ) from None
            self.fd = fd
        if not self._write_lock_free():
            self.release()
            return False
        return True

    def _write_lock_free(self) -> bool:
        """Whether SQLite's write lock can be taken now (taken, then given back at once)."""
        import sqlite3

        if self.conn.in_transaction:
            return True  # the caller's own transaction already holds what it holds
        before = self.conn.execute("PRAGMA busy_timeout").fetchone()[0]
        self.conn.execute("PRAGMA busy_timeout = 0")
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                return False
            raise
        finally:
            self.conn.execute(f"PRAGMA busy_timeout = {int(before)}")
        self.conn.execute("ROLLBACK")
        return True

    def release(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def _lock_for(engine: EngineName, connection: Any, realm: str) -> _Lock:
    if engine == "postgres":
        return _PostgresLock(connection, realm)
    if engine == "mysql":
        return _MysqlLock(connection, realm)
    return _SqliteLock(connection)


@contextlib.contextmanager
def held(engine: EngineName, connection: Any, realm: str, *, wait: float = 0.0) -> Iterator[None]:
    """Hold the realm's fence for the body; raise :class:`RealmBusy` if it stays taken.

    ``wait`` is how long to keep trying (0: one try). The runner never waits: under
    the Lease a second run on one realm is a fault, and refusing says so at once.
    """
    lock = _lock_for(engine, connection, realm)
    deadline = time.monotonic() + max(wait, 0.0)
    while not lock.try_take():
        if time.monotonic() >= deadline:
            raise RealmBusy(
                f"another run holds this database's fence ({lock_name(realm)}); nothing was run"
            )
        time.sleep(POLL_SECONDS)
    try:
        yield
    finally:
        # A broken connection has already lost its session lock; nothing to hand back.
        with contextlib.suppress(Exception):
            lock.release()
