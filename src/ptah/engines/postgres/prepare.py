"""The desired file as the scratch loads it, after the confinement check passed.

:mod:`ptah.engines.confine` has already refused anything that acts outside the
database. What is left to decide is policy, statement by statement:

* ownership (``spec.policy.ownership``): under ``ignore``, the default,
  ``ALTER ... OWNER TO role`` statements are left out of the load, so a file
  naming roles this server lacks (as every ``pg_dump`` output does) still
  loads; under ``manage`` they run as written;
* pg_dump's ``\\restrict``/``\\unrestrict`` lines (psql-only guards) are left out;
* ``COPY ... FROM STDIN`` (a dump with its rows) is refused with its line: rows are not
  a schema, and the rows that follow the statement are not SQL;
* ``CREATE INDEX CONCURRENTLY`` loads as ``CREATE INDEX`` (the same index; the word
  cannot run in the loading transaction);
* top-level transaction control (``BEGIN``/``START TRANSACTION``/``COMMIT``/
  ``END``) is left out with a warning: the whole file loads in one transaction
  that is always rolled back, and a ``COMMIT`` in it would end that
  transaction early.

The statements are joined into one text for a single round trip; :class:`Load`
maps a position the server reports back to the line of the desired file.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from ptah.engines.base import DesiredSchemaInvalid
from ptah.engines.splitter import Statement

OWNERSHIP_POLICIES = ("ignore", "manage")

_LEADING_COMMENTS = re.compile(r"\A(?:\s+|--[^\n]*(?:\n|\Z)|/\*.*?\*/)*", re.DOTALL)
_OWNER_TO = re.compile(
    r"\AALTER\s.*\sOWNER\s+TO\s+(?:\"(?:[^\"]|\"\")+\"|[\w$]+)\s*\Z", re.DOTALL | re.IGNORECASE
)
_COPY_STDIN = re.compile(r"\ACOPY\s.*\sFROM\s+STDIN\b", re.DOTALL | re.IGNORECASE)
_TRANSACTION = re.compile(r"\A(?:BEGIN|COMMIT|END|START\s+TRANSACTION)\b", re.IGNORECASE)
# A value added to an enum cannot be used in the transaction that added it ("unsafe use
# of new value"); psql, in autocommit, commits it at once.
_ADD_ENUM_VALUE = re.compile(r"\AALTER\s+TYPE\s.*\sADD\s+VALUE\b", re.DOTALL | re.IGNORECASE)
# CREATE INDEX CONCURRENTLY cannot run in the loading transaction; the index it makes is
# the same without the word (how the plan builds it is the plan's: online indexes).
_CONCURRENT_INDEX = re.compile(
    r"\A((?:\s+|--[^\n]*(?:\n|\Z)|/\*.*?\*/)*CREATE\s+(?:UNIQUE\s+)?INDEX\s+)CONCURRENTLY\b",
    re.DOTALL | re.IGNORECASE,
)


@dataclass
class Load:
    """The text to send, the statements in it (with their offsets), and warnings."""

    sql: str
    statements: list[Statement]
    offsets: list[int]
    warnings: list[str]

    def line_of(self, position: int) -> int:
        """The desired file's line of a 1-based character position in :attr:`sql`."""
        at = max(0, position - 1)
        k = max(0, bisect.bisect_right(self.offsets, at) - 1)
        stmt = self.statements[k]
        return stmt.line + self.sql.count("\n", self.offsets[k], at)

    def commits(self) -> list[int]:
        """Where a temporary scratch must commit before going on: after each ``ALTER TYPE
        ... ADD VALUE`` (the index of the statement after it), so the rest of the file may
        use the value, as it can when psql loads the file statement by statement. A dev
        database loads in one transaction, which cannot (the server says so)."""
        return [
            i + 1
            for i, stmt in enumerate(self.statements)
            if _ADD_ENUM_VALUE.match(_body(stmt.text))
        ]

    def part(self, first: int, last: int) -> Load:
        """Statements ``first`` to ``last`` (excluded) as a load of their own: one round
        trip, its positions mapped to the desired file's lines as this load's are."""
        start = self.offsets[first]
        end = self.offsets[last] if last < len(self.statements) else len(self.sql)
        return Load(
            self.sql[start:end],
            self.statements[first:last],
            [o - start for o in self.offsets[first:last]],
            [],
        )


def _body(text: str) -> str:
    return text[_LEADING_COMMENTS.match(text).end() :]  # type: ignore[union-attr]


def loadable(text: str) -> str:
    """The statement as the loading transaction runs it: ``CONCURRENTLY`` of a ``CREATE
    INDEX`` blanked, not cut, so positions the server reports keep their lines."""
    m = _CONCURRENT_INDEX.match(text)
    if m is None:
        return text
    return text[: m.end(1)] + " " * len("CONCURRENTLY") + text[m.end() :]


def prepare(statements: list[Statement], ownership: str = "ignore") -> Load:
    kept: list[Statement] = []
    warnings: list[str] = []
    for stmt in statements:
        body = _body(stmt.text).rstrip().rstrip(";").rstrip()
        if not body:
            continue
        if body.startswith("\\"):
            # The confinement let through only pg_dump's \restrict / \unrestrict, which
            # guard psql itself; Ptah sends SQL only.
            warnings.append(f"line {stmt.line}: psql {body.split()[0]} left out")
            continue
        if _COPY_STDIN.match(body):
            raise DesiredSchemaInvalid(
                f"desired schema does not load (line {stmt.line} of the desired file): COPY"
                " ... FROM STDIN brings rows, and a desired schema holds definitions only"
                " (take the dump with pg_dump --schema-only)"
            )
        if _TRANSACTION.match(body) and not body.upper().startswith("BEGIN ATOMIC"):
            word = body.split()[0].upper()
            warnings.append(
                f"line {stmt.line}: {word} left out (the desired file loads in one transaction"
                " that is always rolled back)"
            )
            continue
        if ownership == "ignore" and _OWNER_TO.match(body):
            continue
        kept.append(stmt)
    parts: list[str] = []
    offsets: list[int] = []
    pos = 0
    for stmt in kept:
        offsets.append(pos)
        piece = loadable(stmt.text) + "\n;\n"
        parts.append(piece)
        pos += len(piece)
    return Load("".join(parts), kept, offsets, warnings)
