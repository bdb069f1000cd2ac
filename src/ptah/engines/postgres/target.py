"""PostgreSQL target: a psycopg 3 connection and the identity of the cluster behind it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import psycopg

from ptah.engines.base import Target
from ptah.engines.urls import DbUrl

if TYPE_CHECKING:
    from ptah.engines.report import DatabaseIdentity


def connect(
    url: DbUrl, database: str | None = None, autocommit: bool = False, options: str | None = None
) -> Any:
    """A psycopg connection; keyword arguments so the password never sits in a DSN string.
    ``options``: settings the session starts with (``-c name=value``), above the role's
    and the database's own defaults."""
    kwargs: dict[str, Any] = {
        "options": options,
        "host": url.host or None,
        "port": url.port,
        "user": url.user or None,
        "password": url.password or None,
        "dbname": database if database is not None else url.database,
        "connect_timeout": 10,
        "application_name": "ptah-runner",
    }
    return psycopg.connect(
        autocommit=autocommit, **{k: v for k, v in kwargs.items() if v is not None}
    )


class PostgresTarget(Target):
    engine = "postgres"

    @classmethod
    def open(cls, url: DbUrl) -> PostgresTarget:
        return cls(url, connect(url, autocommit=True))

    def identity(self) -> DatabaseIdentity:
        """System identifier (when readable), database oid and name, address, recovery."""
        conn = self.connection
        with conn.cursor() as cur:
            cur.execute(
                "SELECT d.oid::text, current_database(),"
                " coalesce(host(inet_server_addr()), 'local'),"
                " coalesce(inet_server_port()::text, current_setting('port')),"
                " pg_is_in_recovery()::text, current_setting('server_version_num')"
                " FROM pg_database d WHERE d.datname = current_database()"
            )
            row = cur.fetchone()
            assert row is not None
            oid, name, addr, port, recovery, version = row
            system_id = ""
            if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                try:
                    cur.execute("SELECT system_identifier::text FROM pg_control_system()")
                    sysrow = cur.fetchone()
                    system_id = sysrow[0] if sysrow else ""
                except psycopg.Error:
                    system_id = ""  # not readable by this role: fall back to address and port
        key: dict[str, str] = {"databaseOid": oid, "database": name}
        if system_id:
            key["systemIdentifier"] = system_id
        else:
            key["serverAddress"] = addr
            key["serverPort"] = port
        details = {
            "serverAddress": addr,
            "serverPort": port,
            "inRecovery": recovery,
            "serverVersionNum": version,
        }
        return self._identity(key, details)

    def server_version(self) -> int:
        return int(self.connection.info.server_version)
