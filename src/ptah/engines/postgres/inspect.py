"""Set-based PostgreSQL catalog inspection: one query per object kind, any number of objects.

Every query runs with ``search_path = pg_catalog`` so that ``format_type``,
``pg_get_expr``, ``pg_get_constraintdef``, ``pg_get_indexdef``,
``pg_get_functiondef``, ``pg_get_triggerdef`` and ``pg_get_viewdef`` print
fully qualified names: the text is then valid in any session and identical
between the scratch database and the target. Names are quoted by the server
(``quote_ident``), so the differ never guesses quoting. Objects that belong to
an extension are left to the extension.

Besides the definitions, inspection records (under private keys, outside the
fingerprint) the dependency graph between the objects, read from
``pg_depend`` (:mod:`ptah.engines.postgres.graph`), and the census of every
object the catalogs hold that the inspection did not take in.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import psycopg

from ptah.engines.model import PlanError, Schema
from ptah.engines.postgres import graph

_USER_NS = (
    "n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')"
    " AND n.nspname NOT LIKE 'pg_temp_%' AND n.nspname NOT LIKE 'pg_toast_temp_%'"
)


def _not_ext(catalog: str, oid: str) -> str:
    return (
        "NOT EXISTS (SELECT 1 FROM pg_depend e WHERE e.classid = "
        f"'{catalog}'::regclass AND e.objid = {oid} AND e.deptype = 'e')"
    )


def _qn(ns: str, name: str) -> str:
    return f"quote_ident({ns}.nspname) || '.' || quote_ident({name})"


KINDS = (
    "extension",
    "schema",
    "collation",
    "ts_dict",
    "ts_config",
    "enum",
    "domain",
    "ctype",
    "range",
    "function",
    "sequence",
    "table",
    "constraint",
    "index",
    "view",
    "statistics",
    "trigger",
    "rule",
    "policy",
    "event_trigger",
    "publication",
    "pub_table",
    "pub_schema",
    "acl",
    "default_acl",
    "comment",
)

Q_SCHEMAS = f"""
SELECT n.oid, quote_ident(n.nspname) FROM pg_namespace n
WHERE {_USER_NS} AND {_not_ext("pg_namespace", "n.oid")}
"""

Q_EXTENSIONS = """
SELECT x.oid, quote_ident(x.extname), quote_ident(n.nspname)
FROM pg_extension x JOIN pg_namespace n ON n.oid = x.extnamespace
WHERE x.extname <> 'plpgsql'
"""

Q_COLLATIONS = f"""
SELECT c.oid, {_qn("n", "c.collname")}, c.collprovider::text, c.collisdeterministic,
       c.collcollate, c.collctype, c.colliculocale
FROM pg_collation c JOIN pg_namespace n ON n.oid = c.collnamespace
WHERE {_USER_NS} AND {_not_ext("pg_collation", "c.oid")}
"""

# Text search dictionaries: their template and their options as the server keeps them
# (what pg_dump writes back after TEMPLATE).
Q_TS_DICTS = f"""
SELECT d.oid, {_qn("n", "d.dictname")}, {_qn("tn", "t.tmplname")}, d.dictinitoption
FROM pg_ts_dict d JOIN pg_namespace n ON n.oid = d.dictnamespace
JOIN pg_ts_template t ON t.oid = d.dicttemplate
JOIN pg_namespace tn ON tn.oid = t.tmplnamespace
WHERE {_USER_NS} AND {_not_ext("pg_ts_dict", "d.oid")}
"""

# Text search configurations: their parser, and each token type's dictionaries in the
# order they are consulted (token types in the parser's order).
Q_TS_CONFIGS = f"""
SELECT c.oid, {_qn("n", "c.cfgname")}, {_qn("pn", "p.prsname")},
       ARRAY(SELECT ARRAY[quote_ident(t.alias), array_to_string(ARRAY(
                     SELECT {_qn("dn", "d.dictname")}
                       FROM pg_ts_config_map m JOIN pg_ts_dict d ON d.oid = m.mapdict
                       JOIN pg_namespace dn ON dn.oid = d.dictnamespace
                      WHERE m.mapcfg = c.oid AND m.maptokentype = t.tokid
                      ORDER BY m.mapseqno), ', ')]
               FROM ts_token_type(c.cfgparser) t
              WHERE EXISTS (SELECT 1 FROM pg_ts_config_map m
                             WHERE m.mapcfg = c.oid AND m.maptokentype = t.tokid)
              ORDER BY t.tokid)
FROM pg_ts_config c JOIN pg_namespace n ON n.oid = c.cfgnamespace
JOIN pg_ts_parser p ON p.oid = c.cfgparser JOIN pg_namespace pn ON pn.oid = p.prsnamespace
WHERE {_USER_NS} AND {_not_ext("pg_ts_config", "c.oid")}
"""

Q_ENUMS = f"""
SELECT t.oid, {_qn("n", "t.typname")},
       array_agg(e.enumlabel::text ORDER BY e.enumsortorder)
FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
JOIN pg_enum e ON e.enumtypid = t.oid
WHERE {_USER_NS} AND {_not_ext("pg_type", "t.oid")}
GROUP BY t.oid, n.nspname, t.typname
"""

Q_DOMAINS = f"""
SELECT t.oid, {_qn("n", "t.typname")}, format_type(t.typbasetype, t.typtypmod),
       CASE WHEN t.typcollation <> b.typcollation
            THEN {_qn("cn", "co.collname")} END,
       pg_get_expr(t.typdefaultbin, 0), t.typnotnull,
       ARRAY(SELECT ARRAY[quote_ident(k.conname), pg_get_constraintdef(k.oid)]
               FROM pg_constraint k WHERE k.contypid = t.oid AND k.contype = 'c'
              ORDER BY k.conname)
FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
JOIN pg_type b ON b.oid = t.typbasetype
LEFT JOIN pg_collation co ON co.oid = t.typcollation
LEFT JOIN pg_namespace cn ON cn.oid = co.collnamespace
WHERE t.typtype = 'd' AND {_USER_NS} AND {_not_ext("pg_type", "t.oid")}
"""

Q_COMPOSITES = f"""
SELECT t.oid, c.oid, {_qn("n", "t.typname")},
       ARRAY(SELECT ARRAY[quote_ident(a.attname), format_type(a.atttypid, a.atttypmod),
                          CASE WHEN a.attcollation <> at.typcollation
                               THEN {_qn("cn", "co.collname")} ELSE '' END]
               FROM pg_attribute a JOIN pg_type at ON at.oid = a.atttypid
               LEFT JOIN pg_collation co ON co.oid = a.attcollation
               LEFT JOIN pg_namespace cn ON cn.oid = co.collnamespace
              WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
              ORDER BY a.attnum)
FROM pg_type t JOIN pg_class c ON c.oid = t.typrelid AND c.relkind = 'c'
JOIN pg_namespace n ON n.oid = t.typnamespace
WHERE t.typtype = 'c' AND {_USER_NS} AND {_not_ext("pg_type", "t.oid")}
"""

Q_RANGES = f"""
SELECT t.oid, r.rngmultitypid, {_qn("n", "t.typname")}, format_type(r.rngsubtype, NULL),
       CASE WHEN NOT o.opcdefault THEN {_qn("on_", "o.opcname")} END,
       CASE WHEN r.rngcollation <> 0 AND r.rngcollation <> st.typcollation
            THEN {_qn("cn", "co.collname")} END,
       CASE WHEN r.rngcanonical <> 0 THEN r.rngcanonical::regproc::text END,
       CASE WHEN r.rngsubdiff <> 0 THEN r.rngsubdiff::regproc::text END,
       {_qn("mn", "mt.typname")}
FROM pg_range r JOIN pg_type t ON t.oid = r.rngtypid
JOIN pg_namespace n ON n.oid = t.typnamespace
JOIN pg_type st ON st.oid = r.rngsubtype
JOIN pg_opclass o ON o.oid = r.rngsubopc JOIN pg_namespace on_ ON on_.oid = o.opcnamespace
LEFT JOIN pg_collation co ON co.oid = r.rngcollation
LEFT JOIN pg_namespace cn ON cn.oid = co.collnamespace
JOIN pg_type mt ON mt.oid = r.rngmultitypid JOIN pg_namespace mn ON mn.oid = mt.typnamespace
WHERE {_USER_NS} AND {_not_ext("pg_type", "t.oid")}
"""

Q_FUNCTIONS = f"""
SELECT p.oid, p.oid::regprocedure::text,
       p.prokind::text, pg_get_function_result(p.oid), pg_get_function_arguments(p.oid),
       CASE WHEN p.prokind IN ('f', 'p', 'w') THEN pg_get_functiondef(p.oid) END,
       coalesce(array_to_string(p.proargnames, ','), ''), p.pronargdefaults,
       a.aggkind::text, a.aggtransfn::regproc::text, format_type(a.aggtranstype, NULL),
       nullif(a.aggfinalfn::regproc::text, '-'), a.aggfinalextra, a.aggfinalmodify::text,
       nullif(a.aggcombinefn::regproc::text, '-'), nullif(a.aggserialfn::regproc::text, '-'),
       nullif(a.aggdeserialfn::regproc::text, '-'), a.agginitval,
       nullif(a.aggmtransfn::regproc::text, '-'), nullif(a.aggminvtransfn::regproc::text, '-'),
       CASE WHEN a.aggmtranstype <> 0 THEN format_type(a.aggmtranstype, NULL) END,
       nullif(a.aggmfinalfn::regproc::text, '-'), a.aggmfinalextra,
       a.aggmfinalmodify::text, a.aggminitval,
       CASE WHEN a.aggsortop <> 0 THEN a.aggsortop::regoperator::text END,
       a.aggtransspace, a.aggmtransspace, p.proparallel::text, a.aggnumdirectargs,
       coalesce((SELECT string_agg(format_type(u.t, NULL), ',' ORDER BY u.n)
                   FROM unnest(p.proallargtypes, p.proargmodes) WITH ORDINALITY AS u(t, m, n)
                  WHERE u.m IN ('o', 'b', 't')), ''),
       p.prosqlbody IS NOT NULL
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
LEFT JOIN pg_aggregate a ON a.aggfnoid = p.oid
WHERE {_USER_NS} AND {_not_ext("pg_proc", "p.oid")}
  AND NOT EXISTS (SELECT 1 FROM pg_depend i WHERE i.classid = 'pg_proc'::regclass
                  AND i.objid = p.oid AND i.deptype = 'i')
"""

Q_SEQUENCES = f"""
SELECT c.oid, {_qn("n", "c.relname")},
       format_type(s.seqtypid, NULL), s.seqstart::text, s.seqincrement::text,
       s.seqmin::text, s.seqmax::text, s.seqcache::text, s.seqcycle,
       (SELECT quote_ident(tn.nspname) || '.' || quote_ident(tc.relname) || '.'
               || quote_ident(a.attname)
          FROM pg_depend d JOIN pg_class tc ON tc.oid = d.refobjid
          JOIN pg_namespace tn ON tn.oid = tc.relnamespace
          JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
         WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
           AND d.refclassid = 'pg_class'::regclass AND d.deptype = 'a' LIMIT 1),
       c.relpersistence::text
FROM pg_sequence s JOIN pg_class c ON c.oid = s.seqrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE {_USER_NS} AND {_not_ext("pg_class", "c.oid")}
  AND NOT EXISTS (SELECT 1 FROM pg_depend i WHERE i.classid = 'pg_class'::regclass
                  AND i.objid = c.oid AND i.deptype = 'i')
"""

Q_TABLES = f"""
SELECT c.oid, {_qn("n", "c.relname")}, c.relkind::text, c.relispartition,
       c.relpersistence::text,
       coalesce(c.reloptions, '{{}}') || ARRAY(SELECT 'toast.' || o FROM pg_class tc,
         unnest(tc.reloptions) o WHERE tc.oid = c.reltoastrelid), c.relrowsecurity,
       c.relforcerowsecurity, c.relreplident::text,
       (SELECT quote_ident(ri.relname) FROM pg_index x JOIN pg_class ri ON ri.oid = x.indexrelid
         WHERE x.indrelid = c.oid AND x.indisreplident),
       CASE WHEN c.relkind = 'p' THEN pg_get_partkeydef(c.oid) END,
       ARRAY(SELECT {_qn("pn", "pc.relname")} FROM pg_inherits h
               JOIN pg_class pc ON pc.oid = h.inhparent
               JOIN pg_namespace pn ON pn.oid = pc.relnamespace
              WHERE h.inhrelid = c.oid ORDER BY h.inhseqno),
       pg_get_expr(c.relpartbound, c.oid),
       c.reloftype <> 0, am.amname,
       ARRAY(SELECT quote_ident(a.attname) FROM pg_attribute a
              WHERE a.attrelid = c.oid AND a.attnum > 0 AND c.relkind = 'p'
                AND (a.attnum = ANY ((SELECT pt.partattrs FROM pg_partitioned_table pt
                                       WHERE pt.partrelid = c.oid)::int2[])
                     OR EXISTS (SELECT 1 FROM pg_depend d
                                 WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
                                   AND d.objsubid = a.attnum
                                   AND d.refclassid = 'pg_class'::regclass
                                   AND d.refobjid = c.oid AND d.refobjsubid = 0
                                   AND d.deptype = 'i'))
              ORDER BY a.attnum)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_am am ON am.oid = c.relam
WHERE c.relkind IN ('r', 'p') AND {_USER_NS} AND {_not_ext("pg_class", "c.oid")}
"""

Q_COLUMNS = f"""
SELECT c.oid, quote_ident(a.attname),
       a.attnum, format_type(a.atttypid, a.atttypmod), a.attnotnull,
       pg_get_expr(ad.adbin, ad.adrelid), a.attidentity::text, a.attgenerated::text,
       CASE WHEN a.attcollation <> t.typcollation
            THEN quote_ident(cn.nspname) || '.' || quote_ident(co.collname) END,
       a.attstattarget, CASE WHEN a.attstorage <> t.typstorage THEN a.attstorage::text END,
       a.attcompression::text, a.attislocal, ad.oid,
       CASE WHEN a.attidentity <> '' THEN (
         SELECT ARRAY[{_qn("sn", "sc.relname")}, s.seqstart::text, s.seqincrement::text,
                      s.seqmin::text, s.seqmax::text, s.seqcache::text, s.seqcycle::text,
                      (SELECT string_agg(CASE WHEN x.grantee = 0 THEN 'PUBLIC'
                                ELSE quote_ident(pg_get_userbyid(x.grantee)) END
                                || '|' || x.privilege_type || '|'
                                || CASE WHEN x.is_grantable THEN 'g' ELSE '' END, E'\n')
                         FROM aclexplode(coalesce(sc.relacl, acldefault('s', sc.relowner))) x
                        WHERE x.grantee <> sc.relowner),
                      obj_description(sc.oid, 'pg_class'),
                      CASE WHEN s.seqtypid <> a.atttypid THEN format_type(s.seqtypid, NULL) END]
           FROM pg_depend d JOIN pg_class sc ON sc.oid = d.objid
           JOIN pg_namespace sn ON sn.oid = sc.relnamespace
           JOIN pg_sequence s ON s.seqrelid = sc.oid
          WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
            AND d.refobjid = c.oid AND d.refobjsubid = a.attnum AND d.deptype = 'i') END,
       t.typstorage::text, format_type(a.atttypid, NULL)
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
LEFT JOIN pg_collation co ON co.oid = a.attcollation
LEFT JOIN pg_namespace cn ON cn.oid = co.collnamespace
WHERE c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
  AND {_USER_NS} AND {_not_ext("pg_class", "c.oid")}
"""

# What PostgreSQL's ALTER COLUMN ... TYPE without USING can convert (its assignment
# coercion, parse_coerce.c find_coercion_pathway): every type the tables' columns use,
# with the domains' base types and the arrays' element types they lead to, and the
# implicit and assignment casts from or to any of them.
Q_COERCION = f"""
WITH RECURSIVE used(oid) AS (
  SELECT DISTINCT a.atttypid FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
  JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped AND {_USER_NS}
  UNION
  SELECT x.oid FROM used u JOIN pg_type t ON t.oid = u.oid
  CROSS JOIN LATERAL (VALUES (t.typbasetype),
    (CASE WHEN t.typsubscript = 'array_subscript_handler'::regproc THEN t.typelem END)) x(oid)
  WHERE x.oid <> 0
)
SELECT 't', format_type(t.oid, NULL), t.typcategory::text,
       CASE WHEN t.typtype = 'd' THEN format_type(t.typbasetype, NULL) END,
       CASE WHEN t.typtype <> 'd' AND t.typsubscript = 'array_subscript_handler'::regproc
            THEN format_type(t.typelem, NULL) END
FROM used JOIN pg_type t ON t.oid = used.oid
UNION ALL
SELECT 'c', format_type(k.castsource, NULL), format_type(k.casttarget, NULL), NULL, NULL
FROM pg_cast k
WHERE k.castcontext IN ('a', 'i')
  AND (k.castsource IN (SELECT oid FROM used) OR k.casttarget IN (SELECT oid FROM used))
"""

Q_CONSTRAINTS = f"""
SELECT k.oid, k.conindid, {_qn("n", "c.relname")}, quote_ident(k.conname),
       k.contype::text, pg_get_constraintdef(k.oid),
       k.contype IN ('p', 'u', 'x') AND coalesce(
         (SELECT x.indisclustered FROM pg_index x WHERE x.indexrelid = k.conindid), false),
       k.conislocal AND k.conparentid = 0,
       CASE WHEN k.contype IN ('p', 'u', 'x') THEN
         (SELECT ic.reloptions FROM pg_class ic WHERE ic.oid = k.conindid) END
FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE k.contype IN ('p', 'u', 'c', 'f', 'x')
  AND (k.conislocal AND k.conparentid = 0 OR c.relispartition OR k.coninhcount > 0)
  AND {_USER_NS} AND {_not_ext("pg_class", "c.oid")}
"""

Q_INDEXES = f"""
SELECT ic.oid, {_qn("n", "ic.relname")}, {_qn("n", "tc.relname")},
       pg_get_indexdef(i.indexrelid), i.indisunique,
       ARRAY(SELECT ARRAY[a.attnum::text, a.attstattarget::text] FROM pg_attribute a
              WHERE a.attrelid = ic.oid AND a.attstattarget >= 0 ORDER BY a.attnum),
       i.indisclustered,
       (SELECT {_qn("pn", "pi.relname")} FROM pg_inherits h JOIN pg_class pi ON pi.oid = h.inhparent
          JOIN pg_namespace pn ON pn.oid = pi.relnamespace WHERE h.inhrelid = ic.oid),
       i.indisvalid, coalesce(ic.reloptions, '{{}}')
FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
JOIN pg_class tc ON tc.oid = i.indrelid
JOIN pg_namespace n ON n.oid = ic.relnamespace
WHERE tc.relkind IN ('r', 'p', 'm') AND {_USER_NS} AND {_not_ext("pg_class", "tc.oid")}
  AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid
                  AND k.contype IN ('p', 'u', 'x'))
"""

Q_VIEWS = f"""
SELECT c.oid, {_qn("n", "c.relname")}, c.relkind::text,
       pg_get_viewdef(c.oid),
       coalesce(c.reloptions, '{{}}') || ARRAY(SELECT 'toast.' || o FROM pg_class tc,
         unnest(tc.reloptions) o WHERE tc.oid = c.reltoastrelid)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('v', 'm') AND {_USER_NS} AND {_not_ext("pg_class", "c.oid")}
"""

# Extended statistics objects (CREATE STATISTICS), printed by the server, and their
# statistics target (ALTER STATISTICS ... SET STATISTICS; -1: the default).
Q_STATISTICS = f"""
SELECT s.oid, {_qn("n", "s.stxname")}, {_qn("cn", "c.relname")},
       pg_get_statisticsobjdef(s.oid), s.stxstattarget
FROM pg_statistic_ext s JOIN pg_namespace n ON n.oid = s.stxnamespace
JOIN pg_class c ON c.oid = s.stxrelid JOIN pg_namespace cn ON cn.oid = c.relnamespace
WHERE {_USER_NS} AND {_not_ext("pg_statistic_ext", "s.oid")}
"""

# Publications (logical replication): FOR ALL TABLES, what they publish, and whether a
# partition's changes are published as its root's.
Q_PUBLICATIONS = """
SELECT p.oid, quote_ident(p.pubname), p.puballtables,
       array_to_string(ARRAY(SELECT w FROM unnest(ARRAY[
         CASE WHEN p.pubinsert THEN 'insert' END, CASE WHEN p.pubupdate THEN 'update' END,
         CASE WHEN p.pubdelete THEN 'delete' END,
         CASE WHEN p.pubtruncate THEN 'truncate' END]) w WHERE w IS NOT NULL), ', '),
       p.pubviaroot
FROM pg_publication p
"""

# A publication's tables, each with its row filter and its column list (in the list's
# order), and its schemas (FOR TABLES IN SCHEMA).
Q_PUBLICATION_TABLES = f"""
SELECT r.oid, quote_ident(p.pubname), {_qn("n", "c.relname")},
       pg_get_expr(r.prqual, r.prrelid),
       ARRAY(SELECT quote_ident(a.attname)
               FROM unnest(r.prattrs::int2[]) WITH ORDINALITY u(num, i)
               JOIN pg_attribute a ON a.attrelid = r.prrelid AND a.attnum = u.num
              ORDER BY u.i)
FROM pg_publication_rel r JOIN pg_publication p ON p.oid = r.prpubid
JOIN pg_class c ON c.oid = r.prrelid JOIN pg_namespace n ON n.oid = c.relnamespace
"""
Q_PUBLICATION_SCHEMAS = """
SELECT s.oid, quote_ident(p.pubname), quote_ident(n.nspname)
FROM pg_publication_namespace s JOIN pg_publication p ON p.oid = s.pnpubid
JOIN pg_namespace n ON n.oid = s.pnnspid
"""

Q_TRIGGERS = f"""
SELECT g.oid, g.tgconstraint, {_qn("n", "c.relname")}, quote_ident(g.tgname),
       pg_get_triggerdef(g.oid), g.tgenabled::text
FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE NOT g.tgisinternal AND g.tgparentid = 0 AND {_USER_NS}
  AND {_not_ext("pg_class", "c.oid")}
"""

Q_RULES = f"""
SELECT r.oid, {_qn("n", "c.relname")}, quote_ident(r.rulename), pg_get_ruledef(r.oid),
       r.ev_enabled::text
FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE r.rulename <> '_RETURN' AND {_USER_NS} AND {_not_ext("pg_class", "c.oid")}
"""

Q_POLICIES = f"""
SELECT p.oid, {_qn("n", "c.relname")}, quote_ident(p.polname), p.polpermissive,
       p.polcmd::text,
       ARRAY(SELECT CASE WHEN r = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(r)) END
               FROM unnest(p.polroles) r ORDER BY 1),
       pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid)
FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE {_USER_NS} AND {_not_ext("pg_class", "c.oid")}
"""

Q_EVENT_TRIGGERS = f"""
SELECT et.oid, quote_ident(et.evtname), et.evtevent, et.evtfoid::regproc::text,
       et.evtenabled::text, coalesce(et.evttags, '{{}}')
FROM pg_event_trigger et WHERE {_not_ext("pg_event_trigger", "et.oid")}
"""

# Privileges as granted, with the object's defaults filled in and the owner's own left out:
# the owner differs between scratch and target only by who loaded the file.
_ACL_ROW = """
SELECT {kind}, {name}, {node_cat}, {node_oid},
       CASE WHEN x.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(x.grantee)) END
         || '|' || x.privilege_type || {col} || '|' || CASE WHEN x.is_grantable THEN 'g' ELSE ''
         END
FROM {source}, aclexplode(coalesce({acl}, acldefault({deftype}, {owner}))) x
WHERE x.grantee <> {owner}
"""

Q_ACLS = "\nUNION ALL\n".join(
    _ACL_ROW.format(**parts)
    for parts in (
        {
            "kind": "CASE WHEN c.relkind = 'S' THEN 'SEQUENCE' ELSE 'TABLE' END",
            "name": _qn("n", "c.relname"),
            "node_cat": "'pg_class'",
            "node_oid": "c.oid",
            "col": "''",
            "source": "pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace",
            "acl": "c.relacl",
            "deftype": "CASE WHEN c.relkind = 'S' THEN 's' ELSE 'r' END::\"char\"",
            "owner": "c.relowner",
        },
        {
            "kind": "'TABLE'",
            "name": _qn("n", "c.relname"),
            "node_cat": "'pg_class'",
            "node_oid": "c.oid",
            "col": "'(' || quote_ident(a.attname) || ')'",
            "source": "pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace",
            "acl": "a.attacl",
            "deftype": "'c'::\"char\"",
            "owner": "c.relowner",
        },
        {
            "kind": "'SCHEMA'",
            "name": "quote_ident(n.nspname)",
            "node_cat": "'pg_namespace'",
            "node_oid": "n.oid",
            "col": "''",
            "source": "pg_namespace n",
            "acl": "n.nspacl",
            "deftype": "'n'::\"char\"",
            "owner": "n.nspowner",
        },
        {
            "kind": "CASE WHEN p.prokind = 'p' THEN 'PROCEDURE' ELSE 'FUNCTION' END",
            "name": "p.oid::regprocedure::text",
            "node_cat": "'pg_proc'",
            "node_oid": "p.oid",
            "col": "''",
            "source": "pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace",
            "acl": "p.proacl",
            "deftype": "'f'::\"char\"",
            "owner": "p.proowner",
        },
        {
            "kind": "CASE WHEN t.typtype = 'd' THEN 'DOMAIN' ELSE 'TYPE' END",
            "name": _qn("n", "t.typname"),
            "node_cat": "'pg_type'",
            "node_oid": "t.oid",
            "col": "''",
            "source": "pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace",
            "acl": "t.typacl",
            "deftype": "'T'::\"char\"",
            "owner": "t.typowner",
        },
    )
)
# Restrict each branch to user objects (appended per branch by the caller below).
_ACL_FILTERS = (
    f"c.relkind IN ('r', 'p', 'v', 'm', 'S') AND {_USER_NS} AND {_not_ext('pg_class', 'c.oid')}",
    f"a.attacl IS NOT NULL AND a.attnum > 0 AND NOT a.attisdropped AND {_USER_NS}"
    f" AND {_not_ext('pg_class', 'c.oid')}",
    f"{_USER_NS} AND {_not_ext('pg_namespace', 'n.oid')}",
    f"{_USER_NS} AND {_not_ext('pg_proc', 'p.oid')}",
    f"t.typtype IN ('e', 'd', 'c', 'r') AND {_USER_NS} AND {_not_ext('pg_type', 't.oid')}"
    " AND NOT EXISTS (SELECT 1 FROM pg_class r WHERE r.oid = t.typrelid AND r.relkind <> 'c')",
)
Q_ACLS = "\nUNION ALL\n".join(
    part.strip() + f"\n  AND {flt}"
    for part, flt in zip(Q_ACLS.split("\nUNION ALL\n"), _ACL_FILTERS, strict=True)
)

Q_DEFAULT_ACLS = """
SELECT d.oid, CASE WHEN d.defaclrole = (SELECT oid FROM pg_roles WHERE rolname = current_user)
            THEN '' ELSE quote_ident(pg_get_userbyid(d.defaclrole)) END,
       coalesce(quote_ident(n.nspname), ''), d.defaclobjtype::text,
       ARRAY(SELECT CASE WHEN x.grantee = 0 THEN 'PUBLIC'
                         ELSE quote_ident(pg_get_userbyid(x.grantee)) END
                    || '|' || x.privilege_type || '|' || CASE WHEN x.is_grantable THEN 'g'
                    ELSE '' END
               FROM aclexplode(d.defaclacl) x WHERE x.grantee <> d.defaclrole ORDER BY 1)
FROM pg_default_acl d LEFT JOIN pg_namespace n ON n.oid = d.defaclnamespace
"""

# Who owns what: planned only under the ownership policy ``manage`` (kept private, so
# fingerprints never depend on who loaded the scratch).
Q_OWNERS = """
SELECT 'pg_class', c.oid, quote_ident(pg_get_userbyid(c.relowner)) FROM pg_class c
 WHERE c.oid >= 16384 AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
UNION ALL SELECT 'pg_proc', p.oid, quote_ident(pg_get_userbyid(p.proowner)) FROM pg_proc p
 WHERE p.oid >= 16384
UNION ALL SELECT 'pg_type', t.oid, quote_ident(pg_get_userbyid(t.typowner)) FROM pg_type t
 WHERE t.oid >= 16384 AND t.typtype IN ('e', 'd', 'c', 'r')
UNION ALL SELECT 'pg_namespace', n.oid, quote_ident(pg_get_userbyid(n.nspowner))
  FROM pg_namespace n WHERE n.oid >= 16384
UNION ALL SELECT 'pg_collation', k.oid, quote_ident(pg_get_userbyid(k.collowner))
  FROM pg_collation k WHERE k.oid >= 16384
UNION ALL SELECT 'pg_event_trigger', e.oid, quote_ident(pg_get_userbyid(e.evtowner))
  FROM pg_event_trigger e
UNION ALL SELECT 'pg_statistic_ext', x.oid, quote_ident(pg_get_userbyid(x.stxowner))
  FROM pg_statistic_ext x WHERE x.oid >= 16384
UNION ALL SELECT 'pg_ts_dict', d.oid, quote_ident(pg_get_userbyid(d.dictowner))
  FROM pg_ts_dict d WHERE d.oid >= 16384
UNION ALL SELECT 'pg_ts_config', c.oid, quote_ident(pg_get_userbyid(c.cfgowner))
  FROM pg_ts_config c WHERE c.oid >= 16384
UNION ALL SELECT 'pg_publication', p.oid, quote_ident(pg_get_userbyid(p.pubowner))
  FROM pg_publication p
"""

# Every comment, named as COMMENT ON names its object.
Q_COMMENTS = """
SELECT d.classoid::regclass::text, d.objoid, d.objsubid, o.type, o.identity, d.description
FROM pg_description d, pg_identify_object(d.classoid, d.objoid, d.objsubid) o
WHERE d.objoid >= 16384
  AND NOT EXISTS (SELECT 1 FROM pg_depend e WHERE e.classid = d.classoid
                  AND e.objid = d.objoid AND e.deptype = 'e')
UNION ALL
SELECT 'pg_namespace', n.oid, 0, 'schema', quote_ident(n.nspname), d.description
FROM pg_description d JOIN pg_namespace n
  ON d.classoid = 'pg_namespace'::regclass AND n.oid = d.objoid
WHERE n.oid < 16384 AND n.nspname = 'public'
"""

# Comments on an extension's members, with the extension: the planner sets them as the
# desired file has them (the extension's own script may set some: a direct load has those
# too). Only on members owned by the extension's owner (who creates it, and who may set
# them): a trusted extension's members belong to the bootstrap superuser, whoever created
# it, so their comments are the script's own, and a plan could not set them anyway.
_OWNERS = {
    "pg_proc": "proowner",
    "pg_type": "typowner",
    "pg_class": "relowner",
    "pg_language": "lanowner",
    "pg_operator": "oprowner",
    "pg_opclass": "opcowner",
    "pg_opfamily": "opfowner",
    "pg_ts_dict": "dictowner",
    "pg_ts_config": "cfgowner",
    "pg_collation": "collowner",
    "pg_conversion": "conowner",
    "pg_namespace": "nspowner",
    "pg_foreign_data_wrapper": "fdwowner",
    "pg_foreign_server": "srvowner",
}
_OWNER_CASES = "\n".join(
    f"  WHEN '{catalog}'::regclass THEN (SELECT {column} FROM {catalog} WHERE oid = d.objoid)"
    for catalog, column in _OWNERS.items()
)
Q_MEMBER_COMMENTS = f"""
SELECT quote_ident(x.extname), d.objsubid, o.type, o.identity, d.description
FROM pg_description d
JOIN pg_depend e ON e.classid = d.classoid AND e.objid = d.objoid AND e.deptype = 'e'
  AND e.refclassid = 'pg_extension'::regclass
JOIN pg_extension x ON x.oid = e.refobjid,
LATERAL pg_identify_object(d.classoid, d.objoid, d.objsubid) o,
LATERAL (SELECT CASE d.classoid
{_OWNER_CASES}
  END AS owner) w
WHERE w.owner = x.extowner
"""


def script_comments(conn: Any, schema: Schema) -> None:
    """What each extension's own creation comments (its control file's comment on the
    extension, its script's on its members), under ``schema["_scriptComments"]``: the
    comments a plan that creates the extension finds there without setting them. Read
    on the scratch only: each extension is dropped and created again (its desired
    schema and version) in a savepoint rolled back at once, so the desired file's own
    comments on it (set, changed or removed after the extension) are not taken for the
    script's."""
    found: dict[str, dict[str, str]] = {}
    with conn.cursor() as cur:
        versions = dict(
            _rows(cur, "SELECT quote_ident(extname), extversion FROM pg_catalog.pg_extension")
        )
        for name, x in sorted(schema["extension"].items()):
            try:
                comments = _created_comments(conn, cur, name, x["schema"], versions[name])
            except psycopg.Error:
                continue  # not created again here (the load made it): none known
            if comments:
                found[name] = comments
    schema["_scriptComments"] = found


def _created_comments(conn: Any, cur: Any, name: str, nsp: str, version: str) -> dict[str, str]:
    """The comments extension ``name`` has just after its creation, read in a savepoint
    that is always rolled back."""
    with conn.transaction(force_rollback=True):
        cur.execute(f"DROP EXTENSION {name} CASCADE".encode())
        create = f"CREATE EXTENSION {name} WITH SCHEMA {nsp} VERSION {_lit(version)}"
        cur.execute(create.encode())
        comments = {
            comment_target(objtype, identity): text
            for ext, _, objtype, identity, text in _rows(cur, Q_MEMBER_COMMENTS)
            if ext == name
        }
        own = _rows(
            cur,
            "SELECT d.description FROM pg_catalog.pg_description d"
            " JOIN pg_catalog.pg_extension x ON d.objoid = x.oid"
            " AND d.classoid = 'pg_catalog.pg_extension'::regclass"
            f" WHERE quote_ident(x.extname) = {_lit(name)}",
        )
        if own:
            comments[f"EXTENSION {name}"] = own[0][0]
    return comments


_COMMENT_WORDS = {
    "table column": "COLUMN",
    "view column": "COLUMN",
    "materialized view column": "COLUMN",
    "composite type column": "COLUMN",
    "composite type": "TYPE",
    "table constraint": "CONSTRAINT",
    "domain constraint": "CONSTRAINT",
    "statistics object": "STATISTICS",
}


def comment_target(objtype: str, identity: str) -> str:
    """What follows COMMENT ON for an object pg_identify_object named so."""
    word = _COMMENT_WORDS.get(objtype, objtype.upper())
    if objtype == "domain constraint":
        name, _, dom = identity.partition(" on ")
        return f"CONSTRAINT {name} ON DOMAIN {dom}"
    if objtype in ("table constraint", "trigger", "policy"):
        name, _, rel = identity.partition(" on ")
        return f"{word} {name} ON {rel}"
    return f"{word} {identity}"


def _rows(cur: Any, query: str) -> list[tuple[Any, ...]]:
    cur.execute(query)
    rows: list[tuple[Any, ...]] = cur.fetchall()
    return rows


def _aggregate_sql(name: str, args: str, r: tuple[Any, ...]) -> str:
    (
        kind,
        sfunc,
        stype,
        ffunc,
        fextra,
        fmod,
        combine,
        serial,
        deserial,
        init,
        msfunc,
        minv,
        mstype,
        mffunc,
        mfextra,
        mfmod,
        minit,
        sortop,
        space,
        mspace,
        parallel,
    ) = r
    opts = [f"SFUNC = {sfunc}", f"STYPE = {stype}"]
    if space:
        opts.append(f"SSPACE = {space}")
    if ffunc:
        opts.append(f"FINALFUNC = {ffunc}")
        if fextra:
            opts.append("FINALFUNC_EXTRA")
        opts.append(f"FINALFUNC_MODIFY = {_MODIFY[fmod]}")
    for word, value in (
        ("COMBINEFUNC", combine),
        ("SERIALFUNC", serial),
        ("DESERIALFUNC", deserial),
    ):
        if value:
            opts.append(f"{word} = {value}")
    if init is not None:
        opts.append("INITCOND = " + _lit(init))
    if msfunc:
        opts += [f"MSFUNC = {msfunc}", f"MINVFUNC = {minv}", f"MSTYPE = {mstype}"]
        if mspace:
            opts.append(f"MSSPACE = {mspace}")
        if mffunc:
            opts.append(f"MFINALFUNC = {mffunc}")
            if mfextra:
                opts.append("MFINALFUNC_EXTRA")
            opts.append(f"MFINALFUNC_MODIFY = {_MODIFY[mfmod]}")
        if minit is not None:
            opts.append("MINITCOND = " + _lit(minit))
    if sortop:
        opts.append(f"SORTOP = {sortop.split('(')[0]}")
    if parallel != "u":
        opts.append("PARALLEL = " + {"s": "SAFE", "r": "RESTRICTED"}[parallel])
    if kind == "h":
        opts.append("HYPOTHETICAL")
    return (
        f"CREATE AGGREGATE {name.split('(')[0]}({args or '*'}) (\n  " + ",\n  ".join(opts) + "\n)"
    )


_MODIFY = {"r": "READ_ONLY", "s": "SHAREABLE", "w": "READ_WRITE"}


def _with_index_options(definition: str, options: list[str]) -> str:
    """A primary key's or unique constraint's definition with its index's storage
    parameters (``WITH (fillfactor='60')``) where ``ADD CONSTRAINT`` takes them.

    ``pg_get_constraintdef`` leaves them out for these two (an exclusion constraint's
    has them), so a constraint created ``WITH (...)`` was added again without: the
    options were lost silently, and a change of them alone was never planned. They go
    before the ``DEFERRABLE`` clause.
    """
    tail = ""
    for suffix in (" DEFERRABLE INITIALLY DEFERRED", " DEFERRABLE"):
        if definition.endswith(suffix):
            definition, tail = definition.removesuffix(suffix), suffix
            break
    params = ", ".join(
        f"{name}={_lit(value)}" for name, value in (o.split("=", 1) for o in options)
    )
    return f"{definition} WITH ({params}){tail}"


def _without_index_options(definition: str, options: list[str]) -> str:
    """An exclusion constraint's definition without the ``WITH (...)`` of its index's
    storage parameters (``pg_get_constraintdef`` prints them, each value quoted or not);
    unchanged where they are not found as printed."""
    names = [o.split("=", 1)[0] for o in options]
    clause = r" WITH \(" + ", ".join(re.escape(n) + r"=(?:'(?:[^']|'')*'|[^,)']*)" for n in names)
    found = list(re.finditer(clause + r"\)", definition))
    if not found:
        return definition
    last = found[-1]
    return definition[: last.start()] + definition[last.end() :]


_STORAGE = {"p": "PLAIN", "e": "EXTERNAL", "m": "MAIN", "x": "EXTENDED"}


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def inspect(conn: Any, helper: Any = None) -> Schema:
    """Read the whole user schema in the connection's current transaction.

    The caller owns the transaction (read-only, repeatable read on the target;
    the loading transaction on a scratch database). The census of what was
    not taken in is under ``schema["_meta"]["unmanaged"]``.

    ``helper``: another session of the same database, idle, that sees what ``conn``
    sees (a scratch's, once its load is committed and nothing else writes it): it
    reads some of the queries ahead (:class:`ReadAhead`) while ``conn`` reads the
    others, so the server runs two of them at once. The result is the same.
    """
    schema: Schema = {k: {} for k in KINDS}
    nodes = graph.NodeMap()
    with conn.cursor() as plain, ReadAhead.over(plain, helper) as cur:
        cur.execute("SET LOCAL search_path = pg_catalog")
        _read_namespaces(cur, schema, nodes)
        _read_types(cur, schema, nodes)
        _read_functions(cur, schema, nodes)
        _read_relations(cur, schema, nodes)
        schema["_coercion"] = _read_coercion(cur)
        _read_dependents(cur, schema, nodes)
        _read_privileges(cur, schema, nodes)
        _read_comments(cur, schema, nodes)
        owners: dict[str, str] = {}
        for catalog, oid, owner in _rows(cur, Q_OWNERS):
            node = nodes.get(catalog, oid)
            if node is not None and (catalog != "pg_type" or node.split(":", 1)[0] != "table"):
                owners[node] = owner
        schema["_owners"] = owners
        role = _rows(cur, "SELECT quote_ident(current_user)")[0][0]
        t0 = time.perf_counter()
        schema["_deps"] = graph.dependencies(cur, nodes)
        # table node -> {node: [columns]}: the table depends on it only through those
        # columns' defaults (or generation expressions).
        schema["_defaultDeps"] = nodes.default_edges
        # table node -> column -> {node using the column: deptype}.
        schema["_columnDeps"] = nodes.column_edges
        unmanaged, held = graph.census(cur, nodes)
        schema["_meta"] = {
            "unmanaged": unmanaged,
            "heldBy": held,
            "role": role,
            "censusSeconds": time.perf_counter() - t0,
        }
    return schema


# The queries of one inspection a helper session reads ahead (see :func:`inspect`), in
# the order the inspection uses them: the heaviest of those it reads after the columns
# (the columns' own query, the heaviest, is the first session's, run meanwhile). At 1,000
# tables the server spends about as long on these as on all the others.
READ_AHEAD = (Q_CONSTRAINTS, Q_INDEXES, Q_COERCION, Q_ACLS, Q_COMMENTS, Q_OWNERS, *graph.READ_AHEAD)


class ReadAhead:
    """A cursor of the inspecting session whose :data:`READ_AHEAD` queries a helper
    session runs, on a thread of its own, from the start of the inspection: asked for
    one of them, it hands that query's rows (waiting for them if need be) instead of
    running it. The helper first takes on the inspecting session's own settings (those
    its session set, ``SET``: a desired file's ``SET DateStyle`` or
    ``quote_all_identifiers`` print defaults and names as they print on the inspecting
    session), and its ``search_path`` is ``pg_catalog`` as the inspection's is. Whatever
    the helper could not run (a setting it could not take, an error) the inspecting
    session runs itself, as it does without a helper: any error is its own."""

    def __init__(self, cur: Any, helper: Any, settings: list[tuple[str, str]]) -> None:
        self._cur = cur
        self._helper = helper
        self._ahead: dict[str, Future[list[tuple[Any, ...]]]] = {q: Future() for q in READ_AHEAD}
        self._rows: list[tuple[Any, ...]] | None = None
        self._stop = False
        self._thread = threading.Thread(target=self._run, args=(settings,), name="read-ahead")
        self._thread.start()

    @classmethod
    @contextlib.contextmanager
    def over(cls, cur: Any, helper: Any) -> Iterator[Any]:
        """``cur`` itself without a helper; else a :class:`ReadAhead` over it, whose
        helper is stopped (its running query cancelled) and joined on the way out."""
        if helper is None:
            yield cur
            return
        cur.execute(
            "SELECT name, current_setting(name) FROM pg_catalog.pg_settings"
            " WHERE source = 'session' AND name <> 'search_path'"
        )
        ahead = cls(cur, helper, [(str(n), str(v)) for n, v in cur.fetchall()])
        try:
            yield ahead
        finally:
            ahead._close()

    def _run(self, settings: list[tuple[str, str]]) -> None:
        pending = list(self._ahead.values())
        try:
            with self._helper.transaction(force_rollback=True), self._helper.cursor() as cur:
                for name, value in settings:
                    cur.execute("SELECT pg_catalog.set_config(%s, %s, true)", (name, value))
                cur.execute("SET LOCAL search_path = pg_catalog")
                for query, future in self._ahead.items():
                    if self._stop:
                        break
                    cur.execute(query)
                    future.set_result(cur.fetchall())
                    pending.remove(future)
        except Exception as exc:  # each query not read here is read by the inspection
            for future in pending:
                future.set_exception(exc)
        finally:
            for future in pending:
                if not future.done():
                    future.cancel()

    def _close(self) -> None:
        self._stop = True
        if self._thread.is_alive():
            with contextlib.suppress(Exception):
                self._helper.cancel_safe(timeout=5.0)
        self._thread.join()

    def execute(self, query: Any, params: Any = None) -> ReadAhead:
        future = self._ahead.pop(query, None) if params is None else None
        self._rows = None
        if future is not None:
            with contextlib.suppress(Exception):  # read here instead: the error is its own
                self._rows = future.result()
                return self
        self._cur.execute(query, params)
        return self

    def fetchall(self) -> list[tuple[Any, ...]]:
        if self._rows is None:
            rows: list[tuple[Any, ...]] = self._cur.fetchall()
            return rows
        rows, self._rows = self._rows, None
        return rows


def _read_coercion(cur: Any) -> dict[str, Any]:
    """The column types' categories, domain bases and array elements, and the implicit
    and assignment casts between them and others (:data:`Q_COERCION`): what a type
    change without ``USING`` converts by. Private: it describes the server, not the
    schema."""
    types: dict[str, list[str | None]] = {}
    casts: list[list[str]] = []
    for kind, name, second, base, elem in _rows(cur, Q_COERCION):
        if kind == "t":
            types[name] = [second, base, elem]
        else:
            casts.append([name, second])
    return {"types": types, "casts": sorted(casts)}


def _read_namespaces(cur: Any, schema: Schema, nodes: graph.NodeMap) -> None:
    for oid, name in _rows(cur, Q_SCHEMAS):
        schema["schema"][name] = {}
        nodes.add("pg_namespace", oid, f"schema:{name}")
    for oid, name, nsp in _rows(cur, Q_EXTENSIONS):
        schema["extension"][name] = {"schema": nsp}
        nodes.add("pg_extension", oid, f"extension:{name}")
    for oid, name, provider, deterministic, collate, ctype, icu in _rows(cur, Q_COLLATIONS):
        schema["collation"][name] = {
            "provider": provider,
            "deterministic": bool(deterministic),
            "collate": collate,
            "ctype": ctype,
            "icuLocale": icu,
        }
        nodes.add("pg_collation", oid, f"collation:{name}")
    for oid, name, template, options in _rows(cur, Q_TS_DICTS):
        schema["ts_dict"][name] = {"template": template, "options": options}
        nodes.add("pg_ts_dict", oid, f"ts_dict:{name}")
    for oid, name, parser, mapping in _rows(cur, Q_TS_CONFIGS):
        schema["ts_config"][name] = {"parser": parser, "mapping": [list(m) for m in mapping]}
        nodes.add("pg_ts_config", oid, f"ts_config:{name}")


def _read_types(cur: Any, schema: Schema, nodes: graph.NodeMap) -> None:
    for oid, name, labels in _rows(cur, Q_ENUMS):
        schema["enum"][name] = {"labels": list(labels)}
        nodes.add("pg_type", oid, f"enum:{name}")
    for oid, name, base, coll, default, notnull, checks in _rows(cur, Q_DOMAINS):
        schema["domain"][name] = {
            "type": base,
            "collation": coll,
            "default": default,
            "notNull": bool(notnull),
            "checks": {c[0]: c[1] for c in checks},
        }
        nodes.add("pg_type", oid, f"domain:{name}")
    for oid, reloid, name, attrs in _rows(cur, Q_COMPOSITES):
        schema["ctype"][name] = {"attributes": [list(a) for a in attrs]}
        nodes.add("pg_type", oid, f"ctype:{name}")
        nodes.add("pg_class", reloid, f"ctype:{name}")
    for oid, multi, name, sub, opclass, coll, canon, subdiff, mname in _rows(cur, Q_RANGES):
        schema["range"][name] = {
            "subtype": sub,
            "opclass": opclass,
            "collation": coll,
            "canonical": canon,
            "subdiff": subdiff,
            "multirange": mname,
        }
        nodes.add("pg_type", oid, f"range:{name}")
        nodes.add("pg_type", multi, f"range:{name}")
    nodes.read_type_aliases(cur)


def _read_functions(cur: Any, schema: Schema, nodes: graph.NodeMap) -> None:
    for row in _rows(cur, Q_FUNCTIONS):
        oid, ident, kind, result, args, definition, argnames, ndefaults = row[:8]
        if kind == "a":
            definition = _aggregate_sql(ident, args, (*row[8:28], row[28]))
            if row[8] == "o" or row[8] == "h":  # ordered-set: direct args before ORDER BY
                pass
        schema["function"][ident] = {
            "kind": kind,
            "result": result,
            "args": args,
            "def": definition.strip(),
            "_argnames": argnames,
            "_defaults": ndefaults,
            # The types of its OUT (INOUT, TABLE) arguments: its result's row type.
            "_outTypes": row[-2],
            # A SQL-standard body (BEGIN ATOMIC, RETURN): parsed once, at its creation,
            # against the types it uses then (a composite's attributes by position).
            "_sqlBody": bool(row[-1]),
        }
        nodes.add("pg_proc", oid, f"function:{ident}")


def _read_relations(cur: Any, schema: Schema, nodes: graph.NodeMap) -> None:
    for oid, name, typ, start, inc, mn, mx, cache, cycle, owned, persist in _rows(cur, Q_SEQUENCES):
        schema["sequence"][name] = {
            "type": typ,
            "start": start,
            "increment": inc,
            "min": mn,
            "max": mx,
            "cache": cache,
            "cycle": bool(cycle),
            "ownedBy": owned,
            "unlogged": persist == "u",
        }
        nodes.add("pg_class", oid, f"sequence:{name}")
    tables_by_oid: dict[int, str] = {}
    for row in _rows(cur, Q_TABLES):
        (
            oid,
            name,
            kind,
            is_partition,
            persist,
            reloptions,
            rls,
            force,
            replident,
            replindex,
            partkey,
            parents,
            bound,
            typed,
            am,
            key_columns,
        ) = row
        if typed:
            raise PlanError(
                f"table {name} is a typed table (OF type); Ptah does not plan those", "Unsupported"
            )
        table: dict[str, Any] = {"columns": {}}
        if persist == "u":
            table["unlogged"] = True
        if reloptions:
            table["reloptions"] = sorted(reloptions)
            table["_reloptions"] = list(reloptions)  # as written: pg_dump prints this order
        if rls or force:
            table["rls"] = {"enabled": bool(rls), "forced": bool(force)}
        if replident != "d":
            table["replicaIdentity"] = {
                "n": "NOTHING",
                "f": "FULL",
                "i": f"USING INDEX {replindex}",
            }[replident]
        if partkey:
            table["partitionBy"] = partkey
            # The columns its partition key reads (as a column or in an expression): the
            # server changes neither their type nor their collation.
            table["_partitionColumns"] = list(key_columns)
        if is_partition:
            table["partitionOf"] = parents[0]
            table["bound"] = bound
        elif parents:
            table["inherits"] = list(parents)
        if am and am != "heap":
            table["accessMethod"] = am
        schema["table"][name] = table
        tables_by_oid[oid] = name
        nodes.add("pg_class", oid, f"table:{name}")
    for row in _rows(cur, Q_COLUMNS):
        (
            reloid,
            col,
            num,
            typ,
            notnull,
            default,
            ident,
            gen,
            coll,
            stat,
            storage,
            compression,
            local,
            adoid,
            identity_seq,
            typstorage,
            typ_name,
        ) = row
        table = schema["table"][tables_by_oid[reloid]]
        column: dict[str, Any] = {
            "_n": num,
            "type": typ,
            "notNull": bool(notnull),
            "default": default,
            "identity": ident or "",
            "generated": gen or "",
            "collation": coll,
        }
        if stat is not None and stat >= 0:
            column["statistics"] = stat
        if storage:
            column["storage"] = _STORAGE[storage]
        # The type's own: what a column's storage goes back to (PostgreSQL 15 has no
        # SET STORAGE DEFAULT). Private: the type says it already.
        column["_typeStorage"] = _STORAGE[typstorage]
        column["_typ"] = typ_name  # without its modifier: what casts are between
        if compression:
            column["compression"] = {"p": "pglz", "l": "lz4"}.get(compression, compression)
        if not local:
            column["_inherited"] = True
        if identity_seq:
            name_, start, inc, mn, mx, cache, cycle, acl, comment, seqtype = identity_seq
            column["identitySequence"] = {
                "name": name_,
                "start": start,
                "increment": inc,
                "min": mn,
                "max": mx,
                "cache": cache,
                "cycle": cycle == "true",
            }
            if acl:
                # Its grants (GRANT ... ON ALL SEQUENCES reaches it), the owner's left out;
                # the grantees' order as the ACL holds them (see _read_privileges).
                entries = acl.split("\n")
                column["identitySequence"]["acl"] = sorted(entries)
                column["identitySequence"]["_order"] = list(
                    dict.fromkeys(e.split("|", 1)[0] for e in entries)
                )
            if seqtype is not None:
                # A sequence of another type than its column's (CREATE TABLE ... LIKE
                # copies an identity under a bigint sequence): pg_dump prints its bounds.
                column["identitySequence"]["type"] = seqtype
            if comment is not None:
                column["identitySequence"]["comment"] = comment
        table["columns"][col] = column
        nodes.columns[(reloid, num)] = col
        if adoid is not None:
            nodes.add("pg_attrdef", adoid, f"table:{tables_by_oid[reloid]}")
            nodes.defaults[adoid] = col
    for row in _rows(cur, Q_CONSTRAINTS):
        oid, indid, rel, name, kind, definition, clustered, own, options = row
        bare = definition
        if options and kind == "x":
            bare = _without_index_options(definition, list(options))
        elif options:
            definition = _with_index_options(definition, list(options))
        written, definition = definition, _options_sorted(definition, list(options or []))
        if not own:
            # A partition's copy of its parent's constraint: its own once detached; a
            # child's check from its parents only (not named in its CREATE TABLE).
            if rel in schema["table"]:  # not a foreign table's (the census names those)
                schema["table"][rel].setdefault("_clones", {})[name] = definition
            continue
        key = f"{rel}.{name}"
        schema["constraint"][key] = {"table": rel, "name": name, "type": kind, "def": definition}
        if written != definition:
            schema["constraint"][key]["_def"] = written  # the index's options as written
        if kind in ("p", "u", "x"):
            # Its index's storage parameters, and the definition without them: a change
            # of those alone is an ALTER INDEX ... SET, not a new constraint.
            schema["constraint"][key]["_options"] = list(options or [])
            schema["constraint"][key]["_bare"] = bare
        if clustered:
            schema["constraint"][key]["clustered"] = True
        nodes.add("pg_constraint", oid, f"constraint:{key}")
        if indid and kind in ("p", "u", "x"):  # a foreign key's conindid is the referenced one
            nodes.add("pg_class", indid, f"constraint:{key}")
    for row in _rows(cur, Q_INDEXES):
        oid, name, table, definition, unique, stats, clustered, parent, valid, options = row
        definition = definition.replace(" ON ONLY ", " ON ", 1)
        index: dict[str, Any] = {
            "table": table,
            "def": _options_sorted(definition, options),
            "unique": bool(unique),
        }
        if index["def"] != definition:
            index["_def"] = definition  # as written: pg_dump prints the options so
        if stats:
            index["statistics"] = {s[0]: int(s[1]) for s in stats}
        if clustered:
            index["clustered"] = True
        if parent:
            index["parent"] = parent  # a partition's index, attached to its parent's index
        if not valid:
            # A concurrent build that failed (or is still running) left it: it enforces
            # and serves nothing, so it is not the index the desired schema names.
            index["invalid"] = True
        schema["index"][name] = index
        nodes.add("pg_class", oid, f"index:{name}")
    for oid, name, kind, definition, reloptions in _rows(cur, Q_VIEWS):
        view: dict[str, Any] = {"materialized": kind == "m", "def": definition.strip()}
        if reloptions:
            view["reloptions"] = sorted(reloptions)
            view["_reloptions"] = list(reloptions)
        schema["view"][name] = view
        nodes.add("pg_class", oid, f"view:{name}")
    for oid, name, table, definition, target in _rows(cur, Q_STATISTICS):
        schema["statistics"][name] = {"table": table, "def": definition, "target": target}
        nodes.add("pg_statistic_ext", oid, f"statistics:{name}")
    nodes.read_rules(cur)


def _options_sorted(definition: str, options: list[str]) -> str:
    """An index's definition with its storage parameters (``WITH (...)``) in name order:
    the server keeps them in the order written, and the same options written in another
    order are the same index (compared so, it was rebuilt for nothing, and the plan never
    matched its fingerprint)."""
    if len(options) < 2:
        return definition
    first = options[0].split("=", 1)[0]
    start = definition.find(f" WITH ({first}=")
    if start < 0:
        return definition
    at, quoted, parts, part = start + len(" WITH ("), False, [], ""
    while at < len(definition):
        ch = definition[at]
        at += 1
        if ch == "'":
            quoted = not quoted
        elif not quoted and ch == ")":
            break
        elif not quoted and ch == "," and definition.startswith(" ", at):
            parts.append(part)
            part, at = "", at + 1
            continue
        part += ch
    parts.append(part)
    if len(parts) != len(options):
        return definition
    return f"{definition[:start]} WITH ({', '.join(sorted(parts))}){definition[at:]}"


def _read_dependents(cur: Any, schema: Schema, nodes: graph.NodeMap) -> None:
    for oid, conoid, table, name, definition, enabled in _rows(cur, Q_TRIGGERS):
        key = f"{table}.{name}"
        schema["trigger"][key] = {
            "table": table,
            "name": name,
            "def": definition,
            "enabled": enabled,
        }
        nodes.add("pg_trigger", oid, f"trigger:{key}")
        if conoid:
            nodes.add("pg_constraint", conoid, f"trigger:{key}")
    for oid, table, name, definition, enabled in _rows(cur, Q_RULES):
        key = f"{table}.{name}"
        schema["rule"][key] = {
            "table": table,
            "name": name,
            "def": definition.strip().rstrip(";"),
            "enabled": enabled,
        }
        nodes.add("pg_rewrite", oid, f"rule:{key}")
    for oid, table, name, permissive, cmd, roles, qual, check in _rows(cur, Q_POLICIES):
        key = f"{table}.{name}"
        schema["policy"][key] = {
            "table": table,
            "name": name,
            "permissive": bool(permissive),
            "command": {"r": "SELECT", "a": "INSERT", "w": "UPDATE", "d": "DELETE", "*": "ALL"}[
                cmd
            ],
            "roles": list(roles),
            "using": qual,
            "check": check,
        }
        nodes.add("pg_policy", oid, f"policy:{key}")
    for oid, name, event, func, enabled, tags in _rows(cur, Q_EVENT_TRIGGERS):
        schema["event_trigger"][name] = {
            "event": event,
            "function": func,
            "enabled": enabled,
            "tags": list(tags),
        }
        nodes.add("pg_event_trigger", oid, f"event_trigger:{name}")
    for oid, name, alltables, publish, viaroot in _rows(cur, Q_PUBLICATIONS):
        schema["publication"][name] = {
            "allTables": alltables,
            "publish": publish,
            "viaRoot": viaroot,
        }
        nodes.add("pg_publication", oid, f"publication:{name}")
    for oid, pub, table, where, columns in _rows(cur, Q_PUBLICATION_TABLES):
        key = f"{pub} {table}"
        schema["pub_table"][key] = {
            "publication": pub,
            "table": table,
            "where": where,
            "columns": list(columns),
        }
        nodes.add("pg_publication_rel", oid, f"pub_table:{key}")
    for oid, pub, nsp in _rows(cur, Q_PUBLICATION_SCHEMAS):
        key = f"{pub} {nsp}"
        schema["pub_schema"][key] = {"publication": pub, "schema": nsp}
        nodes.add("pg_publication_namespace", oid, f"pub_schema:{key}")


def _read_privileges(cur: Any, schema: Schema, nodes: graph.NodeMap) -> None:
    acls: dict[str, dict[str, Any]] = {}
    for kind, name, catalog, oid, entry in _rows(cur, Q_ACLS):
        node = nodes.get(catalog, oid)
        if node is None:
            continue
        acl = acls.setdefault(node, {"on": f"{kind} {name}", "entries": []})
        acl["entries"].append(entry)
    for node, acl in acls.items():
        # The grantees in the order the object's ACL holds them (the order they were
        # first granted in): pg_dump prints its GRANTs so, and a plan granting in
        # another order left a dump unlike the desired file's. Private: the grants
        # are the same whatever their order.
        acl["_order"] = list(dict.fromkeys(e.split("|", 1)[0] for e in acl["entries"]))
        acl["entries"].sort()
        schema["acl"][node] = acl
    for oid, role, nsp, objtype, entries in _rows(cur, Q_DEFAULT_ACLS):
        key = f"{role}|{nsp}|{objtype}"
        nodes.add("pg_default_acl", oid, f"default_acl:{key}")
        schema["default_acl"][key] = {
            "role": role,
            "schema": nsp,
            "objtype": objtype,
            "entries": list(entries),
        }


def _read_comments(cur: Any, schema: Schema, nodes: graph.NodeMap) -> None:
    for catalog, oid, subid, objtype, identity, text in _rows(cur, Q_COMMENTS):
        node = nodes.get(catalog, oid)
        if node is None:
            continue  # the census names the object itself
        target = comment_target(objtype, identity)
        schema["comment"][target] = {"on": target, "node": node, "text": text, "_sub": subid}
    for ext, subid, objtype, identity, text in _rows(cur, Q_MEMBER_COMMENTS):
        target = comment_target(objtype, identity)
        schema["comment"][target] = {
            "on": target,
            "node": f"extension:{ext}",
            "text": text,
            "member": True,
            "_sub": subid,
        }
