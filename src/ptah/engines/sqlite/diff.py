"""SQLite diff: ADD COLUMN where SQLite can express it, otherwise a table rebuild.

The rebuild is SQLite's documented procedure, in the order that keeps the
desired statement's text: rename the old table aside (SQLite's legacy ALTER
TABLE behaviour, so that what names it keeps naming the table), create the new
shape under its own name with the desired statement itself, copy the common
columns, drop the old table, then recreate its indexes and triggers. Views and
triggers are recreated around any rebuild.
"""

from __future__ import annotations

import re
from typing import Any

from sqlglot import expressions as exp

from ptah.engines.model import DATA_DEPENDENT, DESTRUCTIVE, LOCK_HEAVY, Schema, Statement
from ptah.engines.sqlite.inspect import (
    body_segments,
    canonical_sql,
    is_constant,
    is_virtual,
    parse,
    table_options,
    unquoted,
)

# An FTS table's content option: content='' is contentless, content='t' external.
_CONTENT_OPTION = re.compile(
    r"[(,]\s*content\s*=\s*('(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|[\w$]+)", re.IGNORECASE
)


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def column_addable(column: exp.ColumnDef) -> bool:
    """Whether ``ALTER TABLE ADD COLUMN`` can add this column (SQLite's documented limits).

    No PRIMARY KEY or UNIQUE; a default that is a constant (not CURRENT_*,
    not an expression in parentheses); NOT NULL only with a non-NULL default;
    a REFERENCES clause only with a NULL default (foreign keys may be on);
    a generated column only VIRTUAL. CHECK and COLLATE are allowed: SQLite
    checks CHECK constraints against the existing rows.
    """
    kinds = [c.args.get("kind") for c in column.args.get("constraints") or []]
    default: exp.Expression | None = None
    has_default = not_null = references = False
    for kind in kinds:
        if isinstance(kind, exp.PrimaryKeyColumnConstraint | exp.UniqueColumnConstraint):
            return False
        if isinstance(kind, exp.ComputedColumnConstraint) and kind.args.get("persisted"):
            return False
        if isinstance(kind, exp.DefaultColumnConstraint):
            has_default, default = True, kind.this
            if not is_constant(default):
                return False
        if isinstance(kind, exp.NotNullColumnConstraint) and not kind.args.get("allow_null"):
            not_null = True
        if isinstance(kind, exp.Reference):
            references = True
    is_null = not has_default or isinstance(default, exp.Null)
    if not_null and is_null:
        return False
    return not (references and not is_null)


def _addable(cur_sql: str, want_sql: str) -> list[str] | None:
    """Column definitions to ADD when ``want`` is ``cur`` plus new columns after its last.

    Table constraints and options (PRIMARY KEY (...), UNIQUE, CHECK, FOREIGN
    KEY, WITHOUT ROWID, STRICT) do not matter as long as they are unchanged:
    SQLite places an added column after the last column, before them, and the
    result is the table as written whole. A table nested deeper than the parser's
    recursion holds is rebuilt.
    """
    try:
        return _added_columns(cur_sql, want_sql)
    except RecursionError:
        return None


def _added_columns(cur_sql: str, want_sql: str) -> list[str] | None:
    cur, want = parse(cur_sql), parse(want_sql)
    if not isinstance(cur, exp.Create) or not isinstance(want, exp.Create):
        return None
    if not isinstance(cur.this, exp.Schema) or not isinstance(want.this, exp.Schema):
        return None
    cur_cols = [e for e in cur.this.expressions if isinstance(e, exp.ColumnDef)]
    want_cols = [e for e in want.this.expressions if isinstance(e, exp.ColumnDef)]
    extra = want_cols[len(cur_cols) :]
    if not extra or not all(column_addable(c) for c in extra):
        return None
    if table_options(cur_sql)[1] != table_options(want_sql)[1]:
        return None
    without = want.copy()
    assert isinstance(without.this, exp.Schema)
    without.this.set("expressions", [e for e in without.this.expressions if e not in extra])
    if canonical_sql(without.sql(dialect="sqlite")) != canonical_sql(table_options(cur_sql)[0]):
        return None
    segments = body_segments(want_sql)
    if len(segments) != len(want.this.expressions):
        return None
    return [" ".join(segments[want.this.expressions.index(c)].split()) for c in extra]


def _aside_name(name: str, taken: set[str], prefixes: set[str]) -> str:
    """A name to rename the old table to while its successor is created under its own
    name: one no object of either schema has (``taken``: their names lower-cased; names
    are per database and case-insensitive in SQLite), nor begins (``prefixes``: every
    taken name's beginnings before a ``_``), since a virtual table's shadow tables are
    renamed with it (``f_data`` to ``<aside>_data``)."""
    aside, n = f"ptah_old_{name}", 1
    while aside.lower() in taken or aside.lower() in prefixes:
        n += 1
        aside = f"ptah_old{n}_{name}"
    return aside


def _prefixes(names: set[str]) -> set[str]:
    """Each name's beginnings before one of its ``_`` (``a_b_c``: ``a``, ``a_b``)."""
    return {n[:i] for n in names for i, ch in enumerate(n) if ch == "_"}


def _rowid_alias(columns: list[str]) -> str | None:
    """A name that means the rowid in a table with these columns (a column may take any
    of them), or None when all three are taken."""
    taken = {c.lower() for c in columns}
    return next((a for a in ("rowid", "_rowid_", "oid") if a not in taken), None)


def _has_rowid(sql: str) -> bool:
    return "WITHOUT ROWID" not in table_options(sql)[1]


def _copy(source: str, target: str, cur: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """The statements that carry the rows over from ``source`` into ``target``, rowids
    included.

    A table without an INTEGER PRIMARY KEY still has rowids, which applications and
    other tables' references may hold: they are copied when both shapes have them (a
    copied INTEGER PRIMARY KEY column, named after it, wins). An FTS table that reads
    its content elsewhere (``content=``) is rebuilt from that content; a contentless
    one has nothing to copy.
    """
    if is_virtual(want["_sql"]):
        content = _CONTENT_OPTION.search(_virtual_args(want["_sql"]))
        if content is not None:
            if content.group(1) in ("''", '""'):
                return []
            return [f"INSERT INTO {q(target)} ({q(target)}) VALUES ('rebuild')"]
    # SQLite's names are case-insensitive: "Name" and "name" are one column.
    old_columns = {c.lower(): c for c in cur.get("_readable", cur["_columns"])}
    common = [c for c in want["_columns"] if c.lower() in old_columns]
    targets = [q(c) for c in common]
    sources = [q(old_columns[c.lower()]) for c in common]
    old_alias = _rowid_alias(cur["_columns"])
    new_alias = _rowid_alias(want["_columns"])
    if _has_rowid(cur["_sql"]) and _has_rowid(want["_sql"]) and old_alias and new_alias:
        targets.insert(0, new_alias)
        sources.insert(0, old_alias)
    if not targets:
        return []
    return [
        f"INSERT INTO {q(target)} ({', '.join(targets)}) SELECT {', '.join(sources)}"
        f" FROM {q(source)}"
    ]


def affinity(declared: str) -> str:
    """A declared type's affinity, by SQLite's rules (its letters, in this order)."""
    kind = declared.upper()
    if "INT" in kind:
        return "INTEGER"
    if any(word in kind for word in ("CHAR", "CLOB", "TEXT")):
        return "TEXT"
    if "BLOB" in kind or not kind.strip():
        return "BLOB"
    if any(word in kind for word in ("REAL", "FLOA", "DOUB")):
        return "REAL"
    return "NUMERIC"


def _converted(cur: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """The copied columns whose values the copy may change, by the new column's affinity
    (a STRICT table converts alike), which no plan gives back:

    - TEXT or none (BLOB) to a numeric affinity: '012' is kept as 12, '1.50' as 1.5;
    - any other to TEXT: a number becomes its text, a REAL's rounded to 15 digits
      (0.30000000000000004 becomes '0.3'), and a column of any affinity may hold one;
    - INTEGER or NUMERIC to REAL: an integer becomes a REAL, rounded past 2^53.

    A STRICT table's ANY column converts nothing."""
    if is_virtual(cur["_sql"]) or is_virtual(want["_sql"]):
        return []
    strict = "STRICT" in table_options(want["_sql"])[1]
    old = {c.lower(): t for c, t in cur.get("_types", {}).items()}
    out = []
    for column, declared in want.get("_types", {}).items():
        was = old.get(column.lower())
        if was is None or column not in want["_columns"]:
            continue
        if strict and declared.strip().upper() == "ANY":
            continue
        before, after = affinity(was), affinity(declared)
        if (
            (before in ("TEXT", "BLOB") and after not in ("TEXT", "BLOB"))
            or (after == "TEXT" and before != "TEXT")
            or (after == "REAL" and before in ("INTEGER", "NUMERIC"))
        ):
            out.append(column)
    return out


def _sequence(aside: str, name: str, want_sql: str) -> list[str]:
    """Keep an AUTOINCREMENT table's high-water mark: ids of deleted rows are not
    handed out again. The rename took the old table's row to ``aside`` (DROP TABLE
    removes it); the copy set the new table's to its largest id, and left none when
    there were no rows: the old mark is taken where it is higher. (No row is made
    where the old table had none: a direct load has none either.)"""
    if "AUTOINCREMENT" not in unquoted(want_sql).upper():
        return []
    old, new = _literal(aside), _literal(name)
    return [
        f"INSERT INTO sqlite_sequence (name, seq) SELECT {new}, seq FROM sqlite_sequence"
        f" WHERE name = {old} AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = {new})",
        f"UPDATE sqlite_sequence SET seq = max(seq, coalesce((SELECT max(seq)"
        f" FROM sqlite_sequence WHERE name = {old}), 0)) WHERE name = {new}",
    ]


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _virtual_args(sql: str) -> str:
    start = sql.find("(")
    return sql[start:] if start >= 0 else ""


# SQLite's legacy ALTER TABLE behaviour, for the one statement that needs it: the old
# table renamed aside leaves every reference to it (other tables' foreign keys, views,
# triggers) naming the table, which the new one then is (with foreign_keys off, as the
# apply has it; https://www.sqlite.org/lang_altertable.html#compatibility). The plan
# says so itself, so that its statements mean what they say wherever they run; the
# apply allows this pragma alone (a connection's behaviour, not a database setting) and
# sets it back whatever happens (:meth:`ptah.engines.sqlite.ops.SqliteOps.execute`).
LEGACY_ALTER_ON = "PRAGMA legacy_alter_table = ON"
LEGACY_ALTER_OFF = "PRAGMA legacy_alter_table = OFF"


def _rebuild(
    name: str,
    cur: dict[str, Any],
    want: dict[str, Any],
    aside: str,
    old: str,
) -> list[Statement]:
    """The 12 steps for table ``old``, to become ``name`` (the same name, or another
    spelling of it: SQLite's names are case-insensitive), the old table renamed aside
    first: the new one is created with the desired statement itself, under its own
    name, so that SQLite keeps the text a direct load keeps (a table renamed into its
    name would be kept as ``CREATE TABLE "name"``, a virtual table's shadow tables as
    ``CREATE TABLE "name_data"``). The rename takes the old table's indexes, triggers
    and sqlite_sequence row with it; dropped, it takes them away."""
    kept = {c.lower() for c in want["_columns"]}
    dropped = [c for c in cur["_columns"] if c.lower() not in kept]
    copy = _copy(aside, name, cur, want)
    lossy = dropped or not copy or _converted(cur, want)
    copy_hazards = (DATA_DEPENDENT, LOCK_HEAVY) + ((DESTRUCTIVE,) if lossy else ())
    return [
        Statement(LEGACY_ALTER_ON),
        Statement(f"ALTER TABLE {q(old)} RENAME TO {q(aside)}"),
        Statement(LEGACY_ALTER_OFF),
        Statement(want["_sql"]),
        *(Statement(sql, copy_hazards) for sql in copy),
        *(Statement(sql) for sql in _sequence(aside, name, want["_sql"])),
        Statement(
            f"DROP TABLE {q(aside)}", (DESTRUCTIVE,) if dropped or not copy else (LOCK_HEAVY,)
        ),
    ]


def diff(current: Schema, desired: Schema) -> list[Statement]:
    """The statements that take ``current`` to ``desired``.

    A rebuilt table takes its indexes and triggers with it when it is dropped
    (renamed aside, it has them still). Around any rebuild, every view and
    trigger is dropped first and created again after, as when the new table was
    renamed into its name, which made SQLite re-read them all (one naming a table
    that was missing then failed the rename); the legacy rename aside reads none,
    so this is more than the rebuild now needs, and kept. A trigger on a view
    that is dropped (INSTEAD OF) goes with the view and is created again after it.
    """
    cur_t, want_t = dict(current["table"]), desired["table"]
    old_name = _respelled(cur_t, want_t)
    for name, old in old_name.items():
        cur_t[name] = cur_t.pop(old)
    # Lower-cased once for every rebuild's temporary name (once per rebuild was quadratic).
    taken = {
        n.lower() for schema in (current, desired) for objects in schema.values() for n in objects
    }
    # In the database's order: a set's order differs from one process to the next.
    gone = [name for name in cur_t if name not in want_t]
    drops = [Statement(f"DROP TABLE {q(name)}", (DESTRUCTIVE,)) for name in gone]
    tables, rebuilt = _tables(cur_t, want_t, old_name, taken)
    out_drops, creates = _dependents(current, desired, cur_t, want_t, rebuilt)
    return out_drops + drops + tables + creates


def _tables(
    cur_t: dict[str, Any], want_t: dict[str, Any], old_name: dict[str, str], taken: set[str]
) -> tuple[list[Statement], set[str]]:
    """The desired tables created, grown (ADD COLUMN) or rebuilt, in the desired order
    (parents usually first); and the names of the rebuilt ones, old and new."""
    tables: list[Statement] = []
    rebuilt: set[str] = set()
    prefixes: set[str] | None = None  # made once, for the first rebuild
    for name in want_t:
        if name not in cur_t:
            tables.append(Statement(want_t[name]["_sql"]))
        elif cur_t[name]["def"] != want_t[name]["def"]:
            extra = _addable(cur_t[name]["_sql"], want_t[name]["_sql"])
            if extra is not None and name not in old_name:
                tables.extend(Statement(f"ALTER TABLE {q(name)} ADD COLUMN {c}") for c in extra)
            else:
                old = old_name.get(name, name)
                rebuilt |= {name, old}
                if prefixes is None:
                    prefixes = _prefixes(taken)
                aside = _aside_name(old, taken, prefixes)
                tables.extend(_rebuild(name, cur_t[name], want_t[name], aside, old))
    return tables, rebuilt


def _dependents(
    current: Schema,
    desired: Schema,
    cur_t: dict[str, Any],
    want_t: dict[str, Any],
    rebuilt: set[str],
) -> tuple[list[Statement], list[Statement]]:
    """The views, triggers and indexes dropped before the tables change and created
    after (see :func:`diff`): one that changed, and one a rebuild or a dropped table
    or view takes with it."""
    cur_v, want_v = current["view"], desired["view"]
    # Views dropped (and, if still wanted, created again): all of them around a rebuild.
    gone_views = {
        name
        for name in cur_v
        if rebuilt or name not in want_v or _changed(cur_v[name], want_v[name])
    }
    gone_with = rebuilt | gone_views | (cur_t.keys() - want_t.keys())
    out_drops: list[Statement] = []
    creates: dict[str, list[Statement]] = {"view": [], "trigger": [], "index": []}
    for kind in creates:
        cur, want = current[kind], desired[kind]
        for name in cur:
            goes_with_table = kind != "view" and cur[name]["table"] in gone_with
            changed = name not in want or _changed(cur[name], want[name])
            if kind == "trigger" and rebuilt:
                changed = True
            if not goes_with_table and (changed or name in gone_views):
                out_drops.append(Statement(f"DROP {kind.upper()} {q(name)}"))
        for name, obj in want.items():
            fresh = (
                name not in cur
                or _changed(cur[name], obj)
                or (kind == "view" and name in gone_views)
                or (kind == "trigger" and bool(rebuilt))
                or (kind != "view" and obj["table"] in gone_with)
            )
            if not fresh:
                continue
            hazards: tuple[str, ...] = ()
            if kind == "index" and obj["table"] in cur_t and obj["table"] not in rebuilt:
                hazards = (LOCK_HEAVY,)
                if "UNIQUE" in obj["def"].upper().split(" ON ", 1)[0]:
                    hazards = (DATA_DEPENDENT, LOCK_HEAVY)
            creates[kind].append(Statement(obj["_sql"], hazards))
    # A trigger may be on a view (INSTEAD OF): views first.
    return out_drops, creates["index"] + creates["view"] + creates["trigger"]


def _changed(cur: dict[str, Any], want: dict[str, Any]) -> bool:
    """Whether an index, view or trigger differs: its definition, or a view's column
    names (:func:`ptah.engines.sqlite.inspect._view_columns`)."""
    return bool(cur["def"] != want["def"] or cur.get("columns") != want.get("columns"))


def _respelled(cur_t: dict[str, Any], want_t: dict[str, Any]) -> dict[str, str]:
    """Desired tables spelled in other letters' case than a current one (new name ->
    current name): the same table, SQLite's names being case-insensitive, so rebuilt
    under the new spelling, not dropped and created."""
    spelled = {n.lower(): n for n in cur_t}
    found: dict[str, str] = {}
    for name in want_t:
        old = spelled.get(name.lower())
        if old is not None and old != name and name not in cur_t and old not in want_t:
            found[name] = old
    return found
