"""MariaDB/MySQL online ALTERs: what the server itself says it can do without a copy.

Which ``ALTER TABLE`` the server runs ``INSTANT`` or ``INPLACE`` with ``LOCK=NONE``
depends on the change, the table (its row format, its keys, full-text indexes) and the
server's version, so the plan does not guess: it asks the server. The target's tables
(their ``SHOW CREATE TABLE``, empty) are created in a temporary probe database on the
same server (or the dev server), and each of the plan's statements runs there in plan
order; an ``ALTER`` is tried with ``ALGORITHM=INSTANT``, then ``ALGORITHM=INPLACE,
LOCK=NONE``, then ``INPLACE`` alone, then as it is. The first the server accepts is
how the target will do it (the algorithm a server supports depends on the schema, not
on the rows). A change that needs ``COPY`` (or blocks writes in place) is
``lock-heavy``, with the server's reason, and a policy may refuse it.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from typing import Any

import pymysql

from ptah.engines.confine import excerpt
from ptah.engines.model import (
    ALLOWS_WRITES,
    BRIEF,
    BUILDS_INDEX,
    COPIES_TABLE,
    LOCK_HEAVY,
    LOCKS_WRITES,
    Online,
    PlanError,
    Schema,
    Statement,
    lock_hazard,
)

# ER_ALTER_OPERATION_NOT_SUPPORTED(_REASON): the server refuses the requested algorithm.
_NOT_SUPPORTED = {1845, 1846}
# Errors that say nothing of the change itself: a bound or a lock wait reached, the
# connection lost (the probe's tables are its own, but the server is shared).
_TRANSIENT = {1205, 1969, 3024, 2006, 2013}
_TABLE = re.compile(r"^(?:ALTER|CREATE|DROP) TABLE `((?:[^`]|``)+)`")

INSTANT = "ALGORITHM=INSTANT"
INPLACE_NONE = "ALGORITHM=INPLACE, LOCK=NONE"
INPLACE = "ALGORITHM=INPLACE"


def _run(conn: Any, sql: str) -> None:
    with conn.cursor() as cur:
        cur.execute(sql)


def _reason(exc: pymysql.MySQLError) -> str:
    text = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
    m = re.search(r"Reason: (.*?)(?:\. Try .*)?$", text)
    return (m.group(1) if m else text).strip().rstrip(".")


def _described(stmt: Statement, algorithm: str, reason: str, request: bool) -> Statement:
    """``stmt`` as the probe found the server does it; ``request``: the clause is added."""
    hazards = [h for h in stmt.hazards if h != LOCK_HEAVY]
    sql = stmt.sql
    if algorithm == INSTANT:
        hazards.append(lock_hazard(ALLOWS_WRITES, BRIEF))
        lock = "INSTANT"
    elif algorithm == INPLACE_NONE:
        effect = (
            BUILDS_INDEX
            if re.search(r"^\s*ADD (UNIQUE )?(KEY|INDEX)", sql, re.M)
            else ("rebuilds table in place")
        )
        hazards.append(lock_hazard(ALLOWS_WRITES, effect))
        lock = "INPLACE, LOCK=NONE"
    else:
        effect = "rebuilds table in place" if algorithm == INPLACE else COPIES_TABLE
        hazards += [LOCK_HEAVY, lock_hazard(LOCKS_WRITES, effect)]
        if reason:
            why = "needs a table copy" if algorithm != INPLACE else "blocks writes in place"
            hazards.append(f"{why}: {reason}")
        lock = "INPLACE" if algorithm == INPLACE else "COPY"
    if request and algorithm in (INSTANT, INPLACE_NONE):
        sql = f"{sql},\n  {algorithm}"
    return Statement(sql, tuple(hazards), transaction=stmt.transaction, lock=lock)


def probe(
    connect: Callable[[], Any], current: Schema, statements: list[Statement], online: Online
) -> tuple[list[Statement], list[str]]:
    """The statements with each ``ALTER TABLE`` of an existing table described (and, under
    ``online.algorithm``, requesting) the least-locking algorithm the server accepts.

    ``connect`` opens a connection (no database selected) to the server to probe on.
    When no probe database can be made, the statements come back as they were, with a
    warning: the plan then says nothing about algorithms rather than guessing.
    """
    if not any(s.sql.startswith("ALTER TABLE ") for s in statements):
        return statements, []
    name = "ptah_probe_" + secrets.token_hex(6)
    try:
        conn = connect()
    except pymysql.MySQLError as exc:
        return statements, [f"ALTER algorithms not probed: server unreachable ({exc.args[0]})"]
    try:
        try:
            _run(conn, f"CREATE DATABASE `{name}`")
        except pymysql.MySQLError as exc:
            return statements, [
                f"ALTER algorithms not probed: may not create a probe database ({exc.args[0]})"
            ]
        try:
            conn.select_db(name)
            _run(conn, "SET SESSION foreign_key_checks = 0")
            # Tables the inspection leaves out (sequences, system-versioned tables) are not
            # made here: a statement naming one fails here only, so none is refused.
            unmanaged = current.get("_meta", {}).get("unmanaged", [])
            faithful = not any(
                item.startswith(("sequence ", "system-versioned table ")) for item in unmanaged
            )
            for table in sorted(current.get("table", {})):
                try:
                    _run(conn, current["table"][table]["_sql"])
                except pymysql.MySQLError:
                    # Not made here as it is on the target (it names an object the probe
                    # lacks, a sequence...): the probe goes on, but refuses nothing.
                    faithful = False
            # As apply runs: a foreign key added to rows is checked (and so copies).
            _run(conn, "SET SESSION foreign_key_checks = 1")
            return _probe_each(conn, statements, online, name, faithful), []
        finally:
            _run(conn, f"DROP DATABASE IF EXISTS `{name}`")
    finally:
        conn.close()


def _refused(exc: pymysql.MySQLError, stmt: Statement, probe: str) -> PlanError:
    """The plan refused: the server refuses one of its statements on empty copies of the
    target's tables, so it refuses it on the target too, rows or not (an INT column
    retyped UUID: "Cannot cast 'int' as 'uuid'"). Refused at plan time, before apply
    has run the statements before it (a foreign key dropped for the retyping stayed
    dropped when the ALTER after it failed)."""
    code = exc.args[0] if exc.args else ""
    text = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
    text = re.sub(rf"`?{re.escape(probe)}`?\.", "", text).replace(probe, "the database")
    return PlanError(
        f"the server cannot make this change, even on an empty table, so apply would fail"
        f" (ERROR {code}: {text}): {excerpt(stmt.sql)}",
        "Unsupported",
    )


def _probe_each(
    conn: Any, statements: list[Statement], online: Online, probe: str = "", faithful: bool = False
) -> list[Statement]:
    """Each statement as the probe found the server does it. While the probe holds what
    the target would hold at that point of the plan (``faithful``: each statement before
    ran there), a statement the server refuses refuses the plan (:func:`_refused`)."""
    out: list[Statement] = []
    for stmt in statements:
        if not _TABLE.match(stmt.sql):
            out.append(stmt)
            continue
        if not stmt.sql.startswith("ALTER TABLE "):
            try:
                _run(conn, stmt.sql)  # the probe follows the plan as far as it can
            except pymysql.MySQLError:
                faithful = False
            out.append(stmt)
            continue
        reason = ""
        for algorithm in (INSTANT, INPLACE_NONE, INPLACE, ""):
            sql = f"{stmt.sql}, {algorithm}" if algorithm else stmt.sql
            try:
                _run(conn, sql)
            except pymysql.MySQLError as exc:
                if exc.args and exc.args[0] in _NOT_SUPPORTED:
                    if algorithm == INPLACE_NONE or not reason:
                        reason = _reason(exc)
                    continue
                if algorithm:
                    # Refused with the clause for another reason than the algorithm:
                    # the statement as it is decides.
                    try:
                        _run(conn, stmt.sql)
                    except pymysql.MySQLError as plain:
                        exc = plain
                    else:
                        out.append(stmt)
                        break
                if faithful and exc.args and exc.args[0] not in _TRANSIENT:
                    raise _refused(exc, stmt, probe) from None
                faithful = False
                out.append(stmt)  # the probe cannot tell: apply will say
                break
            out.append(_described(stmt, algorithm or "COPY", reason, online.algorithm))
            break
        else:
            out.append(stmt)
    return out
