"""Simulated databases: just enough schema and history to tell whether a mutation ran,
ran twice, or ran while another executor wrote.

A database is addressed by URL; URLs are normalised the way a real server would
resolve them (host case, trailing slash, default port), so two differently
spelled targets reach one physical database and report one identity.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ptah.api.digest import digest
from ptah.engines.report import DatabaseIdentity


def physical(url: str) -> str:
    """``sim://user:pw@Host:5432/db/`` and ``sim://host/db`` name the same database."""
    rest = url.split("://", 1)[-1]
    rest = rest.split("@", 1)[-1]
    host = rest.partition("/")[0]
    return host.lower().removesuffix(":5432")


@dataclass
class SimDatabase:
    name: str
    tables: set[str] = field(default_factory=set)
    history: list[str] = field(default_factory=list)
    dirty: str | None = None
    # Each applied version's file content as it ran (the runner's checksum of it).
    checksums: dict[str, str] = field(default_factory=dict)
    # Each repeatable file's checksum as it last ran, by name.
    repeatables: dict[str, str] = field(default_factory=dict)
    executions: Counter[str] = field(default_factory=Counter)
    writers: set[str] = field(default_factory=set)
    max_concurrent_writers: int = 0

    @property
    def identity(self) -> DatabaseIdentity:
        return DatabaseIdentity(
            engine="postgres", key={"system": self.name}, details={"database": self.name}
        )

    def fingerprint(self) -> str:
        return digest(sorted(self.tables), 32)

    # --- declarative

    def plan(self, desired_text: str) -> dict[str, object]:
        desired = {line.strip() for line in desired_text.splitlines() if line.strip()}
        adds = sorted(desired - self.tables)
        drops = sorted(self.tables - desired)
        statements = [{"sql": s, "hazards": []} for s in adds] + [
            {"sql": f"DROP {s}", "hazards": ["destructive"]} for s in drops
        ]
        return {
            "statements": statements,
            "changes": bool(statements),
            "destructive": bool(drops),
            "fingerprintBefore": self.fingerprint(),
            "fingerprintAfter": digest(sorted(desired), 32),
        }

    def apply_statements(self, statements: list[str]) -> None:
        for sql in statements:
            if sql.startswith("DROP "):
                self.tables.discard(sql.removeprefix("DROP "))
            else:
                self.tables.add(sql)

    # --- versioned

    def read_history(
        self,
        versions: list[str],
        files: dict[str, str] | None = None,
        repeatable: dict[str, str] | None = None,
    ) -> dict[str, object]:
        """``files``: each version's file content in the directory now; an applied
        version whose file changed since it ran is reported mismatched. ``repeatable``:
        each repeatable file's content, by name; one whose checksum is not the one it last
        ran with is pending."""
        files = files or {}
        repeatable = repeatable or {}
        sums = {name: digest(text, 32) for name, text in sorted(repeatable.items())}
        applied = [v for v in self.history if v in versions]
        pending = [v for v in versions if v not in self.history and v != self.dirty]
        dirty = (
            [{"version": self.dirty, "statement": 2, "total": 3, "error": "interrupted"}]
            if self.dirty
            else []
        )
        return {
            "applied": applied,
            "pending": pending,
            "dirty": dirty,
            "mismatched": [
                {"version": v, "expected": self.checksums[v], "actual": digest(files[v], 32)}
                for v in applied
                if v in self.checksums and v in files and digest(files[v], 32) != self.checksums[v]
            ],
            "repeatables": [
                {
                    "name": name,
                    "checksum": sums[name],
                    "appliedChecksum": self.repeatables.get(name, ""),
                    "state": "applied" if self.repeatables.get(name) == sums[name] else "pending",
                }
                for name in sums
            ],
            "repeatablesPending": [n for n in sums if self.repeatables.get(n) != sums[n]],
            "missingFromDirectory": [v for v in self.history if v not in versions],
            "settled": not pending
            and not dirty
            and all(self.repeatables.get(n) == c for n, c in sums.items()),
        }


@dataclass
class Databases:
    by_name: dict[str, SimDatabase] = field(default_factory=dict)

    def add(self, name: str) -> SimDatabase:
        db = SimDatabase(name)
        self.by_name[name] = db
        return db

    def open(self, url: str) -> SimDatabase | None:
        return self.by_name.get(physical(url))
