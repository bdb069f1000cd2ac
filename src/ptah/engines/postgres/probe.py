"""A cheap digest of everything a PostgreSQL inspection reads, to reuse an inspection.

Inspecting 1,000 tables costs hundreds of catalog rows per table run through
``pg_get_*def`` and friends; the digest costs one scan of the same catalogs with no
function per row. It changes whenever the inspection's output can: every catalog the
inspection or the census reads contributes each row's version (``xmin`` with
``ctid``: any insert, update or delete of a catalog row makes a new one, or removes
it), so any DDL moves it. The few catalog columns PostgreSQL updates in place (a new
row version is not made) are taken by value where the inspection can see them (an
index's validity), and so are the names of roles (``pg_authid`` is shared and not
readable; role names reach ACLs and owners) and the session settings that shape how
expressions and literals are printed.

The digest is read in the inspection's own transaction, so the two describe the same
snapshot. A digest that moves without a change (a ``VACUUM FULL`` of a catalog) only
costs an inspection; a reused inspection is still only a plan: apply checks the
target's real fingerprint before it writes anything.
"""

from __future__ import annotations

import hashlib
from typing import Any

# Every catalog the inspection (:mod:`.inspect`) and the census (:mod:`.graph`) read.
CATALOGS = (
    "pg_aggregate",
    "pg_am",
    "pg_attrdef",
    "pg_attribute",
    "pg_cast",
    "pg_class",
    "pg_collation",
    "pg_constraint",
    "pg_conversion",
    "pg_default_acl",
    "pg_depend",
    "pg_description",
    "pg_enum",
    "pg_event_trigger",
    "pg_extension",
    "pg_foreign_data_wrapper",
    "pg_foreign_server",
    "pg_index",
    "pg_inherits",
    "pg_init_privs",
    "pg_language",
    "pg_namespace",
    "pg_opclass",
    "pg_operator",
    "pg_opfamily",
    "pg_partitioned_table",
    "pg_policy",
    "pg_proc",
    "pg_publication",
    "pg_publication_namespace",
    "pg_publication_rel",
    "pg_range",
    "pg_rewrite",
    "pg_seclabel",
    "pg_sequence",
    "pg_statistic_ext",
    "pg_tablespace",
    "pg_transform",
    "pg_trigger",
    "pg_ts_config",
    "pg_ts_config_map",
    "pg_ts_dict",
    "pg_ts_parser",
    "pg_ts_template",
    "pg_type",
)

# Settings that change how the server prints names, expressions and literals.
SETTINGS = (
    "server_version_num",
    "quote_all_identifiers",
    "standard_conforming_strings",
    "DateStyle",
    "IntervalStyle",
    "TimeZone",
    "extra_float_digits",
    "bytea_output",
    "lc_monetary",
    "lc_numeric",
    "server_encoding",
)

_ROWS = "sum(hashtextextended(xmin::text || ctid::text, 0)::numeric)"

_PROBE = "\nUNION ALL\n".join(
    [
        f"SELECT '{c}', count(*)::text || ':' || coalesce({_ROWS}::text, '') FROM {c}"
        for c in CATALOGS
    ]
    + [
        "SELECT 'in-place pg_index', coalesce(sum(hashtextextended(indexrelid::text"
        " || indisvalid::text || indisready::text || indislive::text"
        " || indisclustered::text, 0)::numeric)::text, '') FROM pg_index",
        "SELECT 'roles', coalesce(sum(hashtextextended(oid::text || ':' || rolname, 0)"
        "::numeric)::text, '') FROM pg_roles",
        "SELECT 'session', "
        + " || '|' || ".join(f"current_setting('{s}')" for s in SETTINGS)
        + " || '|' || current_user || '|' || current_database() || '|'"
        " || coalesce(host(inet_server_addr()), 'local') || '|'"
        " || coalesce(inet_server_port()::text, current_setting('port')) || '|'"
        " || (SELECT oid::text FROM pg_database WHERE datname = current_database())",
    ]
)


def probe(conn: Any) -> str:
    """The digest, read in the connection's current transaction."""
    with conn.cursor() as cur:
        cur.execute("SET LOCAL search_path = pg_catalog")
        cur.execute(_PROBE)
        rows = cur.fetchall()
    h = hashlib.sha256()
    for name, value in rows:
        h.update(f"{name}={value}\n".encode())
    return h.hexdigest()
