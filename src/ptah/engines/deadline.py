"""A bound on how long a scratch session may run the desired file, whatever the file says.

A desired file is untrusted input, and loading it runs it: a materialized view over an
unbounded recursive query, a routine of the file that sleeps or computes, called at load
time (``SELECT f()``, ``CALL``, an event trigger, a ``DO`` body), would otherwise keep a
plan (and the CLI, or the runner Job until its deadline) waiting with no reason given,
while the scratch grows on the target's own server. A session setting cannot bound it:
the file may change the setting (``SET statement_timeout = 0``, ``set_config``, a
routine's own ``SET`` clause). So the bound is the client's: past it, a thread cancels
the session's statement through the server's cancel protocol, and keeps cancelling
every ``every`` seconds until the bounded block ends, so a replay of the file (to name
the failing line) meets the same bound at the same statement, and names it.

Its size is bounded the same way. A temporary scratch lives on the target's own server,
and a file that writes data (``CREATE TABLE ... AS SELECT`` of a billion rows, an
``INSERT ... SELECT``, a routine of the file that inserts in a loop, a trigger) would
fill that server's disk within the time bound, and the target would go down with it.
No statement-level rule can see every way of writing rows, so the same thread reads the
scratch's size (``grown``, from a session of its own) every ``every`` seconds and
cancels while it is past :data:`SCRATCH_BYTES`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

from ptah.engines.base import DesiredSchemaInvalid

# The load and inspection of a desired file in its scratch. Definitions load in
# milliseconds each: 10,000 tables with their indexes load in about 15 s on two cores.
LOAD_SECONDS = 120.0
# The scratch's size: it holds the file's schema and a few seed rows, not data: this,
# and beside it what each statement of the file may make (:func:`scratch_limit`).
SCRATCH_BYTES = 256 * 1024 * 1024
# What one statement's empty objects may take on disk, by engine: in PostgreSQL a table
# with its sequence, keys, TOAST table and indexes takes some 20 KB a statement (3,000
# such tables and their 6,000 indexes: 177 MB; 10,000: some 590 MB, past the base
# alone); an InnoDB table's own file takes 64-160 KB. SQLite's pages are bounded by
# SCRATCH_BYTES alone (10,000 tables take some 20 MB).
STATEMENT_BYTES = {"postgres": 64 * 1024, "mysql": 256 * 1024}
# How long cancels may go unheeded before the session itself is ended (see bounded).
GRACE_SECONDS = 5.0


def scratch_limit(engine: str, statements: int) -> int:
    """The size bound of ``engine``'s scratch for a file of ``statements`` statements:
    :data:`SCRATCH_BYTES`, and :data:`STATEMENT_BYTES` a statement, so a schema of 10,000
    tables loads while a file that writes data still meets the bound (a few statements
    writing rows gain little from it)."""
    return SCRATCH_BYTES + max(0, statements) * STATEMENT_BYTES.get(engine, 0)


def grew_past(limit: int | None = None) -> str:
    """The refusal's reason once a scratch grew past ``limit`` (default
    :data:`SCRATCH_BYTES`; one line)."""
    mb = (SCRATCH_BYTES if limit is None else limit) // (1024 * 1024)
    return f"desired schema grew its scratch past {mb} MB"


def past_size(where: str = "", limit: int | None = None) -> str:
    """The whole refusal, ``where`` naming the line (e.g. " (line 3 of the desired file)")."""
    return f"{grew_past(limit)}{where}: a desired file holds definitions, not data"


class Deadline:
    """The state of one bounded block: whether its bound passed (and cancels began)."""

    def __init__(self, seconds: float, limit: int = SCRATCH_BYTES) -> None:
        self.seconds = seconds
        self.limit = limit  # the scratch's size bound, in bytes (:func:`scratch_limit`)
        self.expired = False
        # The scratch grew past its limit (its statements were cancelled meanwhile).
        self.outgrown = False
        self.disarmed = False
        self._grown: Callable[[], bool] | None = None

    def grown(self) -> bool:
        """Whether the scratch is past its size now (False when nothing measures it)."""
        if self._grown is None:
            return False
        with contextlib.suppress(Exception):
            return self._grown()
        return False

    def refuse_if_grown(self) -> None:
        """The read after a load that ended between two of the watcher's: a scratch
        grown past its size by then is refused (with no line to name)."""
        if self.grown():
            self.outgrown = True
            raise DesiredSchemaInvalid(past_size(limit=self.limit))

    def disarm(self) -> None:
        """Cancel nothing more (the caller bounds what it runs next by other means)."""
        self.disarmed = True


@contextlib.contextmanager
def bounded(
    cancel: Callable[[], None],
    seconds: float | None = None,
    every: float = 0.5,
    grown: Callable[[], bool] | None = None,
    end: Callable[[], None] | None = None,
    limit: int | None = None,
) -> Iterator[Deadline]:
    """Run the block; once ``seconds`` (default :data:`LOAD_SECONDS`) pass, call
    ``cancel`` at once and every ``every`` seconds until the block ends.

    ``grown``: whether the scratch is past ``limit`` (default :data:`SCRATCH_BYTES`; the
    refusal names it), read every ``every``
    seconds on the same thread (from a session of its own: the loading one is busy);
    while it is, ``cancel`` is called too and the deadline marked ``outgrown``. Only
    while it is: a replay of the file (to name the line) after a rollback that shrank
    the scratch runs until the statement that grows it again, which is cancelled there.

    ``cancel`` must be safe from another thread (psycopg's ``Connection.cancel_safe``,
    a ``KILL QUERY`` on a second session); its own failure is ignored: the next one
    tries again, and the block's statement fails or ends by itself; so is ``grown``'s.

    ``end``: ends the session itself (``pg_terminate_backend``), called once the
    cancels went on for :data:`GRACE_SECONDS` and the block still runs: a routine of
    the file may catch a cancel (PL/pgSQL's ``EXCEPTION WHEN query_canceled``) and go
    on writing in a loop."""
    deadline = Deadline(
        LOAD_SECONDS if seconds is None else seconds, SCRATCH_BYTES if limit is None else limit
    )
    deadline._grown = grown
    done = threading.Event()

    first: list[float] = []  # when the first cancel went

    def stop() -> None:
        first[:] = first or [time.monotonic()]
        with contextlib.suppress(Exception):
            cancel()
        if end is not None and time.monotonic() - first[0] >= GRACE_SECONDS:
            with contextlib.suppress(Exception):
                end()

    def watch() -> None:
        ends = time.monotonic() + deadline.seconds
        while not deadline.expired:
            left = ends - time.monotonic()
            if left <= 0:
                deadline.expired = True
                break
            if done.wait(left if grown is None else min(every, left)):
                return
            if deadline.disarmed or time.monotonic() >= ends:
                continue
            if deadline.grown():
                deadline.outgrown = True
                stop()
        while not done.is_set() and not deadline.disarmed:
            stop()
            done.wait(every)

    thread = threading.Thread(target=watch, name="scratch-deadline", daemon=True)
    thread.start()
    try:
        yield deadline
    finally:
        done.set()
        thread.join()
