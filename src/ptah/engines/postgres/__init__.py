"""PostgreSQL: psycopg 3 connection, identity, set-based catalog inspection, diff.

Importing this package first lets psycopg load without ``importlib.metadata``
(:class:`DriverVersions`) and without running ``asyncio`` or ``ctypes``
(:mod:`ptah.engines.deferred`): every runner Job pays the driver's import before its
first round trip.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from ptah.engines.deferred import Deferred


def dist_info_version(where: str, package: str) -> str | None:
    """The version in the name of ``package``'s one ``.dist-info`` directory in ``where``."""
    prefix, suffix = package + "-", ".dist-info"
    try:
        found = [n for n in os.listdir(where) if n.startswith(prefix) and n.endswith(suffix)]
    except OSError:
        return None
    version = found[0][len(prefix) : -len(suffix)] if len(found) == 1 else ""
    return version if version and "-" not in version else None


class DriverVersions:
    """Finds and loads ``psycopg.version`` and ``psycopg_binary.version`` without running
    them: each sets ``__version__`` from ``importlib.metadata.version()``, and that import
    (email, zipfile, csv, ...) with its two scans of ``sys.path`` is about a tenth of the
    driver's import. The version is read from the name of the package's ``.dist-info``
    beside it instead (one ``listdir``); where there is not exactly one, the module runs
    as it is. Once both are loaded, it leaves ``sys.meta_path``."""

    NAMES = ("psycopg.version", "psycopg_binary.version")

    def __init__(self) -> None:
        self.pending = set(self.NAMES)
        self.versions: dict[str, str] = {}

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.pending or not path:
            return None
        self.pending.discard(fullname)
        if not self.pending and self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        package = fullname.partition(".")[0]
        version = dist_info_version(os.path.dirname(os.path.normpath(path[0])), package)
        if spec is None or version is None:
            return spec
        self.versions[fullname] = version
        spec.loader = self  # type: ignore[assignment]
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        setattr(module, "__version__", self.versions[module.__name__])  # noqa: B010


# The names of asyncio psycopg reads as its modules load (psycopg.errors' CancelledError,
# the lock, queue and task types psycopg._acompat aliases), each from the submodule that
# defines it: the event loop, its transports and ssl load only if an async API is used.
ASYNCIO_SEEDS = {
    "CancelledError": "asyncio.exceptions",
    "Future": "asyncio.futures",
    "get_running_loop": "asyncio.events",
    "sleep": "asyncio.tasks",
    "Lock": "asyncio.locks",
    "Queue": "asyncio.queues",
    "Task": "asyncio.tasks",
}

if "psycopg" not in sys.modules:
    sys.meta_path.insert(0, DriverVersions())
    # psycopg's asyncio (beyond the names it reads on import: ASYNCIO_SEEDS), ctypes and
    # its ctypes.util (libpq found by name, never by the binary build: psycopg.pq.misc
    # imports ctypes.util and reads it only in a call) and ssl (imported by the binary
    # build's pq; libpq does its own TLS) load only if used (ptah.engines.deferred).
    Deferred({"asyncio": ASYNCIO_SEEDS, "ctypes": {}, "ctypes.util": {}, "ssl": {}}).install()
