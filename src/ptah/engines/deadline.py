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
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

# The load and inspection of a desired file in its scratch. Definitions load in
# milliseconds each: 10,000 tables with their indexes load in about 15 s on two cores.
LOAD_SECONDS = 120.0


class Deadline:
    """The state of one bounded block: whether its bound passed (and cancels began)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False
        self.disarmed = False

    def disarm(self) -> None:
        """Cancel nothing more (the caller bounds what it runs next by other means)."""
        self.disarmed = True


@contextlib.contextmanager
def bounded(
    cancel: Callable[[], None], seconds: float | None = None, every: float = 0.5
) -> Iterator[Deadline]:
    """Run the block; once ``seconds`` (default :data:`LOAD_SECONDS`) pass, call
    ``cancel`` at once and every ``every`` seconds until the block ends.

    ``cancel`` must be safe from another thread (psycopg's ``Connection.cancel_safe``,
    a ``KILL QUERY`` on a second session); its own failure is ignored: the next one
    tries again, and the block's statement fails or ends by itself."""
    deadline = Deadline(LOAD_SECONDS if seconds is None else seconds)
    done = threading.Event()

    def watch() -> None:
        if done.wait(deadline.seconds):
            return
        deadline.expired = True
        while not done.is_set() and not deadline.disarmed:
            with contextlib.suppress(Exception):
                cancel()
            done.wait(every)

    thread = threading.Thread(target=watch, name="scratch-deadline", daemon=True)
    thread.start()
    try:
        yield deadline
    finally:
        done.set()
        thread.join()
