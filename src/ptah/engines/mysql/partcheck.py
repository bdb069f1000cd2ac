"""MariaDB/MySQL: a plan's new RANGE or LIST partitioning has a partition for each row.

``ALTER TABLE t PARTITION BY LIST (r) (PARTITION p1 VALUES IN (1,2))`` fails on a row
whose ``r`` is 3 (error 1526, "Table has no partition for value 3"), and the statements
of the plan before it have committed. Whether every row fits is asked before the first
statement (:func:`ptah.engines.mysql.datacheck.refuse_data_failures`), by the
partitioning's own expression and bounds, read from the clause the plan runs (the
server's ``SHOW CREATE TABLE`` text):

- RANGE: a row fits below the last bound (``MAXVALUE``: every row; a NULL goes to the
  first partition). RANGE COLUMNS compares the columns as a row, a ``MAXVALUE`` at a
  position ending the comparison there (``(a, b) < (10, MAXVALUE)`` is ``a <= 10``);
- LIST: the expression's value is among the partitions' values (a NULL, where one lists
  NULL). LIST COLUMNS compares the columns as a row; a row holding a NULL is taken as
  not fitting, as the comparison cannot say (a false refusal at worst, never a failure
  part-way).

HASH and KEY partitioning take every row. An expression naming what the table does not
have yet (a column the plan adds, empty then) is not checked.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pymysql

from ptah.engines.mysql.scan import unquoted

_HEAD = re.compile(r"PARTITION BY (RANGE|LIST)(\s+COLUMNS)?\s*\(")
_VALUES = re.compile(r"VALUES (LESS THAN|IN)\s*(\(|MAXVALUE\b)")
# Unknown column, unknown function: the expression names what the plan adds.
_NOT_YET = {1054, 1305}


def _closing(text: str, start: int) -> int:
    """The index of the parenthesis that closes the one at ``start`` (quotes skipped)."""
    for i, ch, depth in unquoted(text, start):
        if ch == ")" and depth == 1:
            return i
    return len(text)


def _items(text: str) -> list[str]:
    """The comma-separated items of ``text`` at its top level."""
    out, start = [], 0
    for i, ch, depth in unquoted(text):
        if ch == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    out.append(text[start:].strip())
    return [x for x in out if x]


def misfit_condition(clause: str) -> str | None:
    """A condition true of a row the partitioning ``clause`` has no partition for; None
    when every row fits (HASH, KEY, a MAXVALUE) or the clause is not understood."""
    head = _HEAD.search(clause)
    if head is None:
        return None
    kind, columns = head.group(1), bool(head.group(2))
    close = _closing(clause, head.end() - 1)
    expr = clause[head.end() : close].strip()
    bounds: list[str | None] = []  # None: MAXVALUE
    for m in _VALUES.finditer(clause, close):
        if m.group(2) != "(":
            bounds.append(None)
            continue
        end = _closing(clause, m.end() - 1)
        bounds.append(clause[m.end() : end].strip())
    if not bounds:
        return None
    if kind == "RANGE":
        last = bounds[-1]
        if last is None:
            return None
        if not columns:
            return f"({expr}) >= ({last})"
        cols, vals = _items(expr), _items(last)
        if "MAXVALUE" in (v.upper() for v in vals):
            k = [v.upper() for v in vals].index("MAXVALUE")
            if k == 0:
                return None
            return f"({', '.join(cols[:k])}) > ({', '.join(vals[:k])})"
        return f"({', '.join(cols)}) >= ({', '.join(vals)})"
    values = [v for b in bounds if b is not None for v in _items(b)]
    if not columns:
        nulls = any(v.upper() == "NULL" for v in values)
        listed = [v for v in values if v.upper() != "NULL"]
        known = f"({expr}) NOT IN ({', '.join(listed)})" if listed else "TRUE"
        return f"CASE WHEN ({expr}) IS NULL THEN {'FALSE' if nulls else 'TRUE'} ELSE {known} END"
    cols = _items(expr)
    if len(cols) == 1:
        return f"NOT (({cols[0]}) IN ({', '.join(values)}) <=> 1)"
    return f"NOT (({', '.join(cols)}) IN ({', '.join(values)}) <=> 1)"


def check(
    cur: Any,
    table: str,
    clause: str,
    run: Callable[[Any, str, str], Any],
    fail: Callable[[str, str], Exception],
) -> None:
    """Refuse (``fail``) when a row of ``table`` (quoted) has no partition under
    ``clause``; ``run`` runs the query as the data check runs its own."""
    condition = misfit_condition(clause)
    if condition is None:
        return
    sql = f"SELECT 1 FROM {table} WHERE {condition} LIMIT 1"
    try:
        cur.execute("SELECT 1 FROM DUAL WHERE FALSE AND EXISTS (" + sql + ")")
        cur.fetchall()
    except pymysql.MySQLError as exc:
        if exc.args and exc.args[0] in _NOT_YET:
            return
    if run(cur, sql, f"the partitioning of table {table}"):
        raise fail(
            f"table {table} has rows that no partition of its new partitioning takes",
            "DataNotPartitionable",
        )
