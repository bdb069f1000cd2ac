"""PostgreSQL online techniques: the statements that keep a busy table writable.

The differ (:mod:`ptah.engines.postgres.diff`) decides *what* changes; this module says
*how* a change on a table that already exists is done without blocking its writers,
and what every statement does to such a table (its lock and whether it scans or
rewrites), as the hazards a person reads before approving:

- an index is built and dropped ``CONCURRENTLY``, outside a transaction (lock
  SHARE UPDATE EXCLUSIVE: reads and writes go on); a changed index is built under a
  temporary name, the old one dropped, the new one renamed, so the table is never
  without it;
- a new foreign key or check is added ``NOT VALID`` (a brief lock, no scan) and
  validated in a transaction of its own (SHARE UPDATE EXCLUSIVE while it scans);
- ``SET NOT NULL`` is proved by such a validated check first, so it skips its scan.

The plain forms take SHARE (writes wait for a whole index build) or ACCESS EXCLUSIVE
(everything waits while the table is scanned or rewritten).
"""

from __future__ import annotations

import re

from ptah.engines.model import (
    ALLOWS_WRITES,
    BRIEF,
    BUILDS_INDEX,
    LOCK_HEAVY,
    LOCKS_ALL,
    LOCKS_WRITES,
    REWRITES_TABLE,
    SCANS_TABLE,
    Statement,
    lock_hazard,
)

ACCESS_EXCLUSIVE = "ACCESS EXCLUSIVE"
SHARE = "SHARE"
SHARE_ROW_EXCLUSIVE = "SHARE ROW EXCLUSIVE"
SHARE_UPDATE_EXCLUSIVE = "SHARE UPDATE EXCLUSIVE"

# What each lock mode lets the table's other users do while it is held.
_LETS = {
    ACCESS_EXCLUSIVE: LOCKS_ALL,
    SHARE: LOCKS_WRITES,
    SHARE_ROW_EXCLUSIVE: LOCKS_WRITES,
    SHARE_UPDATE_EXCLUSIVE: ALLOWS_WRITES,
}

_IDENT = r'(?:"(?:[^"]|"")+"|[^\s."(]+)'
_QNAME = rf"{_IDENT}(?:\.{_IDENT})?"
_INDEX_HEAD = re.compile(rf"^CREATE (UNIQUE )?INDEX ({_IDENT}) ON (ONLY )?({_QNAME})")
_BUILT = re.compile(
    rf"^CREATE (?:UNIQUE )?INDEX CONCURRENTLY (?:IF NOT EXISTS )?({_IDENT}) ON (?:ONLY )?"
    rf"({_QNAME})"
)
_STATISTICS_FROM = re.compile(rf" FROM ({_QNAME})$")
_ALTER = re.compile(rf"^ALTER TABLE (?:ONLY )?(?:IF EXISTS )?({_QNAME})\s+(.*)", re.S)
_ON_TABLE = re.compile(
    rf"^(?:CREATE|DROP|ALTER) (?:OR REPLACE )?(?:CONSTRAINT )?(TRIGGER|POLICY|RULE) {_IDENT}"
    rf".*? ON ({_QNAME})",
    re.S,
)
_DROP_INDEX = re.compile(rf"^DROP INDEX (?:CONCURRENTLY )?(?:IF EXISTS )?({_QNAME})")


def hazard(mode: str, effect: str) -> str:
    """The hazard naming ``mode``'s effect on others and what the statement does."""
    return lock_hazard(_LETS[mode], effect)


def _unquote(ident: str) -> str:
    if ident.startswith('"'):
        return ident[1:-1].replace('""', '"')
    return ident


def quote(raw: str) -> str:
    """``raw`` as PostgreSQL's ``quote_ident`` would print a name it made up."""
    if re.fullmatch(r"[a-z_][a-z0-9_]*", raw):
        return raw
    return '"' + raw.replace('"', '""') + '"'


def temporary_name(name: str, suffix: str) -> str:
    """A name for a stand-in object (at most 63 bytes), deterministic so that planning
    the same change twice gives the same statements."""
    raw = _unquote(name)
    room = 63 - len(suffix.encode())
    cut = raw.encode()[:room].decode(errors="ignore")
    return quote(cut + suffix)


def split_index(qualified: str) -> tuple[str, str]:
    """(schema, index name) of an inspected index key ``schema.name``."""
    m = re.fullmatch(rf"({_IDENT})\.({_IDENT})", qualified)
    if m is None:
        return "", qualified
    return m.group(1), m.group(2)


def concurrent_create(definition: str, name: str | None = None) -> str:
    """``CREATE INDEX`` as ``CREATE INDEX CONCURRENTLY``, optionally under ``name``."""
    m = _INDEX_HEAD.match(definition)
    if m is None:
        raise ValueError(f"not an index definition: {definition[:80]}")
    unique = m.group(1) or ""
    return (
        f"CREATE {unique}INDEX CONCURRENTLY {name or m.group(2)} ON {m.group(4)}"
        + definition[m.end() :]
    )


def unique_columns(definition: str) -> str | None:
    """``(a, b)`` of a plain ``UNIQUE (a, b)`` constraint definition (no INCLUDE, no
    NULLS NOT DISTINCT, no storage options, not deferrable), which a unique index of
    those columns can stand for; None for anything else."""
    m = re.fullmatch(r"UNIQUE (\((?:[^()]|\([^()]*\))+\))", definition)
    return m.group(1) if m else None


def built_index(sql: str) -> str | None:
    """The schema-qualified index a ``CREATE INDEX CONCURRENTLY`` builds (its table's
    schema), or None when ``sql`` is not one."""
    m = _BUILT.match(sql)
    if m is None:
        return None
    table = m.group(2)
    schema = split_index(table)[0] if "." in table else ""
    return f"{schema}.{m.group(1)}" if schema else m.group(1)


def build_index(definition: str, unique: bool, name: str | None = None) -> Statement:
    """The concurrent build of ``definition``; reads and writes go on while it builds."""
    hazards = [hazard(SHARE_UPDATE_EXCLUSIVE, BUILDS_INDEX)]
    if unique:
        hazards.insert(0, "data-dependent")
    return Statement(
        concurrent_create(definition, name),
        tuple(hazards),
        transaction="none",
        lock=SHARE_UPDATE_EXCLUSIVE,
    )


def drop_index(name: str) -> Statement:
    return Statement(
        f"DROP INDEX CONCURRENTLY {name}",
        (hazard(SHARE_UPDATE_EXCLUSIVE, BRIEF),),
        transaction="none",
        lock=SHARE_UPDATE_EXCLUSIVE,
    )


def _table_of(sql: str) -> tuple[str, str] | None:
    """(table, what the statement does to it) for the statements that lock a table."""
    m = _ALTER.match(sql)
    if m:
        return m.group(1), m.group(2)
    m = _ON_TABLE.match(sql)
    if m:
        return m.group(2), m.group(1)
    return None


def describe(stmt: Statement, existing: set[str], indexes: dict[str, str]) -> Statement:
    """``stmt`` with the lock it takes on an existing table named among its hazards, when
    the differ did not name it already; a statement on no existing table is unchanged.

    ``existing``: the tables the target has; ``indexes``: the target's index -> table.
    """
    if stmt.lock:
        return stmt
    sql = stmt.sql
    mode, effect = "", BRIEF
    m = _DROP_INDEX.match(sql)
    if m and indexes.get(m.group(1)) in existing:
        mode = SHARE_UPDATE_EXCLUSIVE if "CONCURRENTLY" in sql.split("(")[0] else ACCESS_EXCLUSIVE
    elif sql.startswith("CREATE TRIGGER") or sql.startswith("CREATE CONSTRAINT TRIGGER"):
        found = _table_of(sql)
        if found and found[0] in existing:
            mode = SHARE_ROW_EXCLUSIVE
    elif sql.startswith("CREATE STATISTICS "):
        # Printed by the server, its table last: CREATE STATISTICS ... FROM <table>.
        table = _STATISTICS_FROM.search(sql)
        if table and table.group(1) in existing:
            mode = SHARE_UPDATE_EXCLUSIVE
    elif sql.startswith("DROP TABLE "):
        name = sql.split()[2]
        if name in existing:
            mode = ACCESS_EXCLUSIVE
    else:
        found = _table_of(sql)
        if found and found[0] in existing:
            what = found[1].upper()
            mode = ACCESS_EXCLUSIVE
            if what.startswith("ADD CONSTRAINT") and " FOREIGN KEY " in what:
                mode = SHARE_ROW_EXCLUSIVE
            elif what.startswith(("VALIDATE CONSTRAINT", "SET STATISTICS", "CLUSTER ON")) or (
                what.startswith("ALTER COLUMN") and " SET STATISTICS " in what
            ):
                mode = SHARE_UPDATE_EXCLUSIVE
            rewrites = (
                (what.startswith("ALTER COLUMN") and " TYPE " in what)
                or what.startswith(("SET LOGGED", "SET UNLOGGED", "SET ACCESS METHOD"))
                or (what.startswith("ADD COLUMN") and LOCK_HEAVY in stmt.hazards)
            )
            if rewrites:
                effect = REWRITES_TABLE
            elif what.startswith("VALIDATE CONSTRAINT") or (
                what.startswith("ALTER COLUMN") and what.endswith("SET NOT NULL")
            ):
                effect = SCANS_TABLE
            elif what.startswith("ATTACH PARTITION"):
                effect = SCANS_TABLE  # the partition's rows are checked against its bound
    if not mode:
        return stmt
    return Statement(
        stmt.sql,
        (*stmt.hazards, hazard(mode, effect)),
        transaction=stmt.transaction,
        lock=mode,
    )
