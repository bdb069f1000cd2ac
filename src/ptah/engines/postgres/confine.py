"""What a PostgreSQL desired file may not do: act on the cluster instead of one database.

The minimal shared guard (the PostgreSQL fidelity work extends it): whole
databases, roles, tablespaces, subscriptions, ``ALTER SYSTEM``, server files
and programs through ``COPY``, loaded libraries, cluster maintenance, psql
meta-commands (``\\connect`` would switch databases in psql; Ptah sends SQL
only), and names of relations with a database part (``otherdb.schema.table``). Schemas are inside
one database on PostgreSQL, so ``schema.table`` stays inside.
"""

from __future__ import annotations

from ptah.engines.confine import OBJECT_POSITIONS, Word, dotted_names, object_kind

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


def _head(words: list[Word]) -> str | None:
    w = words[0]
    nxt = words[1] if len(words) > 1 else None
    if w.punct("\\"):
        return "a psql meta-command is not SQL (it may switch databases)"
    if w.is_("CREATE", "DROP", "ALTER"):
        kind = object_kind(words, 0)
        if w.is_("ALTER") and kind == "SYSTEM":
            return "changes the server's configuration"
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


def refusal(words: list[Word], text: str) -> str | None:
    """Why this statement acts outside its database, or None."""
    if not words:
        return None
    why = _head(words)
    if why:
        return why
    for name in dotted_names(words):
        in_position = name.before is not None and name.before.upper in _OBJECT_POSITION
        if len(name.parts) > 3 or (len(name.parts) == 3 and in_position):
            return f"names another database ({name.parts[0]})"
    return None
