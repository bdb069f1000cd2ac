"""MariaDB/MySQL: the data-dependent failures of a plan's ALTERs, found before its first
statement.

MariaDB commits each DDL statement on its own: an ALTER that fails on the target's data
(a value that does not convert under the session's strict sql_mode, a NULL where the
column becomes NOT NULL, duplicates under a unique key, an orphan under a foreign key, a
row a CHECK refuses) stops the apply with the statements before it applied. Whether the
data allows a change is known only on the target, at apply: :func:`refuse_data_failures`
asks the target's server, after the fingerprint check and before any statement, and fails
with one line naming the table and the column or constraint (never a value: rows may hold
secrets). Nothing has run when it fails.

The server decides every case, under the apply session's own sql_mode:

- a retype: each value is converted to the new type by the server, in one anonymous
  block per table (``BEGIN NOT ATOMIC ... FOR r IN (SELECT ...)``) that stores it in a
  local variable declared with the new type (with its effective charset and collation):
  a value the ALTER's copy refuses fails that store (strict mode makes its warning an
  error, as the ALTER's). The ALTER copies a value by the conversion function its source
  and target field types select (``Field::get_copy_func``, sql/field_conv.cc), some
  stricter than an assignment: a string to an integer is read as an integer
  (``val_int``: '1.5' is refused, where an assignment rounds), a number to a string is
  written as its text ('123.456' does not fit CHAR(5)). :func:`_conversion` names which
  of the server's functions the ALTER calls (``CAST(x AS SIGNED)`` reads ``val_int``...);
  the conversion itself is the server's. tests/engines/test_mysql_datacheck.py compares
  the two on a matrix of types and values;
- NOT NULL over NULLs (but a TIMESTAMP's, which become the current time, and an
  AUTO_INCREMENT's, which are numbered), a CHECK: the same condition, in a SELECT; the
  server checks every CHECK of the table on an ALTER that copies its rows, and none on
  one it makes in place or instantly (as the plan's probe found it does the ALTER);
- a unique key: ``GROUP BY`` the key's columns, which compares by the column's collation
  as the index does (the new collation where the ALTER changes it);
- a foreign key: an anti-join to the parent, by the parent column's collation (the apply
  runs with ``foreign_key_checks`` on, so the ALTER checks every row);
- a new RANGE or LIST partitioning: a row no partition takes (:mod:`.partcheck`).

Cost: each check reads only a table the plan changes in that way, once per kind (one
scan for all its retyped columns, one for its NOT NULL and CHECK conditions, one per
added unique or foreign key; an index may shorten them). On a large table that is a full
read, about what the ALTER's own copy reads; the retype check runs row by row in the
server (about 4 us a row here: 40 s for ten million rows), and every check is one
statement under the session's ``max_statement_time``: past it the apply fails, nothing
changed. Rows written between the check and the ALTER are not seen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pymysql

from ptah.engines.base import NothingRan
from ptah.engines.model import Schema, Statement
from ptah.engines.mysql import diff as mydiff
from ptah.engines.mysql import partcheck
from ptah.engines.mysql.inspect import create_lines
from ptah.engines.mysql.scan import unquoted

_NAME = r"`(?:[^`]|``)+`"
_ALTERED = re.compile(rf"^ALTER TABLE ({_NAME})$")
_POSITION = re.compile(rf" (?:FIRST|AFTER {_NAME})$")
_KEY_PART = re.compile(rf"({_NAME})(?:\((\d+)\))?(?: (?:ASC|DESC))?")
_CHARSET = re.compile(r" CHARACTER SET (\w+)")
_COLLATE = re.compile(r" COLLATE (\w+)")
# The errors that end a statement without a verdict on the data: max_statement_time,
# KILL QUERY, a lost connection.
_INTERRUPTED = {1317, 1969, 3024, 2013}

_INTEGER = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year"}
_REAL = {"float", "double", "real"}
_TEMPORAL = {"date", "datetime", "timestamp", "time"}
_STRING = {"char", "varchar", "binary", "varbinary", "enum", "set"}
_BLOB_BYTES = {
    "tinytext": 255,
    "tinyblob": 255,
    "text": 65535,
    "blob": 65535,
    "mediumtext": 16777215,
    "mediumblob": 16777215,
    "longtext": 4294967295,
    "longblob": 4294967295,
}
_CHARACTER = {"char", "varchar", "enum", "set", "tinytext", "text", "mediumtext", "longtext"}


def _unq(name: str) -> str:
    return name[1:-1].replace("``", "`")


def _base(type_text: str) -> str:
    """``varchar`` of ``varchar(20) CHARACTER SET latin1``."""
    return re.split(r"[ (]", type_text, maxsplit=1)[0].lower()


def _bare(type_text: str) -> str:
    """A type without its charset and collation."""
    return _COLLATE.sub("", _CHARSET.sub("", type_text))


@dataclass
class _Charsets:
    """The server's collations: each one's charset, each charset's default collation and
    widest character (read once, when a check needs them)."""

    charset: dict[str, str] = field(default_factory=dict)
    default: dict[str, str] = field(default_factory=dict)
    maxlen: dict[str, int] = field(default_factory=dict)

    @classmethod
    def read(cls, cur: Any) -> _Charsets:
        out = cls()
        cur.execute(
            "SELECT COLLATION_NAME, CHARACTER_SET_NAME, IS_DEFAULT"
            " FROM information_schema.COLLATIONS"
        )
        for name, charset, default in cur.fetchall():
            out.charset[name] = charset
            if default == "Yes":
                out.default[charset] = name
        cur.execute("SELECT CHARACTER_SET_NAME, MAXLEN FROM information_schema.CHARACTER_SETS")
        out.maxlen = {name: int(maxlen) for name, maxlen in cur.fetchall()}
        return out


@dataclass
class _Column:
    """A column's type as the ALTER leaves it (or finds it): the type without its name,
    charset and collation; the effective collation (None: not a character type)."""

    type: str
    collation: str | None
    not_null: bool
    generated: bool
    auto_increment: bool


def _name_end(line: str) -> int:
    """Where a column line's quoted name ends (its closing backtick)."""
    end = line.index("`", 1)
    while line.startswith("``", end):  # a doubled backtick inside the name
        end = line.index("`", end + 2)
    return end


def _typed(line: str) -> str:
    """A column line's type with its charset and collation, without its name."""
    return mydiff.column_type(line)[_name_end(line) + 2 :].removesuffix(" NOT NULL")


def _column(line: str, collation: str | None) -> _Column:
    name_end = _name_end(line)
    not_null = mydiff.column_type(line).endswith(" NOT NULL")
    typed = _typed(line)
    return _Column(
        type=_bare(typed),
        collation=collation,
        not_null=not_null,
        generated=" GENERATED ALWAYS AS " in line,
        auto_increment=" AUTO_INCREMENT" in line[name_end:],
    )


def _new_collation(line_type: str, table_options: str, charsets: _Charsets) -> str | None:
    """The collation a column declared ``line_type`` gets in a table with these options:
    its own COLLATE, else its CHARACTER SET's default, else the table's default."""
    if _base(line_type) not in _CHARACTER:
        return None
    m = _COLLATE.search(line_type)
    if m:
        return m.group(1)
    m = _CHARSET.search(line_type)
    if m:
        return charsets.default.get(m.group(1))
    options = mydiff.options(table_options)
    if "COLLATE" in options:
        return options["COLLATE"]
    charset = options.get("DEFAULT CHARSET")
    return charsets.default.get(charset) if charset else None


def _declared(column: _Column, charsets: _Charsets) -> str:
    """The new column's type as a local variable's declaration."""
    if column.collation is None:
        return column.type
    charset = charsets.charset.get(column.collation, "")
    return f"{column.type} CHARACTER SET {charset} COLLATE {column.collation}"


def _length(type_text: str) -> int | None:
    m = re.match(r"\w+\((\d+)\)", type_text)
    return int(m.group(1)) if m else None


def _unsigned(column: _Column) -> bool:
    return " unsigned" in column.type.lower()


_LONGLONG = "9223372036854775808"


def _conversion(old: _Column, new: _Column, charsets: _Charsets) -> tuple[str, str, str]:
    """How the ALTER's copy converts a value of ``old`` to ``new``, as the server's own
    expressions: what to read of the column (``{c}``: the column), the value to store
    in a variable of the new type (``{x}``: what was read), and a condition under which
    the copy refuses a value that store takes ('' for none).

    Which of the server's conversions the copy calls (``Field::get_copy_func``, with
    ``Field_year``'s and the enum's own): an integer or BIT target reads the source as
    an integer (``val_int``: CAST AS SIGNED, AS UNSIGNED from an unsigned source; an
    ENUM's or SET's number; text past the signed 64-bit range, a DOUBLE past 2^63, is
    refused), DECIMAL as a decimal, FLOAT/DOUBLE as a double; a string target from a
    number or a date reads the source's text (``val_str``), an ENUM/SET target from a
    date too; YEAR reads text as text and a date as a date. Between VARCHARs of one
    charset and length prefix the copy cuts by characters and refuses any cut (even of
    trailing spaces, which a store only notes); a TEXT/BLOB target refuses a value
    longer than its bytes but for trailing spaces (a local TEXT variable holds more)."""
    src, dst = _base(old.type), _base(new.type)
    numeric_src = src in _INTEGER or src in _REAL or src == "decimal" or src in _TEMPORAL
    textual_src = not numeric_src and src != "bit" and src not in ("enum", "set")
    unsigned = src in ("bit", "enum", "set") or _unsigned(old)
    read = "({c} + 0)" if src in ("enum", "set") else "{c}"
    as_int = f"CAST({{x}} AS {'UNSIGNED' if unsigned else 'SIGNED'})"
    past_int = ""
    if textual_src:
        past_int = f"CAST({{x}} AS DECIMAL(65,0)) NOT BETWEEN -{_LONGLONG} AND {_LONGLONG} - 1"
    elif src in ("double", "real"):  # a FLOAT's integer read clamps, a DOUBLE's refuses
        past_int = f"ABS({{x}}) > {_LONGLONG}e0"
    if dst in _BLOB_BYTES:
        text = "CAST({x} AS CHAR)" if numeric_src else "{x}"
        charset = charsets.charset.get(new.collation or "", "binary")
        limit = _BLOB_BYTES[dst]
        if charset == "binary":
            return "{c}", text, f"OCTET_LENGTH({text}) > {limit}"
        # Trailing spaces past the end are cut with a note; any other byte refuses.
        return "{c}", text, f"OCTET_LENGTH(RTRIM(CONVERT({text} USING {charset}))) > {limit}"
    if dst == "year":
        if textual_src:
            return "{c}", "{x}", ""
        if src in _TEMPORAL:
            return "{c}", "CAST({x} AS DATE)", ""
        if src in _REAL or src == "decimal" or src in _INTEGER:
            return "{c}", "{x}", ""
        return read, as_int, past_int
    if dst == "bit" or src == "bit":
        return read, as_int, past_int
    if dst in _INTEGER:
        if src == "decimal" and _unsigned(new):
            return "{c}", "{x}", ""
        return read, as_int, past_int
    if dst == "decimal":
        m = re.match(r"decimal\(\d+,(\d+)\)", new.type)
        scale = m.group(1) if m else "0"
        return read, f"CAST({{x}} AS DECIMAL(65,{scale}))", ""
    if dst in _REAL:
        # Text is stored as val_real reads it (a CAST of a TEXT '' does not warn where
        # the copy refuses); but a BINARY/VARBINARY's trailing space, which the copy
        # reads past and a store refuses, is CAST.
        plain = textual_src and src not in ("binary", "varbinary")
        return read, ("{x}" if plain else "CAST({x} AS DOUBLE)"), ""
    if dst in _TEMPORAL:
        return "{c}", ("CAST({x} AS CHAR)" if src in _REAL or src == "year" else "{x}"), ""
    if dst in ("enum", "set"):
        if src in _TEMPORAL:
            return "{c}", "CAST({x} AS CHAR)", ""
        return "{c}", (as_int if numeric_src else "{x}"), ""
    if dst in _STRING:
        if numeric_src:
            return "{c}", "CAST({x} AS CHAR)", ""
        extra = ""
        n, was = _length(new.type), _length(old.type)
        if src == dst and src in ("varchar", "varbinary") and n is not None and was is not None:
            cs = charsets.charset.get(old.collation or "", "binary")
            same_cs = cs == charsets.charset.get(new.collation or "", "binary")
            width = charsets.maxlen.get(cs, 1)
            if same_cs and (n * width < 256) == (was * width < 256):
                extra = f"CHAR_LENGTH({{x}}) > {n}"
        return "{c}", "{x}", extra
    return "{c}", "{x}", ""


@dataclass
class _Table:
    """What the plan's ALTERs of one existing table ask of its data."""

    name: str
    retyped: list[tuple[str, _Column, _Column]] = field(default_factory=list)
    not_null: list[str] = field(default_factory=list)
    added: dict[str, _Column] = field(default_factory=dict)
    added_lines: dict[str, str] = field(default_factory=dict)
    unique: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)
    checks: dict[str, str] = field(default_factory=dict)
    dropped: set[str] = field(default_factory=set)
    new_options: str = ""


def _clauses(sql: str) -> tuple[str, list[str]] | None:
    """The table an ``ALTER TABLE`` statement of the plan changes, and its clauses."""
    lines = create_lines(sql)
    m = _ALTERED.match(lines[0])
    if m is None:
        return None
    return _unq(m.group(1)), [ln.strip().removesuffix(",") for ln in lines[1:]]


def _column_check(line: str) -> str | None:
    """The expression of a column line's own CHECK (the last part the server shows)."""
    found: int | None = None
    for i, _ch, depth in unquoted(line):
        if depth == 0 and line.startswith(" CHECK (", i):
            found = i + len(" CHECK ")
    return line[found:] if found is not None else None


def _gather(current: Schema, statements: list[Statement], charsets: _Charsets) -> list[_Table]:
    tables: dict[str, _Table] = {}
    for stmt in statements:
        parsed = _clauses(stmt.sql)
        if parsed is None or parsed[0] not in current["table"]:
            continue  # a new table is empty when its ALTERs run
        name, clauses = parsed
        entry = current["table"][name]
        table = tables.setdefault(name, _Table(name))
        options = next(
            (
                c
                for c in clauses
                if not c.startswith(("MODIFY ", "ADD ", "DROP ", "ALTER ", "RENAME "))
                and ("CHARSET=" in c or "COLLATE=" in c)
            ),
            "",
        )
        table.new_options = options or table.new_options or entry["options"]
        lines = {k: v for k, v in entry["elements"].items() if k.startswith(("column ", "check "))}
        for clause in clauses:
            if clause.startswith(("MODIFY COLUMN ", "ADD COLUMN ", "CHANGE COLUMN ")):
                line = _POSITION.sub("", clause.split(" ", 2)[2])
                was = ""
                if clause.startswith("CHANGE COLUMN "):
                    # The plan's CHANGE renames a column to its name in other letters'
                    # case (the same name to the server): the old line is the old name's.
                    was = "column " + _unq(line[: _name_end(line) + 1])
                    line = line[_name_end(line) + 2 :]
                    lines.pop(was, None)
                column = line[: _name_end(line) + 1]
                key = "column " + _unq(column)
                lines[key] = line
                new = _column(line, None)
                new.collation = _new_collation(_typed(line), table.new_options, charsets)
                old_line = entry["elements"].get(was or key)
                if old_line is None or clause.startswith("ADD COLUMN "):
                    table.added[_unq(column)] = new
                    table.added_lines[_unq(column)] = line
                    continue
                old_name = was.split(" ", 1)[1] if was else _unq(column)
                old = _column(old_line, entry.get("collations", {}).get(old_name))
                # A NULL put in a TIMESTAMP NOT NULL becomes the current time.
                timestamp = _base(new.type) == "timestamp"
                if new.not_null and not old.not_null and not new.auto_increment and not timestamp:
                    table.not_null.append(column)
                changed = (old.type, old.collation) != (new.type, new.collation)
                if changed and not (old.generated or new.generated):
                    table.retyped.append((column, old, new))
            elif clause.startswith(("DROP COLUMN ", "DROP CONSTRAINT ")):
                kind = "column " if clause.startswith("DROP COLUMN ") else "check "
                lines.pop(kind + _unq(clause.split(" ", 2)[2]), None)
            elif clause.startswith(("DROP INDEX ", "DROP PRIMARY KEY")):
                table.dropped.add(clause)
            elif clause.startswith(("ADD PRIMARY KEY ", "ADD UNIQUE KEY ")):
                table.unique.append(clause[4:])
            elif clause.startswith("ADD CONSTRAINT ") and " FOREIGN KEY " in clause:
                table.foreign.append(clause[4:])
            elif clause.startswith("ADD CONSTRAINT ") and " CHECK (" in clause:
                label = clause[len("ADD CONSTRAINT ") :].split(" CHECK (", 1)[0]
                lines["check " + _unq(label)] = clause[4:]
        # The server checks the CHECKs on the rows an ALTER copies, every one the table
        # then has (a row a CHECK refuses, written with check_constraint_checks off,
        # fails a copy that does not touch it), and on no row of an ALTER it makes in
        # place or instantly (a column CHECK added so is not checked). ``lock``: how
        # the plan's probe found the server does the ALTER; not probed: a copy.
        if stmt.lock not in ("", "COPY"):
            continue
        for key, line in lines.items():
            if key.startswith("column ") and (expr := _column_check(line)) is not None:
                table.checks[f"CHECK of column {mydiff.q(key[7:])}"] = expr
            elif key.startswith("check "):
                table.checks[f"check constraint {mydiff.q(key[6:])}"] = line.split(" CHECK ", 1)[1]
    for table in tables.values():  # a unique key kept over a column the ALTER retypes
        retyped = {column for column, _, _ in table.retyped}
        for key, line in current["table"][table.name]["elements"].items():
            drop = "DROP PRIMARY KEY" if key == "primary" else f"DROP INDEX {mydiff.q(key[6:])}"
            m = _KEY.match(line)
            if m is None or drop in table.dropped:
                continue
            if retyped & {c for c, _ in _KEY_PART.findall(m.group(3))}:
                table.unique.append(line)
    return list(tables.values())


def refuse_data_failures(conn: Any, current: Schema, statements: list[Statement]) -> None:
    """Fail the apply before its first statement when the target's data would fail one
    of the plan's ALTERs under the session's sql_mode (the module's list); one line,
    naming the table and the column or constraint, never a value."""
    altered = (_clauses(s.sql) for s in statements)
    if not any(parsed and parsed[0] in current["table"] for parsed in altered):
        return  # no existing table altered: no rows to ask
    with conn.cursor() as cur:
        charsets = _Charsets.read(cur)
        for table in _gather(current, statements, charsets):
            _check_table(cur, current, table, charsets)
        for stmt in statements:
            parsed = _clauses(stmt.sql)
            if parsed is None or parsed[0] not in current["table"]:
                continue
            rest = stmt.sql.split("\n", 1)[1].strip() if "\n" in stmt.sql else ""
            if rest.startswith("PARTITION BY "):
                partcheck.check(cur, mydiff.q(parsed[0]), rest, _run, _fail)


def _fail(message: str, reason: str) -> NothingRan:
    return NothingRan(
        f"{message}, so the apply would fail part-way: nothing was changed", reason=reason
    )


def _run(cur: Any, sql: str, what: str) -> Any:
    """Run one check and return its first row (None: no row, or no result); a check that
    ran past the session's bound (or was killed) fails the apply, nothing changed, and
    so does an error of the check itself, shown by its code only (the server's message
    may quote a value)."""
    try:
        cur.execute(sql)
        row = cur.fetchone() if cur.description else None
        while cur.nextset():
            pass
        return row
    except pymysql.MySQLError as exc:
        raise _unchecked(exc, what) from None


def _unchecked(exc: pymysql.MySQLError, what: str) -> NothingRan:
    code = exc.args[0] if exc.args else 0
    if code in _INTERRUPTED:
        return NothingRan(
            f"checking {what} before the first statement ran past the statement bound or"
            " was ended: nothing was changed",
            reason="DataCheckInterrupted",
        )
    return NothingRan(
        f"checking {what} before the first statement failed (ERROR {code}): nothing was changed",
        reason="DataCheckFailed",
    )


def _check_table(cur: Any, current: Schema, table: _Table, charsets: _Charsets) -> None:
    qt = mydiff.q(table.name)
    entry = current["table"][table.name]
    if table.retyped:
        _check_conversions(cur, table, charsets)
    conditions = [
        (f"column {c}", f"{c} IS NULL", "holds NULLs where it becomes NOT NULL")
        for c in table.not_null
    ]
    for label, expr in table.checks.items():
        names = {_unq(n) for n in re.findall(_NAME, expr)}
        if names & set(table.added):  # a column the ALTER adds: not readable before
            continue
        conditions.append((label, f"NOT {expr}", "fails on existing rows"))
    if conditions:
        flags = ", ".join(f"({cond}) IS TRUE" for _, cond, _ in conditions)
        where = " OR ".join(f"({cond})" for _, cond, _ in conditions)
        row = _run(cur, f"SELECT {flags} FROM {qt} WHERE {where} LIMIT 1", f"table {qt}")
        if row:
            label, _, why = next(c for c, hit in zip(conditions, row, strict=True) if hit)
            reason = (
                "DataNotConvertible" if label.startswith("column ") else "DataViolatesConstraint"
            )
            raise _fail(f"{label} of table {qt} {why}", reason)
    for clause in table.unique:
        _check_unique(cur, entry, table, clause, charsets)
    for clause in table.foreign:
        _check_foreign(cur, current, table, clause, charsets)


def _check_conversions(cur: Any, table: _Table, charsets: _Charsets) -> None:
    """One pass over the table converting each retyped column's values as the ALTER
    would; ``@ptah_check`` holds the index of the column being converted, so the error
    names it (its message, which quotes the value, is not shown)."""
    declarations, steps, selected = [], [], []
    for i, (column, old, new) in enumerate(table.retyped):
        if old.type == new.type and charsets.charset.get(
            old.collation or ""
        ) == charsets.charset.get(new.collation or ""):
            continue  # another collation of the same charset: every value stays
        declarations.append(f"DECLARE ptah_v{i} {_declared(new, charsets)};")
        read, value, refused = _conversion(old, new, charsets)
        selected.append(f"{read.format(c=column)} AS ptah_c{i}")
        x = f"r.ptah_c{i}"
        step = f"SET @ptah_check = {i}; SET ptah_v{i} = {value.format(x=x)};"
        if refused:
            step += (
                f" IF {refused.format(x=x)} THEN"
                " SIGNAL SQLSTATE '22001' SET MYSQL_ERRNO = 1406; END IF;"
            )
        steps.append(step)
    sql = (
        "BEGIN NOT ATOMIC "
        + " ".join(declarations)
        + f" FOR r IN (SELECT {', '.join(selected)} FROM {mydiff.q(table.name)}) DO "
        + " ".join(steps)
        + " END FOR; END"
    )
    if not steps:
        return
    qt = mydiff.q(table.name)
    what = f"the values of table {qt}"
    _run(cur, "SET @ptah_check = NULL", what)
    try:
        cur.execute(sql)
    except pymysql.MySQLError as exc:
        failed = _run(cur, "SELECT @ptah_check", what)
        code = exc.args[0] if exc.args else 0
        if code in _INTERRUPTED or failed is None or failed[0] is None:
            raise _unchecked(exc, what) from None
        column, _, new = table.retyped[int(failed[0])]
        raise _fail(
            f"column {qt}.{column} holds values that do not convert to {new.type}",
            "DataNotConvertible",
        ) from None


_KEY = re.compile(
    rf"^(PRIMARY KEY|UNIQUE KEY ({_NAME})) \(((?:{_NAME}(?:\(\d+\))?(?: (?:ASC|DESC))?,?)+)\)"
)
_LITERAL_DEFAULT = re.compile(
    r" DEFAULT (?:NULL|'(?:[^'\\]|\\.|'')*'|-?[\d.]+(?:e[-+]?\d+)?)(?: |$)"
)


def _constant(column: _Column, line: str) -> bool | None:
    """What an added column holds on every existing row: None for NULL (a key over it
    holds), True for one value (its literal default, or the type's own), False for
    values that may differ (AUTO_INCREMENT, generated, a default expression)."""
    if column.auto_increment or column.generated:
        return False
    has_default = " DEFAULT " in line
    if not has_default or " DEFAULT NULL" in line:
        return None if not column.not_null else True
    return bool(_LITERAL_DEFAULT.search(line))


def _check_unique(
    cur: Any, entry: dict[str, Any], table: _Table, clause: str, charsets: _Charsets
) -> None:
    """A unique key the ALTER adds (or keeps over a column it retypes) holds on the
    rows: no two rows with all key parts non-NULL are equal, by the collation the key
    compares with. Equality is the server's: ``GROUP BY`` compares by the column's
    collation (PAD SPACE or not, case, accents) as the index does; a column the same
    ALTER retypes is compared converted (its new collation; a CAST to its new type)."""
    m = _KEY.match(clause)
    if m is None:
        return
    label = "primary key" if m.group(1) == "PRIMARY KEY" else f"unique key {m.group(2)}"
    parts = _KEY_PART.findall(m.group(3))
    retyped = {column: (old, new) for column, old, new in table.retyped}
    retyped_names = {_unq(c) for c in retyped}
    existing = {
        line.split("(", 1)[1] if "(" in line else ""
        for key, line in entry["elements"].items()
        if key == "primary" or line.startswith("UNIQUE KEY ")
    }
    names = {_unq(c) for c, _ in parts}
    if not names & (retyped_names | set(table.added)) and any(
        line.startswith(m.group(3) + ")") for line in existing
    ):
        return  # the same parts are unique already, and keep their types
    exprs, not_null = [], []
    for column, prefix in parts:
        added = table.added.get(_unq(column))
        if added is not None:
            kind = _constant(added, table.added_lines[_unq(column)])
            if kind is None:
                return  # NULL on every row: no two rows are equal
            if kind is False:
                return  # values the ALTER makes: not readable before (documented)
            continue  # one value on every row: the other parts decide
        expr = column
        if column in retyped:
            old, new = retyped[column]
            if new.collation is not None:
                charset = charsets.charset.get(new.collation, "")
                expr = f"CONVERT({column} USING {charset}) COLLATE {new.collation}"
            else:
                read, value, _ = _conversion(old, new, charsets)
                expr = value.format(x=read.format(c=column))
        not_null.append(f"{column} IS NOT NULL")
        exprs.append(f"LEFT({expr}, {prefix})" if prefix else expr)
    where = f" WHERE {' AND '.join(not_null)}" if not_null else ""
    group = f" GROUP BY {', '.join(exprs)}" if exprs else ""
    qt = mydiff.q(table.name)
    # max_sort_length: GROUP BY on a TEXT/BLOB compares its first 1,024 bytes only.
    sql = (
        f"SET STATEMENT max_sort_length = 8388608 FOR SELECT 1 FROM {qt}{where}{group}"
        " HAVING COUNT(*) > 1 LIMIT 1"
    )
    if _run(cur, sql, f"the {label} of table {qt}"):
        raise _fail(
            f"{label} of table {qt} would have duplicate values on existing rows",
            "DataViolatesConstraint",
        )


def _check_foreign(
    cur: Any, current: Schema, table: _Table, clause: str, charsets: _Charsets
) -> None:
    """A foreign key the ALTER adds holds on the rows: each row whose key columns are
    all non-NULL has a parent row, compared by the parent column's collation (the index
    the server looks the value up in). The apply runs with ``foreign_key_checks`` on,
    under which the ALTER checks every row (error 1452). A parent the plan creates is
    empty."""
    fk = mydiff.foreign(clause)
    if fk is None:
        return
    columns, parent, parent_columns = fk
    label = "foreign key " + clause.split(" FOREIGN KEY ", 1)[0].removeprefix("CONSTRAINT ")
    qt = mydiff.q(table.name)
    if any(c in table.added for c in columns):
        return  # a column the ALTER adds: not readable before (documented)
    present = " AND ".join(f"ptah_child.{mydiff.q(c)} IS NOT NULL" for c in columns)
    parent_entry = current["table"].get(parent)
    if parent_entry is None:
        sql = f"SELECT 1 FROM {qt} AS ptah_child WHERE {present} LIMIT 1"
    else:
        collations = current["table"][table.name].get("collations", {})
        matches = []
        for c, p in zip(columns, parent_columns, strict=True):
            child = f"ptah_child.{mydiff.q(c)}"
            pc, cc = parent_entry.get("collations", {}).get(p), collations.get(c)
            if pc and cc and pc != cc and charsets.charset.get(pc) == charsets.charset.get(cc):
                child += f" COLLATE {pc}"
            matches.append(f"ptah_parent.{mydiff.q(p)} = {child}")
        sql = (
            f"SELECT 1 FROM {qt} AS ptah_child WHERE {present} AND NOT EXISTS (SELECT 1"
            f" FROM {mydiff.q(parent)} AS ptah_parent WHERE {' AND '.join(matches)}) LIMIT 1"
        )
    if _run(cur, sql, f"the {label} of table {qt}"):
        raise _fail(
            f"{label} of table {qt} has rows with no parent row in {mydiff.q(parent)}",
            "DataViolatesConstraint",
        )
