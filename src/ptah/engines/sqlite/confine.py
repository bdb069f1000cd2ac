"""What a SQLite desired file may not do: reach another database file or write settings.

The scratch is an in-memory database; what could escape it are other files:
``ATTACH`` (which creates a file that does not exist), ``DETACH``,
``VACUUM INTO`` (which writes one), names qualified with an attached schema,
and pragmas that write a database's settings. Pragmas that only read, or only
set this connection's behaviour (``foreign_keys``, ``recursive_triggers``,
``defer_foreign_keys``), are allowed: sample schemas start with
``PRAGMA foreign_keys = ON``.

The same rules are enforced a second time while the scratch loads, by
SQLite's own authorizer (:func:`authorizer`): the reading here gives the
line and the reason, the authorizer holds even where a reading might miss.
"""

from __future__ import annotations

import sqlite3

from ptah.engines.confine import (
    OBJECT_POSITIONS,
    Word,
    dotted_names,
    first_reason,
    names_an_object,
    qualified_tables,
)

OWN_SCHEMAS = {"main", "temp"}
# Pragmas that may be given a value because they only set this connection's behaviour.
SESSION_PRAGMAS = {"foreign_keys", "recursive_triggers", "defer_foreign_keys"}
# Pragmas whose argument names what to read, not a value to write.
READING_PRAGMAS = {
    "table_info",
    "table_xinfo",
    "table_list",
    "index_info",
    "index_xinfo",
    "index_list",
    "foreign_key_list",
    "foreign_key_check",
    "integrity_check",
    "quick_check",
}
# Pragmas that write even without a value.
WRITING_PRAGMAS = {"optimize", "incremental_vacuum", "wal_checkpoint", "shrink_memory"}


def writes_setting(name: str, has_value: bool) -> bool:
    """Whether ``PRAGMA name`` (given a value or not) writes a database's setting: the
    one rule for the reading here and for the authorizer."""
    name = name.lower()
    return name in WRITING_PRAGMAS or (
        has_value and name not in SESSION_PRAGMAS and name not in READING_PRAGMAS
    )


# Pragmas that reach past the database file even on the target itself: the process's
# directories for temporary and data files, and a schema table the file would write by
# hand (a forged schema: a table whose SQL is not what it holds). Every other pragma a
# migration sets is the target's own setting (user_version, journal_mode...).
OUTSIDE_PRAGMAS = {"temp_store_directory", "data_store_directory", "writable_schema"}


def migration_writes(name: str, has_value: bool) -> bool:
    """Whether a migration's ``PRAGMA name`` reaches past its database: the one rule for
    the reading here and for the runner's authorizer."""
    return name.lower() in OUTSIDE_PRAGMAS and (has_value or name.lower() != "writable_schema")


def _pragma(words: list[Word], i: int, migration: bool = False) -> str | None:
    j = i + 1
    schema = ""
    if j + 2 < len(words) and words[j].is_name and words[j + 1].punct("."):
        schema = words[j].text.lower()
        j += 2
    if j >= len(words) or not words[j].is_name:
        return None
    name = words[j].text.lower()
    if schema and schema not in OWN_SCHEMAS:
        return f"names another schema ({schema})"
    has_value = j + 1 < len(words) and (words[j + 1].punct("=") or words[j + 1].punct("("))
    if migration:
        if migration_writes(name, has_value):
            return f"reaches past the database file (PRAGMA {name})"
        return None
    if writes_setting(name, has_value):
        return f"writes a database setting (PRAGMA {name})"
    return None


def _head(words: list[Word], i: int, migration: bool = False) -> str | None:
    w = words[i]
    if w.is_("ATTACH"):
        return "attaches another database file"
    if w.is_("DETACH"):
        return "detaches a database"
    if w.is_("VACUUM") and _vacuum_into(words, i):
        return "writes another database file (VACUUM INTO)"
    if w.is_("PRAGMA"):
        return _pragma(words, i, migration)
    if w.is_("CREATE") and _creates_temporary_trigger(words, i):
        return _TEMPORARY_TRIGGER
    return None


def _vacuum_into(words: list[Word], i: int) -> bool:
    """Whether the VACUUM at ``i`` writes INTO a file: read to its statement's end only
    (read to the text's end, a body of many statements was quadratic)."""
    j = i + 1
    while j < len(words) and not words[j].punct(";"):
        if words[j].is_("INTO"):
            return True
        j += 1
    return False


# A temporary trigger lives in the connection that made it, yet fires on the main
# schema's tables and writes where its body says: the plan could neither keep it nor
# show what it does. (A temporary table or view is the file's own scratch work.)
_TEMPORARY_TRIGGER = "creates a temporary trigger, which the database does not keep"


def _creates_temporary_trigger(words: list[Word], i: int) -> bool:
    """``CREATE TEMP TRIGGER`` or ``CREATE TRIGGER temp.name``."""
    j = i + 1
    temporary = j < len(words) and words[j].is_("TEMP", "TEMPORARY")
    if temporary:
        j += 1
    if j >= len(words) or not words[j].is_("TRIGGER"):
        return False
    j += 1
    while j < len(words) and words[j].is_("IF", "NOT", "EXISTS"):
        j += 1
    qualified = j + 1 < len(words) and words[j].is_name and words[j + 1].punct(".")
    return temporary or (qualified and words[j].text.lower() == "temp")


# Functions that read or write files or load code (most are absent from Python's
# sqlite3, but a build may have them).
OUTSIDE_FUNCTIONS = {"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"}
# Tables, table-valued functions and virtual-table modules that read or write files or
# the database's raw pages (SQLite's dbpage, fileio, zipfile and csv extensions: absent
# from Python's sqlite3, so a trigger or view naming them loads in the scratch, and would
# run them on a target whose build has them). The raw-page tables' names are reserved
# (sqlite_*): named anywhere a table is, they are SQLite's; the others are refused
# where they can only be SQLite's (called, or a module): a table of the file may be
# named csv.
RAW_PAGE_TABLES = {"sqlite_dbpage", "sqlite_dbdata", "sqlite_dbptr"}
FILE_TABLE_FUNCTIONS = {"fsdir", "zipfile"} | RAW_PAGE_TABLES
FILE_MODULES = {"csv", "fileio"} | FILE_TABLE_FUNCTIONS
_TABLE_POSITIONS = {"FROM", "JOIN", "INTO", "UPDATE"}
# Words before a name with parentheses that is the file's own table: CREATE TABLE
# zipfile (...), INSERT INTO zipfile (...), REFERENCES zipfile (...).
_NAMING_POSITIONS = ("TABLE", "EXISTS", "INTO", "ON", "REFERENCES")


def _outside_table(words: list[Word], i: int) -> bool:
    w = words[i]
    if w.kind not in ("word", "ident") or i == 0:
        return False
    name, before = w.text.lower(), words[i - 1]
    after = words[i + 1] if i + 1 < len(words) else None
    # A name qualified with a schema (main.sqlite_dbpage) is a table's: the qualifier's
    # position is the one that counts.
    if before.punct(".") and i >= 2 and words[i - 2].is_name:
        if i == 2:
            return False
        qualified_at = words[i - 3]
    else:
        qualified_at = before
    return (
        (
            name in RAW_PAGE_TABLES
            and (qualified_at.upper in _TABLE_POSITIONS or qualified_at.punct(","))
        )
        or (
            name in FILE_TABLE_FUNCTIONS
            and after is not None
            and after.punct("(")
            and not before.is_(*_NAMING_POSITIONS)
        )
        or (name in FILE_MODULES and before.is_("USING"))
    )


def migration_refusal(words: list[Word], text: str) -> str | None:
    """Why a versioned migration's statement reaches outside its database, or None: the
    rules of :func:`refusal`, but a pragma that writes the target's own setting is the
    migration's to write (:func:`migration_writes`)."""
    return refusal(words, text, migration=True)


def refusal(words: list[Word], text: str, migration: bool = False) -> str | None:
    """Why this statement reaches outside its database, or None."""
    why = first_reason(words, lambda w, i: _head(w, i, migration))
    if why:
        return why
    for i, w in enumerate(words[:-1]):
        # A quoted name calls the function too: SQLite reads "load_extension"(...) and
        # [load_extension](...) as load_extension(...).
        called = w.kind in ("word", "ident") and words[i + 1].punct("(")
        if called and w.text.lower() in OUTSIDE_FUNCTIONS:
            return f"calls {w.text.lower()}(), which reaches outside the database"
    for i, w in enumerate(words):
        if _outside_table(words, i):
            return f"uses {w.text.lower()}, which reaches outside the database"
    if words and words[0].is_("PRAGMA"):
        return None
    for name in dotted_names(words):
        if name.parts[0].lower() in OWN_SCHEMAS:
            continue
        if names_an_object(name, OBJECT_POSITIONS):
            return f"names another schema ({name.parts[0]})"
    for schema in qualified_tables(text, "sqlite"):
        if schema.lower() not in OWN_SCHEMAS:
            return f"names another schema ({schema})"
    return None


_DENIED_ACTIONS = {
    sqlite3.SQLITE_ATTACH,
    sqlite3.SQLITE_DETACH,
    sqlite3.SQLITE_CREATE_TEMP_TRIGGER,
}


def authorizer(action: int, arg1: str | None, arg2: str | None, db: str | None, _: object) -> int:
    """SQLite's own check while the scratch loads: the same rules, enforced by the library."""
    if action in _DENIED_ACTIONS:
        return sqlite3.SQLITE_DENY
    if db is not None and db not in OWN_SCHEMAS:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in OUTSIDE_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_PRAGMA and writes_setting(arg1 or "", arg2 is not None):
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


# Pragmas a plan's statements may set, and a desired file may not: SQLite's legacy
# ALTER TABLE behaviour, which a rebuild's rename aside needs (see
# :data:`ptah.engines.sqlite.diff.LEGACY_ALTER_ON`). It is this connection's
# behaviour, not a database's setting, and the apply sets it back after the plan
# whatever happens; a forged plan setting it gains what its own DDL could do anyway.
PLAN_PRAGMAS = {"legacy_alter_table"}


_VACUUM_SCHEMA = "vacuum_db"


def migration_authorizer(
    action: int, arg1: str | None, arg2: str | None, db: str | None, _: object
) -> int:
    """SQLite's own check of a migration's statements while they run on the target:
    :func:`authorizer`, but the target's own settings are the migration's to write, and
    a VACUUM of the target may rebuild it through the private temporary database SQLite
    attaches for it (``ATTACH ''`` as ``vacuum_db``: no file outlives the statement; the
    reading refuses any ATTACH a file writes)."""
    if action == sqlite3.SQLITE_ATTACH and arg1 == "":
        return sqlite3.SQLITE_OK
    if db == _VACUUM_SCHEMA:
        db = None
    if action == sqlite3.SQLITE_PRAGMA:
        if db is not None and db not in OWN_SCHEMAS:
            return sqlite3.SQLITE_DENY
        outside = migration_writes(arg1 or "", arg2 is not None)
        return sqlite3.SQLITE_DENY if outside else sqlite3.SQLITE_OK
    return authorizer(action, arg1, arg2, db, _)


def plan_authorizer(
    action: int, arg1: str | None, arg2: str | None, db: str | None, _: object
) -> int:
    """The apply's check of a plan's statements: :func:`authorizer`, but for
    :data:`PLAN_PRAGMAS`."""
    if (
        action == sqlite3.SQLITE_PRAGMA
        and (arg1 or "").lower() in PLAN_PRAGMAS
        and (db is None or db in OWN_SCHEMAS)
    ):
        return sqlite3.SQLITE_OK
    return authorizer(action, arg1, arg2, db, _)
