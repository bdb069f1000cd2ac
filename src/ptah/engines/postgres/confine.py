"""What a PostgreSQL desired file may not do: act on the cluster instead of one database.

Besides the statements below, this refuses role switching (``SET ROLE``,
``SET SESSION AUTHORIZATION``), ownership sweeps (``REASSIGN OWNED``,
``DROP OWNED``), foreign servers and user mappings, ``IMPORT FOREIGN SCHEMA``,
comments, labels and grants on databases, tablespaces and parameters,
transaction control that would end the scratch's own transaction
(``ROLLBACK``, ``SAVEPOINT``, two-phase commit), and calls, at load time, of
functions that act on other sessions, the server's files or other servers
(``pg_terminate_backend``, ``lo_export``, ``dblink``...), ``DO`` bodies included.

The minimal shared guard (the PostgreSQL fidelity work extends it): whole
databases, roles, tablespaces, subscriptions, ``ALTER SYSTEM``, server files
and programs through ``COPY``, loaded libraries, cluster maintenance, psql
meta-commands (``\\connect`` would switch databases in psql; Ptah sends SQL
only), and names of relations with a database part (``otherdb.schema.table``). Schemas are inside
one database on PostgreSQL, so ``schema.table`` stays inside.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Set

from ptah.engines.confine import (
    OBJECT_POSITIONS,
    Word,
    dotted_names,
    object_kind,
    statement_starts,
)

_OBJECT_WHY = {
    "DATABASE": "acts on a whole database",
    "ROLE": "changes cluster roles",
    "USER": "changes cluster roles",
    "GROUP": "changes cluster roles",
    "TABLESPACE": "changes cluster-wide objects",
    "SUBSCRIPTION": "connects to another database",
    "SERVER": "connects to another server",
}

# Words after which a name is a relation or routine: three parts there are db.schema.name.
_OBJECT_POSITION = OBJECT_POSITIONS | {"TYPE", "ON"}


def _head(words: list[Word], own: str | None = None) -> str | None:
    """Why the statement's first words act on the cluster; ``own``: a versioned
    migration's database (None for a desired file), which it may alter (:func:`_own_database`)."""
    w = words[0]
    nxt = words[1] if len(words) > 1 else None
    if w.punct("\\"):
        if nxt is not None and nxt.is_("RESTRICT", "UNRESTRICT"):
            return None  # pg_dump's guard for psql itself: left out of the load (prepare)
        return "a psql meta-command is not SQL (it may switch databases)"
    if w.is_("CREATE", "DROP", "ALTER"):
        kind = object_kind(words, 0)
        if w.is_("ALTER") and kind == "SYSTEM":
            return "changes the server's configuration"
        if own is not None and kind == "DATABASE" and w.is_("ALTER"):
            return _alter_database(words, own)
        return _OBJECT_WHY.get(kind)
    if w.is_("COPY"):
        for k, x in enumerate(words):
            if x.is_("FROM", "TO") and k + 1 < len(words):
                target = words[k + 1]
                if target.kind == "string" or target.is_("PROGRAM"):
                    return "reads or writes files or programs on the server"
        return None
    if w.is_("LOAD"):
        return "loads a server library"
    if w.is_("CHECKPOINT"):
        return "administers the server"
    if w.is_("REINDEX") and nxt is not None and nxt.is_("SYSTEM", "DATABASE"):
        return "administers a whole database"
    if w.is_("GRANT", "REVOKE") and not any(x.is_("ON") for x in words):
        return "changes cluster role membership"
    return None


# -- a versioned migration's own database ----------------------------------------------
# A migration runs on the target itself (:mod:`ptah.engines.versioned.confine`): its own
# database is its to change, the cluster is not. So, unlike a desired file, it may set its
# database's defaults (ALTER DATABASE own SET/RESET: every later session of that database
# reads them, and of the reading settings only values the check reads alike), comment on,
# label or grant on its own database, control its transactions (the runner refuses that in
# a transactional file on its own), VACUUM, and create temporary objects; never another
# database, nor the database itself as the cluster sees it (its name, owner, connection
# limit, template flag, tablespace), nor a VACUUM FULL of every table (it rewrites the
# cluster's shared catalogs too).


def _is_own(w: Word, own: str) -> bool:
    """Whether ``w`` names the database ``own`` (an unquoted name folds to lower case)."""
    if not w.is_name or not own:
        return False
    return (w.text if w.kind == "ident" else w.text.lower()) == own


_DATABASE_ROLE_SETTINGS = {"ROLE", "SESSION_AUTHORIZATION"}
_DATABASE_ITSELF = (
    "changes the database itself as the cluster sees it (its name, owner, connections,"
    " template flag or tablespace): an administrator's change, not a migration's"
)


def _alter_database(words: list[Word], own: str) -> str | None:
    """A migration's ALTER DATABASE: its own database's SET/RESET only."""
    k = next(i for i, w in enumerate(words) if w.is_("DATABASE"))
    name = words[k + 1] if k + 1 < len(words) else None
    if name is None or not _is_own(name, own):
        shown = name.text if name is not None else ""
        return f"acts on another database ({shown})"
    action = words[k + 2] if k + 2 < len(words) else None
    if action is not None and action.is_("RESET"):
        return None
    if action is not None and action.is_("SET") and k + 3 < len(words):
        setting = words[k + 3]
        if setting.is_("TABLESPACE"):  # moves its files, not a setting
            return _DATABASE_ITSELF
        if setting.is_name and setting.text.upper() in _DATABASE_ROLE_SETTINGS:
            return "makes every later session of the database switch to another role"
        return None  # the setting itself: the rules of :func:`_reading_settings`
    return _DATABASE_ITSELF


def _on_own_database(words: list[Word], k: int, own: str) -> bool:
    """Whether the DATABASE at ``k`` (GRANT/REVOKE/COMMENT/SECURITY LABEL ... ON DATABASE)
    names only the migration's own database."""
    names = []
    for w in words[k + 1 :]:
        if w.punct(","):
            continue
        if w.is_("TO", "FROM", "IS"):
            break
        names.append(w)
    return bool(names) and all(_is_own(w, own) for w in names)


_VACUUM_OPTIONS = {"FULL", "FREEZE", "VERBOSE", "ANALYZE", "ANALYSE"}


def _vacuum(words: list[Word]) -> str | None:
    """A migration's VACUUM: any but a VACUUM FULL without a table list, which rewrites
    the shared catalogs of the whole cluster too (their exclusive locks hold every login)."""
    full = False
    j = 1
    while j < len(words):
        w = words[j]
        if w.punct("(") and j == 1:
            depth = 0
            while j < len(words):
                depth += words[j].punct("(") - words[j].punct(")")
                full = full or words[j].is_("FULL")
                j += 1
                if depth == 0:
                    break
            continue
        if w.upper in _VACUUM_OPTIONS:
            full = full or w.is_("FULL")
            j += 1
            continue
        break
    listed = j < len(words) and not words[j].punct(";")
    if full and not listed:
        return (
            "is a VACUUM FULL of every table, which rewrites the cluster's shared catalogs"
            " too; name the tables"
        )
    return None


_MIGRATION_TWO_WORDS = {
    ("PREPARE", "TRANSACTION"): "is two-phase commit (a prepared transaction outlives the session)",
}
# Desired-file wording read as a migration's (the reasons are shared).
_MIGRATION_WORDING = (
    ("while the file loads", "while the migration runs"),
    ("a routine of this file", "a routine of the pending migrations"),
    ("a view or routine of this file", "a view or routine of the pending migrations"),
    ("the loading session's", "the migration session's"),
    ("acts beyond the scratch", "acts beyond the database"),
)


def migration_wording(why: str) -> str:
    """A reason of these rules worded for a versioned migration."""
    for old, new in _MIGRATION_WORDING:
        why = why.replace(old, new)
    return why


_TWO_WORDS = {
    ("REASSIGN", "OWNED"): "changes ownership across roles",
    ("DROP", "OWNED"): "drops every object of a role",
    ("IMPORT", "FOREIGN"): "reads another server's schema",
    ("PREPARE", "TRANSACTION"): "is two-phase commit (it would end the scratch's transaction)",
    ("COMMIT", "PREPARED"): "is two-phase commit",
    ("ROLLBACK", "PREPARED"): "is two-phase commit",
}
_ONE_WORD = {
    "ROLLBACK": "is transaction control (it would end the scratch's transaction)",
    "ABORT": "is transaction control (it would end the scratch's transaction)",
    "SAVEPOINT": "is transaction control inside the desired file",
    "RELEASE": "is transaction control inside the desired file",
    "VACUUM": "is maintenance, not a schema object",
}
_CLUSTER_TARGETS = {"DATABASE", "TABLESPACE", "PARAMETER", "ROLE", "SUBSCRIPTION", "SERVER"}
_OUTSIDE_FUNCTIONS = frozenset(
    {
        "PG_TERMINATE_BACKEND",
        "PG_CANCEL_BACKEND",
        "PG_RELOAD_CONF",
        "PG_ROTATE_LOGFILE",
        "PG_SWITCH_WAL",
        "PG_PROMOTE",
        "PG_CREATE_RESTORE_POINT",
        "PG_BACKUP_START",
        "PG_BACKUP_STOP",
        # their names up to PostgreSQL 14: an exclusive backup writes backup_label into
        # the data directory, and a server that stops during it does not start again
        "PG_START_BACKUP",
        "PG_STOP_BACKUP",
        "PG_SWITCH_XLOG",
        "PG_XLOG_REPLAY_PAUSE",
        "PG_XLOG_REPLAY_RESUME",
        "PG_LOG_STANDBY_SNAPSHOT",
        "PG_REPLICATION_ORIGIN_XACT_SETUP",
        "LO_IMPORT",
        "LO_EXPORT",
        "PG_READ_FILE",
        "PG_READ_BINARY_FILE",
        "PG_LS_DIR",
        "PG_STAT_FILE",
        "PG_FILE_WRITE",
        "PG_FILE_UNLINK",
        "PG_FILE_RENAME",
        "DBLINK",
        "DBLINK_EXEC",
        "DBLINK_CONNECT",
        "DBLINK_CONNECT_U",
        "PG_CREATE_PHYSICAL_REPLICATION_SLOT",
        "PG_CREATE_LOGICAL_REPLICATION_SLOT",
        "PG_DROP_REPLICATION_SLOT",
        "PG_REPLICATION_ORIGIN_CREATE",
        "PG_LOGICAL_EMIT_MESSAGE",
        "PG_STAT_RESET_SHARED",
        "PG_LOG_BACKEND_MEMORY_CONTEXTS",
        # cluster-wide state: statistics, replication slots and origins, WAL replay
        "PG_STAT_RESET_SLRU",
        "PG_STAT_RESET_REPLICATION_SLOT",
        "PG_STAT_STATEMENTS_RESET",
        "PG_REPLICATION_ORIGIN_DROP",
        "PG_REPLICATION_ORIGIN_ADVANCE",
        "PG_REPLICATION_ORIGIN_SESSION_SETUP",
        "PG_REPLICATION_SLOT_ADVANCE",
        "PG_COPY_PHYSICAL_REPLICATION_SLOT",
        "PG_COPY_LOGICAL_REPLICATION_SLOT",
        "PG_LOGICAL_SLOT_GET_CHANGES",
        "PG_LOGICAL_SLOT_GET_BINARY_CHANGES",
        "PG_WAL_REPLAY_PAUSE",
        "PG_WAL_REPLAY_RESUME",
        "AUTOPREWARM_START_WORKER",
        "AUTOPREWARM_DUMP_NOW",
        # the server's files
        "PG_LS_LOGDIR",
        "PG_LS_WALDIR",
        "PG_LS_TMPDIR",
        "PG_LS_ARCHIVE_STATUSDIR",
        # raw pages and WAL: any relation's bytes, the shared catalogs' (pg_authid's
        # password hashes, read with pageinspect into a plan's error) and every database's
        # changes; pg_surgery's writes reach the shared catalogs' tuples too
        "GET_RAW_PAGE",
        "PG_GET_WAL_RECORD_INFO",
        "PG_GET_WAL_RECORDS_INFO",
        "PG_GET_WAL_RECORDS_INFO_TILL_END_OF_WAL",
        "PG_GET_WAL_STATS",
        "PG_GET_WAL_STATS_TILL_END_OF_WAL",
        "PG_GET_WAL_BLOCK_INFO",
        "PG_GET_WAL_FPI_INFO",
        "HEAP_FORCE_KILL",
        "HEAP_FORCE_FREEZE",
        "PG_TRUNCATE_VISIBILITY_MAP",
        "PG_LS_REPLSLOTDIR",
        "PG_LS_LOGICALSNAPDIR",
        "PG_LS_LOGICALMAPDIR",
        "PG_CURRENT_LOGFILE",
        "PG_FILE_SYNC",
        "PG_LOGDIR_LS",
    }
)
# Functions that run SQL text given as a value: what they run, the check never reads
# (ts_stat ran "SELECT to_tsvector(lo_export(...)::text)" and wrote a server file).
_SQL_TEXT_FUNCTIONS = frozenset(
    {
        "QUERY_TO_XML",
        "QUERY_TO_XMLSCHEMA",
        "QUERY_TO_XML_AND_XMLSCHEMA",
        "TS_STAT",
        "TS_REWRITE",
        "CROSSTAB",
        "CROSSTAB2",
        "CROSSTAB3",
        "CROSSTAB4",
        "CONNECTBY",
        "XPATH_TABLE",
    }
)
_OUTSIDE_FUNCTIONS = _OUTSIDE_FUNCTIONS | _SQL_TEXT_FUNCTIONS
_CALL = re.compile(r"\b(" + "|".join(sorted(_OUTSIDE_FUNCTIONS)) + r")\s*\(", re.IGNORECASE)
# What _CALL finds, found faster: each name it matches is a whole run of word characters
# (a boundary before it, a space or "(" after it), so only runs followed by "(" are
# candidates, and each is matched against the same names as _CALL matches them. One
# alternation of dozens of names tried at every word boundary of a schema of thousands
# of statements took a quarter of the confinement check.
_CALL_CANDIDATE = re.compile(r"(?<!\w)(\w+)\s*\(")
_CALL_NAME = re.compile("|".join(sorted(_OUTSIDE_FUNCTIONS)), re.IGNORECASE)


def _call_search(text: str) -> re.Match[str] | None:
    """The first call of an :data:`_OUTSIDE_FUNCTIONS` function in ``text``, as
    ``_CALL.search(text)`` finds it (its group 1 is the name as written)."""
    for found in _CALL_CANDIDATE.finditer(text):
        if _CALL_NAME.fullmatch(found.group(1)):
            return found
    return None


# Statements that run code while the file loads (a routine body only runs when called).
_RUNS_AT_LOAD = {
    "SELECT",
    "DO",
    "CALL",
    "WITH",
    "VALUES",
    "EXECUTE",
    "INSERT",
    "UPDATE",
    "DELETE",
    "MERGE",
    "EXPLAIN",
    "CREATE",
    "TABLE",
    "PREPARE",  # its query runs at EXECUTE
    "DECLARE",  # a cursor's query runs at FETCH
}


_ROLE_SETTINGS = {"ROLE", "SESSION_AUTHORIZATION"}


def _session_setting(words: list[Word]) -> str | None:
    """What a SET or RESET of the session's identity does, past its scope word.

    ``SET [SESSION | LOCAL] ROLE``, ``SET [SESSION | LOCAL] SESSION AUTHORIZATION``, their
    RESET, and the settings' own names (``SET role = x``, ``SET LOCAL
    session_authorization = x``, quoted or not) all switch roles; ``SET SESSION
    CHARACTERISTICS`` changes every later transaction of the loading session. Any other
    ``SET SESSION name`` is a setting like ``SET name`` (judged by the other rules)."""
    if not words[0].is_("SET", "RESET") or len(words) < 2:
        return None
    rest = words[1:]
    if (
        words[0].is_("SET")
        and rest[0].is_("SESSION", "LOCAL")
        and not (len(rest) > 1 and rest[1].is_("AUTHORIZATION", "CHARACTERISTICS"))
    ):
        rest = rest[1:]  # the scope of an ordinary setting
    if not rest:
        return None
    name = rest[0].text.upper() if rest[0].is_name else ""
    if name in _ROLE_SETTINGS or (
        name == "SESSION" and len(rest) > 1 and rest[1].is_("AUTHORIZATION")
    ):
        return "switches to another role"
    if name == "SESSION" and len(rest) > 1 and rest[1].is_("CHARACTERISTICS"):
        return "sets the characteristics of the loading session's later transactions"
    return None


def _more(words: list[Word], own: str | None = None) -> str | None:
    w = words[0]
    switch = _session_setting(words)
    if switch is not None:
        return switch
    head = tuple(x.upper for x in words[:2])
    if own is not None and head in _MIGRATION_TWO_WORDS:
        return _MIGRATION_TWO_WORDS[head]
    if head in _TWO_WORDS:
        return _TWO_WORDS[head]
    if own is not None and w.is_("VACUUM"):
        return _vacuum(words)
    if own is not None and w.upper in _ONE_WORD:
        return None  # transaction control: the runner's own check (versioned.apply)
    if w.upper in _ONE_WORD:
        return _ONE_WORD[w.upper]
    if w.is_("CREATE", "ALTER", "DROP") and len(words) > 2:
        pair = (words[1].upper, words[2].upper)
        if pair == ("USER", "MAPPING"):
            return "maps a role to another server's user"
        if pair == ("FOREIGN", "DATA"):
            return "defines a way to reach other servers"
    if w.is_("COMMENT", "SECURITY", "GRANT", "REVOKE"):
        for k, x in enumerate(words[:-1]):
            if x.is_("ON"):
                target = words[k + 1]
                if own is not None and target.is_("DATABASE"):
                    if _on_own_database(words, k + 1, own):
                        break  # its own database's comment, label or privileges
                    return "acts on another database"
                if target.upper in _CLUSTER_TARGETS or (
                    target.is_("FOREIGN")
                    and k + 2 < len(words)
                    and words[k + 2].is_("SERVER", "DATA")
                ):
                    return f"acts on a {target.text.lower()} (outside the database's schema)"
                break
    return None


def _named_outside(seqs: list[list[Word]], bare: bool = False) -> str | None:
    """The first function of :data:`_OUTSIDE_FUNCTIONS` the word sequences call (``name(``,
    quoted or U&-escaped names read as the server reads them), or, ``bare``, name as a
    function (``CREATE OPERATOR ### (FUNCTION = lo_export)``: the operator calls it;
    ``ALTER FUNCTION lo_export RENAME TO x``), not as another object (an extension or a
    schema named dblink)."""
    for seq in seqs:
        for i, w in enumerate(seq):
            # The name first (a word's upper-cased text is kept: Word.upper), then its place.
            if not (w.is_name and (w.upper or w.text.upper()) in _OUTSIDE_FUNCTIONS):
                continue
            prev = seq[i - 1] if i > 0 else None
            named = prev is not None and (prev.punct("=") or prev.is_("FUNCTION", "ROUTINE"))
            if (bare and named) or (i + 1 < len(seq) and seq[i + 1].punct("(")):
                return w.text.lower()
    return None


def _calls_outside(words: list[Word], text: str) -> str | None:
    if not words[0].is_(*_RUNS_AT_LOAD, "ALTER"):
        return None
    # Every CREATE but a routine's own (its body runs only when called) is read: a
    # partition bound, say, is evaluated while the table is created; an ALTER TABLE
    # evaluates a new column's default or a USING expression for each row.
    if words[0].is_("CREATE") and any(x.is_("FUNCTION", "PROCEDURE") for x in words[:4]):
        return None
    scan = text if words[0].is_("DO") else " ".join(x.text for x in words if x.kind != "string")
    found = _call_search(scan)
    name = found.group(1).lower() if found is not None else None
    if name is None:
        seqs = _all_words(words) if words[0].is_("DO") else [words]
        name = _named_outside(seqs, bare=words[0].is_("CREATE", "ALTER"))
    if name is None:
        return None
    if name.upper() in _SQL_TEXT_FUNCTIONS:
        return f"calls {name}(), which runs SQL text the check cannot read"
    return f"calls {name}(), which acts outside the database"


# -- code that runs while the file loads ---------------------------------------------------
# The rules above read statements; code that runs at load time can build statements the
# check never reads: PL/pgSQL's dynamic EXECUTE (``DO $$ BEGIN EXECUTE 'COPY ... TO
# PROGRAM ...'; END $$`` ran a program on the server during a plan), or a language the
# check cannot read at all. So a DO block must be PL/pgSQL without EXECUTE, its static
# statements are judged like the file's own, and a routine of the file that runs dynamic
# SQL or another language ("opaque", :func:`load_time_refusal`) may be defined but not run.
_READABLE_LANGUAGES = {"SQL", "PLPGSQL"}
_LIBRARY_LANGUAGES = {"C"}  # internal functions are the server's own: opaque, not loaded


def _language(words: list[Word]) -> str:
    for i, w in enumerate(words[:-1]):
        if w.is_("LANGUAGE"):
            return words[i + 1].text.upper()
    return ""


def _bodies(words: list[Word]) -> list[list[Word]]:
    """The words of each string of the statement (a DO or routine body among them)."""
    out: list[list[Word]] = []
    for w in words:
        if w.kind == "string":
            try:
                out.append(read_words(w.text))
            except Exception:  # not code (a default, a comment): nothing to read
                continue
    return out


_DYNAMIC = "runs dynamic SQL (EXECUTE) while the file loads, which the check cannot read"


def _do_block(words: list[Word], own: str | None = None) -> str | None:
    if not words[0].is_("DO"):
        return None
    language = _language(words) or "PLPGSQL"
    if language != "PLPGSQL":
        return f"runs {language.lower()} code while the file loads, which the check cannot read"
    for body in _bodies(words):
        for i, w in enumerate(body):
            if w.is_("EXECUTE"):
                why = _DYNAMIC if own is None else _constant_execute(body, i, own)
                if why:
                    return why
        for start in statement_starts(body):
            why = _head(body[start:], own) or _more(body[start:], own)
            if why:
                return why
    return None


def _constant_execute(body: list[Word], i: int, own: str) -> str | None:
    """A migration's DO block may EXECUTE one constant string (``EXECUTE 'CREATE INDEX
    ...'``), judged as the statements it holds; an EXECUTE of anything built at run time
    (format(), ``||``, a variable) is SQL the check cannot read."""
    text = body[i + 1] if i + 1 < len(body) else None
    after = body[i + 2] if i + 2 < len(body) else None
    constant = (
        text is not None
        and text.kind == "string"
        and (after is None or after.punct(";") or after.is_("USING", "INTO"))
    )
    if text is None or not constant:
        return _DYNAMIC
    try:
        inner = read_words(text.text)
    except Exception:
        return "runs dynamic SQL (EXECUTE) the check cannot read"
    start = 0
    for k in range(len(inner) + 1):
        if k == len(inner) or inner[k].punct(";"):
            part = inner[start:k]
            if part:
                why = migration_refusal(part, " ".join(x.text for x in part), own)
                if why:
                    return why
            start = k + 1
    return None


def _runs_code_outside(words: list[Word], own: str | None = None) -> str | None:
    if _routine_name(words) is not None and _language(words) in _LIBRARY_LANGUAGES:
        return "loads a server library (a C function)"
    return _do_block(words, own)


# -- how the server reads what follows --------------------------------------------------
# The file loads in batches of many statements (one query each), and a statement that
# fails makes the load replay them one by one: a setting a statement changes applies to
# the lexing of what follows. With standard_conforming_strings off a backslash escapes a
# quote in '...', so "SELECT 'a\\', ' ; COPY ... TO PROGRAM ... ; SELECT ' AS q --'" was one
# harmless SELECT to the check and a COPY TO PROGRAM to the server (a plan ran a program);
# a client encoding such as SJIS or BIG5 (read from UTF-8 bytes) makes a backslash part of
# a character. So these settings keep the values the check reads by, wherever they are set
# (a routine that sets them for the session included), and set_config() must name its
# setting plainly.
_READING_SETTINGS = {"STANDARD_CONFORMING_STRINGS", "CLIENT_ENCODING", "NAMES"}
_SAFE_SCS = {"ON", "TRUE", "YES", "1", "DEFAULT"}
_SAFE_ENCODING = re.compile(
    r"(UTF-?8|UNICODE|SQL_ASCII|LATIN\d+|WIN\d+|WINDOWS\d+|ISO_?8859_?\d+|KOI8-?[RU]|DEFAULT)",
    re.IGNORECASE,
)
_GUC_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
# Settings whose effect reaches past the loading session's objects: the server's log (a
# plan with "SET log_min_duration_statement = 0" wrote the file's own text, a forged
# FATAL line, into the server's log; log_statement = none hides a session), statistics
# other sessions read (track_*), the catalogs' safety nets, libraries loaded from a
# directory the file names, and files written into the data directory (jit_dump_bitcode).
_SERVER_SETTINGS = frozenset(
    {
        "LOG_STATEMENT",
        "LOG_MIN_MESSAGES",
        "LOG_MIN_ERROR_STATEMENT",
        "LOG_MIN_DURATION_STATEMENT",
        "LOG_MIN_DURATION_SAMPLE",
        "LOG_STATEMENT_SAMPLE_RATE",
        "LOG_TRANSACTION_SAMPLE_RATE",
        "LOG_DURATION",
        "LOG_ERROR_VERBOSITY",
        "LOG_PARAMETER_MAX_LENGTH",
        "LOG_PARAMETER_MAX_LENGTH_ON_ERROR",
        "LOG_LOCK_WAITS",
        "LOG_TEMP_FILES",
        "LOG_EXECUTOR_STATS",
        "LOG_PARSER_STATS",
        "LOG_PLANNER_STATS",
        "LOG_STATEMENT_STATS",
        "LOG_REPLICATION_COMMANDS",
        "LOG_BTREE_BUILD_STATS",
        "DEBUG_PRINT_PARSE",
        "DEBUG_PRINT_REWRITTEN",
        "DEBUG_PRINT_PLAN",
        "DEBUG_PRETTY_PRINT",
        "DEBUG_DISCARD_CACHES",
        "BACKTRACE_FUNCTIONS",
        "TRACE_NOTIFY",
        "TRACE_LOCKS",
        "TRACE_LWLOCKS",
        "TRACE_USERLOCKS",
        "TRACE_SORT",
        "TRACE_LOCK_OIDMIN",
        "TRACE_LOCK_TABLE",
        "TRACK_ACTIVITIES",
        "TRACK_COUNTS",
        "TRACK_FUNCTIONS",
        "TRACK_IO_TIMING",
        "TRACK_WAL_IO_TIMING",
        "ALLOW_SYSTEM_TABLE_MODS",
        "IGNORE_SYSTEM_INDEXES",
        "ZERO_DAMAGED_PAGES",
        "IGNORE_CHECKSUM_FAILURE",
        "DYNAMIC_LIBRARY_PATH",
        "SESSION_PRELOAD_LIBRARIES",
        "LOCAL_PRELOAD_LIBRARIES",
        "JIT_DUMP_BITCODE",
        "WAL_CONSISTENCY_CHECKING",
    }
)
# Modules whose settings reach the same places: auto_explain writes the plans of the
# session's statements into the server's log, pg_stat_statements keeps their text for
# other roles to read. Their settings are "module.name"; other dotted names (a custom
# "app.tenant" an RLS policy reads) stay the file's own.
_SERVER_SETTING_MODULES = frozenset({"AUTO_EXPLAIN", "PG_STAT_STATEMENTS"})
_SERVER_SETTING_WHY = "acts beyond the scratch (the server's log, statistics, files or libraries)"


def _server_setting(name: str) -> bool:
    upper = name.upper()
    return upper in _SERVER_SETTINGS or upper.partition(".")[0] in _SERVER_SETTING_MODULES


_READS_DIFFERENTLY = "changes how the server reads the statements that follow"


def _all_words(words: list[Word], depth: int = 0) -> list[list[Word]]:
    """The statement's words and those of its strings that read as code (bodies), nested."""
    out = [words]
    if depth < 3:
        for body in _bodies(words):
            out.extend(_all_words(body, depth + 1))
    return out


def _assigns_a_column(seq: list[Word], k: int) -> bool:
    """Whether the SET at ``k`` is an UPDATE's (UPDATE [ONLY] t [AS a] SET, ON CONFLICT DO
    UPDATE SET, MERGE ... THEN UPDATE SET, a rule's DO ALSO UPDATE): its names are
    columns, not settings. The UPDATE must begin a statement there and name only a table
    before the SET ('CREATE FUNCTION update() ... SET log_statement' is a setting)."""
    j = k - 1
    while j >= 0 and not seq[j].is_("UPDATE"):
        if not (seq[j].is_name or seq[j].punct(".") or seq[j].punct("*")):
            return False
        j -= 1
    return j >= 0 and (
        j == 0
        or seq[j - 1].punct(";")
        or seq[j - 1].punct("(")
        or seq[j - 1].is_("DO", "ALSO", "INSTEAD", "THEN", "ATOMIC", "BEGIN", "LOOP", "ELSE")
    )


def _reading_settings(words: list[Word]) -> str | None:
    for seq in _all_words(words):
        n = len(seq)
        if n == 1 and seq is not words:
            continue  # a string that is one name ('client_encoding'), not code
        for i, w in enumerate(seq):
            upper = w.text.upper() if w.is_name else ""
            if upper == "SET_CONFIG" and i + 2 < n and seq[i + 1].punct("("):
                arg = seq[i + 2]
                plain = i + 3 < n and seq[i + 3].punct(",")  # one literal, no expression
                if arg.kind != "string" or not plain or not _GUC_NAME.fullmatch(arg.text):
                    return "calls set_config() with a setting's name the check cannot read"
                if arg.text.upper() in _READING_SETTINGS:
                    return f"{_READS_DIFFERENTLY} (set_config('{arg.text}', ...))"
                if arg.text.upper() in ("ROLE", "SESSION_AUTHORIZATION"):
                    return "switches to another role (set_config)"  # as SET ROLE is
                if _server_setting(arg.text):
                    return f"sets {arg.text} (set_config), which {_SERVER_SETTING_WHY}"
            elif (
                (
                    upper in _SERVER_SETTINGS
                    or (upper in _SERVER_SETTING_MODULES and i + 1 < n and seq[i + 1].punct("."))
                )
                and i > 0
                and seq[i - 1].is_("SET", "SESSION", "LOCAL")
                and not _assigns_a_column(seq, i - 1)
            ):
                # SET [SESSION | LOCAL] x, a routine's SET x (it holds while it runs)
                return f"sets {w.text.lower()}, which {_SERVER_SETTING_WHY}"
            elif upper == "PG_SETTINGS" and any(x.is_("UPDATE") for x in seq):
                return f"{_READS_DIFFERENTLY} (UPDATE pg_settings)"
            elif (upper in _READING_SETTINGS and upper != "NAMES") or (
                upper == "NAMES" and i > 0 and seq[i - 1].is_("SET")
            ):
                value = seq[i + 1 : i + 3]
                if value and (value[0].punct("=") or value[0].is_("TO")):
                    value = value[1:]
                if (
                    i > 0
                    and seq[i - 1].is_("SET", "SESSION", "LOCAL")
                    and value
                    and value[0].kind in ("word", "string", "number")
                    and (
                        value[0].text.upper() in _SAFE_SCS
                        if upper == "STANDARD_CONFORMING_STRINGS"
                        else bool(_SAFE_ENCODING.fullmatch(value[0].text))
                    )
                ):
                    continue
                if i > 0 and seq[i - 1].is_("RESET", "SHOW", "CURRENT_SETTING"):
                    continue
                return f"{_READS_DIFFERENTLY} (sets {w.text.lower()})"
    return None


# The catalogs every database of the cluster shares: roles, databases, tablespaces...
# A superuser may write them directly ("UPDATE pg_authid SET rolcreatedb = true ...", in a
# file of more than one batch, was committed: a plan changed another role), lock them
# (LOCK pg_authid holds every new login) or grant on them.
_SHARED_CATALOGS = {
    "PG_AUTHID",
    "PG_AUTH_MEMBERS",
    "PG_DATABASE",
    "PG_DB_ROLE_SETTING",
    "PG_SHDEPEND",
    "PG_SHDESCRIPTION",
    "PG_SHSECLABEL",
    "PG_TABLESPACE",
    "PG_REPLICATION_ORIGIN",
    "PG_SUBSCRIPTION",
    "PG_PARAMETER_ACL",
}


# The database's own catalogs: writing them remakes what the check reads by ("UPDATE
# pg_proc SET proname = 'harmless' WHERE proname = 'lo_export'" made harmless() write a
# server file in a plan; a language could be made trusted, a function's source changed).
_CATALOGS = frozenset(
    [
        "PG_AGGREGATE",
        "PG_AM",
        "PG_AMOP",
        "PG_AMPROC",
        "PG_ATTRDEF",
        "PG_ATTRIBUTE",
        "PG_CAST",
        "PG_CLASS",
        "PG_COLLATION",
        "PG_CONSTRAINT",
        "PG_CONVERSION",
        "PG_DEFAULT_ACL",
        "PG_DEPEND",
        "PG_DESCRIPTION",
        "PG_ENUM",
        "PG_EVENT_TRIGGER",
        "PG_EXTENSION",
        "PG_FOREIGN_DATA_WRAPPER",
        "PG_FOREIGN_SERVER",
        "PG_FOREIGN_TABLE",
        "PG_INDEX",
        "PG_INHERITS",
        "PG_INIT_PRIVS",
        "PG_LANGUAGE",
        "PG_LARGEOBJECT",
        "PG_LARGEOBJECT_METADATA",
        "PG_NAMESPACE",
        "PG_OPCLASS",
        "PG_OPERATOR",
        "PG_OPFAMILY",
        "PG_PARTITIONED_TABLE",
        "PG_POLICY",
        "PG_PROC",
        "PG_PUBLICATION",
        "PG_PUBLICATION_NAMESPACE",
        "PG_PUBLICATION_REL",
        "PG_RANGE",
        "PG_REWRITE",
        "PG_SECLABEL",
        "PG_SEQUENCE",
        "PG_STATISTIC",
        "PG_STATISTIC_EXT",
        "PG_STATISTIC_EXT_DATA",
        "PG_SUBSCRIPTION_REL",
        "PG_TRANSFORM",
        "PG_TRIGGER",
        "PG_TS_CONFIG",
        "PG_TS_CONFIG_MAP",
        "PG_TS_DICT",
        "PG_TS_PARSER",
        "PG_TS_TEMPLATE",
        "PG_TYPE",
        "PG_USER_MAPPING",
    ]
)


# Words after which a name is what a statement writes, locks or grants on.
_WRITE_TARGETS = {
    "UPDATE",
    "INTO",
    "TABLE",
    "ON",
    "TO",
    "COPY",
    "LOCK",
    "TRUNCATE",
    "VACUUM",
    "ANALYZE",
    "CLUSTER",
}
_LIST_VERBS = {"LOCK", "TRUNCATE", "VACUUM", "ANALYZE", "GRANT", "REVOKE"}


def _catalog_writes(words: list[Word]) -> str | None:
    """A catalog written, locked or granted on: the name where a statement's target stands
    (UPDATE x, INSERT INTO x, DELETE FROM x, LOCK [TABLE] x, GRANT ... ON x, a list after
    such a verb), or any catalog in a query that locks rows (FOR UPDATE/SHARE). Reading one
    (IF NOT EXISTS (SELECT FROM pg_constraint ...) THEN ALTER TABLE ...) is fine."""
    for seq in _all_words(words):
        uppers = [w.text.upper() if w.is_name else "" for w in seq]
        locks_rows = any(
            a == "FOR" and b in ("UPDATE", "SHARE", "NO", "KEY")
            for a, b in itertools.pairwise(uppers)
        )
        for i, name in enumerate(uppers):
            if name not in _SHARED_CATALOGS and name not in _CATALOGS:
                continue
            j = i - 1
            if j >= 1 and seq[j].punct(".") and uppers[j - 1] == "PG_CATALOG":
                j -= 2  # pg_catalog.pg_proc
            while j >= 0 and uppers[j] in ("ONLY", "IF", "EXISTS"):
                j -= 1
            prev = uppers[j] if j >= 0 else ""
            target = (
                prev in _WRITE_TARGETS
                or (prev == "FROM" and j >= 1 and uppers[j - 1] == "DELETE")
                or (j >= 0 and seq[j].punct(",") and any(v in _LIST_VERBS for v in uppers))
            )
            if target or locks_rows:
                shared = name in _SHARED_CATALOGS
                whose = "of the whole cluster" if shared else "the check reads by"
                return f"writes or locks {name.lower()}, a system catalog {whose}"
    return None


# The load's own session: its temporary schema is searched before pg_catalog for
# relations and types, even by the inspection's "search_path = pg_catalog", so a
# "CREATE TEMP TABLE pg_namespace (...)" of the file was what the inspection read instead of
# the catalog (the plan reads a schema the file forged). Temporary objects are no part of a
# schema: creating one, or naming pg_temp at all (search_path, SET SCHEMA), is refused.
_PG_TEMP = re.compile(r"pg_temp(_\d+)?", re.IGNORECASE)
_NAMES_TEMP = "names pg_temp first, the loading session's own schema (read before the catalog)"


def _temporary(words: list[Word]) -> str | None:
    for seq in _all_words(words):
        for i, w in enumerate(seq):
            prev = seq[i - 1] if i > 0 else None
            if w.is_name and _PG_TEMP.fullmatch(w.text):
                # pg_temp.x, SET SCHEMA pg_temp, search_path = pg_temp, ...: what is created
                # lands there (a function's "SET search_path = pg_catalog, pg_temp" is fine)
                after = seq[i + 1] if i + 1 < len(seq) else None
                if (after is not None and after.punct(".")) or (
                    prev is not None and (prev.is_("SCHEMA", "TO") or prev.punct("="))
                ):
                    return _NAMES_TEMP
            elif (
                w.kind == "string"
                and prev is not None
                and (
                    prev.is_("TO")
                    or prev.punct("=")
                    or (prev.punct(",") and i > 1 and seq[i - 2].text.lower() == "search_path")
                )
                and _PG_TEMP.fullmatch(w.text.split(",")[0].strip().strip('"'))
            ):
                return _NAMES_TEMP  # SET search_path TO 'pg_temp', set_config(.., 'pg_temp')
            elif (
                w.is_("TEMP", "TEMPORARY")
                and prev is not None
                and prev.is_("CREATE", "LOCAL", "GLOBAL", "INTO", "REPLACE")
            ):
                return "creates a temporary object (read before the catalog by the inspection)"
    return None


# What the server keeps from other roles and sessions: password hashes (pg_authid,
# pg_shadow), connection strings and user mappings with their passwords (pg_subscription,
# pg_user_mapping[s]), roles' settings, the server's configuration files (pg_hba_file_rules,
# pg_file_settings...). A file reads them into an error message, and the plan's failure
# reports it: "SELECT rolpassword::int FROM pg_authid WHERE rolname = 'other'" showed
# another role's SCRAM hash in a plan's result. Catalogs without secrets (pg_database,
# pg_roles, pg_class...) stay readable.
_SECRET_CATALOGS = frozenset(
    {
        "PG_AUTHID",
        "PG_SHADOW",
        "PG_USER_MAPPING",
        "PG_USER_MAPPINGS",
        "PG_SUBSCRIPTION",
        "PG_DB_ROLE_SETTING",
        "PG_HBA_FILE_RULES",
        "PG_IDENT_FILE_MAPPINGS",
        "PG_FILE_SETTINGS",
        "PG_SHOW_ALL_FILE_SETTINGS",
        "USER_MAPPING_OPTIONS",  # information_schema's, with the mappings' passwords
    }
)
# Other sessions' query text (a password in an ALTER ROLE, an application's literals): a
# monitoring view or function over them may be defined (a schema may hold one), but
# nothing that runs while the file loads may read them, through such a view or routine
# either (:func:`_activity_refusal`).
_ACTIVITY_VIEWS = frozenset(
    {"PG_STAT_ACTIVITY", "PG_STAT_GET_ACTIVITY", "PG_STAT_STATEMENTS", "PG_STAT_STATEMENTS_INFO"}
)
_SECRET_WHY = "which holds what the server keeps from other roles (passwords, queries, files)"


def _mentions(words: list[Word], names: Set[str]) -> str | None:
    """The first word of the statement or its bodies that is one of ``names`` (upper-cased),
    unless it is another schema's object or a column (``t.name``); ``pg_catalog.`` and
    ``information_schema.`` count."""
    for seq in _all_words(words):
        if len(seq) == 1 and seq is not words:
            continue  # a string that is one name ('pg_authid'::regclass), not code
        for i, w in enumerate(seq):
            if not w.is_name or w.text.upper() not in names:
                continue
            if (
                i > 0
                and seq[i - 1].punct(".")
                and not (i > 1 and seq[i - 2].is_("PG_CATALOG", "INFORMATION_SCHEMA"))
            ):
                continue
            return w.text
    return None


def _secret_reads(words: list[Word]) -> str | None:
    found = _mentions(words, _SECRET_CATALOGS)
    if found is not None:
        return f"reads {found}, {_SECRET_WHY}"
    if _defined_view_or_routine(words) is None:
        found = _mentions(words, _ACTIVITY_VIEWS)
        if found is not None:
            return f"reads {found} while the file loads, {_SECRET_WHY}"
    return None


def _defined_view_or_routine(words: list[Word]) -> str | None:
    """The (upper-cased, unqualified) name a CREATE [OR REPLACE] [TEMP] [RECURSIVE] VIEW or
    CREATE FUNCTION/PROCEDURE defines (nothing of it runs then), else None."""
    routine = _routine_name(words)
    if routine is not None:
        return routine.upper()
    if not words[0].is_("CREATE"):
        return None
    k = 1
    while k < len(words) and words[k].is_("OR", "REPLACE", "TEMP", "TEMPORARY", "RECURSIVE"):
        k += 1
    if k + 1 >= len(words) or not words[k].is_("VIEW"):
        return None
    j = k + 1
    while j + 2 < len(words) and words[j + 1].punct(".") and words[j + 2].is_name:
        j += 2
    return words[j].text.upper() if words[j].is_name else None


def _activity_refusal(statements: list[tuple[int, str, list[Word]]]) -> tuple[int, str] | None:
    """(index, why) of the first statement that runs (is not a view's or routine's
    definition) and names a view or routine of the file that reads other sessions' queries
    (pg_stat_activity...), transitively; or None."""
    reading: set[str] = set(_ACTIVITY_VIEWS)
    grown = True
    while grown:
        grown = False
        for _line, _text, words in statements:
            name = _defined_view_or_routine(words) if words else None
            if name is not None and name not in reading and _mentions(words, reading):
                reading.add(name)
                grown = True
    if len(reading) == len(_ACTIVITY_VIEWS):
        return None
    for k, (_line, _text, words) in enumerate(statements):
        if words and _defined_view_or_routine(words) is None:
            found = _mentions(words, reading)
            if found is not None:
                return k, (
                    f"reads {found} while the file loads: a view or routine of this file over"
                    " other sessions' queries, which the server keeps from other roles"
                )
    return None


# The schemas the plan's inspection reads by: it runs on the loading session with
# search_path = pg_catalog and calls format_type, pg_get_expr, pg_get_indexdef... there.
# "CREATE OR REPLACE FUNCTION pg_catalog.format_type(oid, integer) ... SELECT 'bigint'"
# made a plan of "title text" create "title bigint" (the inspection read what the file
# forged). Objects are not created, altered, dropped or commented in pg_catalog or
# information_schema, those schemas are not altered or dropped, and what the file creates
# unqualified does not land there (search_path with one of them first).
_SYSTEM_SCHEMAS = frozenset({"PG_CATALOG", "INFORMATION_SCHEMA"})
_KIND_WORDS = frozenset(
    {
        "OR",
        "REPLACE",
        "TEMP",
        "TEMPORARY",
        "UNLOGGED",
        "MATERIALIZED",
        "RECURSIVE",
        "FOREIGN",
        "TABLE",
        "VIEW",
        "FUNCTION",
        "PROCEDURE",
        "ROUTINE",
        "AGGREGATE",
        "OPERATOR",
        "CLASS",
        "FAMILY",
        "TYPE",
        "DOMAIN",
        "SEQUENCE",
        "COLLATION",
        "CONVERSION",
        "DEFAULT",
        "TEXT",
        "SEARCH",
        "CONFIGURATION",
        "DICTIONARY",
        "PARSER",
        "TEMPLATE",
        "STATISTICS",
        "SCHEMA",
        "IF",
        "NOT",
        "EXISTS",
        "ONLY",
        "ON",
        "COLUMN",
        "LABEL",
    }
)
_IN_SYSTEM_SCHEMA = "defines, changes or drops an object of a system schema the inspection reads by"
_SYSTEM_FIRST = (
    "puts a system schema first in search_path (what the file creates unqualified would land there)"
)


def _object_in_system_schema(words: list[Word]) -> bool:
    """CREATE/ALTER/DROP/COMMENT ON/SECURITY LABEL ON an object qualified with pg_catalog
    or information_schema, or ALTER/DROP SCHEMA of one of them (a DROP's whole list)."""
    head = words[0]
    j = 1
    if head.is_("SECURITY") and j + 2 < len(words) and words[j + 1].is_("FOR"):
        j += 2  # SECURITY LABEL FOR provider ON ...
    schema = False
    while j < len(words) and words[j].upper in _KIND_WORDS:
        schema = schema or words[j].is_("SCHEMA")
        j += 1
    depth = 0
    for k in range(j, len(words)):
        w = words[k]
        nxt = words[k + 1] if k + 1 < len(words) else None
        if w.punct("("):
            depth += 1
        elif w.punct(")"):
            depth -= 1
        elif (
            depth == 0
            and w.is_name
            and w.text.upper() in _SYSTEM_SCHEMAS
            and (schema or (nxt is not None and nxt.punct(".")))
        ):
            return True
        if not head.is_("DROP") and depth == 0 and not (w.is_name or w.punct(".")):
            return False  # past the object's name (a DROP lists several)
        if not head.is_("DROP") and not schema and w.is_name and not (nxt and nxt.punct(".")):
            return False  # the name's last part
    return False


def _system_first(value: Word) -> bool:
    first = value.text.split(",")[0] if value.kind == "string" else value.text
    return first.strip().strip('"').upper() in _SYSTEM_SCHEMAS


def _system_schemas(words: list[Word]) -> str | None:
    if words[0].is_("CREATE", "ALTER", "DROP", "COMMENT", "SECURITY") and (
        _object_in_system_schema(words)
    ):
        return _IN_SYSTEM_SCHEMA
    for i in range(1, len(words) - 1):
        if (
            words[i].is_("SCHEMA")
            and words[i - 1].is_("SET")
            and words[i + 1].is_name
            and words[i + 1].text.upper() in _SYSTEM_SCHEMAS
        ):
            # ALTER FUNCTION public.format_type(oid, integer) SET SCHEMA pg_catalog: a
            # builtin renamed aside, a forged one moved in
            return _IN_SYSTEM_SCHEMA
    for seq in _all_words(words):
        if seq is words and not words[0].is_("SET", "SELECT", "DO"):
            continue  # a routine's own SET search_path holds while it runs
        for i, w in enumerate(seq[:-2]):
            value = seq[i + 2]
            if (
                w.is_name
                and w.text.upper() == "SEARCH_PATH"
                and (seq[i + 1].punct("=") or seq[i + 1].is_("TO"))
                and value.kind != "punct"
                and _system_first(value)
            ):
                return _SYSTEM_FIRST
            if (
                w.kind == "string"
                and w.text.lower() == "search_path"
                and seq[i + 1].punct(",")
                and value.kind == "string"
                and _system_first(value)
            ):
                return _SYSTEM_FIRST  # set_config('search_path', 'pg_catalog, ...')
    return None


def refusal(words: list[Word], text: str, own: str | None = None) -> str | None:
    """Why this statement acts outside its database, or None. ``own``: a versioned
    migration's database (its rules: :func:`migration_refusal`); None for a desired file."""
    if not words:
        return None
    why = (
        _head(words, own)
        or _more(words, own)
        or _calls_outside(words, text)
        or _runs_code_outside(words, own)
        or _reading_settings(words)
        or _catalog_writes(words)
        or (_temporary(words) if own is None else None)
        or _secret_reads(words)
        or _system_schemas(words)
    )
    if why:
        return why
    for name in dotted_names(words):
        in_position = name.before is not None and name.before.upper in _OBJECT_POSITION
        if own is not None and len(name.parts) == 3 and name.parts[0].lower() == own.lower():
            continue  # own.schema.t: the server itself refuses any other database's name
        if len(name.parts) > 3 or (len(name.parts) == 3 and in_position):
            return f"names another database ({name.parts[0]})"
    return None


def migration_refusal(words: list[Word], text: str, own: str) -> str | None:
    """Why a versioned migration's statement, run on the database ``own``, reaches past it,
    or None: the desired file's rules (:func:`refusal`) but for what its own database
    allows (ALTER DATABASE own SET, grants on it, transaction control, VACUUM, temporary
    objects, a DO block's constant EXECUTE), worded for a migration."""
    why = refusal(words, text, own) or _resets_reading(words)
    return migration_wording(why) if why else None


_RESET_READING = {"STANDARD_CONFORMING_STRINGS", "CLIENT_ENCODING", "ALL"}


def _resets_reading(words: list[Word]) -> str | None:
    """A migration's session reads SQL as the check does because the runner SETs it so
    (:mod:`ptah.engines.versioned.dialects`); its defaults are the role's or database's,
    which may read otherwise: so RESET of the reading settings (or ALL), DISCARD ALL and
    SET ... TO DEFAULT of them are refused (a desired file's load has them as defaults)."""
    for seq in _all_words(words):
        starts = set(statement_starts(seq))  # not ALTER DATABASE app RESET ALL: its own
        for i, w in enumerate(seq[:-1]):
            nxt = seq[i + 1]
            name = nxt.text.upper() if nxt.is_name else ""
            if i in starts and (
                (w.is_("RESET") and name in _RESET_READING) or (w.is_("DISCARD") and name == "ALL")
            ):
                return f"{_READS_DIFFERENTLY} (back to the role's or database's default)"
            if (
                w.is_name
                and w.text.upper() in _READING_SETTINGS
                and i > 0
                and seq[i - 1].is_("SET", "SESSION", "LOCAL")
                and (nxt.punct("=") or nxt.is_("TO"))
                and i + 2 < len(seq)
                and seq[i + 2].is_("DEFAULT")
            ):
                return f"{_READS_DIFFERENTLY} (back to the role's or database's default)"
    return None


def migration_rule(own: str) -> Callable[[list[Word], str], str | None]:
    """The rule a versioned migration's statement is judged by on its database ``own``
    (``current_database()`` of its session)."""
    return lambda words, text: migration_refusal(words, text, own)


# -- reading ------------------------------------------------------------------------------
# PostgreSQL's lexical rules, read by one compiled pattern: several times faster than a
# general tokenizer on a schema of thousands of statements, and exact about what matters
# here (quotes, dollar quotes, nested comments, names, punctuation).
_TOKEN = re.compile(
    r"""
    (?:\s+|--[^\n\r]*)*  # whitespace and line comments (ended by LF or CR), before each token
    (?:
    (?P<block>/\*)
  | (?P<dollar>\$(?:[A-Za-z_\x80-\uffff][\w\x80-\uffff]*)?\$)
  | (?P<param>\$\d+)
  | (?P<estring>[eE]'(?:[^'\\]|\\.|'')*'
      (?:[ \t\f]*[\n\r](?:[ \t\n\r\f]+|--[^\n\r]*[\n\r])*'(?:[^'\\]|\\.|'')*')*)
      # an E'' string and its continuations, escaped as it is (PG_STRING_CONTINUES)
  | (?P<string>(?:[bBxXnN]|[uU]&)?'(?:[^']|'')*')
  | (?P<ident>(?:[uU]&)?"(?:[^"]|"")*")
  | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<word>[A-Za-z_\x80-\uffff][\w$\x80-\uffff]*)
  | (?P<op>::|[-+*/<>=~!@#%^&|`?]+)
  | (?P<punct>.)
  | (?P<eof>\Z)
    )
    """,
    re.VERBOSE | re.DOTALL,
)


_UESCAPE = re.compile(r"\s*[uU][eE][sS][cC][aA][pP][eE]\s*'([^'])'")


def _unicode_escapes(name: str, esc: str) -> str:
    """A U&"..." name with its escapes (``\\XXXX``, ``\\+XXXXXX``, ``\\\\``) decoded."""
    from sqlglot.errors import TokenError

    out, i, n = [], 0, len(name)
    while i < n:
        ch = name[i]
        if ch != esc:
            out.append(ch)
            i += 1
            continue
        if name.startswith(esc, i + 1):
            out.append(esc)
            i += 2
            continue
        digits = 6 if name.startswith("+", i + 1) else 4
        start = i + 1 + (digits == 6)
        code = name[start : start + digits]
        if len(code) != digits or any(c not in "0123456789abcdefABCDEF" for c in code):
            raise TokenError("a Unicode escape that cannot be read")
        out.append(chr(int(code, 16)))
        i = start + digits
    return "".join(out)


def read_words(text: str) -> list[Word]:
    """The statement as words (strings and quoted names without their quotes)."""
    from sqlglot.errors import TokenError

    out: list[Word] = []
    append = out.append
    i, n = 0, len(text)
    match = _TOKEN.match
    while True:
        m = match(text, i)
        if m is None:  # pragma: no cover - the last alternatives match anything
            raise TokenError(f"cannot read at offset {i}")
        kind = m.lastgroup
        end = m.end()
        if kind == "word":
            append(Word("word", m.group("word")))
            i = end
            continue
        if kind == "eof":
            return out
        if kind == "block":
            depth, j = 1, end
            while depth and j < n:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            if depth:
                raise TokenError("a comment is never closed")
            end = j
        elif kind == "dollar":
            tag = m.group("dollar")
            close = text.find(tag, end)
            if close < 0:
                raise TokenError(f"{tag} quote never closed")
            append(Word("string", text[end:close]))
            end = close + len(tag)
        elif kind in ("string", "estring"):
            body = m.group(kind)
            append(Word("string", body[body.index("'") + 1 : -1].replace("''", "'")))
        elif kind == "ident":
            body = m.group("ident")
            name = body[body.index('"') + 1 : -1].replace('""', '"')
            if body[0] in "uU":
                # U&"lo\\005fexport" is lo_export to the server: read as the server reads it.
                esc = _UESCAPE.match(text, end)
                name = _unicode_escapes(name, esc.group(1) if esc else "\\")
                end = esc.end() if esc else end
            append(Word("ident", name))
        elif kind == "number":
            append(Word("number", m.group("number")))
        else:  # op, punct, param
            token = m.group(kind)  # type: ignore[arg-type]
            if token in ("'", '"'):
                raise TokenError("a quote is never closed")
            append(Word("punct", token))
        i = end


def _routine_name(words: list[Word]) -> str | None:
    """The (unqualified, lower-cased) name a CREATE [OR REPLACE] FUNCTION|PROCEDURE defines."""
    if not words[0].is_("CREATE"):
        return None
    k = 3 if len(words) > 2 and words[1].is_("OR") and words[2].is_("REPLACE") else 1
    if k + 1 >= len(words) or not words[k].is_("FUNCTION", "PROCEDURE"):
        return None
    j = k + 1
    while j + 2 < len(words) and words[j + 1].punct(".") and words[j + 2].is_name:
        j += 2
    return words[j].text.lower() if words[j].is_name else None


# Definitions that name the functions they run without calling them: FUNCTION = f,
# SFUNC = f, INPUT = f... (an operator over a routine of the file ran its dynamic SQL).
_BY_REFERENCE = {"OPERATOR", "AGGREGATE", "TYPE", "TEXT", "CONVERSION", "ACCESS", "LANGUAGE"}


_NAMING = {"CREATE", "REPLACE", "ALTER", "DROP", "EXISTS", "ON"}


def _names_a_routine(seq: list[Word], i: int) -> bool:
    """Whether the name at ``i`` is a routine's that a statement defines, alters, drops,
    comments or grants on (``CREATE FUNCTION [s.]name(``, ``DROP FUNCTION IF EXISTS
    name(``, ``ON FUNCTION name(``), not one a trigger or cast runs (``EXECUTE FUNCTION
    name(``, ``WITH FUNCTION name(``)."""
    j = i - 1
    if j >= 2 and seq[j].punct(".") and seq[j - 1].is_name:
        j -= 2  # s.name
    return j >= 1 and seq[j].is_("FUNCTION", "PROCEDURE", "ROUTINE") and seq[j - 1].upper in _NAMING


def _calls(words: list[Word], names: set[str]) -> str | None:
    """The first of ``names`` the words call (``name(``), in the statement or a body, or
    name after ``=`` in a definition that runs what it names."""
    by_reference = (
        len(words) > 2
        and words[0].is_("CREATE", "ALTER")
        and (
            words[1].upper in _BY_REFERENCE
            or words[3 if words[1].is_("OR") else 1].upper in _BY_REFERENCE
        )
    )
    for seq in _all_words(words):
        for i, w in enumerate(seq[:-1]):
            if w.is_name and w.text.lower() in names and seq[i + 1].punct("("):
                if seq is not words and _names_a_routine(seq, i):
                    continue  # DO $$ BEGIN CREATE FUNCTION run(q text) ...: defined, not run
                return w.text.lower()
        if by_reference and seq is words:
            for i, w in enumerate(seq):
                if w.is_name and w.text.lower() in names and i > 0 and seq[i - 1].punct("="):
                    return w.text.lower()
    return None


# Statements that define or name routines without running them.
_DEFINES = {"CREATE", "ALTER", "DROP", "COMMENT", "GRANT", "REVOKE", "SECURITY"}
_ROUTINE_WORDS = {"FUNCTION", "PROCEDURE", "ROUTINE", "FUNCTIONS", "PROCEDURES", "ROUTINES"}
# Statements that run queries (so operators, casts and triggers) while the file loads.
_RUNS_QUERIES = {
    "SELECT",
    "VALUES",
    "WITH",
    "DO",
    "CALL",
    "INSERT",
    "UPDATE",
    "DELETE",
    "MERGE",
    "COPY",
    "TRUNCATE",
    "REFRESH",
    "EXPLAIN",
    "EXECUTE",
    "TABLE",
}


def _evaluates_rows(words: list[Word]) -> bool:
    """A CREATE or ALTER that evaluates expressions while it runs: CREATE TABLE ... AS
    (an operator in its query ran a routine's dynamic SQL), a materialized view, an index
    over rows, ALTER TABLE (a new column's default, USING, a CHECK validated)."""
    if words[0].is_("ALTER"):
        return len(words) > 1 and words[1].is_("TABLE")
    if not words[0].is_("CREATE"):
        return False
    if any(w.is_("INDEX", "MATERIALIZED") for w in words[:6]):
        return True
    return any(
        w.is_("AS") and (nxt.is_("SELECT", "WITH", "VALUES", "TABLE", "EXECUTE") or nxt.punct("("))
        for w, nxt in itertools.pairwise(words)
    )


def _body_refusal(words: list[Word]) -> str | None:
    """Why a statement of a routine's body (its strings read as code) would be refused."""
    for body in _all_words(words)[1:]:
        for start in statement_starts(body):
            why = _head(body[start:]) or _more(body[start:])
            if why:
                return why
    return None


def load_time_refusal(statements: list[tuple[int, str, list[Word]]]) -> tuple[int, str] | None:
    """(index, why) of the first statement that would run an opaque routine while the file
    loads, or None. ``statements``: (line, text, words) of each statement of the file.

    A routine is opaque when its body runs dynamic SQL (EXECUTE), calls a function that
    acts outside the database (``pg_terminate_backend``, ``lo_export``...), or its language
    is not SQL or PL/pgSQL, or when it calls an opaque one (by name, transitively). Defining it is
    allowed (nothing runs); calling it anywhere but in another definition is refused, and
    once a trigger, operator, cast, aggregate or type reaches one, so is every statement
    that runs queries (pg_dump's ``SELECT pg_catalog.set_config(...)`` aside)."""
    found = _activity_refusal(statements)
    if found is not None:
        return found
    routines: dict[str, list[list[Word]]] = {}
    for _line, _text, words in statements:
        if not words:
            continue
        # A routine a DO block creates (in its body, or in the constant it EXECUTEs) is
        # the file's too: "DO $$ BEGIN CREATE FUNCTION run(q text) ... EXECUTE q ...; END
        # $$" then "SELECT run('...')" ran what no rule read.
        for seq in _all_words(words):
            for start in statement_starts(seq) if seq is not words else (0,):
                name = _routine_name(seq[start:])
                if name is not None:
                    routines.setdefault(name, []).append(seq[start:])
    opaque = {
        name
        for name, defs in routines.items()
        if any(
            (_language(w) or "SQL") not in _READABLE_LANGUAGES  # a standard body: SQL
            or any(x.is_("EXECUTE") for body in _bodies(w) for x in body)
            # a body that calls what acts outside the database (allowed to be defined)
            or any(_call_search(x.text) for x in w if x.kind == "string")
            # ... in a string body or a standard one (RETURN ..., BEGIN ATOMIC ... END: words
            # of the statement itself, which ran lo_export at SELECT f() in a plan)
            or _named_outside(_all_words(w)) is not None
            # ... or runs a statement the file may not (COPY ... TO PROGRAM in a PL/pgSQL
            # body ran at SELECT f() in a plan)
            or _body_refusal(w) is not None
            for w in defs
        )
    }
    grown = True
    while grown:
        grown = False
        for name, defs in routines.items():
            if name not in opaque and any(_calls(w, opaque) for w in defs):
                opaque.add(name)
                grown = True
    if not opaque:
        return None
    reachable = ""
    for k, (_line, _text, words) in enumerate(statements):
        if not words:
            continue
        called = _calls(words, opaque)
        head = words[0].upper
        defines = head in _DEFINES and any(w.upper in _ROUTINE_WORDS for w in words[:6])
        if called and head == "CREATE" and len(words) > 1 and words[1].is_("EVENT"):
            return k, (
                f"fires {called}(), a routine of this file that runs dynamic SQL or code the"
                " check cannot read, on each later statement while the file loads"
            )
        if (
            called
            and head == "CREATE"
            and len(words) > 1
            and (words[1].is_("TRIGGER", "OPERATOR", "AGGREGATE", "CAST", "TYPE", "CONSTRAINT"))
        ):
            reachable = reachable or called
            continue
        if called and not defines:
            return k, (
                f"calls {called}(), a routine of this file that runs dynamic SQL or code the"
                " check cannot read, while the file loads"
            )
        prologue = head == "SELECT" and any(w.upper == "SET_CONFIG" for w in words[:4])
        if reachable and (head in _RUNS_QUERIES or _evaluates_rows(words)) and not prologue:
            return k, (
                f"runs queries while the file loads, which can run {reachable}(), a routine"
                " of this file that runs dynamic SQL or code the check cannot read"
            )
    return None
