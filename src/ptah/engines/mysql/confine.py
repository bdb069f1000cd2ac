"""What a MariaDB/MySQL desired file may not do: act outside its one database.

The scratch database lives on a real server (the dev server or the target's
own), so anything server-wide in the desired file would run there: whole
databases, the session's current database, accounts and grants, global
variables, plugins, server files, dynamic SQL (which no reader can vouch
for) and server administration. A name qualified with a database reaches
another database (the target's own name included: the scratch is not it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from sqlglot.errors import SqlglotError

from ptah.engines.confine import (
    NAME_TOKENS,
    OBJECT_POSITIONS,
    STRING_TOKENS,
    Word,
    digit_names,
    dotted_names,
    first_reason,
    mysql_tokens,
    names_an_object,
    object_kind,
    qualified_tables,
    read_words,
    statement_starts,
    uncover_versioned_comments,
)
from ptah.engines.mysql import bounds
from ptah.engines.mysql.modes import SAFE_MODES
from ptah.engines.mysql.udf import calls


@dataclass(frozen=True)
class Scope:
    """Whose rules judge a statement: a desired file's (loaded into a scratch, where no
    qualifier is the file's own: the scratch is no database the file names) or a
    versioned migration's (run on the target itself, whose own name ``database`` a file
    may use: ``USE app``, ``app.t``). A migration may do what DDL and DML do in its
    database, and what a session does for itself (a statement's time, a named lock);
    never what reaches past the database: another database, the server's accounts,
    privileges (the server's ``mysql`` schema), variables, files or replication."""

    migration: bool = False
    database: str = ""  # a migration's target ("" when its session has none)

    def own(self, qualifier: str) -> bool:
        """Whether ``qualifier`` (a name's database part) is the database judged: the
        exact name (a case-sensitive server reads App.t and app.t as two databases)."""
        return self.migration and bool(self.database) and qualifier == self.database


DESIRED = Scope()

_OBJECT_WHY = {
    "DATABASE": "acts on a whole database",
    "SCHEMA": "acts on a whole database",
    "DATABASES": "acts on a whole database",
    "USER": "changes server accounts",
    "ROLE": "changes server accounts",
    "SERVER": "changes server-wide objects",
    "TABLESPACE": "changes server-wide objects",
    "LOGFILE": "changes server-wide objects",
    "INSTANCE": "changes server-wide objects",
    "RESOURCE": "changes server-wide objects",
}
_ADMIN = {"FLUSH", "PURGE", "KILL", "SHUTDOWN", "RESTART", "BINLOG", "CLONE", "BACKUP"}
_ADMIN_PAIRS = {
    "CHANGE": {"MASTER", "REPLICATION"},
    "RESET": {"MASTER", "SLAVE", "REPLICA", "QUERY", "PERSIST", "BINARY"},
    "START": {"SLAVE", "REPLICA", "ALL", "GROUP_REPLICATION"},
    "STOP": {"SLAVE", "REPLICA", "ALL", "GROUP_REPLICATION"},
    "CACHE": {"INDEX"},
    "LOCK": {"INSTANCE"},
}
_DYNAMIC = {"PREPARE", "EXECUTE", "DEALLOCATE"}
_GLOBAL_SCOPES = {"GLOBAL", "PERSIST", "PERSIST_ONLY"}
# Words after which a name is a table, view, routine, trigger, event or sequence.
_TABLE_POSITION = OBJECT_POSITIONS | {
    "TABLES",
    "EVENT",
    "TO",
    "CALL",
    "INSERT",
    "REPLACE",
    "TRUNCATE",
    "DESCRIBE",
    "DESC",
    "EXPLAIN",
    "HANDLER",
    "FOR",
    "RENAME",  # ALTER TABLE t RENAME [TO|AS|=] x.t
    "AS",
    # Modifiers between a statement's verb and its table: INSERT DELAYED x.t, UPDATE
    # LOW_PRIORITY x.t, REPLACE HIGH_PRIORITY x.t, DELETE IGNORE ...
    "DELAYED",
    "LOW_PRIORITY",
    "HIGH_PRIORITY",
    "IGNORE",
    "QUICK",
    "PACKAGE",
    "BODY",
}
# Statements whose lists are of tables only: any qualified name in them is a table's
# (RENAME TABLE a TO b, x.t TO c moved another database's table into the scratch, which
# was dropped with it).
_TABLE_LISTS = {
    "RENAME": None,
    "OPTIMIZE": None,
    "REPAIR": None,
    "CHECKSUM": None,
    "LOCK": None,
    "ANALYZE": {"TABLE", "TABLES", "NO_WRITE_TO_BINLOG", "LOCAL"},
    "CHECK": {"TABLE", "TABLES"},
    "DROP": {"TABLE", "TABLES", "TEMPORARY", "VIEW", "SEQUENCE"},
}


# Words that may follow ALTER DATABASE where it names no database (the current one's).
_DATABASE_OPTIONS = {"DEFAULT", "CHARACTER", "CHARSET", "COLLATE", "COMMENT", "READ"}
# SHOW statements whose FROM/IN names a table first, then (a second FROM/IN) a database.
_SHOW_OF_TABLE = {"COLUMNS", "FIELDS", "INDEX", "INDEXES", "KEYS"}


def _show(words: list[Word], i: int, scope: Scope) -> str | None:
    """``SHOW TABLES FROM x``, ``SHOW COLUMNS FROM t IN x``, ``SHOW TRIGGERS IN x``,
    ``SHOW CREATE DATABASE x``, ``SHOW PROCEDURE CODE x.p``...: a database named where
    SHOW reads."""
    end = _statement_end(words, i)
    for name in dotted_names(words[i:end]):
        if not scope.own(name.parts[0]) and not (name.before and name.before.punct("@@")):
            return f"names another database ({'.'.join(name.parts[:-1])})"
    if i + 3 < end and words[i + 1].is_("CREATE") and words[i + 2].is_("DATABASE", "SCHEMA"):
        k = i + 3
        while k < end and words[k].is_("IF", "NOT", "EXISTS"):
            k += 1
        if k < end and words[k].is_name and not scope.own(words[k].text):
            return f"names another database ({words[k].text})"
    of_table = any(words[j].upper in _SHOW_OF_TABLE for j in range(i + 1, min(i + 4, end)))
    seen = 0
    for j in range(i + 1, end - 1):
        w = words[j]
        if w.is_("LIKE", "WHERE"):
            return None
        if w.is_("FROM", "IN"):
            seen += 1
            db = words[j + 1]
            if (seen == 2 or not of_table) and db.is_name and not scope.own(db.text):
                return f"names another database ({db.text})"
    return None


def _head(words: list[Word], i: int, scope: Scope = DESIRED) -> str | None:
    w = words[i]
    nxt = words[i + 1] if i + 1 < len(words) else None
    if w.is_("USE") and nxt is not None and nxt.is_name and not scope.own(nxt.text):
        return "switches the session to another database"
    if w.is_("SHOW"):
        return _show(words, i, scope)
    if w.is_("CREATE") and any(
        words[k].is_("SONAME") and words[k + 1].kind == "string"
        for k in range(i, min(_statement_end(words, i), len(words) - 1))
    ):
        # CREATE FUNCTION f RETURNS STRING SONAME 'lib.so': a server-wide loadable function,
        # its library loaded into the server (mysql.func), not the database's.
        return "loads a server library (a loadable function, SONAME)"
    if w.is_("CREATE", "DROP", "ALTER"):
        kind = object_kind(words, i)
        if kind in ("DATABASE", "SCHEMA") and w.is_("ALTER") and scope.migration:
            # ALTER DATABASE [name] options: the target's own options, when it names none
            # or names the target (never another, never CREATE or DROP of one).
            at = i + 2
            name = words[at] if at < len(words) else None
            if name is None or scope.own(name.text) or name.upper in _DATABASE_OPTIONS:
                return None
        return _OBJECT_WHY.get(kind)
    if w.is_("RENAME") and nxt is not None and nxt.is_("USER"):
        return "changes server accounts"
    if w.is_("GRANT", "REVOKE"):
        return "grants privileges to server accounts"
    if w.is_("SET") and nxt is not None and nxt.is_("STATEMENT"):
        # ``SET STATEMENT var=value[, ...] FOR <statement>`` runs the statement: each word
        # after a FOR of it is judged as a statement's start.
        for j in range(i + 2, len(words) - 1):
            if words[j].punct(";"):
                break
            if words[j].is_("FOR"):
                why = _head(words, j + 1, scope)
                if why:
                    return why
        return None
    if w.is_("SET"):
        after = words[i + 2] if i + 2 < len(words) else None
        if nxt is not None and (
            nxt.is_("PASSWORD") or (nxt.is_("DEFAULT") and after is not None and after.is_("ROLE"))
        ):
            return "changes server accounts"
        if nxt is not None and nxt.is_("ROLE"):
            # As on PostgreSQL: the file runs with the privileges it was given, not a
            # role's it may switch to (what it creates, and its DEFINERs, would be done as
            # CURRENT_ROLE's, beyond what the plan's user was vouched for).
            return "switches the session's role"
        return None
    if w.is_("INSTALL", "UNINSTALL"):
        return "installs or removes server plugins"
    if w.is_("LOAD") and nxt is not None and nxt.is_("DATA", "XML", "INDEX"):
        return "reads files on the server"
    if w.is_("XA"):
        # A global transaction left open keeps the scratch from being dropped.
        return "controls a global (XA) transaction"
    if w.upper in _DYNAMIC:
        return "runs dynamic SQL, which cannot be checked"
    if w.upper in _ADMIN:
        return "administers the server"
    pair = _ADMIN_PAIRS.get(w.upper)
    if pair and nxt is not None and nxt.upper in pair:
        return "administers the server"
    return None


def _set_scope(words: list[Word]) -> str | None:
    """``SET GLOBAL x``, ``SET PERSIST x``, ``SET @@global.x`` anywhere in a SET."""
    in_set = False
    for i, w in enumerate(words):
        if w.punct(";"):
            in_set = False
        elif w.is_("SET"):
            in_set = True
        elif in_set and w.upper in _GLOBAL_SCOPES and i + 1 < len(words) and words[i + 1].is_name:
            return "sets a server-wide variable"
        elif (
            w.punct("@@")
            and i + 2 < len(words)
            and words[i + 1].upper in _GLOBAL_SCOPES
            and words[i + 2].punct(".")
        ):
            return "sets a server-wide variable" if in_set else None
    return None


# S3 stores the table on a remote service; OQGRAPH reads its DATA_TABLE; SPHINX queries a
# search daemon named by its CONNECTION or, in its older form, its COMMENT
# ('sphinx://host:9312/index'): the server ships ha_sphinx.so, one INSTALL away.
_OUTSIDE_ENGINES = {"FEDERATED", "FEDERATEDX", "CONNECT", "SPIDER", "S3", "OQGRAPH", "SPHINX"}


def _server_files(words: list[Word], scope: Scope = DESIRED) -> str | None:
    """Files on the server and other servers: OUTFILE/DUMPFILE, table
    files placed by DATA/INDEX DIRECTORY, engines and CONNECTION options that read
    files or reach another server."""
    # Where "UNION (" can only be a MERGE table's list: an ALTER, or a CREATE naming the
    # engine (a view's "SELECT ... UNION (SELECT x.a FROM t x)" is no table list).
    merge = words[0].is_("ALTER") or (
        words[0].is_("CREATE") and any(x.upper in ("MERGE", "MRG_MYISAM") for x in words)
    )
    for i, w in enumerate(words):
        nxt = words[i + 1] if i + 1 < len(words) else None
        if w.is_("DATA", "INDEX") and nxt is not None and nxt.is_("DIRECTORY"):
            return "places table files on the server's file system"
        if w.is_("CONNECTION") and nxt is not None and (nxt.punct("=") or nxt.kind == "string"):
            return "connects a table to another server"
        if w.is_("ENGINE") and nxt is not None:
            engine = words[i + 2] if nxt.punct("=") and i + 2 < len(words) else nxt
            if engine.text.upper() in _OUTSIDE_ENGINES:
                return f"uses the {engine.text} engine, which reaches outside the database"
        if w.is_("UNION") and nxt is not None and (nxt.punct("=") or (merge and nxt.punct("("))):
            # A MERGE table's UNION [=] (t1, t2): its tables, which a qualifier puts elsewhere.
            for j in range(i + 1, len(words) - 1):
                if words[j].punct(")"):
                    break
                if words[j].is_name and words[j + 1].punct(".") and not scope.own(words[j].text):
                    return "names another database's table in a MERGE table"
        if w.is_("INTO") and nxt is not None and nxt.is_("OUTFILE", "DUMPFILE"):
            return "writes a file on the server"
    return None


# Functions whose argument is a sequence (a table): SELECT SETVAL(other.s, 1000) moved
# another database's sequence.
_SEQUENCE_FUNCTIONS = {"NEXTVAL", "LASTVAL", "SETVAL"}


def _table_list(words: list[Word], scope: Scope = DESIRED) -> str | None:
    for start in statement_starts(words):
        head = words[start].upper
        if head not in _TABLE_LISTS:
            continue
        kinds = _TABLE_LISTS[head]
        nxt = words[start + 1].upper if start + 1 < len(words) else ""
        if kinds is not None and nxt not in kinds:
            continue
        for name in dotted_names(words[start : _statement_end(words, start)]):
            if (name.before is None or not name.before.punct("@@")) and not scope.own(
                name.parts[0]
            ):
                return f"names another database ({'.'.join(name.parts[:-1])})"
    return None


# Words that open a list of table references, and the words that end one.
_REFERENCES_OPEN = {"FROM", "UPDATE", "JOIN", "DELETE", "USING"}
_REFERENCES_END = {
    "WHERE",
    "SET",
    "ON",
    "GROUP",
    "HAVING",
    "ORDER",
    "LIMIT",
    "WINDOW",
    "UNION",
    "EXCEPT",
    "INTERSECT",
    "INTO",
    "FOR",
    "LOCK",
    "PROCEDURE",
    "RETURNING",
    "VALUES",
    "SELECT",
}
_SUBQUERY = {"SELECT", "WITH", "VALUES", "TABLE"}


def _listed_tables(words: list[Word], scope: Scope = DESIRED) -> str | None:
    """A qualified name after a comma in a list of table references (``FROM t, x.u``,
    ``UPDATE IGNORE t, x.u SET``, ``FROM (t, x.u)``), which the parser-based reading
    misses where sqlglot cannot parse the statement. A comma in a subquery's or a
    condition's parenthesis is not the list's."""
    n = len(words)
    for start, w in enumerate(words):
        if w.kind != "word" or w.upper not in _REFERENCES_OPEN:
            continue
        lists = [True]  # per open parenthesis since the start: whether it holds tables
        i = start + 1
        while i < n:
            x = words[i]
            if x.punct(";"):
                break
            if i > start and lists[-1] and x.kind == "word" and x.upper in _REFERENCES_OPEN:
                break  # the next list's own scan reads on from here (linear, not quadratic)
            if x.kind == "word" and x.upper in _REFERENCES_END:
                if len(lists) == 1:
                    break  # the list ends: WHERE, SET, ON...
                lists[-1] = False  # a nested join's ON ...: the rest is a condition
            elif x.punct("("):
                nxt = words[i + 1] if i + 1 < n else None
                table_list = (
                    lists[-1]
                    and nxt is not None
                    and not (nxt.kind == "word" and nxt.upper in _SUBQUERY)
                    and words[i - 1].upper not in _REFERENCES_END
                    and (words[i - 1].punct(",") or words[i - 1].punct("(") or i - 1 == start)
                )
                lists.append(table_list)
            elif x.punct(")"):
                lists.pop()
                if not lists:
                    break
            elif (
                lists[-1]
                and x.punct(",")
                and i + 3 < n
                and words[i + 1].is_name
                and words[i + 2].punct(".")
                and words[i + 3].is_name
                and not (i + 4 < n and words[i + 4].punct("("))
                and not scope.own(words[i + 1].text)
            ):
                return f"names another database ({words[i + 1].text})"
            i += 1
    return None


def _qualified(words: list[Word], text: str, scope: Scope = DESIRED) -> str | None:
    why = _table_list(words, scope) or _listed_tables(words, scope)
    if why:
        return why
    for name in dotted_names(words):
        if name.before is not None and name.before.punct("@@"):
            continue  # a system variable: @@session.x (SET rules judge global ones)
        if scope.own(name.parts[0]):
            continue  # the target's own name (a migration's app.t)
        if names_an_object(name, _TABLE_POSITION) or name.call in _SEQUENCE_FUNCTIONS:
            return f"names another database ({'.'.join(name.parts[:-1])})"
        if (
            name.before is not None
            and name.before.punct("=")
            and name.before2 is not None
            and name.before2.is_("RENAME")
        ):
            return f"names another database ({'.'.join(name.parts[:-1])})"
    for db in qualified_tables(text, "mysql"):
        if not scope.own(db):
            return f"names another database ({db})"
    return None


# -- how the server reads what follows -------------------------------------------------
# The check, the splitter and the server must read the file alike: the splitter decides
# what is sent as one query, and the scratch connection runs several statements in one
# query. A session's sql_mode (NO_BACKSLASH_ESCAPES, ANSI_QUOTES, and the modes that
# include it) and its client character set (a multi-byte one such as GBK, where a byte
# before a backslash makes one character with it) change where a string ends: with
# "SET sql_mode='NO_BACKSLASH_ESCAPES'", "SELECT '\\'; DROP DATABASE x; -- '" was one
# harmless string to the check and a DROP DATABASE to the server. So a SET of either
# takes only values read as the check reads: modes and character sets listed here, the
# current value (@@sql_mode), or a user variable only ever given such values
# (mysqldump's "SET @OLD_SQL_MODE=@@SQL_MODE ... SET SQL_MODE=@OLD_SQL_MODE").
# Client character sets in which a quote or a backslash is always that character: UTF-8
# and the single-byte sets (what a dump sets); not GBK, Big5, SJIS, CP932...
_SAFE_CHARSETS = frozenset(
    {
        "UTF8",
        "UTF8MB3",
        "UTF8MB4",
        "BINARY",
        "ASCII",
        "LATIN1",
        "LATIN2",
        "LATIN5",
        "LATIN7",
        "CP1250",
        "CP1251",
        "CP1256",
        "CP1257",
        "CP850",
        "CP852",
        "CP866",
        "DEC8",
        "HP8",
        "KOI8R",
        "KOI8U",
        "GREEK",
        "HEBREW",
        "ARMSCII8",
        "GEOSTD8",
        "KEYBCS2",
        "MACCE",
        "MACROMAN",
        "SWE7",
        "TIS620",
    }
)
_READING_VARIABLES = {"SQL_MODE": "sql_mode", "CHARACTER_SET_CLIENT": "charset"}
_SCOPE_WORDS = {"SESSION", "LOCAL", "GLOBAL", "PERSIST", "PERSIST_ONLY"}
_READS_DIFFERENTLY = "changes how the server reads the statements that follow"


def _statement_end(words: list[Word], i: int) -> int:
    j = i
    while j < len(words) and not words[j].punct(";"):
        j += 1
    return j


def _set_parts(words: list[Word]) -> Iterator[tuple[list[Word], int]]:
    """(words, index of its first word) of each comma-separated part of every SET at a
    statement start (bodies and SET STATEMENT ... FOR included: the list before FOR)."""
    for start in statement_starts(words):
        if not words[start].is_("SET"):
            continue
        end = _statement_end(words, start)
        if start + 1 < end and words[start + 1].is_("STATEMENT"):
            start += 1  # SET STATEMENT a=1, b=2 FOR ...: the list before FOR
            for j in range(start + 1, end):
                if words[j].is_("FOR"):
                    end = j
                    break
        depth, first = 0, start + 1
        for j in range(start + 1, end):
            w = words[j]
            if w.punct("("):
                depth += 1
            elif w.punct(")"):
                depth -= 1
            elif w.punct(",") and depth == 0:
                yield words[first:j], first
                first = j + 1
        yield words[first:end], first


def _system_assignments(words: list[Word]) -> Iterator[tuple[list[Word], int, int]]:
    """(part, index of its variable's name in it, index of the part) of each assignment
    of a system variable (``x = v``, ``SESSION x = v``, ``@@x = v``, ``@@session.x = v``,
    and ``NAMES``/``CHARSET``/``CHARACTER SET`` without '='); user variables are not."""
    for part, a in _set_parts(words):
        k = 0
        if part and part[0].punct("@@"):
            k = 1
            if k + 1 < len(part) and part[k].upper in _SCOPE_WORDS and part[k + 1].punct("."):
                k += 2  # @@session.sql_mode
        elif part and part[0].punct("@"):
            continue
        while k < len(part) and part[k].upper in _SCOPE_WORDS:
            k += 1
        if k < len(part) and part[k].is_name:
            yield part, k, a


def _assignments(words: list[Word]) -> Iterator[tuple[str, list[Word], int]]:
    """(what, value words, index of the value) of each SET of sql_mode or the client
    character set in the statement (``what``: ``sql_mode`` or ``charset``), at every
    statement start (bodies and SET STATEMENT ... FOR included)."""
    for part, k, a in _system_assignments(words):
        if part[k].is_("NAMES", "CHARSET"):
            yield "charset", part[k + 1 : k + 2], a + k + 1
        elif k + 1 < len(part) and part[k].is_("CHARACTER") and part[k + 1].is_("SET"):
            yield "charset", part[k + 2 : k + 3], a + k + 2
        elif k + 1 < len(part) and _is_assign(part[k + 1]):
            what = _READING_VARIABLES.get(part[k].text.upper())
            if what is not None:
                yield what, part[k + 2 :], a + k + 2


def _is_assign(w: Word) -> bool:
    return w.punct("=") or w.punct(":=")


def _user_variable(value: list[Word]) -> str | None:
    """The (lower-cased) name of a value that is one user variable ``@v``."""
    if len(value) == 2 and value[0].punct("@") and value[1].kind in ("word", "ident", "string"):
        return value[1].text.lower()
    return None


def _current_value(value: list[Word]) -> bool:
    """``@@sql_mode``, ``@@session.character_set_client``...: what is in force now."""
    if not value or not value[0].punct("@@"):
        return False
    rest = value[1:]
    if len(rest) == 3 and rest[0].upper in ("SESSION", "LOCAL") and rest[1].punct("."):
        rest = rest[2:]
    return len(rest) == 1 and rest[0].text.upper() in _READING_VARIABLES


def _literal_reads_alike(what: str, value: list[Word]) -> bool:
    if what == "charset":
        if len(value) != 1 or value[0].kind not in ("word", "ident", "string"):
            return False
        return value[0].text.upper() in _SAFE_CHARSETS
    if len(value) != 1 or value[0].kind != "string":
        return False
    flags = [f.strip().upper() for f in value[0].text.split(",")]
    return all(f in SAFE_MODES or f == "" for f in flags)


def _reading_mode(words: list[Word]) -> str | None:
    """A SET that would make the server read what follows otherwise than the check."""
    for what, value, _ in _assignments(words):
        if _literal_reads_alike(what, value) or _current_value(value):
            continue
        if _user_variable(value) is not None:
            continue  # judged over the whole file: :func:`file_refusal`
        name = "sql_mode" if what == "sql_mode" else "the client character set"
        return f"{_READS_DIFFERENTLY} (sets {name} to {' '.join(w.text for w in value)!r})"
    return None


def file_refusal(statements: list[tuple[int, str, list[Word]]]) -> tuple[int, str] | None:
    """(index, why) of the first statement that sets sql_mode or the client character set
    from a user variable that is not only ever given values read alike, or None.

    A variable is trusted only when each of its mentions anywhere in the file (a routine
    body or trigger runs later, in an order the check does not follow) is ``SET @v =``
    the current value or a listed literal, or is itself such a restoring SET's value."""
    restoring: set[tuple[int, int]] = set()
    trusted: dict[str, bool] = {}
    uses: list[tuple[int, str]] = []
    for k, (_line, _text, words) in enumerate(statements):
        for _what, value, at in _assignments(words):
            var = _user_variable(value)
            if var is not None:
                restoring.add((k, at + 1))
                uses.append((k, var))
        for start in statement_starts(words):
            if not words[start].is_("SET"):
                continue
            end = _statement_end(words, start)
            j = start + 1
            while j < end:
                var = _user_variable(words[j : j + 2])
                if var is not None and j + 2 < end and _is_assign(words[j + 2]):
                    stop = j + 3
                    while stop < end and not words[stop].punct(","):
                        stop += 1
                    value = words[j + 3 : stop]
                    good = _current_value(value) or any(
                        _literal_reads_alike(w, value) for w in ("sql_mode", "charset")
                    )
                    restoring.add((k, j + 1))
                    trusted[var] = trusted.get(var, True) and good
                    j = stop
                j += 1
        for j, w in enumerate(words[:-1]):
            if w.punct("@") and (k, j + 1) not in restoring:
                trusted[words[j + 1].text.lower()] = False
    for k, var in uses:
        if not trusted.get(var, False):
            return k, (
                f"{_READS_DIFFERENTLY} (sets sql_mode or the client character set from"
                f" @{var}, which this file does not only give values the check reads alike)"
            )
    return None


_ENGINE_VARIABLES = {
    "DEFAULT_STORAGE_ENGINE",
    "STORAGE_ENGINE",
    "DEFAULT_TMP_STORAGE_ENGINE",
    "ENFORCE_STORAGE_ENGINE",
}


def _default_engine(words: list[Word]) -> str | None:
    """SET default_storage_engine = SPIDER: each later CREATE TABLE without ENGINE= would
    use an engine that reaches another server (SPIDER reads its COMMENT as a connection);
    the value must be a name the check reads, not one of those."""
    for i, w in enumerate(words[:-1]):
        if w.is_name and w.text.upper() in _ENGINE_VARIABLES and _is_assign(words[i + 1]):
            value = words[i + 2] if i + 2 < len(words) else None
            if (
                value is None
                or value.kind not in ("word", "ident", "string")
                or value.text.upper() in _OUTSIDE_ENGINES
                or value.is_("DEFAULT")
            ):
                shown = value.text if value is not None else ""
                return f"sets the default engine to {shown!r}, which the check cannot vouch for"
    return None


# Session variables that act beyond the session's statements on the scratch: how the
# server writes its binary log and replicas apply it (a GTID or server id of the file's
# choosing: a replica with gtid_strict_mode stops, one whose server_id it is skips the
# events), the server's own logs (a session
# hidden from the general or slow log, or flooding it), Galera's replication (wsrep_on,
# wsrep_osu_method = RSU desynchronises the node), files placed in a directory the file
# names (innodb_tmpdir), another database's table read (innodb_ft_user_stopword_table),
# and debugging hooks (debug_sync waits on and signals other sessions). Not sql_log_bin:
# leaving the scratch's own statements out of the binary log (a MySQL dump's
# "SET @@SESSION.SQL_LOG_BIN= 0") or keeping them in reaches nothing beyond the scratch.
_SERVER_SESSION_VARIABLES = frozenset(
    {
        "SQL_LOG_OFF",
        "SERVER_ID",
        "SKIP_REPLICATION",
        "SKIP_PARALLEL_REPLICATION",
        "SQL_SLAVE_SKIP_COUNTER",
        "SQL_REPLICA_SKIP_COUNTER",
        "DEFAULT_MASTER_CONNECTION",
        "MAX_RELAY_LOG_SIZE",
        "RBR_EXEC_MODE",
        "SLOW_QUERY_LOG",
        "LONG_QUERY_TIME",
        "MIN_EXAMINED_ROW_LIMIT",
        "GENERAL_LOG",
        "INNODB_TMPDIR",
        "INNODB_FT_USER_STOPWORD_TABLE",
        "DEBUG",
        "DEBUG_DBUG",
        "DEBUG_SYNC",
    }
)
_SERVER_SESSION_PREFIXES = (
    "BINLOG_",
    "GTID_",
    "PSEUDO_",
    "WSREP_",
    "LOG_",
    "ORIGINAL_",
    "IMMEDIATE_",
    "REPLICA_",
    "SLAVE_",
    "RELAY_",
    "REPLICATE_",
)


def _server_session_variable(words: list[Word]) -> str | None:
    """SET sql_log_bin = 0, SET gtid_seq_no = 100, SET server_id = 7...: a session
    variable whose effect reaches past the scratch (replication, logs, files)."""
    for part, k, _ in _system_assignments(words):
        name = part[k].text.upper()
        if (
            k + 1 < len(part)
            and _is_assign(part[k + 1])
            and (name in _SERVER_SESSION_VARIABLES or name.startswith(_SERVER_SESSION_PREFIXES))
        ):
            return (
                f"sets {part[k].text}, which acts beyond the scratch"
                " (replication, server logs or files)"
            )
    return None


def _lifted_bound(words: list[Word]) -> str | None:
    """SET max_statement_time = 0, SET lock_wait_timeout = DEFAULT...: the load's bounds
    (:mod:`.bounds`) lifted, and a statement or a lock wait of the file's may hang the
    plan. A number within the bound is kept (SET STATEMENT max_statement_time = 10 FOR)."""
    for part, k, _ in _system_assignments(words):
        limit = bounds.BOUND_VARIABLES.get(part[k].text.upper())
        if limit is None or k + 1 >= len(part) or not _is_assign(part[k + 1]):
            continue
        value = part[k + 2 :]
        try:
            seconds = float(value[0].text) if len(value) == 1 and value[0].kind == "number" else 0
        except ValueError:
            seconds = 0
        if not 0 < seconds <= limit():
            shown = " ".join(w.text for w in value)
            return (
                f"sets {part[k].text} to {shown!r}, beyond the plan's bound ({limit():g} s):"
                " a statement of the file could hold the plan"
            )
    return None


# Built-in functions that act beyond the scratch. Named locks are the server's, not a
# database's: one taken while the scratch loads blocks whatever else on the server waits
# on that name. Those that wait or spin by design would hold the plan (``DEFAULT
# (SLEEP(100))`` runs at each INSERT, a view's or a generated column's at each read or
# write). A built-in is called quoted too (```load_file`(x)`` reads the file).
_WAITS = "which waits by design: the plan must end"
_REFUSED_FUNCTIONS = {
    "LOAD_FILE": "reads a file on the server",
    "GET_LOCK": "takes a server-wide named lock (GET_LOCK)",
    "SLEEP": _WAITS,
    "BENCHMARK": _WAITS,
    "MASTER_POS_WAIT": _WAITS,
    "SOURCE_POS_WAIT": _WAITS,
    "MASTER_GTID_WAIT": _WAITS,
    "WAIT_FOR_EXECUTED_GTID_SET": _WAITS,
    "WAIT_UNTIL_SQL_THREAD_AFTER_GTIDS": _WAITS,
    "WSREP_SYNC_WAIT_UPTO_GTID": _WAITS,
}


def _function_call(words: list[Word], scope: Scope = DESIRED) -> str | None:
    """A call of a built-in of :data:`_REFUSED_FUNCTIONS` (never a column's prefix in an
    index, ``KEY k (sleep(10))``, nor an object's name: :func:`.udf.calls`)."""
    if not any(w.text.upper() in _REFUSED_FUNCTIONS for w in words if w.is_name):
        return None
    for w in calls(words):
        why = _REFUSED_FUNCTIONS.get(w.text.upper())
        if scope.migration and (why is _WAITS or w.text.upper() == "GET_LOCK"):
            continue  # the migration's own session waits or locks: it holds only itself
        if why is _WAITS:
            return f"calls {w.text}, {why}"
        if why:
            return why
    return None


def refusal(words: list[Word], text: str, scope: Scope = DESIRED) -> str | None:
    """Why this statement acts outside its database, or None when it stays inside: in
    every reading the server may make of its versioned comments (:func:`_readings`)."""
    why = _refusal(words, text, scope)
    if why or "/*" not in text:
        return why
    markers = sorted(set(_VERSIONED.findall(text)))
    if len(markers) > _MAX_MARKERS:
        return (
            f"holds versioned comments of more than {_MAX_MARKERS} versions:"
            " too many readings to check"
        )
    for skipped in _readings(markers):
        reading = uncover_versioned_comments(text, skipped)
        try:
            other = read_words(reading, "mysql")
        except SqlglotError:
            return "the statement cannot be read to be checked"
        if not other:
            continue  # all of it skipped: nothing runs
        why = _refusal(other, reading, scope) or _hidden_reading_set(other, words)
        if why:
            return why
    return None


# A versioned comment's marker: the server runs its content or skips it whole, by its
# version against the server's own (and, for ``/*!``, MySQL-only versions: MariaDB 10.11
# skips /*!79999 and /*!80016 but runs /*!50001 and /*!100000). A skipped one is no
# statement start's prefix: "/*!99999 x */ DROP DATABASE d" read as code hid the DROP
# behind "x", and the server ran it.
_VERSIONED = re.compile(r"/\*M?!\d{5,6}")
_MAX_MARKERS = 6


def _readings(markers: list[str]) -> Iterator[frozenset[str]]:
    """Each set of markers a server may skip (every version decides alike everywhere in
    the statement; the rules read the all-run reading already)."""
    for size in range(1, len(markers) + 1):
        for subset in combinations(markers, size):
            yield frozenset(subset)


def _hidden_reading_set(other: list[Word], words: list[Word]) -> str | None:
    """A SET of sql_mode or the client character set from a user variable that only a
    skipping reading shows at a statement's start: the file's rules (:func:`file_refusal`)
    judge those of the all-run reading."""
    seen = {(what, _user_variable(value)) for what, value, _ in _assignments(words)}
    for what, value, _ in _assignments(other):
        var = _user_variable(value)
        if var is not None and (what, var) not in seen:
            return f"{_READS_DIFFERENTLY} (sets {what} from @{var} behind a versioned comment)"
    return None


def _refusal(words: list[Word], text: str, scope: Scope = DESIRED) -> str | None:
    """The rules over one reading of the statement (a migration's: its session's own
    bounds and waits are its own, :func:`_lifted_bound` and the waiting built-ins)."""
    return (
        first_reason(words, lambda w, i: _head(w, i, scope))
        or (_migration_head(words) if scope.migration else None)
        or _reading_mode(words)
        or _default_engine(words)
        or _set_scope(words)
        or _server_session_variable(words)
        or (None if scope.migration else _lifted_bound(words))
        or _function_call(words, scope)
        or _server_files(words, scope)
        or _qualified(words, text, scope)
    )


def migration_rule(database: str) -> Callable[[list[Word], str], str | None]:
    """The rule a versioned migration's statement is judged by on the target ``database``
    (the session's current database, "" when it has none): :func:`refusal` in that
    scope."""
    scope = Scope(migration=True, database=database)
    return lambda words, text: refusal(words, text, scope)


def _migration_head(words: list[Word]) -> str | None:
    """What a desired file's scratch makes harmless and a migration's target does not:
    ``SET sql_log_bin = 0`` kept the migration's changes from the replicas (the target's
    replicas then differ from it). (``DROP FUNCTION f`` without a database, which drops
    the server's loadable function ``f`` when one has that name, the runner qualifies
    with the target's name: :func:`qualify_function_drops`.)"""
    for part, k, _ in _system_assignments(words):
        if part[k].text.upper() == "SQL_LOG_BIN" and k + 1 < len(part) and _is_assign(part[k + 1]):
            return "sets sql_log_bin, which keeps the migration from the target's replicas"
    return None


def qualify_function_drops(text: str, database: str) -> str:
    """``text`` with the name of each ``DROP FUNCTION [IF EXISTS] f`` qualified with
    ``database`` (the scratch): ```scratch`.f``.

    An unqualified DROP FUNCTION is, to MariaDB, first a loadable function's (a UDF in
    mysql.func, server-wide), and only when none has that name the current database's
    stored function: 'DROP FUNCTION IF EXISTS f' in a desired file dropped the server's
    UDF f during a read-only plan. Qualified, it can only be the scratch's stored function
    (what a schema file means by it, and what a dump's 'DROP FUNCTION IF EXISTS `f`'
    before each CREATE FUNCTION means). The server runs DROP FUNCTION at top level only
    (never inside a routine, trigger or event), and the file cannot run SQL text built at
    load, so every DROP FUNCTION the server runs is in the text read here, as the check
    reads it (executable comments opened, offsets kept: the name is qualified where it
    stands, inside a versioned comment too)."""
    if "function" not in text.lower():
        return text
    tokens = digit_names(mysql_tokens(text))
    quoted = "`" + database.replace("`", "``") + "`."
    at: list[tuple[int, int]] = []
    for i in range(len(tokens) - 2):
        if (
            tokens[i].text.upper() != "DROP"
            or tokens[i + 1].text.upper() != "FUNCTION"
            or tokens[i].token_type in NAME_TOKENS
        ):
            continue
        k = i + 2
        if (
            k + 1 < len(tokens)
            and tokens[k].token_type not in NAME_TOKENS
            and tokens[k].text.upper() == "IF"
            and tokens[k + 1].text.upper() == "EXISTS"
        ):
            k += 2  # IF EXISTS (not a function named `if`)
        if k >= len(tokens):
            continue
        name = tokens[k]
        if name.token_type in STRING_TOKENS:
            continue  # a string is no name in the modes the load keeps: a syntax error
        if k + 1 < len(tokens) and tokens[k + 1].text == ".":
            continue  # already qualified (db.f, db .f: the grammar's ident '.' ident)
        at.append((name.start, name.end + 1))
    for start, end in reversed(at):
        bare = text[start:end]
        if not bare.startswith("`"):
            # Quoted after the qualifier: `scratch`.9f is read as a number's ".9f".
            bare = f"`{bare}`"
        text = text[:start] + quoted + bare + text[end:]
    return text


_NOT_WORDS = NAME_TOKENS | STRING_TOKENS  # quoted: a name or a string, never a keyword
_DEFINER_END = {"EVENT", "PROCEDURE", "FUNCTION", "TRIGGER", "VIEW", "AGGREGATE", "SQL"}


def _event_header(tokens: list[Any], verb: int) -> tuple[int, int] | None:
    """(index of EVENT, index of the header's end: its DO or the end) when the CREATE or
    ALTER at ``verb`` acts on an event (``CREATE [OR REPLACE] [DEFINER = u] EVENT``)."""
    j = verb + 1
    while j < len(tokens) and tokens[j].text.upper() in ("OR", "REPLACE"):
        j += 1
    if j < len(tokens) and tokens[j].text.upper() == "DEFINER":
        k = j + 1
        while k < len(tokens) and k <= j + 12 and tokens[k].text.upper() not in _DEFINER_END:
            k += 1
        j = k
    if j >= len(tokens) or tokens[j].text.upper() != "EVENT" or tokens[j].token_type in _NOT_WORDS:
        return None
    end = j + 1
    while end < len(tokens) and not (
        tokens[end].text.upper() in ("DO", ";", "CREATE", "ALTER")
        and tokens[end].token_type not in _NOT_WORDS
    ):
        end += 1
    return j, end


def disable_events(text: str) -> str:
    """``text`` with each event it creates or alters made DISABLE (ENABLE replaced, and
    DISABLE written before the body's DO where the header says neither).

    An event runs in the server's scheduler thread, as its DEFINER, outside the loading
    session: beyond the plan's bounds (:mod:`.bounds`) and after the plan ends. An event
    ON SCHEDULE AT CURRENT_TIMESTAMP with a long loop in its body was still running on
    the server once the plan had returned and dropped its scratch. Events are not
    inspected (the census names them), so a disabled one is the same to the plan."""
    if "event" not in text.lower():
        return text
    tokens = digit_names(mysql_tokens(text))
    edits: list[tuple[int, int, str]] = []
    verb = 0
    while verb < len(tokens):
        token = tokens[verb]
        verb += 1
        if token.text.upper() not in ("CREATE", "ALTER") or token.token_type in _NOT_WORDS:
            continue
        header = _event_header(tokens, verb - 1)
        if header is None:
            continue
        at, end = header
        verb = end  # read on from the body: each token is read once
        states = [
            k
            for k in range(at + 1, end)
            if tokens[k].text.upper() in ("ENABLE", "DISABLE")
            and tokens[k].token_type not in _NOT_WORDS
        ]
        for k in states:
            if tokens[k].text.upper() == "ENABLE":
                edits.append((tokens[k].start, tokens[k].end + 1, "DISABLE"))
        if not states and end < len(tokens) and tokens[end].text.upper() == "DO":
            edits.append((tokens[end].start, tokens[end].start, "DISABLE "))
    pieces, last = [], 0
    for start, stop, new in sorted(edits):  # joined once: linear in the edits
        pieces += [text[last:start], new]
        last = stop
    return "".join([*pieces, text[last:]])
