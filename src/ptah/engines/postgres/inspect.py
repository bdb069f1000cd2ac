"""Set-based PostgreSQL catalog inspection: one query per object kind, any number of tables.

Every query runs with ``search_path = pg_catalog`` so that ``format_type``,
``pg_get_expr``, ``pg_get_constraintdef``, ``pg_get_indexdef`` and
``pg_get_viewdef`` print fully qualified names: the text is then valid in any
session and identical between the scratch database and the target. Names are
quoted by the server (``quote_ident``), so the differ never guesses quoting.
Objects that belong to an extension are left to the extension.
"""

from __future__ import annotations

from typing import Any

from ptah.engines.model import PlanError, Schema

_USER_NS = (
    "n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')"
    " AND n.nspname NOT LIKE 'pg_temp_%' AND n.nspname NOT LIKE 'pg_toast_temp_%'"
)


def _not_ext(catalog: str, oid: str) -> str:
    return (
        "NOT EXISTS (SELECT 1 FROM pg_depend e WHERE e.classid = "
        f"'{catalog}'::regclass AND e.objid = {oid} AND e.deptype = 'e')"
    )


Q_SCHEMAS = f"""
SELECT quote_ident(n.nspname) FROM pg_namespace n
WHERE {_USER_NS} AND {_not_ext("pg_namespace", "n.oid")}
"""

Q_EXTENSIONS = """
SELECT quote_ident(x.extname), quote_ident(n.nspname)
FROM pg_extension x JOIN pg_namespace n ON n.oid = x.extnamespace
WHERE x.extname <> 'plpgsql'
"""

Q_ENUMS = f"""
SELECT quote_ident(n.nspname) || '.' || quote_ident(t.typname),
       array_agg(e.enumlabel::text ORDER BY e.enumsortorder)
FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
JOIN pg_enum e ON e.enumtypid = t.oid
WHERE {_USER_NS} AND {_not_ext("pg_type", "t.oid")}
GROUP BY 1
"""

Q_SEQUENCES = f"""
SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname),
       format_type(s.seqtypid, NULL), s.seqstart::text, s.seqincrement::text,
       s.seqmin::text, s.seqmax::text, s.seqcache::text, s.seqcycle,
       (SELECT quote_ident(tn.nspname) || '.' || quote_ident(tc.relname) || '.'
               || quote_ident(a.attname)
          FROM pg_depend d JOIN pg_class tc ON tc.oid = d.refobjid
          JOIN pg_namespace tn ON tn.oid = tc.relnamespace
          JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
         WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
           AND d.refclassid = 'pg_class'::regclass AND d.deptype = 'a' LIMIT 1)
FROM pg_sequence s JOIN pg_class c ON c.oid = s.seqrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE {_USER_NS} AND {_not_ext("pg_class", "c.oid")}
  AND NOT EXISTS (SELECT 1 FROM pg_depend i WHERE i.classid = 'pg_class'::regclass
                  AND i.objid = c.oid AND i.deptype = 'i')
"""

Q_TABLES = f"""
SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname), c.relkind::text,
       c.relispartition
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND {_USER_NS} AND {_not_ext("pg_class", "c.oid")}
"""

Q_COLUMNS = f"""
SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname), quote_ident(a.attname),
       a.attnum, format_type(a.atttypid, a.atttypmod), a.attnotnull,
       pg_get_expr(ad.adbin, ad.adrelid), a.attidentity::text, a.attgenerated::text,
       CASE WHEN a.attcollation <> t.typcollation
            THEN quote_ident(cn.nspname) || '.' || quote_ident(co.collname) END
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
LEFT JOIN pg_collation co ON co.oid = a.attcollation
LEFT JOIN pg_namespace cn ON cn.oid = co.collnamespace
WHERE c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
  AND {_USER_NS} AND {_not_ext("pg_class", "c.oid")}
"""

Q_CONSTRAINTS = f"""
SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname), quote_ident(k.conname),
       k.contype::text, pg_get_constraintdef(k.oid)
FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE k.contype IN ('p', 'u', 'c', 'f', 'x') AND k.conislocal
  AND {_USER_NS} AND {_not_ext("pg_class", "c.oid")}
"""

Q_INDEXES = f"""
SELECT quote_ident(n.nspname) || '.' || quote_ident(ic.relname),
       quote_ident(n.nspname) || '.' || quote_ident(tc.relname),
       pg_get_indexdef(i.indexrelid), i.indisunique
FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
JOIN pg_class tc ON tc.oid = i.indrelid
JOIN pg_namespace n ON n.oid = ic.relnamespace
WHERE tc.relkind IN ('r', 'p', 'm') AND {_USER_NS} AND {_not_ext("pg_class", "tc.oid")}
  AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid
                  AND k.contype IN ('p', 'u', 'x'))
"""

Q_VIEWS = f"""
SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname), c.relkind::text,
       pg_get_viewdef(c.oid),
       ARRAY(SELECT DISTINCT quote_ident(rn.nspname) || '.' || quote_ident(rc.relname)
               FROM pg_rewrite r JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass
                    AND d.objid = r.oid AND d.refclassid = 'pg_class'::regclass
               JOIN pg_class rc ON rc.oid = d.refobjid AND rc.oid <> c.oid
               JOIN pg_namespace rn ON rn.oid = rc.relnamespace
              WHERE r.ev_class = c.oid)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('v', 'm') AND {_USER_NS} AND {_not_ext("pg_class", "c.oid")}
"""

# Comments on schemas, relations (and their columns), and types.
Q_COMMENTS = f"""
SELECT CASE WHEN c.relkind IN ('r', 'p') AND d.objsubid = 0 THEN 'TABLE'
            WHEN d.objsubid <> 0 THEN 'COLUMN'
            WHEN c.relkind = 'v' THEN 'VIEW'
            WHEN c.relkind = 'm' THEN 'MATERIALIZED VIEW'
            WHEN c.relkind = 'S' THEN 'SEQUENCE'
            WHEN c.relkind = 'i' THEN 'INDEX' END,
       quote_ident(n.nspname) || '.' || quote_ident(c.relname)
         || CASE WHEN d.objsubid <> 0 THEN '.' || quote_ident(a.attname) ELSE '' END,
       d.description
FROM pg_description d JOIN pg_class c ON d.classoid = 'pg_class'::regclass AND c.oid = d.objoid
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = d.objsubid
WHERE {_USER_NS} AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'i')
  AND {_not_ext("pg_class", "c.oid")}
UNION ALL
SELECT 'SCHEMA', quote_ident(n.nspname), d.description
FROM pg_description d JOIN pg_namespace n
  ON d.classoid = 'pg_namespace'::regclass AND n.oid = d.objoid
WHERE {_USER_NS} AND {_not_ext("pg_namespace", "n.oid")}
UNION ALL
SELECT 'TYPE', quote_ident(n.nspname) || '.' || quote_ident(t.typname), d.description
FROM pg_description d JOIN pg_type t ON d.classoid = 'pg_type'::regclass AND t.oid = d.objoid
JOIN pg_namespace n ON n.oid = t.typnamespace
WHERE {_USER_NS} AND {_not_ext("pg_type", "t.oid")}
"""

# Objects Ptah does not manage yet: reported, never silently ignored.
Q_UNMANAGED = f"""
SELECT 'function', count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE {_USER_NS} AND {_not_ext("pg_proc", "p.oid")}
UNION ALL
SELECT 'trigger', count(*) FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid
  JOIN pg_namespace n ON n.oid = c.relnamespace WHERE NOT g.tgisinternal AND {_USER_NS}
UNION ALL
SELECT 'domain or composite type', count(*) FROM pg_type t
  JOIN pg_namespace n ON n.oid = t.typnamespace
 WHERE t.typtype IN ('d', 'c') AND {_USER_NS} AND {_not_ext("pg_type", "t.oid")}
   AND NOT EXISTS (SELECT 1 FROM pg_class r WHERE r.oid = t.typrelid AND r.relkind <> 'c')
"""


def inspect(conn: Any) -> Schema:
    """Read the whole user schema in the connection's current transaction.

    The caller owns the transaction (read-only, repeatable read on the target;
    the loading transaction on a scratch database).
    """
    schema: Schema = {
        k: {}
        for k in (
            "extension",
            "schema",
            "enum",
            "sequence",
            "table",
            "constraint",
            "index",
            "view",
            "comment",
        )
    }
    with conn.cursor() as cur:
        cur.execute("SET LOCAL search_path = pg_catalog")
        cur.execute(Q_SCHEMAS)
        for (name,) in cur.fetchall():
            schema["schema"][name] = {}
        cur.execute(Q_EXTENSIONS)
        for name, nsp in cur.fetchall():
            schema["extension"][name] = {"schema": nsp}
        cur.execute(Q_ENUMS)
        for name, labels in cur.fetchall():
            schema["enum"][name] = {"labels": list(labels)}
        cur.execute(Q_SEQUENCES)
        for name, typ, start, inc, mn, mx, cache, cycle, owned in cur.fetchall():
            schema["sequence"][name] = {
                "type": typ,
                "start": start,
                "increment": inc,
                "min": mn,
                "max": mx,
                "cache": cache,
                "cycle": bool(cycle),
                "ownedBy": owned,
            }
        cur.execute(Q_TABLES)
        for name, kind, is_partition in cur.fetchall():
            if kind == "p" or is_partition:
                raise PlanError(
                    f"table {name} is partitioned; Ptah does not plan partitioning yet",
                    "Unsupported",
                )
            schema["table"][name] = {"columns": {}}
        cur.execute(Q_COLUMNS)
        for table, col, num, typ, notnull, default, ident, gen, coll in cur.fetchall():
            schema["table"][table]["columns"][col] = {
                "_n": num,
                "type": typ,
                "notNull": bool(notnull),
                "default": default,
                "identity": ident or "",
                "generated": gen or "",
                "collation": coll,
            }
        cur.execute(Q_CONSTRAINTS)
        for table, name, kind, definition in cur.fetchall():
            schema["constraint"][f"{table}.{name}"] = {
                "table": table,
                "name": name,
                "type": kind,
                "def": definition,
            }
        cur.execute(Q_INDEXES)
        for name, table, definition, unique in cur.fetchall():
            schema["index"][name] = {"table": table, "def": definition, "unique": bool(unique)}
        cur.execute(Q_VIEWS)
        for name, kind, definition, deps in cur.fetchall():
            schema["view"][name] = {
                "materialized": kind == "m",
                "def": definition.strip(),
                "_deps": sorted(deps),
            }
        cur.execute(Q_COMMENTS)
        for kind, name, text in cur.fetchall():
            if kind:
                schema["comment"][f"{kind} {name}"] = {"kind": kind, "on": name, "text": text}
    return schema


def unmanaged(conn: Any) -> list[str]:
    """Warnings for objects the planner does not manage (functions, triggers, domains)."""
    with conn.cursor() as cur:
        cur.execute(Q_UNMANAGED)
        rows = cur.fetchall()
    return [f"{count} {kind}(s) not managed by Ptah's planner" for kind, count in rows if count]
