"""Which names a desired file calls are the server's loadable functions (UDFs).

An unqualified call resolves to a built-in function, then to a UDF (server-wide
library code, in mysql.func), then to the database's stored function; a UDF's
code acting during a read-only plan is code outside the scratch. Which names are
UDFs is the server's, so the load asks it, before anything of the file runs:

* mysql.func first, the table the UDFs are loaded from;
* else (the plan's user may not read it) the server's own answer:
  ``CREATE FUNCTION scratch.f() ...`` fails with error 1125 (already exists) in
  the fresh, empty scratch only when a UDF ``f`` is loaded (the in-memory list
  the call would resolve against), and is dropped at once when it succeeds;
* else (nor may it create routines in the scratch) the check fails closed: a
  called name it cannot classify (neither a built-in the server lists, nor a
  type's or the grammar's own word) is refused, saying which grant lets it be
  checked.

Candidates are found cheaply over the raw text (every ``name (`` with comments
between, strings included: a superset); only a statement holding a UDF's or an
unclassified name is read word by word (:func:`.confine.udf_call`), which tells a
call from an object's name or a column prefix in an index (``KEY k (name(10))``).
"""

from __future__ import annotations

import re
from typing import Any

import pymysql

from ptah.engines import confine
from ptah.engines.confine import OBJECT_POSITIONS, Word, uncover_versioned_comments
from ptah.engines.splitter import Statement

# ``name (`` / ```name` (`` with blanks between, or a name before a comment (the
# server allows comments before a UDF's or stored function's parenthesis): taken
# whatever follows the comment, a superset that keeps the scan linear on any text. A
# name starts where no name character or backtick is before it, and neither it nor the
# blanks give back what they took (a 20,000-character string took 20 s, and a line of
# 50,000 "a -- " 5 s, when the pattern backtracked or read each comment to its end).
_CALL = re.compile(
    r"((?<!`)`(?:[^`]|``)++`|(?<![0-9A-Za-z_$\u0080-\uffff])[0-9A-Za-z_$\u0080-\uffff]++)"
    r"(\s*+)(?:\(|/\*|#|--)"
)
_BEFORE = re.compile(r"(\.|[A-Za-z_]+)\s*$")

# Unquoted words the grammar reads itself, written right before their parenthesis: no
# generic call (which resolves to a UDF) can be: reserved words (data types among them:
# ``VARCHAR(10)``) and functions with their own syntax (``IF(``, ``LEFT(``, ``COUNT(``).
# Written with a blank before the parenthesis (``count (x)``) or quoted, some of them
# are a generic call's name; they are judged as any other name then. Each was shown
# unreachable by a generic call on MariaDB 10.11 (a stored function of its name,
# called so, is not called).
GRAMMAR_WORDS = frozenset(
    """
    tinyint smallint mediumint middleint int integer bigint int1 int2 int3 int4 int8
    decimal dec numeric float double real float4 float8 char character varchar
    varcharacter binary varbinary tinytext mediumtext longtext blob tinyblob mediumblob
    longblob long set date time timestamp year text bit enum fixed national nchar
    nvarchar datetime json uuid serial raw clob number varchar2 bool boolean
    key index unique primary fulltext spatial foreign references constraint check
    default as in exists values on using where and or not xor is like rlike regexp between
    then else when case return select with from join union intersect except over
    partition by range table into update delete insert replace order group having limit
    if left right mod interval distinct all any some current_user current_date
    current_time current_timestamp localtime localtimestamp utc_date utc_time
    utc_timestamp sysdate user database schema cast convert extract trim substring
    position row_number count sum avg min max std bit_and bit_or bit_xor group_concat
    json_arrayagg json_objectagg nextval lastval setval day hour minute second
    microsecond month quarter week weight_string ascii charset collation format password
    repeat row_count contains adddate subdate date_add date_sub get_format timestampadd
    timestampdiff coalesce now while procedure function trigger for signal resignal
    match elseif
    """.split()  # noqa: SIM905
)
# Of those, the functions a blank turns into a generic call's name (``count (x)``
# resolves as ``f (x)`` does; shown as above): the others stay the grammar's own.
SPACE_CALLED = frozenset(
    """
    adddate bit_and bit_or bit_xor cast count date_add date_sub extract group_concat
    json_arrayagg json_objectagg max min now position std subdate substring sum trim
    """.split()  # noqa: SIM905
)
_ALREADY_EXISTS = 1125

# Words after which "name (" is an object's name and its list, not a call: CREATE TABLE
# x (...), INSERT INTO x (...), KEY x (...), PARTITION x ..., WITH cte (a, b) AS ...
_NAMED_HERE = OBJECT_POSITIONS | {
    "KEY",
    "UNIQUE",
    "CONSTRAINT",
    "PARTITION",
    "SUBPARTITION",
    "FULLTEXT",
    "SPATIAL",
    "WITH",
    "RECURSIVE",
}
# Words that are the grammar's after these (a partitioning's clauses), though a generic
# call reaches a function of their name elsewhere (``than(1)`` calls one).
_GRAMMAR_AFTER = {
    "THAN": {"LESS"},
    "HASH": {"BY", "LINEAR"},
    "LIST": {"BY"},
    "COLUMNS": {"LIST", "RANGE"},
    "AGAINST": {")"},
}
_KEY_WORDS = frozenset({"KEY", "INDEX", "UNIQUE", "FULLTEXT", "SPATIAL", "PRIMARY"})


def _key_lists(words: list[Word]) -> set[int]:
    """Indices of each ``(`` that opens an index's list of key parts: after KEY, INDEX,
    UNIQUE, PRIMARY KEY, FULLTEXT or SPATIAL, an optional name, IF NOT EXISTS, USING
    <method> and (CREATE INDEX) ON <table>; never past another clause's word (CHECK,
    DEFAULT, UPDATE...: ``a INT UNIQUE CHECK (f(1))`` holds a call)."""
    found: set[int] = set()
    n = len(words)
    for i, w in enumerate(words):
        if w.kind != "word" or w.upper not in _KEY_WORDS:
            continue
        j, named = i + 1, False
        while j < n and j <= i + 12:  # a header is a few words: linear on any text
            x = words[j]
            if x.punct("("):
                found.add(j)
                break
            if x.is_("KEY", "INDEX"):
                j += 1
            elif x.is_("IF") and j + 2 < n and words[j + 2].is_("EXISTS"):
                j += 3
            elif x.is_("USING", "ON") and j + 1 < n and words[j + 1].is_name:
                j += 2
            elif not named and x.is_name and x.text.lower() not in GRAMMAR_WORDS:
                named, j = True, j + 1
            else:
                break
    return found


def _prefix(words: list[Word], i: int) -> bool:
    """``name ( <number> )``: a column's prefix in a key part, at ``i``."""
    return (
        i + 3 < len(words)
        and words[i + 1].punct("(")
        and words[i + 2].kind == "number"
        and words[i + 3].punct(")")
    )


def calls(words: list[Word]) -> list[Word]:
    """The names the statement calls: ``name (`` that is neither qualified (``x.f(`` names
    another database, which the check refuses), nor an object's name before its list,
    nor a column's prefix in an index's key parts (``KEY k (name(10))``)."""
    lists = _key_lists(words)
    found: list[Word] = []
    depth_in: list[int] = []  # the depth of each open key list
    depth = 0
    for i, w in enumerate(words):
        if w.punct("("):
            depth += 1
            if i in lists:
                depth_in.append(depth)
            continue
        if w.punct(")"):
            if depth_in and depth_in[-1] == depth:
                depth_in.pop()
            depth -= 1
            continue
        if not w.is_name or i + 1 >= len(words) or not words[i + 1].punct("("):
            continue
        if i + 1 in lists:
            continue  # KEY k (...), ON t (...): the index's or table's name
        if i > 0 and (words[i - 1].punct(".") or words[i - 1].upper in _NAMED_HERE):
            continue
        if i > 0 and (words[i - 1].upper or words[i - 1].text) in _GRAMMAR_AFTER.get(w.upper, ()):
            continue  # PARTITION BY LIST COLUMNS (a), VALUES LESS THAN (10), MATCH (a) AGAINST
        if depth_in and depth_in[-1] == depth and _prefix(words, i):
            continue
        found.append(w)
    return found


def udf_call(words: list[Word], names: frozenset[str]) -> str | None:
    """The first of ``names`` (lower-cased) the statement calls (:func:`calls`), or None."""
    for w in calls(words):
        if w.text.lower() in names:
            return w.text
    return None


def _called_names(statements: list[Statement], natives: frozenset[str]) -> set[str]:
    """Lower-cased names written before a parenthesis anywhere in the file (strings and
    all: a superset) that a generic call could resolve to a UDF: all but a bare built-in
    or grammar word right before its parenthesis, and a grammar word the grammar keeps
    with a blank too (``CHECK (``, ``IN (``)."""
    found: set[str] = set()
    for statement in statements:
        if "(" not in statement.text:
            continue
        text = uncover_versioned_comments(statement.text)
        for match in _CALL.finditer(text):
            name, gap = match.group(1), match.group(2)
            before = _BEFORE.search(text, max(0, match.start() - 64), match.start())
            if before and (before.group(1) == "." or before.group(1).upper() in _NAMED_HERE):
                continue  # x.f( (refused by the check), TABLE t (, KEY k (: no call
            if name.startswith("`"):
                unquoted = name[1:-1].replace("``", "`").lower()
                if len(unquoted) <= 64:
                    found.add(unquoted)
                continue
            lowered = name.lower()
            if len(lowered) > 64:
                continue  # no function's name (the server refuses the call itself)
            if gap:
                if lowered not in GRAMMAR_WORDS or lowered in SPACE_CALLED:
                    found.add(lowered)
            elif lowered not in natives and lowered not in GRAMMAR_WORDS:
                found.add(lowered)
    return found


def _natives(conn: Any) -> frozenset[str]:
    """The server's built-in functions (MariaDB lists them); none where it does not."""
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT function FROM information_schema.SQL_FUNCTIONS")
            return frozenset(str(row[0]).lower() for row in cur.fetchall())
    except pymysql.MySQLError:
        return frozenset()


def _mysql_func(conn: Any) -> frozenset[str] | None:
    """mysql.func's names, lower-cased; None when the plan's user may not read it."""
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT name FROM mysql.func")
            return frozenset(str(row[0]).lower() for row in cur.fetchall())
    except pymysql.MySQLError:
        return None


# The server's answers that the plan's user may not create a routine in the scratch.
_DENIED = {1044, 1045, 1142, 1227, 1370, 1419}


def _probe(conn: Any, scratch: str, name: str) -> int | None:
    """The server's error code for creating a stored function ``name`` in the empty
    scratch (1125, already exists, when ``name`` is a loaded UDF; a privilege error
    when the user may not create one; another when no function can have the name),
    or None when it was created (and dropped again): no UDF has the name."""
    quoted = "`" + scratch.replace("`", "``") + "`.`" + name.replace("`", "``") + "`"
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE FUNCTION {quoted}() RETURNS INT DETERMINISTIC NO SQL RETURN 1")
            cur.execute(f"DROP FUNCTION {quoted}")
        return None
    except pymysql.MySQLError as exc:
        return exc.args[0] if exc.args and isinstance(exc.args[0], int) else -1


def _classify(conn: Any, scratch: str, names: set[str]) -> tuple[set[str], set[str]]:
    """Of ``names``, the UDFs and the names the check cannot classify (see the module):
    mysql.func when the user may read it, else the server's answer name by name."""
    listed = _mysql_func(conn)
    if listed is not None:
        return names & listed, set()
    udfs: set[str] = set()
    unclassified: set[str] = set()
    ordered = sorted(names)
    for k, name in enumerate(ordered):
        code = _probe(conn, scratch, name)
        if code == _ALREADY_EXISTS:
            udfs.add(name)
        elif code in _DENIED:  # nor create a routine in the scratch: fail closed
            unclassified.update(ordered[k:])
            break
        elif code is not None:
            unclassified.add(name)  # the server said neither: this name fails closed
    return udfs, unclassified


def refuse_udf_calls(conn: Any, scratch: str, statements: list[Statement]) -> None:
    """Raise :class:`.confine.StatementRefused` for the first statement that calls a
    loadable function, or a function the check cannot classify (see the module)."""
    names = _called_names(statements, _natives(conn))
    if not names:
        return
    udfs, unclassified = _classify(conn, scratch, names)
    if not udfs and not unclassified:
        return
    for statement in statements:
        lowered = statement.text.lower()
        if not any(n in lowered for n in udfs | unclassified):
            continue
        words = confine.read_words(statement.text, "mysql")
        called = udf_call(words, frozenset(udfs))
        if called is not None:
            why = f"calls the server's loadable function {called} (a UDF: server-wide code)"
            raise confine.StatementRefused(statement.line, statement.text, why)
        called = udf_call(words, frozenset(unclassified))
        if called is not None:
            why = (
                f"calls {called}, which the check cannot tell from a server's loadable"
                " function (a UDF): the plan's user may neither read mysql.func nor"
                " create a routine in its scratch; grant one of them"
            )
            raise confine.StatementRefused(statement.line, statement.text, why)
