"""MariaDB/MySQL target: a PyMySQL connection and the server's own identity."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pymysql
from pymysql.constants import CLIENT

from ptah.engines.base import Target
from ptah.engines.mysql.modes import SAFE_MODES
from ptah.engines.urls import DbUrl

if TYPE_CHECKING:
    from ptah.engines.report import DatabaseIdentity


def connect(url: DbUrl, database: str | None = None, read_timeout: float | None = None) -> Any:
    """A PyMySQL connection in autocommit (MariaDB DDL commits implicitly anyway);
    ``read_timeout``: how long the client waits for any one answer (None: no limit)."""
    return pymysql.connect(
        host=url.host or "localhost",
        port=url.port or 3306,
        user=url.user or None,
        password=url.password or "",
        database=(database if database is not None else url.database) or None,
        autocommit=True,
        connect_timeout=10,
        read_timeout=read_timeout,
        client_flag=CLIENT.MULTI_STATEMENTS,
        charset="utf8mb4",
    )


def read_as_checked(conn: Any) -> None:
    """Give the loading session the lexing the confinement check reads a file with.

    The check (and the splitter) read quotes and backslashes as the server's default
    sql_mode does, and a file may only SET modes that read alike. A server whose own
    default mode holds ANSI_QUOTES or NO_BACKSLASH_ESCAPES would read the same bytes
    otherwise: "SELECT '\\'; DROP DATABASE x; -- '" is one string to the check and two
    statements to such a server (the load runs multi-statement queries). So the session
    keeps only the server's modes that read alike (:data:`.modes.SAFE_MODES`, the list a
    file may SET: strictness and the like, which decide what a file's DDL means). The
    inspection reads SHOW CREATE output, which quotes names by the same modes, so every
    declarative session (load, both sides' inspection, and the apply of what they gave)
    reads alike. A versioned migration's session keeps the server's modes (its files are
    the user's SQL, written for them), and is refused when they read otherwise
    (:mod:`ptah.engines.versioned.confine`)."""
    with conn.cursor() as cur:
        cur.execute("SELECT @@SESSION.sql_mode")
        row = cur.fetchone()
        modes = [m for m in str(row[0] if row else "").split(",") if m]
        kept = [m for m in modes if m.upper() in SAFE_MODES]
        if kept != modes:
            cur.execute("SET SESSION sql_mode = %s", (",".join(kept),))


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
