"""Normalise desired PostgreSQL DDL: load it into a scratch database and inspect it.

The scratch is either the dev database given by its own URL (loaded inside a
transaction that is always rolled back, so it is left as found) or a
temporary database created on the target's server and dropped afterwards,
which needs a role that may create databases. The whole desired source goes
to the server in one simple-protocol round trip.
"""

from __future__ import annotations

import secrets
from typing import Any

import psycopg

from ptah.engines.base import DesiredSchemaInvalid, ScratchUnavailable
from ptah.engines.model import Schema
from ptah.engines.postgres import inspect
from ptah.engines.postgres.target import connect
from ptah.engines.urls import DbUrl, scrub


def _load_and_inspect(conn: Any, desired_sql: str, require_empty: bool) -> tuple[Schema, list[str]]:
    with conn.transaction(force_rollback=True), conn.cursor() as cur:
        if require_empty:
            before = inspect.inspect(conn)
            if before["table"] or before["view"] or before["enum"] or before["sequence"]:
                raise ScratchUnavailable(
                    "the dev database is not empty; give an empty database as the dev URL"
                )
        cur.execute("SET LOCAL lock_timeout = '10s'")
        cur.execute(desired_sql.encode())  # no parameters: one simple-query round trip
        return inspect.inspect(conn), inspect.unmanaged(conn)


def normalise(
    target_url: DbUrl, desired_sql: str, dev_url: DbUrl | None
) -> tuple[Schema, list[str]]:
    """The inspected form of ``desired_sql`` and warnings about unmanaged objects."""
    try:
        if dev_url is not None:
            with connect(dev_url) as conn:
                return _load_and_inspect(conn, desired_sql, require_empty=True)
        return _temporary_database(target_url, desired_sql)
    except psycopg.Error as exc:
        secrets_ = (*target_url.secrets, *(dev_url.secrets if dev_url else ()))
        raise DesiredSchemaInvalid(
            scrub(f"desired schema does not load: {exc}", *secrets_)
        ) from None


def _temporary_database(url: DbUrl, desired_sql: str) -> tuple[Schema, list[str]]:
    name = "ptah_scratch_" + secrets.token_hex(6)
    with connect(url, autocommit=True) as admin:
        row = admin.execute(
            "SELECT rolcreatedb OR rolsuper, current_user FROM pg_roles"
            " WHERE rolname = current_user"
        ).fetchone()
        if not row or not row[0]:
            role = row[1] if row else "the target's role"
            raise ScratchUnavailable(
                f"role {role} may not create a temporary scratch database on the target's server;"
                " give a dev database (PTAH_DEV_URL / --dev-url) or grant CREATEDB"
            )
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
        try:
            with connect(url, database=name) as conn:
                return _load_and_inspect(conn, desired_sql, require_empty=False)
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
