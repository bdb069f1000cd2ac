"""MariaDB/MySQL diff over SHOW CREATE TABLE lines: one atomic ALTER TABLE per changed table.

Some changes the server cannot make inside that one ALTER, and they get statements of
their own around it: a foreign key dropped and added again under the same name (InnoDB
refuses both in one statement), a foreign key on a column whose type changes (the server
refuses to retype a column a key uses: the key is dropped first and added back in the
ALTER that follows the retyping), the partitioning (``PARTITION BY`` ends an ALTER, so it
runs after; ``REMOVE PARTITIONING`` before), and options an engine change leaves behind.
"""

from __future__ import annotations

import re
from typing import Any

from ptah.engines.model import (
    DATA_DEPENDENT,
    DESTRUCTIVE,
    LOCK_HEAVY,
    PlanError,
    Schema,
    Statement,
    same,
)
from ptah.engines.mysql.inspect import create_lines
from ptah.engines.mysql.lossy import narrows

_REFERENCES = re.compile(r"REFERENCES `((?:[^`]|``)+)`")
_COLUMNS = r"\(((?:`(?:[^`]|``)+`,?)+)\)"
_FOREIGN = re.compile(rf"FOREIGN KEY {_COLUMNS} REFERENCES `((?:[^`]|``)+)` {_COLUMNS}")
_NAME = re.compile(r"`((?:[^`]|``)+)`")
# Where a column line's type (with its charset and collation) ends.
_AFTER_TYPE = re.compile(
    r" (?:NOT NULL|NULL|DEFAULT|GENERATED|AUTO_INCREMENT|INVISIBLE|COMMENT|ON UPDATE|CHECK)\b"
)
_STORAGE = re.compile(r"\) (VIRTUAL|STORED|PERSISTENT)\b")
# One table option of the options line: ``NAME=value``, ``DEFAULT CHARSET=x``, an
# engine-defined ```NAME`='value'`` (which the server may show inside ``/* */``).
_OPTION = re.compile(
    r"((?:DEFAULT )?CHARSET|`(?:[^`]|``)+`|[A-Z_]+)=('(?:[^'\\]|\\.|'')*'|\([^)]*\)|[^ ]+)"
)
# What an option left out of the desired table is set to so the server shows it no more
# (every other option: ``DEFAULT``).
_RESET = {
    "COMMENT": "''",
    "KEY_BLOCK_SIZE": "0",
    "CHECKSUM": "0",
    "DELAY_KEY_WRITE": "0",
    "MIN_ROWS": "0",
    "MAX_ROWS": "0",
    "AVG_ROW_LENGTH": "0",
    "INSERT_METHOD": "NO",
    "UNION": "()",
}
# Engines that do not keep a table's rows: MEMORY loses them when the server restarts,
# BLACKHOLE at once. A table moved to one is destructive.
_ROWLESS = {"MEMORY", "HEAP", "BLACKHOLE"}
# Options an engine sets for itself (Aria) that an engine change keeps: their reset
# takes effect only in a statement after the change.
_ENGINE_KEPT = {"PAGE_CHECKSUM", "TRANSACTIONAL"}


def q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _names(text: str) -> list[str]:
    return [m.replace("``", "`") for m in _NAME.findall(text)]


def _drop_clause(key: str) -> str:
    kind, _, name = key.partition(" ")
    return {
        "column": f"DROP COLUMN {q(name)}",
        "primary": "DROP PRIMARY KEY",
        "index": f"DROP INDEX {q(name)}",
        "fk": f"DROP FOREIGN KEY {q(name)}",
        "check": f"DROP CONSTRAINT {q(name)}",
        "period": f"DROP PERIOD FOR {q(name)}",
    }.get(kind, "")


def options(line: str) -> dict[str, str]:
    """The table options of a ``SHOW CREATE TABLE`` options line, by name."""
    return {m.group(1): m.group(2) for m in _OPTION.finditer(line)}


def _option_clauses(cur: str, want: str) -> tuple[list[str], list[str]]:
    """The options to set (only those that change: restating ``ENGINE`` rebuilds the
    table) and, apart, the resets that must follow an engine change."""
    old, new = options(cur), options(want)
    clauses: list[str] = []
    after: list[str] = []
    charset = ("DEFAULT CHARSET", "COLLATE")
    if any(old.get(k) != new.get(k) for k in charset):
        clauses.append(" ".join(f"{k}={new[k]}" for k in charset if k in new))
    for name, value in new.items():
        if name not in charset and old.get(name) != value:
            clauses.append(f"{name}={value}")
    engine_changed = old.get("ENGINE") != new.get("ENGINE")
    for name in old:
        if name not in new and name not in charset:
            reset = f"{name}={_RESET.get(name, 'DEFAULT')}"
            (after if engine_changed and name in _ENGINE_KEPT else clauses).append(reset)
    return clauses, after


def column_type(line: str) -> str:
    """The type of a column line with its charset and collation (what a foreign key
    on the column depends on), and whether it is ``NOT NULL``."""
    depth, i, n = 0, line.index("`", 1) + 1, len(line)
    while i < n:
        ch = line[i]
        if ch == "'":
            i += 1
            while i < n and line[i] != "'":
                i += 2 if line[i] == "\\" else 1
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0 and _AFTER_TYPE.match(line, i):
            rest = line[i:]
            return line[:i] + (" NOT NULL" if rest.startswith(" NOT NULL") else "")
        i += 1
    return line


_CHARSET_COLLATE = re.compile(r" (?:CHARACTER SET|COLLATE) \w+")


def bare_type(line: str) -> str:
    """A column line's type without its name, charset, collation and ``NOT NULL``:
    ``decimal(10,2) unsigned``."""
    typed = column_type(line).removesuffix(" NOT NULL")
    end = line.index("`", 1)
    while line.startswith("``", end):  # a doubled backtick inside the name
        end = line.index("`", end + 2)
    return _CHARSET_COLLATE.sub("", typed[end + 2 :])


def _lossy(old: str, new: str, column: str, collations: tuple[dict[str, Any], ...]) -> bool:
    """Whether retyping column line ``old`` to ``new`` changes values without an error
    (:func:`ptah.engines.mysql.lossy.narrows`); ``column``: its name in the desired
    table (the current side's collations are keyed by it too)."""
    if " GENERATED ALWAYS AS " in old or " GENERATED ALWAYS AS " in new:
        return False  # computed again from the other columns
    new_type = bare_type(new)
    if not column_type(old).endswith(" NOT NULL") and column_type(new).endswith(" NOT NULL"):
        # The NULLs of a column made NOT NULL are refused (the data check), but a
        # TIMESTAMP's become the current time and an AUTO_INCREMENT's are numbered.
        # (The server shows AUTO_INCREMENT right after NOT NULL.)
        counted = new[len(column_type(new)) :].startswith(" AUTO_INCREMENT")
        if new_type.startswith("timestamp") or counted:
            return True
    was, now = collations[0].get(column), collations[1].get(column)
    return narrows(bare_type(old), new_type, was, now) is not None


def _unignored(line: str) -> str:
    """An index line without its IGNORED flag (the server shows it last)."""
    return line[: -len(" IGNORED")] if line.endswith(" IGNORED") else line


def _reblocked(
    old: dict[str, str], new: dict[str, str], cur_options: str, want_options: str
) -> set[str]:
    """The indexes built again because the table's ``KEY_BLOCK_SIZE`` changes.

    An index line shows its block size only where it differs from the table's, so the
    same line means another size under another table option; and an index keeps the
    size it was built with when the option changes (``ROW_FORMAT=COMPRESSED
    KEY_BLOCK_SIZE=4`` removed left each index showing ``KEY_BLOCK_SIZE=4``). Dropped and
    added again in the ALTER that sets the option, each takes the new one."""
    if options(cur_options).get("KEY_BLOCK_SIZE") == options(want_options).get("KEY_BLOCK_SIZE"):
        return set()
    return {key for key in old if key.split(" ", 1)[0] in ("index", "primary") and key in new}


def _storage(line: str) -> str | None:
    """VIRTUAL, STORED (PERSISTENT) for a generated column line; None for another."""
    if " GENERATED ALWAYS AS " not in line:
        return None
    found = _STORAGE.findall(line)
    return None if not found else ("STORED" if found[-1] == "PERSISTENT" else found[-1])


def _column_key(entry: dict[str, Any], key: str) -> tuple[str, str | None]:
    column = key.split(" ", 1)[1]
    return column_type(entry["elements"][key]), entry.get("collations", {}).get(column)


def retyped(cur: dict[str, Any], want: dict[str, Any]) -> set[str]:
    """Columns of a table whose type, charset, collation or nullability changes."""
    return {
        key.split(" ", 1)[1]
        for key in cur["elements"]
        if key.startswith("column ")
        and key in want["elements"]
        and _column_key(cur, key) != _column_key(want, key)
    }


def foreign(line: str) -> tuple[list[str], str, list[str]] | None:
    m = _FOREIGN.search(line)
    if not m:
        return None
    return _names(m.group(1)), m.group(2).replace("``", "`"), _names(m.group(3))


def _alter(
    name: str,
    cur: dict[str, Any],
    want: dict[str, Any],
    predropped: set[str],
    defer: frozenset[str] = frozenset(),
) -> tuple[Statement | None, list[Statement]]:
    """The ALTER of one table (None: nothing changes) and the statements after it.

    The foreign keys it adds to the tables in ``defer`` (altered after it) are left to an
    ALTER of their own, the first of the statements after it (see :func:`diff`)."""
    old = {k: v for k, v in cur["elements"].items() if k not in predropped}
    new = want["elements"]
    # A column spelled in other letters' case is the same column to the server: renamed
    # (CHANGE COLUMN), its values kept, not dropped and added again.
    renamed = _respelled(old, new)
    if renamed:
        old = {renamed.get(k, k): v for k, v in old.items()}
        spelled = {k.split(" ", 1)[1]: v.split(" ", 1)[1] for k, v in renamed.items()}
        cur = {
            **cur,
            "_order": [renamed.get(k, k) for k in cur["_order"]],
            "collations": {spelled.get(c, c): v for c, v in cur.get("collations", {}).items()},
        }
    respelled = {v: k.split(" ", 1)[1] for k, v in renamed.items()}
    clauses: list[str] = []
    hazards: set[str] = set()
    collations = cur.get("collations", {}), want.get("collations", {})
    # A generated column whose storage changes is dropped and added again (the server
    # cannot MODIFY it), and so are the indexes and checks that name it. So is a column
    # that becomes VIRTUAL or stops being so (MODIFY: error 1907, "not yet supported for
    # generated columns"; a STORED one it can MODIFY to and from a stored column); its
    # values go with it, computed or stored: destructive.
    restored = {
        key
        for key in old
        if key.startswith("column ")
        and key in new
        and _storage(old[key]) != _storage(new[key])
        and "VIRTUAL" in (_storage(old[key]), _storage(new[key]))
    }
    rekinded = {k for k in restored if (_storage(old[k]) is None) != (_storage(new[k]) is None)}
    regenerated = {k.split(" ", 1)[1] for k in restored}
    readded = {
        key
        for key in old
        if key.split(" ", 1)[0] in ("index", "primary", "check")
        and key in new
        and regenerated & set(_names(old[key].split("(", 1)[-1]))
    } | _reblocked(old, new, cur["options"], want["options"])
    readded |= _rechecked(cur["_order"], want["_order"], old, new, readded)
    # An index whose only change is IGNORED is altered in place: dropped and added again
    # in one ALTER, the server finds the key the same and keeps the old flag.
    flagged = {
        key
        for key in old
        if key.startswith("index ")
        and key in new
        and key not in readded
        and old[key] != new[key]
        and _unignored(old[key]) == _unignored(new[key])
    }
    for key in sorted(flagged):
        flag = "IGNORED" if new[key].endswith(" IGNORED") else "NOT IGNORED"
        clauses.append(f"ALTER INDEX {q(key.split(' ', 1)[1])} {flag}")
    for key in old:
        if key in flagged:
            continue
        changed = old[key] != new.get(key) and not key.startswith("column ")
        if key not in new or changed or key in restored or key in readded:
            clause = _drop_clause(key)
            if clause:
                clauses.append(clause)
                if key.startswith("column ") and (key not in restored or key in rekinded):
                    hazards.add(DESTRUCTIVE)
    unchanged = {k for k in old if k in new and k not in readded and old[k] == new[k]}
    moving = _moving(cur, want, unchanged | flagged)
    deferred: list[str] = []
    prev = None
    cur_cols = [k for k in cur["_order"] if k.startswith("column ") and k in new]
    new_cols = [k for k in want["_order"] if k.startswith("column ") and k in old]
    for key in want["_order"]:
        line = new[key]
        if key.startswith("column "):
            column = key.split(" ", 1)[1]
            where = f" AFTER {q(prev)}" if prev else " FIRST"
            moved = key in old and cur_cols.index(key) != new_cols.index(key)
            if key not in old or key in restored:
                clauses.append(f"ADD COLUMN {line}{where}")
                hazards.add(LOCK_HEAVY)
                if key in restored:
                    hazards.add(DATA_DEPENDENT)
            elif key in respelled:
                clauses.append(f"CHANGE COLUMN {q(respelled[key])} {line}{where}")
                hazards.update((DATA_DEPENDENT, LOCK_HEAVY))
                if _lossy(old[key], line, column, collations):
                    hazards.add(DESTRUCTIVE)
            elif (
                old[key] != line or moved or collations[0].get(column) != collations[1].get(column)
            ):
                clauses.append(f"MODIFY COLUMN {line}{where}")
                hazards.update((DATA_DEPENDENT, LOCK_HEAVY))
                if _lossy(old[key], line, column, collations):
                    hazards.add(DESTRUCTIVE)
            prev = column
        elif key in moving:
            clauses.append("ADD " + line.replace(q(moving[key][0]), q(moving[key][1]), 1))
            hazards.add(LOCK_HEAVY)
        elif key in flagged:
            hazards.add(LOCK_HEAVY)
        elif key not in old or old[key] != line or key in readded:
            if key.startswith("fk ") and (fk := foreign(line)) is not None and fk[1] in defer:
                deferred.append(f"ADD {line}")
                continue
            clauses.append(f"ADD {line}")
            hazards.add(LOCK_HEAVY)
            if key == "primary" or line.startswith(("UNIQUE", "CONSTRAINT")):
                hazards.add(DATA_DEPENDENT)
    set_options, after_engine = _option_clauses(cur["options"], want["options"])
    if set_options:
        clauses.append(" ".join(set_options))
        hazards.add(LOCK_HEAVY)
    engine = options(want["options"]).get("ENGINE", "").upper()
    if engine in _ROWLESS and options(cur["options"]).get("ENGINE", "").upper() != engine:
        hazards.add(DESTRUCTIVE)
    after: list[Statement] = []
    if deferred:
        adds = ",\n  ".join(deferred)
        after.append(Statement(f"ALTER TABLE {q(name)}\n  {adds}", (DATA_DEPENDENT, LOCK_HEAVY)))
    if moving:
        names = sorted(moving.values())
        drops = ",\n  ".join(f"DROP INDEX {q(n)}" for n, _ in names)
        renames = ",\n  ".join(f"RENAME INDEX {q(t)} TO {q(n)}" for n, t in names)
        after += [
            Statement(f"ALTER TABLE {q(name)}\n  {drops}"),
            Statement(f"ALTER TABLE {q(name)}\n  {renames}"),
        ]
    if after_engine:
        after.append(Statement(f"ALTER TABLE {q(name)}\n  " + " ".join(after_engine)))
    partition = want.get("partition", "")
    if partition and partition != cur.get("partition", ""):
        after.append(
            Statement(f"ALTER TABLE {q(name)}\n  {partition}", (DATA_DEPENDENT, LOCK_HEAVY))
        )
    if not clauses:
        return None, after
    order = [h for h in (DESTRUCTIVE, DATA_DEPENDENT, LOCK_HEAVY) if h in hazards]
    return Statement(f"ALTER TABLE {q(name)}\n  " + ",\n  ".join(clauses), tuple(order)), after


def _rechecked(
    cur_order: list[str],
    want_order: list[str],
    old: dict[str, str],
    new: dict[str, str],
    readded: set[str],
) -> set[str]:
    """The unchanged table checks added again so that the checks stand in the desired
    order: the server shows them in the order they were added, and an added one goes
    last (where a direct load has it before others). Each kept check after the first
    added, changed or out-of-order one is dropped and added again, in order."""
    position = {k: i for i, k in enumerate(cur_order)}
    out: set[str] = set()
    last, broken = -1, False
    for key in want_order:
        if not key.startswith("check "):
            continue
        kept = key in old and old[key] == new[key] and key not in readded
        if not kept or position[key] < last:
            broken = True
        if broken and kept:
            out.add(key)
        elif kept:
            last = position[key]
    return out


def _key_class(key: str, line: str) -> int:
    """The group the server sorts an index into (primary and unique keys first, FULLTEXT
    last); within one the order is the order the keys were added. Coarser than the
    server's own (which splits unique keys further), which only moves more keys."""
    if key == "primary" or line.startswith("UNIQUE"):
        return 0
    return 2 if line.startswith("FULLTEXT") else 1


def _moving(
    cur: dict[str, Any], want: dict[str, Any], kept: set[str]
) -> dict[str, tuple[str, str]]:
    """The unchanged indexes that must move for the table's indexes to stand in the
    desired order (``index key -> (name, temporary name)``).

    An added index goes to the end of its group, where a direct load has it before
    others; and the server keeps an unchanged index dropped and added in one ALTER where
    it was. So each unchanged index after the first added one of its group is built
    again beside under a temporary name in the ALTER, in order, then the old one is
    dropped and the new one renamed (the index serves throughout, foreign keys too).
    """
    position = {k: i for i, k in enumerate(cur["_order"])}
    out: dict[str, tuple[str, str]] = {}
    for group in (0, 1, 2):
        keys = [
            k
            for k in want["_order"]
            if (k == "primary" or k.startswith("index "))
            and _key_class(k, want["elements"][k]) == group
        ]
        last, broken = -1, False
        for key in keys:
            if key not in kept or position[key] < last:
                broken = True
            if broken and key in kept and key != "primary":
                name = key.split(" ", 1)[1]
                out[key] = (name, name[:56] + "__ptah")
            elif key in kept:
                last = position[key]
    return out


def references(entry: dict[str, Any]) -> set[str]:
    """Tables this table's foreign keys reference (itself excluded)."""
    found: set[str] = set()
    for key, line in entry["elements"].items():
        if key.startswith("fk "):
            m = _REFERENCES.search(line)
            if m:
                found.add(m.group(1).replace("``", "`"))
    return found


def _order(nodes: dict[str, Statement], after: dict[str, set[str]]) -> list[str]:
    """The keys of ``nodes`` so that each comes after those it depends on; name order
    otherwise.

    A cycle (tables referencing each other) cannot be ordered: it is broken at a new
    table where there is one (:func:`_deferred` adds its keys to tables made after it
    once they exist), else in name order, and the server's own check reports it.
    """
    pending = {k: {d for d in after.get(k, set()) if d in nodes and d != k} for k in nodes}
    out: list[str] = []
    while pending:
        ready = sorted(k for k, deps in pending.items() if not deps)
        if not ready:
            ready = sorted(k for k in pending if k.startswith("create ")) or sorted(pending)
        key = ready[0]
        out.append(key)
        del pending[key]
        for deps in pending.values():
            deps.discard(key)
    return out


def _ordered(nodes: dict[str, Statement], after: dict[str, set[str]]) -> list[Statement]:
    return [nodes[k] for k in _order(nodes, after)]


def _deferred(
    name: str, entry: dict[str, Any], later: set[str]
) -> tuple[Statement, Statement | None]:
    """The CREATE of a new table without its foreign keys to the tables in ``later``
    (made or altered after it), and the ALTER that adds those keys once they are.

    New tables that reference each other (a dump's ``SET FOREIGN_KEY_CHECKS=0`` loads
    them in any order) have no order that apply, with the server's checks on, accepts:
    a CREATE naming a table that does not exist yet fails."""
    keys = [
        key
        for key, line in entry["elements"].items()
        if key.startswith("fk ") and (fk := foreign(line)) is not None and fk[1] in later
    ]
    if not keys:
        return Statement(entry["_sql"]), None
    lines = create_lines(entry["_sql"])
    end = next(i for i in range(1, len(lines)) if lines[i].startswith(")"))
    moved = {entry["elements"][k] for k in keys}
    body = [ln.rstrip(",") for ln in lines[1:end] if ln.strip().rstrip(",") not in moved]
    sql = "\n".join([lines[0], ",\n".join(body), *lines[end:]])
    adds = ",\n  ".join(f"ADD {entry['elements'][k]}" for k in keys)
    return Statement(sql), Statement(f"ALTER TABLE {q(name)}\n  {adds}")


def _keys(entry: dict[str, Any]) -> dict[str, str]:
    return {
        k: v for k, v in entry["elements"].items() if k.split(" ", 1)[0] in ("index", "primary")
    }


def _predropped(current: Schema, desired: Schema) -> dict[str, list[str]]:
    """The foreign keys (by table) dropped in a statement before the alterations: those
    added again under the same name, those on a column whose type changes (on
    either side of the key), which the server refuses to retype while the key is there,
    and those of a dropped table to a table whose keys change."""
    cur_t, want_t = current["table"], desired["table"]
    changed = {name: retyped(cur_t[name], want_t[name]) for name in cur_t.keys() & want_t.keys()}
    # Tables whose keys change: a table dropped after the alterations may hold a foreign
    # key that needs one of the keys they drop (the server refuses: error 1553).
    reindexed = {
        name for name in cur_t.keys() & want_t.keys() if _keys(cur_t[name]) != _keys(want_t[name])
    }
    out: dict[str, list[str]] = {}
    for name in sorted(cur_t):
        for key, line in cur_t[name]["elements"].items():
            if not key.startswith("fk "):
                continue
            wanted = want_t.get(name, {}).get("elements", {}).get(key)
            fk = foreign(line)
            touches = fk is not None and (
                bool(set(fk[0]) & changed.get(name, set()))
                or bool(set(fk[2]) & changed.get(fk[1], set()))
                or (name not in want_t and fk[1] in reindexed)
            )
            if (wanted is not None and wanted != line) or touches:
                out.setdefault(name, []).append(key)
    return out


def _view_sql(name: str, view: dict[str, Any]) -> str:
    check = view["check"]
    suffix = f" WITH {check} CHECK OPTION" if check and check != "NONE" else ""
    algorithm = view.get("algorithm") or "UNDEFINED"
    head = "CREATE" if algorithm == "UNDEFINED" else f"CREATE ALGORITHM={algorithm}"
    security = view.get("security") or "DEFINER"
    if security != "DEFINER":
        head += f" SQL SECURITY {security}"
    return f"{head} VIEW {q(name)} AS {view['def']}{suffix}"


def diff(current: Schema, desired: Schema) -> list[Statement]:
    """Statements in an order that foreign-key checks accept, as the plan's load had them on.

    A new table comes after the new tables it references and after the
    alteration of an existing table it references (which may add the key it
    needs); an altered table comes after the new tables its keys reference and
    after the alteration of a table a key it adds references; a dropped table after
    every alteration (which removes keys to it) and after the dropped tables that
    reference it. A view comes after the views its definition names.
    """
    cur_t, want_t = current["table"], desired["table"]
    cur_v, want_v = current["view"], desired["view"]
    out: list[Statement] = []
    changed_views = [n for n in cur_v if n not in want_v or not same(cur_v[n], want_v[n])]
    out += [Statement(f"DROP VIEW {q(n)}") for n in changed_views]
    predropped = _predropped(current, desired)
    for name, keys in predropped.items():
        drops = ",\n  ".join(_drop_clause(k) for k in keys)
        out.append(Statement(f"ALTER TABLE {q(name)}\n  {drops}"))
    for name in sorted(cur_t.keys() & want_t.keys()):
        if cur_t[name].get("partition") and not want_t[name].get("partition"):
            out.append(Statement(f"ALTER TABLE {q(name)}\n  REMOVE PARTITIONING", (LOCK_HEAVY,)))
    for name in sorted(cur_t.keys() & want_t.keys()):
        _unplannable(name, cur_t[name], want_t[name])
    nodes: dict[str, Statement] = {}
    after: dict[str, set[str]] = {}
    altered: list[str] = []
    more: dict[str, list[Statement]] = {}
    for name in sorted(cur_t.keys() & want_t.keys()):
        stmt, more[name] = _alter(name, cur_t[name], want_t[name], set(predropped.get(name, ())))
        if stmt:
            nodes["alter " + name] = stmt
            altered.append(name)
    created = sorted(want_t.keys() - cur_t.keys())
    for name in created:
        nodes["create " + name] = Statement(want_t[name]["_sql"])
    dropped = sorted(cur_t.keys() - want_t.keys())
    for name in dropped:
        nodes["drop " + name] = Statement(f"DROP TABLE {q(name)}", (DESTRUCTIVE,))
    for name in altered:
        adds = _added_references(cur_t[name], want_t[name], set(predropped.get(name, ())))
        after["alter " + name] = {"create " + r for r in references(want_t[name])} | {
            "alter " + r for r in adds
        }
    for name in created:
        after["create " + name] = {"create " + r for r in references(want_t[name])} | {
            "alter " + r for r in references(want_t[name])
        }
    for name in dropped:
        referencing = {o for o in dropped if name in references(cur_t[o])}
        after["drop " + name] = {"alter " + a for a in altered} | {"drop " + o for o in referencing}
    order = _order(nodes, after)
    # Altered tables whose foreign keys reference each other (a cycle retyped from INT to
    # BIGINT: each key is dropped first, and each ALTER that adds one back needs the
    # other table's retyped already) have no order: the keys an ALTER adds to a table
    # altered after it are added once every table is; and so are those it adds to its
    # own columns that it retypes (the server checks a key against the table as it was:
    # error 150).
    position = {key: i for i, key in enumerate(order)}
    for name in altered:
        added = _added_references(cur_t[name], want_t[name], set(predropped.get(name, ())))
        late = frozenset(
            r
            for r in added
            if position.get("alter " + r, -1) > position["alter " + name]
            or (r == name and _retypes_referenced(name, cur_t[name], want_t[name]))
        )
        if late:
            stmt, more[name] = _alter(
                name, cur_t[name], want_t[name], set(predropped.get(name, ())), late
            )
            if stmt is not None:
                nodes["alter " + name] = stmt
            else:
                del nodes["alter " + name]
    later = [s for name in sorted(more) for s in more[name]]
    done: set[str] = set()
    for key in order:
        if key not in nodes:
            continue
        kind, _, name = key.partition(" ")
        done.add(name)
        if kind == "create":
            create, fks = _deferred(name, want_t[name], (set(created) | set(altered)) - done)
            out.append(create)
            if fks is not None:
                later.insert(0, fks)
        else:
            if kind == "drop":
                out += _unreferenced(name, {n: cur_t[n] for n in dropped if n not in done})
            out.append(nodes[key])
    out += later
    views = {
        name: Statement(_view_sql(name, want_v[name]))
        for name in want_v
        if name not in cur_v or name in changed_views
    }
    view_after = {
        name: {o for o in views if o != name and q(o) in want_v[name]["def"]} for name in views
    }
    out += _collated(_order(views, view_after), views, want_v, current)
    return out


def _collated(
    names: list[str], views: dict[str, Statement], want_v: dict[str, Any], current: Schema
) -> list[Statement]:
    """The views' CREATEs, each under the collation its literals had in the desired
    schema (``SET collation_connection``, which ``SET STATEMENT`` cannot set), and the
    apply session's own settings back after them. The session's are the ones the target
    was read in (the apply's session opens alike); unknown, every view sets its own.

    The statements are sent as UTF-8 whatever the view's ``character_set_client`` was
    (a file's ``SET NAMES latin1``): only a text in ASCII, which every client character
    set reads alike, is sent saying that one, so that the server keeps it as a direct load
    does."""
    meta = current.get("_meta", {})
    session = (meta.get("collationConnection"), meta.get("characterSetClient"))
    out: list[Statement] = []
    now = session
    for name in names:
        view = want_v[name]
        client = view.get("_client") if views[name].sql.isascii() else None
        wanted = (view.get("collation") or now[0], client or session[1])
        if wanted != now and (sql := _set_session(wanted, now)):
            out.append(Statement(sql))
            now = wanted
        out.append(views[name])
    if now != session and (sql := _set_session(session, now)):
        out.append(Statement(sql))
    return out


def _set_session(wanted: tuple[Any, Any], now: tuple[Any, Any]) -> str:
    """``SET SESSION`` of the settings in ``wanted`` that differ from ``now`` (empty: none
    does): the collation first (it sets the connection's character set, not the
    client's)."""
    parts = []
    if wanted[0] and wanted[0] != now[0]:
        parts.append(f"collation_connection = {_literal(wanted[0])}")
    if wanted[1] and wanted[1] != now[1]:
        parts.append(f"character_set_client = {_literal(wanted[1])}")
    return "SET SESSION " + ", ".join(parts) if parts else ""


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def _unreferenced(name: str, remaining: dict[str, dict[str, Any]]) -> list[Statement]:
    """The foreign keys to ``name`` of the tables dropped after it, dropped first.

    Dropped tables that reference each other have no order in which each goes after
    those that reference it: the server refuses to drop a table another one's key still
    references (error 1451), so the keys of the cycle go before the first DROP."""
    out: list[Statement] = []
    for other, entry in sorted(remaining.items()):
        keys = [
            key
            for key, line in entry["elements"].items()
            if key.startswith("fk ") and (fk := foreign(line)) is not None and fk[1] == name
        ]
        if keys:
            drops = ",\n  ".join(_drop_clause(k) for k in keys)
            out.append(Statement(f"ALTER TABLE {q(other)}\n  {drops}"))
    return out


def _respelled(old: dict[str, str], new: dict[str, str]) -> dict[str, str]:
    """Columns (``old key -> new key``) whose name the desired table spells in other
    letters' case, one for one: column names are case-insensitive to the server."""
    gone = {k.lower(): k for k in old if k.startswith("column ") and k not in new}
    came = {k.lower(): k for k in new if k.startswith("column ") and k not in old}
    counts: dict[str, int] = {}
    for k in [*old, *new]:
        if k.startswith("column "):
            counts[k.lower()] = counts.get(k.lower(), 0) + 1
    return {gone[low]: came[low] for low in gone.keys() & came.keys() if counts[low] == 2}


def _unplannable(name: str, cur: dict[str, Any], want: dict[str, Any]) -> None:
    """Refuse a change to a line of ``SHOW CREATE TABLE`` the differ has no clause for
    (keyed ``other ...``: none known on MariaDB 10.11), rather than plan nothing for it
    and fail the apply's check of the schema it reached."""
    old = {k for k in cur["elements"] if k.startswith("other ")}
    new = {k for k in want["elements"] if k.startswith("other ")}
    if old != new:
        line = sorted(old ^ new)[0].split(" ", 1)[1]
        raise PlanError(
            f"table {name}: Ptah cannot plan a change of this part of it: {line}",
            "Unsupported",
        )


def _retypes_referenced(name: str, cur: dict[str, Any], want: dict[str, Any]) -> bool:
    """Whether the table's ALTER retypes a column its own foreign keys reference."""
    changed = retyped(cur, want)
    return any(
        fk[1] == name and bool(set(fk[2]) & changed)
        for key, line in want["elements"].items()
        if key.startswith("fk ")
        for fk in [foreign(line)]
        if fk is not None
    )


def _added_references(cur: dict[str, Any], want: dict[str, Any], predropped: set[str]) -> set[str]:
    """Tables referenced by the foreign keys an ALTER of this table adds: the ALTER
    comes after theirs, which may retype the column or add the key they need."""
    old = cur["elements"]
    return {
        fk[1]
        for key, line in want["elements"].items()
        if key.startswith("fk ") and (key in predropped or old.get(key) != line)
        for fk in [foreign(line)]
        if fk is not None
    }
