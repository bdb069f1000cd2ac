"""SQLite inspection: ``sqlite_master`` plus a canonical form of each stored statement.

SQLite keeps each object's DDL as text. Two spellings of one table must not
look different, and a table grown by ``ALTER TABLE ADD COLUMN`` (which edits
the stored text) must match the same table written whole; so definitions are
compared in sqlglot's canonical rendering, with whitespace folding as the
fallback when sqlglot cannot parse a statement.
"""

from __future__ import annotations

import functools
import logging
import re
import sqlite3
from typing import Any

import sqlglot
from sqlglot import expressions as exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.tokens import TokenType  # type: ignore[attr-defined]

from ptah.engines.model import PlanError, Schema

# Triggers and other statements sqlglot does not model fall back to folding; no warnings.
logging.getLogger("sqlglot").setLevel(logging.ERROR)
_DIALECT = Dialect.get_or_raise("sqlite")
_SIMPLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# SQLite stores a statement's head as ``CREATE VIRTUAL TABLE`` whatever the author wrote.
_VIRTUAL = re.compile(r"\s*CREATE\s+VIRTUAL\s", re.IGNORECASE)
_PUNCT = re.compile(r"\s*([(),;])\s*")
# A comment (no group: dropped, a space in its place) or a quoted token (group 1: kept
# as it is, its whitespace being its value's or its name's).
_QUOTED = re.compile(
    r"""--[^\n]*|/\*.*?\*/|('(?:[^']|'')*'|"(?:[^"]|"")*"|`(?:[^`]|``)*`|\[[^\]]*\])""",
    re.DOTALL,
)


def is_virtual(sql: str) -> bool:
    """Whether this stored statement creates a virtual table (its module reads the rest)."""
    return _VIRTUAL.match(sql) is not None


def unquoted(sql: str) -> str:
    """``sql`` without its quoted tokens and comments: the keywords it is written with."""
    return _QUOTED.sub(" ", sql)


def _fold_code(code: str) -> str:
    return _PUNCT.sub(r"\1", re.sub(r"\s+", " ", code))


def _bare(token: str) -> str:
    """A quoted name that needs no quotes, without them: SQLite writes a renamed
    table's name quoted (``CREATE VIRTUAL TABLE "f" USING ...``), the author may not.
    String literals ('...') keep their quotes."""
    inner = token[1:-1]
    if token[0] in '"`[' and _SIMPLE.match(inner):
        return inner
    return token


def fold(sql: str, lower: bool = False) -> str:
    """``sql`` with its whitespace folded, except inside quotes: ``DEFAULT 'a  b'`` and
    ``DEFAULT 'a b'`` (or a literal with CRLF and one with LF) are different values, and a
    table whose default changed that way must be rebuilt, not called unchanged. A quoted
    name that needs no quotes is written bare (:func:`_bare`).

    Comments are dropped: SQLite keeps them in the stored text, but they change nothing
    the database does, and a table rebuilt (or a trigger or view dropped and created)
    for a changed comment is work and locks for nothing. With ``lower``, what is not
    quoted is lower-cased: keywords and bare names are case-insensitive to SQLite
    (``using FTS5`` is ``USING fts5``); for text sqlglot cannot read (triggers, virtual
    tables), which has no other canonical spelling."""

    def code(text: str) -> str:
        text = _fold_code(text)
        return text.lower() if lower else text

    # The code between two quoted tokens is folded whole (a comment in it is a space),
    # and only it: folding the joined text again folded the quoted tokens' whitespace
    # too, and DEFAULT 'a  b' (or 'a\r\nb') read as DEFAULT 'a b'.
    out: list[str] = []
    pending: list[str] = []
    last = 0
    for m in _QUOTED.finditer(sql):
        pending.append(sql[last : m.start()])
        if m.group(1) is None:
            pending.append(" ")
        else:
            bare = _bare(m.group(1))
            # A double-quoted token keeps its letters' case: SQLite reads one that names
            # nothing as a string ("Active" in a trigger's WHEN is the text Active).
            name_only = m.group(1)[0] in "`[" and bare[0] not in "'\"`["
            out += [code("".join(pending)), bare.lower() if lower and name_only else bare]
            pending = []
        last = m.end()
    pending.append(sql[last:])
    out.append(code("".join(pending)))
    return "".join(out).strip().rstrip(";").rstrip()


def parse(sql: str) -> exp.Expression | None:
    """The statement as a tree, with needless identifier quotes dropped (``"t"`` is ``t``).

    Table options after the body (``WITHOUT ROWID``, ``STRICT``) are not part
    of the tree (sqlglot does not read ``WITHOUT ROWID``); see
    :func:`table_options`. A column's declared type and a CAST's type are the
    author's (:func:`_declared_type`, :func:`_mark_casts`), not sqlglot's reading
    of them.
    """
    core, _ = table_options(sql)
    try:
        # Tokenized once, for the parser and for the declared types (twice with a CAST).
        tokens = _DIALECT.tokenize(core)
        core, cast_types = _mark_casts(core, tokens)
        if cast_types:
            tokens = _DIALECT.tokenize(core)
        trees = _DIALECT.parser().parse(tokens, core)
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, RecursionError):
        return None
    tree: Any = trees[0] if len(trees) == 1 else None
    if not isinstance(tree, exp.Create):  # a trigger reads as a Block of its raw text
        return None
    for node in tree.walk():
        node.comments = None  # see fold: a comment changes nothing
    if not _declared_types(tree, core, tokens) or not _cast_types(tree, cast_types):
        return None
    for ident in tree.find_all(exp.Identifier):
        if ident.quoted and _SIMPLE.match(ident.name):
            ident.set("quoted", False)
    result: exp.Expression = tree
    return result


_QUOTED_TOKENS = (TokenType.IDENTIFIER, TokenType.STRING)
# The words a column constraint begins with: where a column's declared type ends.
_CONSTRAINT_WORDS = {
    "AS",
    "CHECK",
    "COLLATE",
    "CONSTRAINT",
    "DEFAULT",
    "GENERATED",
    "NOT",
    "NULL",
    "PRIMARY",
    "REFERENCES",
    "UNIQUE",
}


def _declared_type(tokens: list[Any], text: str) -> str | None:
    """A column definition's declared type (``tokens``: the definition's, in ``text``)
    as its author wrote it, in one spelling (upper case, whitespace folded, comments
    dropped): ``""`` when it has none, None when it cannot be read.

    sqlglot reads a type as one of its own and renders that: ``INT`` as ``INTEGER``,
    ``NUMERIC`` as ``REAL``, ``BOOLEAN`` as ``INTEGER``, ``VARCHAR(10)`` as
    ``TEXT(10)``. To SQLite they differ: the declared type is what ``table_info``
    reports and what a STRICT table checks, its affinity comes from its letters
    (``NUMERIC`` and ``REAL`` keep values differently), and only ``INTEGER PRIMARY
    KEY`` makes a column the rowid, ``INT PRIMARY KEY`` does not. Compared in
    sqlglot's spelling, a change between them planned nothing."""
    start = end = -1
    depth = 0
    for tok in tokens[1:]:  # tokens[0] is the column's name
        word = tok.text.split()[0].upper() if tok.text.strip() else ""  # one token: PRIMARY KEY
        quoted = tok.token_type in _QUOTED_TOKENS
        if depth == 0 and not quoted and word in _CONSTRAINT_WORDS:
            break
        if tok.token_type == TokenType.L_PAREN:
            if start < 0:
                return None
            depth += 1
        elif tok.token_type == TokenType.R_PAREN:
            depth -= 1
        start = tok.start if start < 0 else start
        end = tok.end
        if depth == 0 and tok.token_type == TokenType.R_PAREN:
            break  # the type's size or precision ends it
    if depth:
        return None
    return "" if start < 0 else fold(text[start : end + 1]).upper()


def _declared_types(tree: exp.Create, core: str, tokens: list[Any]) -> bool:
    """Each column of a CREATE TABLE's tree given its declared type as written
    (:func:`_declared_type`); False when one cannot be read (the text is then compared
    folded, as one sqlglot cannot parse)."""
    if not isinstance(tree.this, exp.Schema) or tree.args.get("kind") != "TABLE":
        return True
    found = _body(tokens)
    if found is None:
        return False
    definitions = _definitions(tokens, *found)
    if len(definitions) != len(tree.this.expressions):
        return False
    for node, definition in zip(tree.this.expressions, definitions, strict=True):
        if isinstance(node, exp.ColumnDef):
            kind = _declared_type(definition, core)
            if kind is None:
                return False
            node.set("kind", exp.Var(this=kind) if kind else None)
    return True


_CAST_MARK = "ptah_cast_"
_CAST_MARKED = re.compile(rf"{_CAST_MARK}(\d+)")


def _mark_casts(core: str, tokens: list[Any]) -> tuple[str, list[str]]:
    """``core`` with each ``CAST(... AS type)``'s type replaced by a marker
    (``ptah_cast_<n>``), and the types as written, in one spelling as declared types
    are (:func:`_declared_type`). sqlglot reads ``CAST(a AS NUMERIC)`` as
    ``CAST(a AS REAL)``, ``STRING`` as ``TEXT``, ``BOOLEAN`` as ``INTEGER``: to SQLite
    a CAST converts by its type's affinity, and those differ (``CAST('1.5' AS
    BOOLEAN)`` is 1.5, ``AS INTEGER`` 1). The markers are found again in the tree
    (:func:`_cast_types`), wherever sqlglot puts the CASTs."""
    spans: list[tuple[int, int]] = []
    if "CAST" not in core.upper():
        return core, []
    for i, tok in enumerate(tokens[:-1]):
        if tok.token_type in _QUOTED_TOKENS or tok.text.upper() != "CAST":
            continue
        if tokens[i + 1].token_type != TokenType.L_PAREN:
            continue
        depth, as_at, close = 0, -1, -1
        for j in range(i + 1, len(tokens)):
            kind = tokens[j].token_type
            if kind == TokenType.L_PAREN:
                depth += 1
            elif kind == TokenType.R_PAREN:
                depth -= 1
                if depth == 0:
                    close = j
                    break
            elif depth == 1 and kind == TokenType.ALIAS:
                as_at = j
        if as_at >= 0 and as_at + 1 < close:
            spans.append((tokens[as_at + 1].start, tokens[close - 1].end))
    types = [fold(core[start : end + 1]).upper() for start, end in spans]
    for n, (start, end) in sorted(enumerate(spans), key=lambda e: -e[1][0]):
        core = f"{core[:start]}{_CAST_MARK}{n}{core[end + 1 :]}"
    return core, types


def _cast_types(tree: exp.Expression, types: list[str]) -> bool:
    """The CASTs' types as written put back where :func:`_mark_casts` marked them;
    False when a marker is not found once (the text is then compared folded)."""
    found = 0
    for node in tree.find_all(exp.DataType):
        mark = _CAST_MARKED.fullmatch(str(node.args.get("kind") or ""))
        if node.this == exp.DataType.Type.USERDEFINED and mark:
            node.set("kind", types[int(mark.group(1))])
            found += 1
    return found == len(types)


_CONSTANTS = (exp.Literal, exp.Null, exp.Boolean, exp.HexString)


def is_constant(value: exp.Expression | None) -> bool:
    """A constant as SQLite reads a default: a literal, a signed number, NULL, a blob."""
    if isinstance(value, exp.Neg):
        value = value.this
    return isinstance(value, _CONSTANTS)


def _same_meaning(tree: exp.Expression) -> None:
    """One spelling for what SQLite reads alike, so that re-spelling it is no change
    (a table rebuilt, an index built again, for nothing): a collation's name in any
    case (``nocase`` is ``NOCASE``), an explicit ``ASC`` in an index, a constant default
    in parentheses (``DEFAULT (0)`` is ``DEFAULT 0``)."""
    for node in list(tree.walk()):
        if isinstance(node, exp.CollateColumnConstraint) and isinstance(node.this, exp.Column):
            node.set("this", exp.Var(this=node.this.name.upper()))
        elif isinstance(node, exp.Collate) and isinstance(node.expression, exp.Var | exp.Column):
            node.set("expression", exp.Var(this=node.expression.name.upper()))
        elif isinstance(node, exp.Ordered) and node.args.get("desc") is False:
            node.set("desc", None)
        elif (
            isinstance(node, exp.DefaultColumnConstraint)
            and isinstance(node.this, exp.Paren)
            and is_constant(node.this.this)
        ):
            node.set("this", node.this.this)


@functools.lru_cache(maxsize=1 << 16)
def canonical_sql(sql: str) -> str:
    """The spelling definitions are compared in: sqlglot's rendering, or :func:`fold`.

    A virtual table's arguments belong to its module (sqlglot reads ``fts5(...)`` as
    a call and keeps the module name's case): folded, not rendered. Remembered by text:
    a plan reads each definition twice (the target's and the scratch's, most often the
    same text), at some 2 ms a parse."""
    core, options = table_options(sql)
    try:
        tree = None if is_virtual(sql) else parse(sql)
        if tree is not None:
            _same_meaning(tree)
        base = fold(core, lower=True) if tree is None else fold(tree.sql(dialect="sqlite"))
    except RecursionError:
        # Nested deeper than the parser's recursion holds (some 60 parentheses, which
        # SQLite's own parser takes): compared as written, folded, as a virtual table's.
        base = fold(core, lower=True)
    return f"{base} {options}" if options else base


def _table_tokens(sql: str) -> tuple[list[Any], int, int] | None:
    """A CREATE TABLE's tokens and the indices of its body's parentheses."""
    if not re.match(r"\s*CREATE\s+(TEMP\w*\s+)?TABLE\b", sql, re.IGNORECASE):
        return None
    try:
        tokens = _DIALECT.tokenize(sql)
    except sqlglot.errors.TokenError:
        return None
    found = _body(tokens)
    return None if found is None else (tokens, *found)


def _body(tokens: list[Any]) -> tuple[int, int] | None:
    """The indices of a CREATE TABLE's body's parentheses among its tokens."""
    depth, opened = 0, -1
    for k, tok in enumerate(tokens):
        if tok.token_type == TokenType.L_PAREN:
            if depth == 0:
                opened = k
            depth += 1
        elif tok.token_type == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                return opened, k
        elif depth == 0 and tok.token_type in (TokenType.ALIAS, TokenType.SELECT):
            return None  # CREATE TABLE ... AS SELECT: no body
    return None


def _definitions(tokens: list[Any], opened: int, close: int) -> list[list[Any]]:
    """The body's comma-separated definitions, as lists of their tokens."""
    out: list[list[Any]] = [[]]
    depth = 0
    for tok in tokens[opened + 1 : close]:
        if depth == 0 and tok.token_type == TokenType.COMMA:
            out.append([])
            continue
        if tok.token_type == TokenType.L_PAREN:
            depth += 1
        elif tok.token_type == TokenType.R_PAREN:
            depth -= 1
        out[-1].append(tok)
    return [d for d in out if d]


def table_options(sql: str) -> tuple[str, str]:
    """``sql`` without its table options, and the options in one canonical spelling."""
    found = _table_tokens(sql)
    if found is None:
        return sql, ""
    tokens, _, close = found
    end = tokens[close].end + 1
    rest = sql[end:].strip().rstrip(";").strip()
    if not rest:
        return sql, ""
    options = ", ".join(" ".join(o.split()).upper() for o in rest.split(","))
    return sql[:end], options


def body_segments(sql: str) -> list[str]:
    """The CREATE TABLE body's comma-separated definitions, each as written.

    A definition to add with ADD COLUMN is taken from the author's own text
    (its type spelling matters to a STRICT table and to ``table_info``), not
    from a re-rendering.
    """
    found = _table_tokens(sql)
    if found is None:
        return []
    return [sql[d[0].start : d[-1].end + 1] for d in _definitions(*found)]


def _shadow_tables(conn: sqlite3.Connection) -> set[str]:
    """The shadow tables of the database's virtual tables (an FTS5 table's ``_data``,
    ``_idx``, ``_content``, ...): the virtual table's module creates and drops them
    with it, so they are part of that table, not objects of their own (planned on
    their own, ``CREATE VIRTUAL TABLE`` then fails to create them a second time).
    ``PRAGMA table_list`` says so (SQLite 3.37+); an older library has no shadow
    tables to report."""
    try:
        rows = conn.execute("PRAGMA main.table_list").fetchall()
    except sqlite3.OperationalError:
        return set()
    return {str(row[1]) for row in rows if row[2] == "shadow"}


def _columns(conn: sqlite3.Connection, name: str) -> list[Any]:
    """``table_xinfo`` of the table; a virtual table of a module this SQLite lacks (an
    extension the application loads: sqlite-vec, SpatiaLite, ...) cannot be read, and
    neither created, copied nor dropped here: the plan is refused, naming it."""
    quoted = name.replace('"', '""')
    try:
        rows: list[Any] = conn.execute(f'PRAGMA table_xinfo("{quoted}")').fetchall()
    except sqlite3.OperationalError as exc:
        raise PlanError(
            f"table {name!r} cannot be inspected ({exc}): SQLite {sqlite3.sqlite_version}"
            " here lacks what it needs, so Ptah can neither read nor change it",
            "Unsupported",
        ) from None
    return rows


def _view_columns(conn: sqlite3.Connection, name: str) -> list[str] | None:
    """The names of a view's columns, as SQLite gives them: a column without an alias is
    named by its expression's text as written (``SELECT a+1`` has a column ``a+1``,
    ``SELECT a + 1`` one ``a + 1``, ``LOWER(a)`` one ``LOWER(a)``), which the canonical
    spelling of the view's statement folds away, and a query reading ``"a+1"`` fails on
    the other. None when the view cannot be compiled here (it names what is missing, or
    a function the application registers)."""
    quoted = name.replace('"', '""')
    try:
        rows = conn.execute(f'PRAGMA table_xinfo("{quoted}")').fetchall()
    except sqlite3.Error:
        return None
    return [str(row[1]) for row in rows]


def inspect(conn: sqlite3.Connection) -> Schema:
    schema: Schema = {"table": {}, "index": {}, "view": {}, "trigger": {}}
    rows = conn.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master"
        # SQLite's own objects are named sqlite_... ('_' escaped: in LIKE it is any
        # character, and a table named sqlitedata was invisible on both sides)
        " WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY rowid"
    ).fetchall()
    shadow = _shadow_tables(conn)
    for kind, name, table, sql in rows:
        if name in shadow:
            continue
        entry: dict[str, Any] = {"def": canonical_sql(sql), "_sql": sql}
        if kind == "table":
            cols = _columns(conn, name)
            # Generated columns (hidden 2, 3) cannot be copied into: only plain ones.
            entry["_columns"] = [c[1] for c in cols if c[6] == 0]
            # ... but they can be read: a column that stops being generated keeps its values.
            entry["_readable"] = [c[1] for c in cols if c[6] in (0, 2, 3)]
            # Their declared types, whose affinity decides what a copy makes of a value.
            entry["_types"] = {c[1]: c[2] for c in cols if c[6] == 0}
        else:
            entry["table"] = table
        if kind == "view":
            entry["columns"] = _view_columns(conn, name)
        if kind in schema:
            schema[kind][name] = entry
    return schema
