"""SQLite target: the resolved file and its identity on disk."""

from __future__ import annotations

import os
import sqlite3
from typing import TYPE_CHECKING

from ptah import failures
from ptah.engines.base import Target, TargetUnavailable
from ptah.engines.urls import DbUrl

if TYPE_CHECKING:
    from ptah.engines.report import DatabaseIdentity


class SqliteTarget(Target):
    engine = "sqlite"

    @classmethod
    def open(cls, url: DbUrl) -> SqliteTarget:
        path = url.path
        if path != ":memory:":
            path = os.path.realpath(path)
            if not os.path.isdir(os.path.dirname(path)):
                raise TargetUnavailable(
                    f"the directory of the SQLite database {path} does not exist",
                    failures.DATABASE_NOT_FOUND.reason,
                )
        # isolation_level=None: we issue BEGIN/COMMIT ourselves.
        conn = sqlite3.connect(path, isolation_level=None, timeout=10)
        return cls(url, conn)

    def identity(self) -> DatabaseIdentity:
        """Resolved path plus device and inode: two spellings of one file agree."""
        rows = self.connection.execute("PRAGMA database_list").fetchall()
        path = next((r[2] for r in rows if r[1] == "main"), "") or ":memory:"
        key = {"path": path}
        if path != ":memory:":
            try:
                st = os.stat(path)
                key["device"] = str(st.st_dev)
                key["inode"] = str(st.st_ino)
            except OSError:
                pass  # not created yet: the path alone identifies it
        details = {"sqliteVersion": sqlite3.sqlite_version}
        return self._identity(key, details)
