"""Split a migration file into statements, keeping each statement's text verbatim.

Why not sqlglot: a migration must run exactly as written. sqlglot parses and
re-generates SQL, and its tokenizer rejects or rewrites syntax it does not know
(PL/pgSQL bodies, MariaDB-only options, psql-isms); a runner that changes what the
author wrote, or refuses valid SQL, is worse than one that only finds the
semicolons. So this is a small lexer that knows where a ``;`` does *not* end a
statement:

* strings ``'...'`` (``''`` doubling; backslash escapes on MySQL and in
  PostgreSQL ``E'...'``), quoted identifiers ``"..."``, MySQL/SQLite backticks,
  SQLite ``[...]``;
* comments ``-- ...`` (on MySQL only when followed by whitespace), MySQL ``# ...``,
  ``/* ... */`` (nested on PostgreSQL);
* PostgreSQL dollar quoting ``$$ ... $$`` / ``$tag$ ... $tag$`` (function bodies,
  ``DO`` blocks) and SQL-standard ``BEGIN ATOMIC ... END`` bodies;
* SQLite ``CREATE TRIGGER ... BEGIN ...; END``, confirmed with
  :func:`sqlite3.complete_statement`;
* MySQL client ``DELIMITER xx`` lines, for procedures and triggers.

Each statement keeps the 1-based line it starts on, for error messages.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Dialect = Literal["postgres", "mysql", "sqlite"]

_DOLLAR_TAG = re.compile(r"\$([A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$")
# What joins two string constants into one on PostgreSQL: whitespace with a newline, and
# comment lines after it. A string continued so keeps its first part's kind: an E'' string's
# next part reads backslash escapes too.
PG_STRING_CONTINUES = re.compile(r"[ \t\f]*[\n\r](?:[ \t\n\r\f]+|--[^\n\r]*[\n\r])*'")
_DELIMITER_LINE = re.compile(r"[ \t]*DELIMITER[ \t]+(\S+)[ \t]*(?:\r?\n|$)", re.IGNORECASE)
# A bare word: a letter of any script (or ``_``) first, as each server reads unquoted
# names (an ASCII-only pattern failed on ``CREATE TABLE naïve``, an internal error).
_WORD = re.compile(r"[^\W\d][\w$]*")
# What the PostgreSQL splitter's loop steps over without changing its state, as one run:
# ASCII characters that are not a quote, a statement's end, a comment's or a dollar
# quote's start or a backslash (blanks, digits, brackets, operators but "-" and "/"), and
# whole ASCII words (not followed by another character of a word, which the loop would
# read as part of it) other than those the loop tracks (ATOMIC, CASE, END). The run's last
# word (``w``) is the loop's previous word after it. Each character and word was a turn
# of the loop of its own: a 1,000-table file has some 55,000 words and as many blanks.
_PG_RUN = re.compile(
    r"""(?:
      [\t\n\r\f\v !#%&()*+,.0-9:<=>?@\[\]^`{|}~]+
    | (?![Aa][Tt][Oo][Mm][Ii][Cc](?![\w$])|[Cc][Aa][Ss][Ee](?![\w$])|[Ee][Nn][Dd](?![\w$]))
      (?P<w>[A-Za-z_][A-Za-z0-9_$]*)(?![\w$]|[^\x00-\x7f])
    )*""",
    re.VERBOSE,
)


def read_sql(path: str | Path) -> str:
    """A SQL file's text exactly as written: UTF-8, its line endings kept.

    Not ``Path.read_text()``: its universal newlines turn ``\\r\\n`` into ``\\n``, which
    changes every string literal and routine body that spans lines in a file saved with
    CRLF endings, so the planned default, check or function body differed from the one
    psql loads from the same file (migrations are read as bytes, and their checksums too).
    Raises ``OSError`` or ``UnicodeDecodeError``."""
    return Path(path).read_bytes().decode("utf-8")


class SplitError(ValueError):
    """The file ends inside a string, comment or body; the message says where it began."""


@dataclass(frozen=True)
class Statement:
    text: str
    line: int


def _is_ident_char(ch: str) -> bool:
    return ch.isalnum() or ch in "_$"


def mysql_dash_comment(sql: str, i: int) -> bool:
    """Whether the ``--`` at ``i`` starts a comment as MariaDB/MySQL read it: followed by
    an ASCII space or control character (or the end), byte-wise. Not by any character
    Python calls a space: ``--`` and U+00A0 are two minus signs and a name to the server,
    and "... 1 --\u00a0; DROP DATABASE x; -- " was one statement with a comment to the
    splitter, two statements of one query to the server."""
    return i + 2 >= len(sql) or sql[i + 2] <= " " or sql[i + 2] == "\x7f"


def mysql_quote_end(sql: str, i: int) -> int:
    """Where the MariaDB/MySQL quoted span opened at ``i`` ends: the index after its
    closing quote (``len(sql)`` when it never closes). The quote is ``sql[i]`` (``'``,
    ``"`` or a backtick); a doubled quote stays inside, and so does a backslash's next
    character, except in a backtick name, where the server reads no escapes."""
    quote, j, n = sql[i], i + 1, len(sql)
    while j < n:
        if sql[j] == "\\" and quote != "`":
            j += 2
            continue
        if sql[j] == quote:
            if j + 1 < n and sql[j + 1] == quote:
                j += 2
                continue
            return j + 1
        j += 1
    return n + 1


def _line_start(sql: str, i: int) -> bool:
    """Only blanks between the line's start and ``i``."""
    j = sql.rfind("\n", 0, i) + 1
    return not sql[j:i].strip()


class _Splitter:
    def __init__(self, sql: str, dialect: Dialect) -> None:
        self.sql = sql
        self.dialect = dialect
        self.n = len(sql)
        self.out: list[Statement] = []
        self.start = 0
        self.delimiter = ";"
        self.atomic_depth = 0
        self.prev_word = ""
        self.trigger_open = False
        self._code_at: tuple[int, int] | None = None  # (statement start, its first code)
        self._line_pos, self._line_no = 0, 1

    def line_at(self, pos: int) -> int:
        # Counted on from the last position asked for (statements come in order), so a
        # file of thousands of statements is read once, not once per statement.
        if pos < self._line_pos:
            self._line_pos, self._line_no = 0, 1
        self._line_no += self.sql.count("\n", self._line_pos, pos)
        self._line_pos = pos
        return self._line_no

    def emit(self, end: int) -> None:
        chunk = self.sql[self.start : end]
        first = _first_code(chunk, self.dialect)
        if first is not None:
            # Leading comments are dropped so the statement and its line start at code.
            self.out.append(Statement(chunk[first:].rstrip(), self.line_at(self.start + first)))

    def at_statement_start(self, i: int) -> bool:
        """Whether only blanks and comments stand between the statement's start and ``i``.

        Once code is found it stays found for the rest of the statement, so it is
        remembered: read again from the statement's start at each line of a long one (a
        MySQL INSERT of 400,000 rows, one a line), it was quadratic."""
        if self._code_at is not None and self._code_at[0] == self.start:
            return i <= self._code_at[1]
        first = _first_code(self.sql[self.start : i], self.dialect)
        if first is None:
            return True
        self._code_at = (self.start, self.start + first)
        return False

    def run(self) -> list[Statement]:
        sql, n, i = self.sql, self.n, 0
        mysql, pg, lite = (self.dialect == d for d in ("mysql", "postgres", "sqlite"))
        while i < n:
            if pg and (run := _PG_RUN.match(sql, i)) is not None and run.end() > i:
                word = run.group("w")
                if word is not None:
                    self.prev_word = word.upper()
                i = run.end()
                if i >= n:
                    break
            ch = sql[i]
            if mysql and (i == 0 or sql[i - 1] == "\n") and self.at_statement_start(i):
                m = _DELIMITER_LINE.match(sql, i)
                if m:
                    self.emit(i)
                    self.delimiter = m.group(1)
                    i = m.end()
                    self.start = i
                    continue
            if pg and ch == "\\" and self.at_statement_start(i) and _line_start(sql, i):
                # A psql meta-command (\connect, \restrict) runs to the end of its line:
                # its own statement, as psql reads it.
                self.emit(i)
                self.start = i
                end = sql.find("\n", i)
                i = n if end < 0 else end
                self.emit(i)
                self.start = i
                continue
            if sql.startswith(self.delimiter, i) and self.atomic_depth == 0:
                end = i + len(self.delimiter)
                if lite and self._in_trigger_body(i):
                    i = end
                    continue
                self.emit(i)
                self.start = end
                i = end
                self.prev_word = ""
                self.trigger_open = False
                continue
            if ch == "'":
                backslash = mysql or (
                    pg
                    and i > 0
                    and sql[i - 1] in "eE"
                    and (i < 2 or not _is_ident_char(sql[i - 2]))
                )
                i = self._skip_quoted(i, "'", backslash)
                while pg and backslash and (m := PG_STRING_CONTINUES.match(sql, i)) is not None:
                    # "E'a'<LF>'\\', ' ; COPY ...' ..." : the server reads the next part as
                    # escaped too (a plan ran a COPY TO PROGRAM hidden so).
                    i = self._skip_quoted(m.end() - 1, "'", True)
            elif ch == '"':
                i = self._skip_quoted(i, '"', mysql)
            elif ch == "`" and (mysql or lite):
                i = self._skip_quoted(i, "`", False)
            elif ch == "[" and lite:
                i = self._skip_to(i, "]")
            elif (
                ch == "-" and sql.startswith("--", i) and (not mysql or mysql_dash_comment(sql, i))
            ) or (ch == "#" and mysql):
                i = self._skip_line(i)
            elif ch == "/" and sql.startswith("/*", i):
                i = self._skip_block_comment(i, nested=pg)
            elif ch == "$" and pg and (i == 0 or not _is_ident_char(sql[i - 1])):
                m = _DOLLAR_TAG.match(sql, i)
                if m:
                    tag = m.group(0)
                    close = sql.find(tag, m.end())
                    if close < 0:
                        raise SplitError(f"line {self.line_at(i)}: {tag} quote never closed")
                    i = close + len(tag)
                else:
                    i += 1
            elif (ch.isalpha() or ch == "_") and (m := _WORD.match(sql, i)) is not None:
                word = m.group(0).upper()
                if pg:
                    self._track_atomic(word)
                self.prev_word = word
                i = m.end()
            else:
                i += 1
        self.emit(n)
        if self.atomic_depth:
            raise SplitError("file ends inside a BEGIN ATOMIC body (missing END)")
        return self.out

    def _in_trigger_body(self, i: int) -> bool:
        """Whether the ``;`` at ``i`` is inside a CREATE TRIGGER's body, not a statement's
        end, as :func:`sqlite3.complete_statement` reads the statement so far. Once it
        said a body is open, only a ``;`` right after END can close it, so it is asked
        again only then: asked at each ``;`` of a long body, with the whole statement so
        far each time, it was quadratic."""
        if self.trigger_open and self.prev_word != "END":
            return True
        self.trigger_open = not sqlite3.complete_statement(self.sql[self.start : i] + ";")
        return self.trigger_open

    def _track_atomic(self, word: str) -> None:
        opens_body = word == "ATOMIC" and self.prev_word == "BEGIN"
        if opens_body or (self.atomic_depth and word == "CASE"):
            self.atomic_depth += 1
        elif self.atomic_depth and word == "END":
            self.atomic_depth -= 1

    def _skip_quoted(self, i: int, quote: str, backslash: bool) -> int:
        j = i + 1
        while j < self.n:
            c = self.sql[j]
            if backslash and c == "\\":
                j += 2
                continue
            if c == quote:
                if j + 1 < self.n and self.sql[j + 1] == quote:
                    j += 2
                    continue
                return j + 1
            j += 1
        raise SplitError(f"line {self.line_at(i)}: {quote} quote never closed")

    def _skip_to(self, i: int, close: str) -> int:
        j = self.sql.find(close, i + 1)
        if j < 0:
            raise SplitError(f"line {self.line_at(i)}: {self.sql[i]} never closed")
        return j + 1

    def _skip_line(self, i: int) -> int:
        return _line_comment_end(self.sql, i, self.dialect)

    def _skip_block_comment(self, i: int, nested: bool) -> int:
        end = _comment_end(self.sql, i, nested)
        if end >= 0:
            return end
        raise SplitError(f"line {self.line_at(i)}: comment never closed")


def _line_comment_end(text: str, i: int, dialect: Dialect) -> int:
    """Offset just past the line comment at ``i``. PostgreSQL ends one at a carriage return
    too (its lexer's newline is [\\n\\r]): "SELECT 1 -- x<CR>; COPY ... TO PROGRAM ...;" was
    one statement with a comment here and two statements to the server, which ran the
    program in a plan. MariaDB and SQLite end one at a line feed only."""
    j = text.find("\n", i)
    if dialect == "postgres":
        r = text.find("\r", i)
        if r >= 0 and (j < 0 or r < j):
            j = r
    return len(text) if j < 0 else j + 1


def _first_code(chunk: str, dialect: Dialect) -> int | None:
    """Offset of the first character that is neither whitespace nor comment, if any."""
    i, n = 0, len(chunk)
    while i < n:
        ch = chunk[i]
        if ch.isspace():
            i += 1
        elif (
            chunk.startswith("--", i) and (dialect != "mysql" or mysql_dash_comment(chunk, i))
        ) or (ch == "#" and dialect == "mysql"):
            i = _line_comment_end(chunk, i, dialect)
        elif chunk.startswith("/*", i) and not (
            dialect == "mysql" and chunk.startswith(("/*!", "/*M!"), i)
        ):
            i = _comment_end(chunk, i, nested=dialect == "postgres")
            if i < 0:
                return None
        else:
            return i
    return None


def _comment_end(text: str, i: int, nested: bool) -> int:
    """Offset just past the block comment starting at ``i``; -1 when it never closes."""
    depth, j, n = 1, i + 2, len(text)
    while j < n:
        if nested and text.startswith("/*", j):
            depth, j = depth + 1, j + 2
        elif text.startswith("*/", j):
            depth, j = depth - 1, j + 2
            if depth == 0:
                return j
        else:
            j += 1
    return -1


def split_statements(sql: str, dialect: Dialect) -> list[Statement]:
    """The statements of ``sql`` in order, comments-only chunks dropped, text verbatim.

    A NUL character is refused wherever it stands: no server takes one in SQL text, and
    the C client libraries end the query string there, so PostgreSQL ran the statements
    before it and silently never saw those after it (a desired file planned half its
    tables, a migration recorded as applied ran half its file)."""
    nul = sql.find("\0")
    if nul >= 0:
        line = sql.count("\n", 0, nul) + 1
        raise SplitError(f"line {line}: a NUL character is not SQL text (is this a binary file?)")
    return _Splitter(sql.lstrip("\ufeff"), dialect).run()
