"""MariaDB/MySQL target: a PyMySQL connection and the server's own identity."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pymysql
from pymysql.constants import CLIENT

from ptah.engines.base import Target
from ptah.engines.urls import DbUrl

if TYPE_CHECKING:
    from ptah.engines.report import DatabaseIdentity


def connect(url: DbUrl, database: str | None = None) -> Any:
    """A PyMySQL connection in autocommit (MariaDB DDL commits implicitly anyway)."""
    return pymysql.connect(
        host=url.host or "localhost",
        port=url.port or 3306,
        user=url.user or None,
        password=url.password or "",
        database=(database if database is not None else url.database) or None,
        autocommit=True,
        connect_timeout=10,
        client_flag=CLIENT.MULTI_STATEMENTS,
        charset="utf8mb4",
    )


class MysqlTarget(Target):
    engine = "mysql"

    @classmethod
    def open(cls, url: DbUrl) -> MysqlTarget:
        return cls(url, connect(url))

    def _one(self, sql: str) -> tuple[Any, ...]:
        with self.connection.cursor() as cur:
            cur.execute(sql)
            row = cur.fetchone()
        return tuple(row) if row else ()

    def is_mariadb(self) -> bool:
        return "mariadb" in str(self._one("SELECT VERSION()")[0]).lower()

    def identity(self) -> DatabaseIdentity:
        """server_uuid on MySQL; server_id plus hostname on MariaDB (it has no uuid)."""
        version, port, hostname, server_id, schema = self._one(
            "SELECT VERSION(), @@port, @@hostname, @@server_id, DATABASE()"
        )
        uuid = ""
        if "mariadb" not in str(version).lower():
            try:
                uuid = str(self._one("SELECT @@server_uuid")[0])
            except pymysql.MySQLError:
                uuid = ""
        key: dict[str, str] = {"port": str(port), "schema": str(schema or "")}
        if uuid:
            key["serverUuid"] = uuid
        else:
            key["serverId"] = str(server_id)
            key["hostname"] = str(hostname)
        details = {"version": str(version), "hostname": str(hostname)}
        return self._identity(key, details)
