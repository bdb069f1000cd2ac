"""What an engine reports about a run: whom it talked to, how the run ended, and why.

The result frame carries these (``ptah.runner.frame`` reads them, ``ptah.runner.emit``
prints them), but they are the engines' facts: the identity is what the database itself
says, the outcome is what the planner or the versioned engine decided. They live here so
that the engines never import the runner (the arrow points runner -> engines only).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

# "refused" and "fenced" both mean nothing ran; "fenced": the realm's fence was held by
# another run (ptah.engines.fence), so the same inputs may well succeed later.
Outcome = Literal["succeeded", "failed", "refused", "fenced"]

# The one bound on a failure's text wherever it leaves the process (a frame's message,
# a history row's error): long enough for an engine's error with its detail and context
# lines, short enough that no frame or row grows with the SQL that failed.
TEXT_LIMIT = 4000


def bounded(text: str) -> str:
    """``text`` cut to :data:`TEXT_LIMIT` characters, saying so when it was cut."""
    if len(text) <= TEXT_LIMIT:
        return text
    return text[: TEXT_LIMIT - 3] + "..."


@dataclass(frozen=True)
class DatabaseIdentity:
    """Who the runner actually talked to, as the database itself reports it.

    ``key`` holds the engine-specific facts that identify the physical
    database (system identifier and oid for PostgreSQL, server uuid and schema
    for MariaDB, resolved path and inode for SQLite). It never holds
    credentials. ``digest`` is derived from ``engine`` and ``key`` only, so two
    spellings of one database produce one digest. (A dataclass, not a model: the
    runner builds one per run; the frame model validates it when the operator reads.)
    """

    __pydantic_config__ = {"extra": "forbid"}  # read by pydantic when a frame is parsed

    engine: Literal["postgres", "mysql", "sqlite"]
    key: dict[str, str]
    details: dict[str, str] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        import hashlib  # after the connection: see ptah.runner.main.AFTER_CONNECT

        canonical = json.dumps({"engine": self.engine, "key": self.key}, sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()[:32]
