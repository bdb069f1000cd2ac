"""Normalise desired PostgreSQL DDL: load it into a scratch database and inspect it.

The planner has already confined the desired file (:mod:`ptah.engines.confine`):
nothing of a file that acts outside the database runs anywhere. The ownership
policy and transaction control are applied next (:mod:`.prepare`). The scratch
is either the dev database given by its own URL (loaded inside a transaction
that is always rolled back, so it is left as found) or a temporary database
created on the target's server and dropped afterwards, which needs a role
that may create databases. The whole desired source goes to the server in
one simple-protocol round trip; only when it fails without a position is it
replayed statement by statement (rolled back) to name the line.

After the load, the census of the scratch (:mod:`ptah.engines.postgres.graph`)
must be empty: an object the planner does not manage stops the plan
(``Unmanaged``), naming each object, unless the policy ignores its kind.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

import psycopg

from ptah.engines import confine
from ptah.engines.base import DesiredSchemaInvalid, ScratchUnavailable
from ptah.engines.model import PlanError, Schema
from ptah.engines.postgres import inspect, prepare
from ptah.engines.postgres.target import connect
from ptah.engines.urls import DbUrl, scrub


class Unmanaged(PlanError):
    """The desired file creates objects the planner would otherwise lose silently."""

    def __init__(self, objects: Sequence[str]) -> None:
        shown = "; ".join(objects[:20])
        if len(objects) > 20:
            shown += f"; and {len(objects) - 20} more"
        super().__init__(
            f"the desired schema creates {len(objects)} object(s) Ptah does not manage: {shown}."
            " Remove them from the desired file or list their kind in spec.policy.ignore",
            "Unmanaged",
        )
        self.objects = list(objects)


def _ignored(item: str, ignore: Sequence[str]) -> bool:
    return any(item == kind or item.startswith(kind + " ") for kind in ignore)


def _locate(conn: Any, load: prepare.Load) -> int | None:
    """The line of the first statement that fails when the file is replayed one by one."""
    with conn.transaction(force_rollback=True), conn.cursor() as cur:
        cur.execute("SET LOCAL lock_timeout = '10s'")
        for stmt in load.statements:
            try:
                with conn.transaction():
                    cur.execute(stmt.text.encode())
            except psycopg.Error:
                return stmt.line
    return None


def _load_and_inspect(conn: Any, load: prepare.Load, require_empty: bool) -> Schema:
    failure: psycopg.Error | None = None
    with conn.transaction(force_rollback=True), conn.cursor() as cur:
        if require_empty:
            before = inspect.inspect(conn)
            if before["table"] or before["view"] or before["enum"] or before["function"]:
                raise ScratchUnavailable(
                    "the dev database is not empty; give an empty database as the dev URL"
                )
        cur.execute("SET LOCAL lock_timeout = '10s'")
        try:
            with conn.transaction():
                cur.execute(load.sql.encode())  # no parameters: one simple-query round trip
        except psycopg.Error as exc:
            failure = exc
        else:
            return inspect.inspect(conn)
    position = getattr(failure.diag, "statement_position", None)
    line = load.line_of(int(position)) if position else _locate(conn, load)
    where = f" (line {line} of the desired file)" if line else ""
    first = str(failure).strip().splitlines()[0] if str(failure).strip() else "error"
    raise DesiredSchemaInvalid(f"desired schema does not load{where}: {first}")


def normalise(
    target_url: DbUrl,
    desired_sql: str,
    dev_url: DbUrl | None,
    ownership: str = "ignore",
    ignore: Sequence[str] = (),
) -> tuple[Schema, list[str]]:
    """The inspected form of ``desired_sql`` and warnings; refuses what must not run."""
    load = prepare.prepare(confine.split(desired_sql, "postgres"), ownership)
    secrets_ = (*target_url.secrets, *(dev_url.secrets if dev_url else ()))
    try:
        if dev_url is not None:
            with connect(dev_url) as conn:
                schema = _load_and_inspect(conn, load, require_empty=True)
        else:
            schema = _temporary_database(target_url, load)
    except psycopg.Error as exc:
        raise DesiredSchemaInvalid(
            scrub(f"desired schema does not load: {exc}", *secrets_)
        ) from None
    except DesiredSchemaInvalid as exc:
        raise DesiredSchemaInvalid(scrub(str(exc), *secrets_)) from None
    schema["_meta"]["ownership"] = ownership
    unmanaged = [u for u in schema["_meta"]["unmanaged"] if not _ignored(u, ignore)]
    if unmanaged:
        raise Unmanaged(unmanaged)
    return schema, list(load.warnings)


def _temporary_database(url: DbUrl, load: prepare.Load) -> Schema:
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
                return _load_and_inspect(conn, load, require_empty=False)
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
