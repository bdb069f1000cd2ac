"""Confinement of a plan: the desired source is checked before anything of it runs.

A plan is read-only on the target; the only thing it writes is its scratch
database. A desired file is arbitrary SQL, though, and the scratch load runs
it on a real server, so a statement that acts outside one database's schema
objects (``DROP DATABASE``, ``USE``, accounts, grants, server variables,
server files, attached files, names qualified with another database) would
escape the scratch. Every statement is classified here first; one that acts
outside is refused with its line and nothing of the file is executed.

Why tokens and not patterns over raw text: ``DROP DATABASE`` inside a
comment or a string literal is harmless, and a backtick name, a
case variation or a MariaDB versioned comment ``/*!40101 ... */`` (which the
server *does* execute) must not hide a statement. The file is split by the
migration splitter (it knows DELIMITER, quotes, comments, trigger bodies and
keeps each statement's line); each statement is then read by sqlglot's
tokenizer for its dialect, after uncovering MariaDB's executable comments.
Each engine's rules live beside the engine (``<engine>/confine.py``) and
see the same :class:`Word` stream; this module is the one home of the shared
mechanics: splitting, reading, statement starts, dotted names, refusal.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Set
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import expressions as exp
from sqlglot.dialects.mysql import MySQL
from sqlglot.dialects.postgres import Postgres
from sqlglot.dialects.sqlite import SQLite
from sqlglot.errors import SqlglotError
from sqlglot.tokens import Token, TokenType  # type: ignore[attr-defined]

from ptah.engines.base import DesiredSchemaInvalid
from ptah.engines.model import PlanError
from ptah.engines.splitter import (
    SplitError,
    Statement,
    mysql_dash_comment,
    mysql_quote_end,
    split_statements,
)
from ptah.engines.urls import EngineName

__all__ = [
    "Check",
    "StatementRefused",
    "Word",
    "check",
    "excerpt",
]

logging.getLogger("sqlglot").setLevel(logging.ERROR)


class StatementRefused(PlanError):
    """A statement of the desired source acts outside the plan's one database."""

    def __init__(self, line: int, statement: str, why: str) -> None:
        super().__init__(
            f"desired schema refused: line {line}: {why}: {excerpt(statement)}",
            "StatementRefused",
        )
        self.line = line
        self.statement = statement
        self.why = why


def excerpt(statement: str, limit: int = 120) -> str:
    """One line of ``statement``, shortened: what a refusal or a load error quotes."""
    folded = " ".join(statement.split())
    return folded if len(folded) <= limit else folded[: limit - 3] + "..."


class Word:
    """One token as the rules see it.

    ``kind`` is ``word`` (a bare keyword or name; ``upper`` is its upper-cased
    text), ``ident`` (a quoted identifier: never a keyword), ``string``,
    ``number`` or ``punct`` (``text`` is the punctuation itself).

    A plain class with slots, its ``upper`` and ``is_name`` worked out once: a schema
    of thousands of statements makes hundreds of thousands of words, each asked
    several times by the rules, on the plan's critical path.
    """

    __slots__ = ("is_name", "kind", "text", "upper")

    def __init__(self, kind: str, text: str) -> None:
        self.kind = kind
        self.text = text
        self.upper = text.upper() if kind == "word" else ""
        self.is_name = kind == "word" or kind == "ident"

    def is_(self, *words: str) -> bool:
        return self.kind == "word" and self.upper in words

    def punct(self, text: str) -> bool:
        return self.kind == "punct" and self.text == text

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Word):
            return NotImplemented
        return self.kind == other.kind and self.text == other.text

    def __hash__(self) -> int:
        return hash((self.kind, self.text))

    def __repr__(self) -> str:
        return f"Word(kind={self.kind!r}, text={self.text!r})"


Rule = Callable[[list[Word], str], "str | None"]

_STRINGS = {
    TokenType.STRING,
    TokenType.BYTE_STRING,
    TokenType.NATIONAL_STRING,
    TokenType.HEREDOC_STRING,
    TokenType.RAW_STRING,
    TokenType.HEX_STRING,
    TokenType.BIT_STRING,
    TokenType.UNICODE_STRING,
}


def _tokenizer_class(dialect: Any) -> Any:
    """The dialect's tokenizer with no "command" swallowing (``VACUUM x`` -> one string)."""

    class Reader(dialect.Tokenizer):  # type: ignore[misc]
        COMMANDS: set[Any] = set()

    return Reader


_READERS: dict[str, Any] = {
    "mysql": _tokenizer_class(MySQL),
    "sqlite": _tokenizer_class(SQLite),
    "postgres": _tokenizer_class(Postgres),
}
_SQLGLOT_DIALECT = {"mysql": "mysql", "sqlite": "sqlite", "postgres": "postgres"}


def _word(token: Token) -> Word:
    if token.token_type in _STRINGS:
        return Word("string", token.text)
    if token.token_type == TokenType.IDENTIFIER:
        return Word("ident", token.text)
    if token.token_type == TokenType.NUMBER:
        return Word("number", token.text)
    text = token.text
    if text[:1].isalpha() or text[:1] == "_" or token.token_type == TokenType.VAR:
        return Word("word", text)
    return Word("punct", text)


def uncover_versioned_comments(text: str, skipped: Set[str] = frozenset()) -> str:
    """``text`` with MariaDB/MySQL executable comments opened up, offsets kept (and a
    ``--`` the server reads as two minus signs made one, so no tokenizer hides the rest
    of its line as a comment).

    ``/*! ... */``, ``/*!40101 ... */``, ``/*M! ... */`` and ``/*M!100100 ... */``
    are executed by the server (the version test is treated as passed: the
    stricter reading). Their markers become spaces, so their content is read
    as the code it is. Quotes and ordinary comments are stepped over. Those whose
    marker (``/*!99999``) is in ``skipped`` become spaces whole: the reading of a
    server that skips them (MySQL's rules read it both ways).
    """
    out = list(text)
    i, n, inside = 0, len(text), False
    while i < n:
        ch = text[i]
        if ch in "'\"`":
            i = mysql_quote_end(text, i)
        elif ch == "#" or (text.startswith("--", i) and mysql_dash_comment(text, i)):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("--", i):
            # Two minus signs to the server (not followed by an ASCII space): the tokenizer
            # would take a comment to the end of the line and miss what the server runs.
            out[i + 1] = " "
            i += 2
        elif inside and text.startswith("*/", i):
            out[i] = out[i + 1] = " "
            inside = False
            i += 2
        elif text.startswith("/*", i):
            j = i + 2
            if text.startswith("M!", j):
                j += 1
            if j < n and text[j] == "!":
                # A versioned comment opens inside another too: MariaDB's lexer expands
                # a nested one as code (no check of its in-comment state), and the first
                # "*/" then ends both ("/*!50000 SELECT 1 /*!50000 ; DROP DATABASE x */"
                # ran the DROP where a regular comment hid it from the check). Its
                # version is five digits, or six (more are code: "/*!1234567" is version
                # 123456 and a 7); with fewer it is no version, and the digits are code.
                j += 1
                digits = 0
                while j + digits < n and text[j + digits].isdigit() and digits < 6:
                    digits += 1
                if digits >= 5:
                    j += digits
                if text[i:j] == "/*M!999999" and text.startswith("\\-", j):
                    # mariadb-dump's first line, "/*M!999999\- enable the sandbox mode */":
                    # a command to its client, and to the server (99.99.99 is above every
                    # server) a comment; read as code, it joined the dump's first SET to
                    # it, and the dump was refused. Any other versioned comment is code.
                    end = text.find("*/", j)
                    i = n if end < 0 else end + 2
                    continue
                if text[i:j] in skipped:
                    end = text.find("*/", j)
                    end = n if end < 0 else end + 2
                    out[i:end] = [c if c == "\n" else " " for c in text[i:end]]
                    i = end
                    continue
                for k in range(i, j):
                    out[k] = " "
                inside = True
                i = j
            else:
                end = text.find("*/", i + 2)
                i = n if end < 0 else end + 2
        else:
            i += 1
    return "".join(out)


def _digit_names(tokens: list[Token]) -> list[Token]:
    """MariaDB's names that begin with digits (``2024data``, ``s.2keep``) as one name each:
    the tokenizer reads a number and a name (or a number alone after a dot), so
    ``RENAME TABLE 2024data.keep TO t`` showed no qualified name."""
    out: list[Token] = []
    for token in tokens:
        prev = out[-1] if out else None
        if (
            prev is not None
            and prev.token_type == TokenType.NUMBER
            and token.start == prev.end + 1
            and token.token_type not in _STRINGS
            and (token.text[:1].isalnum() or token.text[:1] == "_")
        ):
            out[-1] = Token(
                TokenType.VAR, prev.text + token.text, prev.line, prev.col, prev.start, token.end
            )
            continue
        if (
            token.token_type == TokenType.NUMBER
            and len(out) > 1
            and out[-1].token_type == TokenType.DOT
            and out[-1].end + 1 == token.start
            and out[-2].end + 1 == out[-1].start
            and out[-2].token_type not in _STRINGS
            and out[-2].token_type != TokenType.NUMBER
        ):
            token = Token(TokenType.VAR, token.text, token.line, token.col, token.start, token.end)
        out.append(token)
    return out


STRING_TOKENS = frozenset(_STRINGS)
NAME_TOKENS = frozenset({TokenType.IDENTIFIER})  # a quoted name: never a keyword
digit_names = _digit_names


def mysql_tokens(text: str) -> list[Token]:
    """MariaDB's tokens of ``text`` as the check reads them (executable comments opened),
    their offsets ``text``'s own."""
    return list(_READERS["mysql"]().tokenize(uncover_versioned_comments(text)))


def read_words(text: str, engine: EngineName) -> list[Word]:
    """The statement as words; raises sqlglot's TokenError when it cannot be read."""
    if engine == "mysql":
        text = uncover_versioned_comments(text)
    if engine == "postgres":
        from ptah.engines.postgres.confine import read_words as read_pg

        return read_pg(text)
    out: list[Word] = []
    tokens = _READERS[engine]().tokenize(text)
    if engine == "mysql":
        tokens = _digit_names(tokens)
    for token in tokens:
        w = _word(token)
        if w.kind == "word" and len(w.text.split()) > 1:
            # The tokenizer joins some keyword pairs ("SQL SECURITY", "LOCK TABLES"): the
            # rules read each word, so that a routine's header or a table list is seen.
            out.extend(Word("word", part) for part in w.text.split())
        else:
            out.append(w)
    return out


def statement_starts(words: list[Word]) -> Iterator[int]:
    """Indices where a statement begins, including statements inside compound bodies.

    A procedure, trigger or event body holds statements after ``BEGIN``,
    ``THEN``, ``ELSE``, ``DO``, ``LOOP``, ``REPEAT``, a ``label:`` or a ``;``;
    each is checked like a top-level one.
    """
    n = len(words)
    i = 0
    expect = True
    while i < n:
        w = words[i]
        if w.punct(";"):
            expect = True
            i += 1
            continue
        if expect:
            if w.is_("BEGIN", "THEN", "ELSE", "DO", "LOOP", "REPEAT"):
                i += 1
                if (
                    w.is_("BEGIN")
                    and i + 1 < n
                    and words[i].is_("NOT")
                    and words[i + 1].is_("ATOMIC")
                ):
                    i += 2
                continue
            if w.is_name and i + 1 < n and words[i + 1].punct(":"):
                i += 2
                continue
            yield i
            expect = False
            tail = _body_after_header(words, i)
            if tail is not None:
                # A routine's or trigger's body may be one statement, no BEGIN: "CREATE
                # PROCEDURE p() DROP DATABASE x" ran unjudged when a later CALL p() ran it.
                first, body = tail
                yield from (j for j in range(first, body) if words[j].is_name)
                i, expect = body, True
                continue
        elif w.is_("BEGIN", "THEN", "ELSE", "DO", "LOOP", "REPEAT"):
            expect = True
            continue
        elif w.is_("HANDLER") and i + 1 < n and words[i + 1].is_("FOR"):
            # DECLARE ... HANDLER FOR <conditions> <statement>: the statement after the
            # conditions runs when one is raised.
            i, expect = _after_conditions(words, i + 2), True
            continue
        i += 1


def _after_conditions(words: list[Word], i: int) -> int:
    """Where the statement of ``HANDLER FOR cond[, cond...]`` starts (``i``: the first)."""
    n = len(words)
    while i < n:
        if words[i].is_("SQLSTATE"):
            i += 1
            if i < n and words[i].is_("VALUE"):
                i += 1
            i += 1  # the state's string
        elif words[i].is_("NOT") and i + 1 < n and words[i + 1].is_("FOUND"):
            i += 2
        else:
            i += 1  # SQLWARNING, SQLEXCEPTION, an error number or a condition's name
        if i < n and words[i].punct(","):
            i += 1
            continue
        return i
    return i


_HEADER_WORDS = frozenset(
    {
        # types' modifiers after RETURNS
        "UNSIGNED",
        "SIGNED",
        "ZEROFILL",
        "BINARY",
        "ASCII",
        "UNICODE",
        "BYTE",
        # characteristics
        "NOT",
        "DETERMINISTIC",
        "CONTAINS",
        "SQL",
        "NO",
        "READS",
        "MODIFIES",
        "DATA",
        "SECURITY",
        "DEFINER",
        "INVOKER",
        "LANGUAGE",
    }
)


def _closing(words: list[Word], k: int) -> int:
    """The index of the ``)`` that closes the ``(`` at ``k`` (``len(words)`` when none
    does): a header's parameter list or a type's arguments, nested parentheses and all."""
    depth = 0
    while k < len(words):
        if words[k].punct("("):
            depth += 1
        elif words[k].punct(")"):
            depth -= 1
            if depth == 0:
                return k
        k += 1
    return k


def _body_after_header(words: list[Word], i: int) -> tuple[int, int] | None:
    """For a CREATE PROCEDURE/FUNCTION/TRIGGER at ``i``: (first word after the parameter
    list or FOR EACH ROW, the body's first word), else None."""
    n = len(words)
    if not words[i].is_("CREATE"):
        return None
    j = i + 1
    if j + 1 < n and words[j].is_("OR") and words[j + 1].is_("REPLACE"):
        j += 2
    if j < n and words[j].is_("DEFINER"):
        j += 1
        while j < n and not words[j].is_("PROCEDURE", "FUNCTION", "TRIGGER", "AGGREGATE"):
            if words[j].punct(";") or j > i + 12:
                return None
            j += 1
    if j < n and words[j].is_("AGGREGATE"):
        j += 1
    if j >= n:
        return None
    if words[j].is_("TRIGGER"):
        k = j + 1
        while k + 2 < n and not words[k].punct(";"):
            if words[k].is_("FOR") and words[k + 1].is_("EACH") and words[k + 2].is_("ROW"):
                first = body = k + 3
                if body < n and words[body].is_("FOLLOWS", "PRECEDES"):
                    body += 2
                return (first, body) if body < n else None
            k += 1
        return None
    if not words[j].is_("PROCEDURE", "FUNCTION"):
        return None
    k = j + 1
    while k < n and not words[k].punct("("):
        if words[k].punct(";") or words[k].is_("RETURNS"):
            return None  # a loadable function (RETURNS ... SONAME): no body
        k += 1
    k = _closing(words, k)
    first = body = k + 1
    while body < n:
        w = words[body]
        if w.is_("RETURNS"):
            body += 2  # the type's name
        elif w.punct("("):
            body = _closing(words, body) + 1
        elif w.is_("CHARSET", "COLLATE", "COMMENT"):
            body += 2
        elif w.is_("CHARACTER"):
            body += 3
        elif w.upper in _HEADER_WORDS:
            body += 1
        else:
            break
    return (first, body) if body < n else None


@dataclass(frozen=True)
class DottedName:
    """A run ``a.b[.c]`` of names: ``before`` and ``after`` are the words around it;
    ``call`` is the upper-cased word before the innermost parenthesis around it
    (``EXTRACT`` in ``EXTRACT(YEAR FROM t.d)``), or empty."""

    parts: tuple[str, ...]
    before: Word | None
    before2: Word | None
    after: Word | None
    call: str = ""


def dotted_names(words: list[Word]) -> Iterator[DottedName]:
    """Every qualified name in the statement (``@@global.x`` included, for the rules)."""
    n = len(words)
    i = 0
    calls: list[str] = []
    while i < n:
        w = words[i]
        if not w.is_name:
            if w.kind == "punct":
                if w.text == "(":
                    calls.append(words[i - 1].upper if i > 0 else "")
                elif w.text == ")" and calls:
                    calls.pop()
            i += 1
            continue
        j = i
        dot = words[i + 1] if i + 1 < n else None
        if dot is None or dot.kind != "punct" or dot.text != ".":
            i += 1  # a lone name, the common case: no run to follow
            continue
        parts = [w.text]
        while j + 2 < n and words[j + 1].punct(".") and words[j + 2].is_name:
            parts.append(words[j + 2].text)
            j += 2
        if len(parts) > 1:
            yield DottedName(
                tuple(parts),
                words[i - 1] if i > 0 else None,
                words[i - 2] if i > 1 else None,
                words[j + 1] if j + 1 < n else None,
                calls[-1] if calls else "",
            )
        i = j + 1


# Functions whose arguments use FROM, FOR or IN as value syntax, not to name a table.
VALUE_FUNCTIONS = frozenset(
    {"EXTRACT", "SUBSTRING", "SUBSTR", "TRIM", "POSITION", "OVERLAY", "CAST", "CONVERT"}
)
_ROW_ALIASES = {"NEW", "OLD"}
# Words after which a name is an object's (table, view, index, trigger, routine) on
# every engine; each engine's rules add its own.
OBJECT_POSITIONS = frozenset(
    {
        "TABLE",
        "INTO",
        "FROM",
        "JOIN",
        "UPDATE",
        "REFERENCES",
        "VIEW",
        "TRIGGER",
        "INDEX",
        "FUNCTION",
        "PROCEDURE",
        "SEQUENCE",
        "EXISTS",
    }
)
_MODIFIERS = {"OR", "REPLACE", "IF", "NOT", "EXISTS", "ONLINE", "OFFLINE"}


def object_kind(words: list[Word], verb: int) -> str:
    """The kind a CREATE/DROP/ALTER at ``verb`` acts on (``DATABASE`` in ``DROP IF EXISTS``)."""
    j = verb + 1
    while j < len(words) and words[j].upper in _MODIFIERS:
        j += 1
    return words[j].upper if j < len(words) else ""


def first_reason(words: list[Word], head: Callable[[list[Word], int], str | None]) -> str | None:
    """The first reason ``head`` gives at any statement start (bodies included)."""
    for i in statement_starts(words):
        why = head(words, i)
        if why:
            return why
    return None


def names_an_object(name: DottedName, positions: Set[str]) -> bool:
    """Whether the qualified ``name`` names a table or routine (its qualifier a database).

    ``t.col`` in an expression is a column of a table; a qualified name is an
    object's when it has three parts, is called (``x.f(``, ``REFERENCES x.t(``),
    follows a word that introduces an object (``positions``), or is a
    trigger's table (``ON x.t FOR``/``BEGIN``/``WHEN``).
    """
    if len(name.parts) == 2 and name.parts[0].upper() in _ROW_ALIASES:
        return False
    after, before = name.after, name.before
    if name.call in VALUE_FUNCTIONS and len(name.parts) == 2:
        # EXTRACT(YEAR FROM t.d), SUBSTRING(t.s FROM 2 FOR t.n): values, not tables
        return after is not None and after.punct("(")
    return (
        len(name.parts) > 2
        or (after is not None and after.punct("("))
        or (before is not None and before.upper in positions)
        or (
            before is not None
            and before.is_("ON")
            and after is not None
            and after.is_("FOR", "BEGIN", "WHEN")
        )
    )


def qualified_tables(text: str, engine: EngineName) -> list[str]:
    """Database (or schema) qualifiers of tables and columns, as sqlglot parses them.

    A complement to the word rules for lists (``FROM a, other.b``); a statement
    sqlglot cannot parse gives nothing here, the word rules still apply.
    """
    if engine == "mysql":
        text = uncover_versioned_comments(text)
    try:
        tree = sqlglot.parse_one(text, read=_SQLGLOT_DIALECT[engine])
    except (SqlglotError, RecursionError, ValueError):
        return []
    if tree is None or isinstance(tree, exp.Command):
        return []
    found: list[str] = []
    for table in tree.find_all(exp.Table):
        if table.args.get("db") is not None:
            found.append(table.text("db"))
    for column in tree.find_all(exp.Column):
        if column.args.get("db") is not None:
            found.append(column.text("db"))
    return found


def _rule(engine: EngineName) -> Rule:
    if engine == "mysql":
        from ptah.engines.mysql.confine import refusal

        return refusal
    if engine == "sqlite":
        from ptah.engines.sqlite.confine import refusal as sqlite_refusal

        return sqlite_refusal
    from ptah.engines.postgres.confine import refusal as pg_refusal

    return pg_refusal


# The source :func:`check` passed last and its statements, handed to the load that follows
# it (each engine's normalise splits the source it loads): a schema of thousands of
# statements is then split once per plan, not twice. Keyed by the text itself.
_passed: tuple[str, EngineName, list[Statement]] | None = None


def split(sql: str, engine: EngineName) -> list[Statement]:
    """The desired source's statements with their lines (the splitter's dialect rules)."""
    passed = _passed
    if passed is not None and passed[1] == engine and passed[0] == sql:
        return list(passed[2])
    try:
        return split_statements(sql, engine)
    except SplitError as exc:
        raise DesiredSchemaInvalid(f"desired schema does not load: {exc}") from None


def _file_refusal(
    engine: EngineName, read: list[tuple[int, str, list[Word]]]
) -> tuple[int, str] | None:
    """The engine's rules over the statements read together (index, why), or None."""
    if engine == "postgres":
        # What runs while the file loads depends on the routines the whole file defines.
        from ptah.engines.postgres.confine import load_time_refusal

        return load_time_refusal(read)
    if engine == "mysql":
        # A SET of sql_mode from a user variable depends on what the whole file gives it.
        from ptah.engines.mysql.confine import file_refusal

        return file_refusal(read)
    return None


class Check:
    """The check of one source, in growing prefixes: a load may run the first statements
    while the check still reads the rest (:meth:`upto` says which may run).

    A statement may run only once it passed: its own rules, and the engine's rules over
    the file read up to it (what runs while a file loads depends on the routines defined
    before it: a routine defined later does not exist yet when an earlier statement runs,
    and those rules refuse more, never less, the more of the file they read). The whole
    file is always read in the end (:meth:`upto` with every statement), and a refusal
    found in a prefix is reported as :func:`check` reports the whole file's: the first
    statement its own rules refuse anywhere in the file, else the file rules' first.
    """

    def __init__(self, sql: str, engine: EngineName) -> None:
        self.sql = sql
        self.engine = engine
        self.statements = split(sql, engine)
        self._rule = _rule(engine)
        self._read: list[tuple[int, str, list[Word]]] = []

    def upto(self, count: int) -> None:
        """Raise :class:`StatementRefused` unless the first ``count`` statements pass."""
        count = min(count, len(self.statements))
        self._read_upto(count)
        found = _file_refusal(self.engine, self._read[:count])
        if found is not None:
            if count < len(self.statements):
                # The whole file's verdict: a later statement's own refusal comes first.
                self._read_upto(len(self.statements))
                found = _file_refusal(self.engine, self._read) or found
            k, why = found
            line, text, _ = self._read[k]  # by index: several statements may share a line
            raise StatementRefused(line, text, why)
        if count == len(self.statements):
            global _passed
            _passed = (self.sql, self.engine, list(self.statements))

    def _read_upto(self, count: int) -> None:
        for statement in self.statements[len(self._read) : count]:
            try:
                words = read_words(statement.text, self.engine)
            except SqlglotError:
                raise StatementRefused(
                    statement.line, statement.text, "the statement cannot be read to be checked"
                ) from None
            why = self._rule(words, statement.text)
            if why:
                raise StatementRefused(statement.line, statement.text, why)
            self._read.append((statement.line, statement.text, words))


def check(sql: str, engine: EngineName) -> list[Statement]:
    """The statements of ``sql``, after refusing any that acts outside one database.

    Raises :class:`StatementRefused` for the first such statement (its line,
    an excerpt and why) and :class:`DesiredSchemaInvalid` when the source
    cannot be split. A statement the tokenizer cannot read is refused too: a
    guard that cannot read a statement cannot vouch for it.
    """
    checking = Check(sql, engine)
    checking.upto(len(checking.statements))
    return checking.statements
