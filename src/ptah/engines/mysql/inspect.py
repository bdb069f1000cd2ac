"""MariaDB/MySQL inspection from what the server exposes: SHOW CREATE TABLE and views.

``SHOW CREATE TABLE`` is the server's own normalised rendering: one line per
column, index and constraint, which is exactly the granularity the differ
needs; the table options and the partitioning clause follow the body. The counter
``AUTO_INCREMENT=n`` is state, not schema: it is left out of what is compared, and
kept only in the ``CREATE TABLE`` a plan runs for a new table (as a direct load of
the file starts its counter there). A column line names its character set only
where it differs from the table's default, so the same line means another charset
under another default: each character column's effective collation is read too.
Tables are listed with one information_schema query; MariaDB offers no
set-based equivalent of SHOW CREATE TABLE, so that one runs per table.

What inspection does not take in (triggers, stored procedures and functions, events,
sequences, system-versioned tables) is counted by :func:`census` into
``schema["_meta"]["unmanaged"]``, each item named by its kind and name, so that the
planner never loses one silently: on the desired side it refuses the source
(``Unmanaged``), on the target it reports what it leaves alone.
"""

from __future__ import annotations

import re
import time
from typing import Any

from ptah.engines.model import Schema
from ptah.engines.mysql.target import read_as_checked
from ptah.engines.splitter import mysql_quote_end

_AUTO_INC = re.compile(r" AUTO_INCREMENT=\d+")


def element_key(line: str) -> str:
    """A stable key for one line of a table body: column, index or constraint name."""
    if line.startswith("`"):
        return "column " + line[1:].split("`", 1)[0]
    if line.startswith("PRIMARY KEY"):
        return "primary"
    m = re.match(r"(?:(UNIQUE|FULLTEXT|SPATIAL) )?KEY `([^`]+)`", line)
    if m:
        return "index " + m.group(2)
    m = re.match(r"CONSTRAINT `([^`]+)` (FOREIGN KEY|CHECK)", line)
    if m:
        return ("fk " if m.group(2) == "FOREIGN KEY" else "check ") + m.group(1)
    m = re.match(r"PERIOD FOR `((?:[^`]|``)+)`", line)
    if m:  # an application-time period (SYSTEM_TIME's is a system-versioned table's)
        return "period " + m.group(1).replace("``", "`")
    return "other " + line


def create_lines(sql: str) -> list[str]:
    """The lines of a ``SHOW CREATE TABLE``: split at each newline outside quotes only.

    A quoted name may hold a raw line feed, which the server shows as it is (a string's
    it shows escaped); and ``str.splitlines`` splits at more than a line feed too (a
    comment's U+2028, form feed, NEL...). Either way a column line was cut in two, and
    the plan failed with an internal error or altered the wrong thing."""
    lines: list[str] = []
    start, i, n = 0, 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in "`'\"":
            i = mysql_quote_end(sql, i)
        elif ch == "\n":
            lines.append(sql[start:i])
            start = i = i + 1
        else:
            i += 1
    lines.append(sql[start:])
    return lines


def parse_create(sql: str) -> dict[str, Any]:
    """The body lines (keyed), the options line and the partitioning clause of a
    ``SHOW CREATE TABLE``: the body ends at the first line that starts with ``)``
    (body lines are indented; :func:`create_lines` keeps a quoted newline in its line)."""
    lines = create_lines(sql)
    end = next((i for i in range(1, len(lines)) if lines[i].startswith(")")), len(lines) - 1)
    body = [ln.strip().rstrip(",") for ln in lines[1:end]]
    options = _AUTO_INC.sub("", lines[end].lstrip(") ").strip())
    elements = {element_key(ln): ln for ln in body}
    return {
        "elements": elements,
        "_order": [element_key(ln) for ln in body],
        "options": options,
        "partition": "\n".join(lines[end + 1 :]).strip(),
    }


# The kinds of information_schema.tables that inspection reads; another (MariaDB's
# SEQUENCE and SYSTEM VERSIONED) is named by the census.
_INSPECTED = {"BASE TABLE", "VIEW"}
_TABLE_KINDS = {"SEQUENCE": "sequence", "SYSTEM VERSIONED": "system-versioned table"}

# Objects of the database that inspection does not take in: (kind, name) per row.
# Triggers are filtered by their table's schema (always the trigger's own): the server
# looks that one up directly, where a filter on trigger_schema opens every table of
# every database, and waits on the metadata lock of a long ALTER or CREATE TABLE ...
# SELECT in another database (a plan here ended LockBusy because of work elsewhere).
_CENSUS = (
    "SELECT 'trigger', trigger_name FROM information_schema.triggers"
    " WHERE event_object_schema = DATABASE()"
    " UNION ALL SELECT lower(routine_type), routine_name FROM information_schema.routines"
    " WHERE routine_schema = DATABASE()"
    " UNION ALL SELECT 'event', event_name FROM information_schema.events"
    " WHERE event_schema = DATABASE()"
)


def _own_sequences(sql: str, db: str) -> str:
    """``SHOW CREATE TABLE`` with the database's own name left out of each sequence a
    default names: the server shows ``DEFAULT nextval(`db`.`s`)`` qualified, and the
    scratch's name in the desired side's made the plan's CREATE name the scratch (gone
    by apply) and never match the target's."""
    own = re.escape("`" + db.replace("`", "``") + "`.")
    return re.sub(rf"\b(nextval|lastval|setval)\({own}", r"\1(", sql, flags=re.IGNORECASE)


def census(cur: Any, tables: list[tuple[str, str]]) -> list[str]:
    """Every object of the current database that inspection did not take in, as
    ``"<kind> <name>"`` (the kind as ``spec.policy.ignore`` names it), sorted."""
    found = [
        f"{_TABLE_KINDS.get(kind, kind.lower())} {name}"
        for name, kind in tables
        if kind not in _INSPECTED
    ]
    cur.execute(_CENSUS)
    found += [f"{kind} {name}" for kind, name in cur.fetchall()]
    return sorted(found)


def inspect(conn: Any) -> Schema:
    read_as_checked(conn)  # SHOW CREATE quotes names by the session's sql_mode
    schema: Schema = {"table": {}, "view": {}}
    with conn.cursor() as cur:
        cur.execute("SELECT DATABASE()")
        db = cur.fetchone()[0]
        cur.execute(
            "SELECT table_name, table_type FROM information_schema.tables"
            " WHERE table_schema = DATABASE() ORDER BY table_name"
        )
        tables = cur.fetchall()
        for name, kind in tables:
            if kind != "BASE TABLE":
                continue
            cur.execute(f"SHOW CREATE TABLE `{name.replace('`', '``')}`")
            sql = _own_sequences(cur.fetchone()[1], db)
            entry = parse_create(sql)
            entry["_sql"] = sql
            entry["collations"] = {}
            schema["table"][name] = entry
        cur.execute(
            "SELECT table_name, column_name, collation_name FROM information_schema.columns"
            " WHERE table_schema = DATABASE() AND collation_name IS NOT NULL"
        )
        for table, column, collation in cur.fetchall():
            if table in schema["table"]:
                schema["table"][table]["collations"][column] = collation
        cur.execute(
            "SELECT table_name, view_definition, check_option, algorithm, security_type,"
            " collation_connection, character_set_client FROM information_schema.views"
            " WHERE table_schema = DATABASE() ORDER BY table_name"
        )
        for name, definition, check, algorithm, security, collation, client in cur.fetchall():
            text = definition.replace(f"`{db}`.", "")
            schema["view"][name] = {
                "def": text,
                "check": check,
                "algorithm": algorithm,
                "security": security,
                # The collation its string literals have ('a' = 'A' is 1 under
                # utf8mb4_general_ci, 0 under utf8mb4_bin), and a literal column's: the
                # session's when the view was created (a dump sets it before each view).
                "collation": collation,
                # How its text was sent: no part of what it does (its literals are
                # converted to the collation's charset), so not compared; a plan sends
                # UTF-8, and says so otherwise only for a text in ASCII, which reads alike.
                "_client": client,
            }
        cur.execute("SELECT @@collation_connection, @@character_set_client")
        session, session_client = cur.fetchone()
        t0 = time.perf_counter()
        unmanaged = census(cur, list(tables))
        schema["_meta"] = {
            "unmanaged": unmanaged,
            "censusSeconds": time.perf_counter() - t0,
            "collationConnection": session,
            "characterSetClient": session_client,
        }
    return schema
