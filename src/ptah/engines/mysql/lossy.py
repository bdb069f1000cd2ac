"""MariaDB/MySQL: which column retypes change values without an error.

An ``ALTER TABLE ... MODIFY COLUMN`` converts every value to the new type. Under the
strict sql_mode the apply runs in (:meth:`ptah.engines.mysql.ops.MysqlOps.execute`) a
value that does not fit is refused, and the apply's data check fails before anything ran
(:mod:`.datacheck`). Other conversions the server makes with a note only, and the value
the column keeps is not the one it had: digits rounded away, time or trailing spaces cut
off, text read as a number or a date, an ENUM's value matched to another member. Such a
retype is destructive: no plan gives the old values back.

Found on MariaDB 10.11 by converting values of each pair of types under
``STRICT_ALL_TABLES`` and reading them back (tests/engines/test_mysql_lossy.py keeps
the cases).
"""

from __future__ import annotations

import re

_INTEGER = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint"}
_REAL = {"float", "double", "real"}
_NUMERIC = _INTEGER | _REAL | {"decimal", "numeric", "bit", "year", "bool", "boolean"}
_TEMPORAL = {"date", "datetime", "timestamp", "time"}
_CHAR_TEXT = {"tinytext": 255, "text": 65535, "mediumtext": 16777215, "longtext": 4294967295}
_BLOBS = {"tinyblob", "blob", "mediumblob", "longblob"}
_BINARY = {"binary", "varbinary"} | _BLOBS
_CHARACTER = {"char", "varchar"} | set(_CHAR_TEXT) | {"json"}
_MEMBERS = {"enum", "set"}
_SPATIAL = {
    "geometry",
    "point",
    "linestring",
    "polygon",
    "multipoint",
    "multilinestring",
    "multipolygon",
    "geometrycollection",
}
# The widest character of each character set (bytes): what a TEXT type's bytes hold in
# characters. A set not named here is taken at the widest, 4.
_MAXLEN = {
    "ascii": 1,
    "latin1": 1,
    "latin2": 1,
    "latin5": 1,
    "latin7": 1,
    "cp1250": 1,
    "cp1251": 1,
    "cp1256": 1,
    "cp1257": 1,
    "cp850": 1,
    "cp852": 1,
    "cp866": 1,
    "koi8r": 1,
    "koi8u": 1,
    "greek": 1,
    "hebrew": 1,
    "swe7": 1,
    "dec8": 1,
    "hp8": 1,
    "armscii8": 1,
    "geostd8": 1,
    "keybcs2": 1,
    "macce": 1,
    "macroman": 1,
    "tis620": 1,
    "binary": 1,
    "ucs2": 2,
    "big5": 2,
    "gbk": 2,
    "gb2312": 2,
    "sjis": 2,
    "cp932": 2,
    "euckr": 2,
    "utf8": 3,
    "utf8mb3": 3,
    "ujis": 3,
    "eucjpms": 3,
}
_TYPE = re.compile(r"(?P<base>\w+)(?:\((?P<args>(?:'(?:[^'\\]|\\.|'')*'|[^)'])*)\))?(?P<rest>.*)")
_MEMBER = re.compile(r"'((?:[^'\\]|\\.|'')*)'")


def _parse(type_text: str) -> tuple[str, str, str]:
    """(base, arguments, the rest) of a column type as ``SHOW CREATE TABLE`` shows it
    without name, charset and collation: ``decimal(10,2) unsigned``."""
    m = _TYPE.match(type_text.strip())
    if m is None:
        return type_text.strip().lower(), "", ""
    return m["base"].lower(), m["args"] or "", m["rest"].lower()


def _numbers(args: str) -> list[int]:
    return [int(a) for a in re.findall(r"\d+", args)]


def _scale(base: str, args: str) -> int | None:
    """Digits after the point a type keeps (None: a float's, as many as it holds)."""
    nums = _numbers(args)
    if base in ("decimal", "numeric"):
        return nums[1] if len(nums) > 1 else 0
    if base in _REAL:
        return nums[1] if len(nums) > 1 else None
    return 0


def _bits(args: str) -> int:
    nums = _numbers(args)
    return nums[0] if nums else 1


def _fsp(args: str) -> int:
    nums = _numbers(args)
    return nums[0] if nums else 0


def _charset(collation: str | None) -> str:
    if not collation:
        return "binary"
    return collation.split("_", 1)[0].lower()


def _chars(base: str, args: str, collation: str | None) -> int | None:
    """How many characters a character type holds (None: not a character type)."""
    if base in ("char", "varchar"):
        nums = _numbers(args)
        return nums[0] if nums else 1
    if base in _CHAR_TEXT:
        return _CHAR_TEXT[base] // _MAXLEN.get(_charset(collation), 4)
    if base == "json":
        return _CHAR_TEXT["longtext"] // 4
    return None


def _members(args: str) -> list[str]:
    return [m.replace("''", "'") for m in _MEMBER.findall(args)]


def narrows(
    old_type: str, new_type: str, old_collation: str | None, new_collation: str | None
) -> str | None:
    """What a retype from ``old_type`` to ``new_type`` (types as :func:`ptah.engines.mysql.
    datacheck._typed` gives them, without charset and collation; the columns' effective
    collations beside) changes in the values it keeps without an error, or None where
    the server keeps each value or refuses it."""
    src, sargs, srest = _parse(old_type)
    dst, dargs, drest = _parse(new_type)
    if (src, sargs, srest) == (dst, dargs, drest):
        return None  # the charset or collation alone: converted or refused
    textual = src in _CHARACTER or src in _BINARY
    if dst in _MEMBERS:
        if src in _MEMBERS:
            kept = set(_members(dargs))
            if any(m not in kept for m in _members(sargs)):
                return f"a member of the {src.upper()} is removed or respelled"
            return None
        if textual:
            return f"text is matched to the {dst.upper()}'s members (letters' case, spaces)"
        return None
    if src in _MEMBERS and dst not in _CHARACTER and dst not in _BINARY:
        return f"an {src.upper()}'s values become their numbers"
    if (dst in _NUMERIC or dst in _TEMPORAL) and textual:
        return "text is read as a number or a date (its spelling is not kept)"
    if dst == "year" and src != "year":
        return "numbers are read as years"
    if dst in _INTEGER or dst in ("bit", "bool", "boolean"):
        if src in _REAL or (src in ("decimal", "numeric") and (_scale(src, sargs) or 0) > 0):
            return "fractions are rounded away"
        if src in _TEMPORAL and _fsp(sargs) > 0:
            return "fractions of a second are cut off"
        return None
    if dst in ("decimal", "numeric"):
        if src in _REAL:
            return "a float's digits are rounded to the new scale"
        if src in ("decimal", "numeric") and (_scale(src, sargs) or 0) > (_scale(dst, dargs) or 0):
            return "digits past the new scale are rounded away"
        if src in _TEMPORAL and _fsp(sargs) > (_scale(dst, dargs) or 0):
            return "fractions of a second are cut off"
        return None
    if dst in _REAL:
        return _to_real(src, sargs, dst, dargs)
    if dst in _TEMPORAL:
        return _to_temporal(src, sargs, dst, dargs)
    if dst in _CHARACTER or dst in _BINARY:
        return _to_string(src, sargs, dst, dargs, old_collation, new_collation)
    if dst in _SPATIAL or src == dst:
        return None  # a geometry is kept or refused; a type's own arguments change
    return f"values are converted to {dst.upper()}"


def _to_real(src: str, sargs: str, dst: str, dargs: str) -> str | None:
    new_scale = _scale(dst, dargs)
    if new_scale is not None:
        old_scale = _scale(src, sargs)
        if old_scale is None or old_scale > new_scale:
            return "digits past the new scale are rounded away"
    # The server shows FLOAT(p) as FLOAT up to 24 bits, DOUBLE past them; FLOAT(M,D) is
    # single precision whatever M.
    exact = ("float", "tinyint", "smallint", "mediumint", "bool", "boolean")
    if dst == "float" and src not in exact and not (src == "bit" and _bits(sargs) <= 24):
        return "digits past a FLOAT's precision are rounded away"
    if src == "bit" and _bits(sargs) > 53:
        return "digits past a DOUBLE's precision are rounded away"
    if src == "bigint" or (src in ("decimal", "numeric") and (_numbers(sargs) or [10])[0] > 15):
        return "digits past a DOUBLE's precision are rounded away"
    if src in _TEMPORAL:
        return "a date or time is read as a number"
    return None


def _to_temporal(src: str, sargs: str, dst: str, dargs: str) -> str | None:
    if src not in _TEMPORAL:
        return "values are read as dates or times"
    if dst == "date":
        return None if src == "date" else "the time of day is cut off"
    if src == "date":
        return "a date is read as a time" if dst == "time" else None
    if (src == "time") != (dst == "time"):
        return "the date is cut off" if dst == "time" else "a time of day is given a date"
    if {src, dst} == {"datetime", "timestamp"}:
        return "values are read again in the session's time zone"
    if _fsp(dargs) < _fsp(sargs):
        return "fractions of a second are rounded away"
    return None


def _to_string(
    src: str,
    sargs: str,
    dst: str,
    dargs: str,
    old_collation: str | None,
    new_collation: str | None,
) -> str | None:
    if dst == "binary":
        if src != "binary" or _numbers(dargs) != _numbers(sargs):
            return "values are padded with zero bytes to the new length"
        return None
    if dst == "char" and src not in ("char",) and (src in _CHARACTER or src in _BINARY):
        return "trailing spaces are cut off"
    old_chars = _chars(src, sargs, old_collation)
    new_chars = _chars(dst, dargs, new_collation)
    if old_chars is None or new_chars is None or new_chars >= old_chars or src == "char":
        return None  # a CHAR's values have no trailing spaces to cut
    # Between VARCHARs of one character set and length prefix the copy refuses any cut
    # (trailing spaces too); elsewhere it cuts trailing spaces with a note.
    cs_old, cs_new = _charset(old_collation), _charset(new_collation)
    width = _MAXLEN.get(cs_old, 4)
    if (
        src == dst == "varchar"
        and cs_old == cs_new
        and (old_chars * width < 256) == (new_chars * width < 256)
    ):
        return None
    return "trailing spaces past the new length are cut off"
