"""The catalog's own view of a PostgreSQL schema: object nodes, dependencies, census.

Inspection names every object it takes in by a node key (``table:app.orders``,
``function:app.f(integer)``) and records which catalog row (catalog, oid) it
came from. From that map this module reads:

* the dependency graph, from ``pg_depend`` (normal and automatic
  dependencies between user objects), so the differ orders creates and drops
  as the server requires rather than by a fixed list of kinds;
* the census: every object the catalogs hold in the database (outside
  extensions and the system), found from the catalogs themselves and never
  by reading the desired file. An object that maps to no node was not taken
  in by inspection; it is named (kind and identity, as
  ``pg_identify_object`` gives them) so the planner can refuse it on the
  desired side and report it on the target, instead of losing it silently.
  Properties inspection does not carry (column options, toast reloptions,
  tablespaces, security labels) are counted the same way.
"""

from __future__ import annotations

from typing import Any

FIRST_USER_OID = 16384

# Catalogs that hold database-level objects a desired file can create.
_CENSUS_CATALOGS = (
    "pg_class",
    "pg_proc",
    "pg_type",
    "pg_namespace",
    "pg_constraint",
    "pg_trigger",
    "pg_policy",
    "pg_operator",
    "pg_opclass",
    "pg_opfamily",
    "pg_cast",
    "pg_collation",
    "pg_conversion",
    "pg_ts_config",
    "pg_ts_dict",
    "pg_ts_parser",
    "pg_ts_template",
    "pg_event_trigger",
    "pg_rewrite",
    "pg_statistic_ext",
    "pg_publication",
    "pg_publication_rel",
    "pg_publication_namespace",
    "pg_foreign_data_wrapper",
    "pg_foreign_server",
    "pg_default_acl",
    "pg_extension",
    "pg_attrdef",
    "pg_language",
    "pg_transform",
    "pg_am",
)

_CENSUS = "\nUNION ALL\n".join(
    f"SELECT '{cat}', oid FROM {cat} WHERE oid >= {FIRST_USER_OID}"
    + (" AND conislocal" if cat == "pg_constraint" else "")
    + (
        " AND relnamespace NOT IN (SELECT oid FROM pg_namespace WHERE nspname = 'pg_toast'"
        " OR nspname LIKE 'pg_temp_%' OR nspname LIKE 'pg_toast_temp_%')"
        if cat == "pg_class"
        else ""
    )
    for cat in _CENSUS_CATALOGS
)
# One read of pg_depend serves the graph (normal and automatic dependencies), extension
# membership, and what takes an object out of the census (extension membership, being
# internal to another object: array and row types, toast, a view's rule; a partition's copy
# of its parent's).
_DEPEND = f"""
SELECT d.classid::regclass::text, d.objid, d.refclassid::regclass::text, d.refobjid,
       d.deptype::text, d.refobjsubid
FROM pg_depend d
WHERE d.objid >= {FIRST_USER_OID}
  AND (d.deptype IN ('e', 'i', 'P', 'S', 'a')
       OR (d.deptype = 'n' AND (d.refobjid >= {FIRST_USER_OID}
           OR (d.refclassid = 'pg_namespace'::regclass
               AND d.refobjid = to_regnamespace('public')))))
"""

_IDENTIFY = """
SELECT x.c, x.o, i.type, coalesce(i.identity, '')
FROM unnest(%s::text[], %s::oid[]) AS x(c, o),
     pg_identify_object(x.c::regclass, x.o, 0) i
"""

# Properties of managed objects that inspection does not carry. An index's column options
# are its operator classes' parameters (gist_hstore_ops (siglen = 32)): its definition
# (pg_get_indexdef) carries them.
_PROPERTIES = f"""
SELECT 'column options (ALTER COLUMN ... SET (...))', c.oid, a.attname
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
WHERE c.oid >= {FIRST_USER_OID} AND a.attnum > 0 AND NOT a.attisdropped
  AND (a.attoptions IS NOT NULL OR a.attfdwoptions IS NOT NULL) AND c.relkind NOT IN ('i', 'I')
UNION ALL
SELECT 'TOAST storage parameters', c.oid, array_to_string(t.reloptions, ',')
FROM pg_class c JOIN pg_class t ON t.oid = c.reltoastrelid
WHERE c.oid >= {FIRST_USER_OID} AND t.reloptions IS NOT NULL AND c.relkind NOT IN ('r', 'm')
UNION ALL
SELECT 'a tablespace', c.oid, ts.spcname
FROM pg_class c JOIN pg_tablespace ts ON ts.oid = c.reltablespace
WHERE c.oid >= {FIRST_USER_OID} AND c.relkind IN ('r', 'p', 'i', 'I', 'm')
UNION ALL
SELECT 'a security label', s.objoid, s.provider FROM pg_seclabel s
WHERE s.objoid >= {FIRST_USER_OID}
UNION ALL
SELECT 'materialized view column settings (statistics, storage, compression)', c.oid,
       a.attname
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_type t ON t.oid = a.atttypid
WHERE c.oid >= {FIRST_USER_OID} AND c.relkind = 'm' AND a.attnum > 0 AND NOT a.attisdropped
  AND (a.attstattarget >= 0 OR a.attstorage <> t.typstorage OR a.attcompression <> '')
UNION ALL
SELECT 'comment on a copy of its parent''s constraint', k.conrelid, k.conname
FROM pg_constraint k JOIN pg_description d ON d.objsubid = 0
  AND (d.classoid = 'pg_constraint'::regclass AND d.objoid = k.oid
       OR d.classoid = 'pg_class'::regclass AND d.objoid = k.conindid AND k.conindid <> 0
          AND k.contype IN ('p', 'u', 'x'))
WHERE k.oid >= {FIRST_USER_OID} AND k.conrelid <> 0
  AND NOT (k.conislocal AND k.conparentid = 0)
UNION ALL
SELECT 'comment on a copy of its parent''s trigger', g.tgrelid, g.tgname
FROM pg_trigger g JOIN pg_description d ON d.classoid = 'pg_trigger'::regclass
  AND d.objoid = g.oid
WHERE g.oid >= {FIRST_USER_OID} AND g.tgparentid <> 0
UNION ALL
SELECT 'a copy of its parent''s trigger enabled otherwise', g.tgrelid,
       g.tgname || ' ' || g.tgenabled::text
FROM pg_trigger g JOIN pg_trigger pg_ ON pg_.oid = g.tgparentid
WHERE g.oid >= {FIRST_USER_OID} AND g.tgenabled <> pg_.tgenabled
UNION ALL
SELECT 'owner''s own privilege revoked', c.oid, string_agg(d.privilege_type, ',')
FROM pg_class c,
     aclexplode(acldefault(CASE WHEN c.relkind = 'S' THEN 's' ELSE 'r' END::"char",
                           c.relowner)) d
WHERE c.oid >= {FIRST_USER_OID} AND c.relacl IS NOT NULL
  AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
  AND NOT EXISTS (SELECT 1 FROM aclexplode(c.relacl) x
                   WHERE x.grantee = c.relowner AND x.privilege_type = d.privilege_type)
GROUP BY c.oid
UNION ALL
SELECT 'row type grant', c.oid, t.typname
FROM pg_type t JOIN pg_class c ON c.oid = t.typrelid
WHERE c.oid >= {FIRST_USER_OID} AND c.relkind <> 'c'
  AND t.typacl IS NOT NULL AND t.typacl <> acldefault('T', t.typowner)
"""

# Privileges on an extension's member (a function, table, type, language, schema) that
# differ from those it was created with (pg_init_privs): GRANT/REVOKE on them is not
# planned, the extension being created as a whole. plpgsql's language counts too.
_MEMBER_GRANTS = """
SELECT quote_ident(x.extname), pg_describe_object(m.classid, m.objid, 0)
FROM (SELECT 'pg_proc'::regclass AS classid, oid AS objid, proacl AS acl FROM pg_proc
      UNION ALL SELECT 'pg_class'::regclass, oid, relacl FROM pg_class
      UNION ALL SELECT 'pg_type'::regclass, oid, typacl FROM pg_type
      UNION ALL SELECT 'pg_language'::regclass, oid, lanacl FROM pg_language
      UNION ALL SELECT 'pg_namespace'::regclass, oid, nspacl FROM pg_namespace) m
JOIN pg_depend d ON d.classid = m.classid AND d.objid = m.objid AND d.deptype = 'e'
JOIN pg_extension x ON x.oid = d.refobjid
LEFT JOIN pg_init_privs ip ON ip.classoid = m.classid AND ip.objoid = m.objid
  AND ip.objsubid = 0
WHERE m.acl IS DISTINCT FROM ip.initprivs
"""


_TYPE_ALIASES = f"""
SELECT 'pg_type', t.oid,
       CASE WHEN t.typelem <> 0 AND t.typsubscript = 'array_subscript_handler'::regproc
                   THEN 'pg_type' ELSE 'pg_class' END,
       CASE WHEN t.typelem <> 0 AND t.typsubscript = 'array_subscript_handler'::regproc
            THEN t.typelem ELSE t.typrelid END
FROM pg_type t WHERE t.oid >= {FIRST_USER_OID}
  AND ((t.typelem <> 0 AND t.typsubscript = 'array_subscript_handler'::regproc)
       OR t.typrelid <> 0)
UNION ALL
SELECT 'pg_constraint', k.oid, 'pg_type', k.contypid FROM pg_constraint k
WHERE k.contypid <> 0 AND k.oid >= {FIRST_USER_OID}
"""

_RULES = f"""
SELECT r.oid, r.ev_class FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class
WHERE r.oid >= {FIRST_USER_OID} AND c.relkind IN ('v', 'm') AND r.rulename = '_RETURN'
"""


class NodeMap:
    """(catalog, oid) -> node key, with aliases resolved on lookup (array types, rules)."""

    def __init__(self) -> None:
        self.nodes: dict[tuple[str, int], str] = {}
        self.aliases: dict[tuple[str, int], tuple[str, int]] = {}
        self.depend: list[tuple[str, int, str, int, str, int]] = []
        # A column default (pg_attrdef oid) -> its column's name; the default maps to its
        # table's node, and :func:`dependencies` tells which edges come from defaults only.
        self.defaults: dict[int, str] = {}
        self.default_edges: dict[str, dict[str, list[str]]] = {}
        # (table oid, attnum) -> column name; :func:`dependencies` reads, per column, what
        # depends on it (``column_edges``: table node -> column -> {node: deptype}).
        self.columns: dict[tuple[int, int], str] = {}
        self.column_edges: dict[str, dict[str, dict[str, str]]] = {}

    def add(self, catalog: str, oid: int, node: str) -> None:
        self.nodes[(catalog, oid)] = node

    def get(self, catalog: str, oid: int) -> str | None:
        key = (catalog, oid)
        for _ in range(8):  # an array of a domain of a composite: a short chain at most
            node = self.nodes.get(key)
            if node is not None:
                return node
            nxt = self.aliases.get(key)
            if nxt is None:
                return None
            key = nxt
        return None

    def read_type_aliases(self, cur: Any) -> None:
        cur.execute(_TYPE_ALIASES)
        for source, oid, catalog, target in cur.fetchall():
            self.aliases[(source, oid)] = (catalog, target)

    def read_rules(self, cur: Any) -> None:
        cur.execute(_RULES)
        for oid, view in cur.fetchall():
            self.aliases[("pg_rewrite", oid)] = ("pg_class", view)


def dependencies(cur: Any, nodes: NodeMap) -> dict[str, dict[str, str]]:
    """node -> {node it depends on: 'n' (normal) or 'a' (automatic, goes with it)}."""
    cur.execute(_DEPEND)
    nodes.depend = cur.fetchall()
    for catalog, oid, refcatalog, ext, deptype, _ in nodes.depend:
        if deptype == "e" and refcatalog == "pg_extension" and (catalog, oid) not in nodes.nodes:
            nodes.aliases[(catalog, oid)] = ("pg_extension", ext)
    deps: dict[str, dict[str, str]] = {}
    by_default: dict[tuple[str, str], set[str]] = {}
    by_other: set[tuple[str, str]] = set()
    for catalog, oid, refcatalog, refoid, deptype, refsub in nodes.depend:
        if deptype not in ("n", "a"):
            continue
        node = nodes.get(catalog, oid)
        ref = nodes.get(refcatalog, refoid)
        if node is None or ref is None:
            continue
        used_column = nodes.columns.get((refoid, refsub)) if refcatalog == "pg_class" else None
        if used_column is not None:
            # What uses this column: the server drops it with the column (any 'a' edge:
            # an index, a check) or refuses to drop the column under it ('n' only: a
            # view, a trigger). A generated column's expression (its default, on the
            # same table) is named ``column:<name>``.
            user = node
            if node == ref and catalog == "pg_attrdef":
                user = f"column:{nodes.defaults.get(oid, '')}"
            if user not in (ref, f"column:{used_column}"):
                used = nodes.column_edges.setdefault(ref, {}).setdefault(used_column, {})
                if used.get(user) != "a":
                    used[user] = deptype
        if node == ref:
            continue
        if deptype == "a" and node.startswith("sequence:") and ref.startswith("table:"):
            continue  # OWNED BY: a statement of its own after both exist
        edges = deps.setdefault(node, {})
        if edges.get(ref) != "n":
            edges[ref] = deptype
        column = nodes.defaults.get(oid) if catalog == "pg_attrdef" else None
        if column is not None:
            by_default.setdefault((node, ref), set()).add(column)
        else:
            by_other.add((node, ref))
    for (node, ref), columns in by_default.items():
        if (node, ref) not in by_other:
            nodes.default_edges.setdefault(node, {})[ref] = sorted(columns)
    return deps


# The census's and the graph's queries another session may read ahead of them
# (:class:`ptah.engines.postgres.inspect.ReadAhead`): static, read in this order.
READ_AHEAD = (_DEPEND, _PROPERTIES)

_HELD = """
SELECT x.c, x.o, d.refclassid::regclass::text, d.refobjid
FROM unnest(%s::text[], %s::oid[]) AS x(c, o)
JOIN pg_depend d ON d.classid = x.c::regclass AND d.objid = x.o
WHERE d.deptype IN ('n', 'a')
"""


def census(cur: Any, nodes: NodeMap) -> tuple[list[str], dict[str, list[str]]]:
    """Every object and property in the database that inspection did not take in.

    Also: for each managed node, the unmanaged objects that depend on it (the
    plan must not drop such a node, since the server would refuse or cascade).
    """
    owned = nodes.depend  # read by dependencies(), which runs first
    members = {(c, o) for c, o, _, _, t, _ in owned if t == "e"}
    skip = {(c, o) for c, o, _, _, t, _ in owned if t in ("e", "i", "P", "S")}
    skip |= {(c, o) for c, o, rc, ro, t, _ in owned if t == "a" and (rc, ro) in members}
    cur.execute(_CENSUS)
    missing = [(c, o) for c, o in cur.fetchall() if (c, o) not in skip and nodes.get(c, o) is None]
    out: list[str] = []
    held: dict[str, list[str]] = {}
    if missing:
        params = ([c for c, _ in missing], [o for _, o in missing])
        cur.execute(_IDENTIFY, params)
        names = {(c, o): f"{kind} {identity}".strip() for c, o, kind, identity in cur.fetchall()}
        out = sorted(names.values())
        cur.execute(_HELD, params)
        for c, o, refc, refo in cur.fetchall():
            node = nodes.get(refc, refo)
            if node is not None and (c, o) in names:
                held.setdefault(node, []).append(names[(c, o)])
    cur.execute(_PROPERTIES)
    for what, oid, detail in cur.fetchall():
        node = nodes.get("pg_class", oid)
        if node is not None:
            out.append(f"{what} on {node.split(':', 1)[1]} ({detail})")
    cur.execute(_MEMBER_GRANTS)
    for extension, member in cur.fetchall():
        out.append(f"a grant on a member of extension {extension} ({member})")
    return out, held
