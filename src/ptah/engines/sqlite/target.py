"""SQLite target: the resolved file and its identity on disk."""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from typing import TYPE_CHECKING

from ptah import failures
from ptah.engines.base import Target, TargetUnavailable
from ptah.engines.urls import DbUrl

if TYPE_CHECKING:
    from ptah.engines.report import DatabaseIdentity


class SqliteTarget(Target):
    engine = "sqlite"

    # The file a read-only opening stands in for with an empty in-memory database, because
    # it does not exist yet (None: the connection's own file, or ``:memory:``).
    absent: str | None = None

    @classmethod
    def open(cls, url: DbUrl, *, read_only: bool = False) -> SqliteTarget:
        """Open the file (SQLite creates it when missing), or, ``read_only``, read it
        without ever writing: an existing file is opened in SQLite's read-only mode and a
        missing one reads as the empty database it would be created as, so a plan against
        a mistyped path leaves nothing behind."""
        path = url.path
        if path != ":memory:":
            path = os.path.realpath(path)
            if not os.path.isdir(os.path.dirname(path)):
                raise TargetUnavailable(
                    f"the directory of the SQLite database {path} does not exist",
                    failures.DATABASE_NOT_FOUND.reason,
                )
        # isolation_level=None: we issue BEGIN/COMMIT ourselves.
        if not read_only or path == ":memory:":
            return cls(url, sqlite3.connect(path, isolation_level=None, timeout=10))
        if not os.path.exists(path):
            target = cls(url, sqlite3.connect(":memory:", isolation_level=None))
            target.absent = path
            return target
        ro = f"file:{urllib.parse.quote(path)}?mode=ro"
        return cls(url, sqlite3.connect(ro, uri=True, isolation_level=None, timeout=10))

    def identity(self) -> DatabaseIdentity:
        """Resolved path plus device and inode: two spellings of one file agree."""
        rows = self.connection.execute("PRAGMA database_list").fetchall()
        path = self.absent or next((r[2] for r in rows if r[1] == "main"), "") or ":memory:"
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
