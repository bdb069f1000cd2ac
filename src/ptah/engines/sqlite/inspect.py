"""SQLite inspection: ``sqlite_master`` plus a canonical form of each stored statement.

SQLite keeps each object's DDL as text. Two spellings of one table must not
look different, and a table grown by ``ALTER TABLE ADD COLUMN`` (which edits
the stored text) must match the same table written whole; so definitions are
compared in sqlglot's canonical rendering, with whitespace folding as the
fallback when sqlglot cannot parse a statement.
"""

from __future__ import annotations

import logging
import re
import sqlite3
from typing import Any

import sqlglot
from sqlglot import expressions as exp

from ptah.engines.model import Schema

# Triggers and other statements sqlglot does not model fall back to folding; no warnings.
logging.getLogger("sqlglot").setLevel(logging.ERROR)
_SIMPLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PUNCT = re.compile(r"\s*([(),;])\s*")


def fold(sql: str) -> str:
    return _PUNCT.sub(r"\1", " ".join(sql.split())).rstrip(";")


def parse(sql: str) -> exp.Expression | None:
    """The statement as a tree, with needless identifier quotes dropped (``"t"`` is ``t``)."""
    try:
        tree: Any = sqlglot.parse_one(sql, read="sqlite")
    except sqlglot.errors.ParseError:
        return None
    for ident in tree.find_all(exp.Identifier):
        if ident.quoted and _SIMPLE.match(ident.name):
            ident.set("quoted", False)
    result: exp.Expression = tree
    return result


def canonical_sql(sql: str) -> str:
    tree = parse(sql)
    if tree is None:
        return fold(sql)
    return fold(tree.sql(dialect="sqlite"))


def table_parts(sql: str) -> list[str] | None:
    """The canonical column and constraint definitions of a CREATE TABLE, in order."""
    tree = parse(sql)
    if not isinstance(tree, exp.Create) or not isinstance(tree.this, exp.Schema):
        return None
    return [fold(e.sql(dialect="sqlite")) for e in tree.this.expressions]


def inspect(conn: sqlite3.Connection) -> Schema:
    schema: Schema = {"table": {}, "index": {}, "view": {}, "trigger": {}}
    rows = conn.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master"
        " WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
    ).fetchall()
    for kind, name, table, sql in rows:
        entry: dict[str, Any] = {"def": canonical_sql(sql), "_sql": sql}
        if kind == "table":
            quoted = name.replace('"', '""')
            cols = conn.execute(f'PRAGMA table_xinfo("{quoted}")').fetchall()
            # Generated columns (hidden 2, 3) cannot be copied into: only plain ones.
            entry["_columns"] = [c[1] for c in cols if c[6] == 0]
        else:
            entry["table"] = table
        if kind in schema:
            schema[kind][name] = entry
    return schema
