"""What a MariaDB/MySQL desired file may not do: act outside its one database.

The scratch database lives on a real server (the dev server or the target's
own), so anything server-wide in the desired file would run there: whole
databases, the session's current database, accounts and grants, global
variables, plugins, server files, dynamic SQL (which no reader can vouch
for) and server administration. A name qualified with a database reaches
another database (the target's own name included: the scratch is not it).
"""

from __future__ import annotations

from ptah.engines.confine import (
    OBJECT_POSITIONS,
    Word,
    dotted_names,
    first_reason,
    names_an_object,
    object_kind,
    qualified_tables,
)

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
}


def _head(words: list[Word], i: int) -> str | None:
    w = words[i]
    nxt = words[i + 1] if i + 1 < len(words) else None
    if w.is_("USE") and nxt is not None and nxt.is_name:
        return "switches the session to another database"
    if w.is_("CREATE", "DROP", "ALTER"):
        return _OBJECT_WHY.get(object_kind(words, i))
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
                why = _head(words, j + 1)
                if why:
                    return why
        return None
    if w.is_("SET"):
        after = words[i + 2] if i + 2 < len(words) else None
        if nxt is not None and (
            nxt.is_("PASSWORD") or (nxt.is_("DEFAULT") and after is not None and after.is_("ROLE"))
        ):
            return "changes server accounts"
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


_OUTSIDE_ENGINES = {"FEDERATED", "FEDERATEDX", "CONNECT", "SPIDER"}


def _server_files(words: list[Word]) -> str | None:
    """Files on the server and other servers: OUTFILE/DUMPFILE, LOAD_FILE(), table
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
                if words[j].is_name and words[j + 1].punct("."):
                    return "names another database's table in a MERGE table"
        if w.is_("INTO") and nxt is not None and nxt.is_("OUTFILE", "DUMPFILE"):
            return "writes a file on the server"
        if w.is_("LOAD_FILE") and nxt is not None and nxt.punct("("):
            return "reads a file on the server"
        if w.is_("GET_LOCK") and nxt is not None and nxt.punct("("):
            # Named locks are the server's, not a database's: one taken while the scratch
            # loads blocks whatever else on the server waits on that name.
            return "takes a server-wide named lock (GET_LOCK)"
    return None


def _qualified(words: list[Word], text: str) -> str | None:
    for name in dotted_names(words):
        if name.before is not None and name.before.punct("@@"):
            continue  # a system variable: @@session.x (SET rules judge global ones)
        if names_an_object(name, _TABLE_POSITION):
            return f"names another database ({'.'.join(name.parts[:-1])})"
    for db in qualified_tables(text, "mysql"):
        return f"names another database ({db})"
    return None


def refusal(words: list[Word], text: str) -> str | None:
    """Why this statement acts outside its database, or None when it stays inside."""
    return (
        first_reason(words, _head)
        or _set_scope(words)
        or _server_files(words)
        or _qualified(words, text)
    )
