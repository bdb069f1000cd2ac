"""How long a plan's scratch work may take on MariaDB/MySQL.

A desired file is untrusted: a statement that sleeps, computes without end (an
unbounded recursive CTE, BENCHMARK), or waits on a lock someone else holds (a
backup's FLUSH TABLES WITH READ LOCK, the server's defaults being a day for a
metadata lock and longer for a statement) would hold the plan forever. Every
session of the scratch (its creation, the load, the inspection, its drop) runs
with these bounds, and the file may not lift them (:mod:`.confine` refuses a SET
of them beyond the bound); the whole load has a deadline besides, so many bounded
statements still end. Each bound, once reached, ends the plan with one line.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pymysql

# One statement of the file (or of the inspection); a schema's DDL on an empty scratch
# takes milliseconds.
STATEMENT_SECONDS = 60.0
# A wait for a metadata lock or a row lock.
LOCK_SECONDS = 20
# The whole load of the file has the engines' one bound (ptah.engines.deadline.LOAD_SECONDS),
# checked between statements.
# The variables that set them: the file may set them only to a number within the bound.
BOUND_VARIABLES = {
    "MAX_STATEMENT_TIME": lambda: STATEMENT_SECONDS,
    "LOCK_WAIT_TIMEOUT": lambda: float(LOCK_SECONDS),
    "INNODB_LOCK_WAIT_TIMEOUT": lambda: float(LOCK_SECONDS),
}


def bound(conn: Any) -> None:
    """Give the session the bounds (MySQL has no max_statement_time: the load's
    deadline and the lock bounds still hold there)."""
    with conn.cursor() as cur:
        cur.execute(
            f"SET SESSION lock_wait_timeout = {LOCK_SECONDS},"
            f" innodb_lock_wait_timeout = {LOCK_SECONDS}"
        )
        with contextlib.suppress(pymysql.MySQLError):
            cur.execute(f"SET SESSION max_statement_time = {STATEMENT_SECONDS}")


# The server's errors for a bound reached: max_statement_time (MariaDB 1969, MySQL
# 3024), a lock wait (1205 lock_wait_timeout / innodb_lock_wait_timeout).
BOUND_ERRORS = {1969: "statement", 3024: "statement", 1205: "lock"}


def bound_reached(exc: pymysql.MySQLError) -> str | None:
    """A one-line reason when ``exc`` is a bound of this module reached, else None."""
    code = exc.args[0] if exc.args else None
    kind = BOUND_ERRORS.get(code) if isinstance(code, int) else None
    if kind == "statement":
        return f"a statement ran longer than the plan's bound ({STATEMENT_SECONDS:g} s)"
    if kind == "lock":
        return f"a lock was held by another session longer than the plan's bound ({LOCK_SECONDS} s)"
    return None
