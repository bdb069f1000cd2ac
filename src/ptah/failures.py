"""Failures caused by input or environment: one table, one line each, one exit code each.

``ptah`` and ``ptah-runner`` both report such a failure as one line naming what and
where (never a traceback, never a credential) and exit with its class's code; the
runner also prints it as its result frame, the class's name being the frame's
``reason``. The table is the one home of those codes: the commands' ``--help`` and
``docs/errors.md`` are rendered from it.

``transient`` says whether the same inputs may succeed later (the database may come
back, another run may finish); every other class needs a person to change something.

A leaf module at the package's top: the engines name the class of a failure to open a
target, the runner and ``ptah`` report it, the operator decides from it whether to retry,
and none of them may import another's package for it. One name per failure: a missing
URL is ``BadUrl``, a server that cannot be reached is ``TargetUnavailable``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FailureClass:
    reason: str
    exit_code: int
    meaning: str
    transient: bool = False


BAD_URL = FailureClass(
    "BadUrl", 10, "the database URL is missing, malformed or of an unknown scheme"
)
UNREACHABLE = FailureClass(
    "TargetUnavailable",
    11,
    "the database cannot be reached or opened (connection refused, unknown host, timeout)",
    transient=True,
)
AUTH_FAILED = FailureClass(
    "AuthenticationFailed", 12, "the database server refused the user or its password"
)
DATABASE_NOT_FOUND = FailureClass(
    "DatabaseNotFound", 13, "the named database (or the SQLite file's directory) does not exist"
)
NOT_A_DATABASE = FailureClass(
    "NotADatabase", 14, "the file is not an SQLite database, or the path is not a file"
)
INPUT_UNREADABLE = FailureClass(
    "InputUnreadable",
    15,
    "an input file or directory is missing or unreadable (desired schema, migrations, plan)",
)
INPUT_INVALID = FailureClass(
    "InputInvalid",
    16,
    "an input was read but is not valid (migration file names or directives, plan, version,"
    " a desired schema file with no statement)",
)
REALM_BUSY = FailureClass(
    "RealmBusy", 17, "another run holds the database's fence; nothing ran", transient=True
)
WRONG_DATABASE = FailureClass(
    "WrongDatabase", 18, "the database opened is not the one the claim bound; nothing ran"
)
# Retried like a transient failure: an unexpected error is not known to repeat.
INTERNAL = FailureClass(
    "InternalError", 70, "an unexpected error inside Ptah (a bug; please report it)", True
)

CLASSES: tuple[FailureClass, ...] = (
    BAD_URL,
    UNREACHABLE,
    AUTH_FAILED,
    DATABASE_NOT_FOUND,
    NOT_A_DATABASE,
    INPUT_UNREADABLE,
    INPUT_INVALID,
    REALM_BUSY,
    WRONG_DATABASE,
    INTERNAL,
)
_BY_REASON = {c.reason: c for c in CLASSES}

# Exit codes that are not a failure class.
OK, DID_NOT_SUCCEED, USAGE = 0, 1, 2
DETERMINISTIC = frozenset(c.reason for c in CLASSES if not c.transient)


def by_reason(reason: str) -> FailureClass | None:
    """The class a frame reason belongs to, or None for an operation's own outcome."""
    return _BY_REASON.get(reason)


def exit_code_for(reason: str) -> int | None:
    found = by_reason(reason)
    return None if found is None else found.exit_code


def table() -> str:
    """The exit-code table, for ``--help`` and the docs."""
    rows = [
        (OK, "success"),
        (
            DID_NOT_SUCCEED,
            "the operation ran and refused or failed, the message says why"
            " (ptah approve --wait: the resource is Stalled)",
        ),
        (
            USAGE,
            "bad command-line arguments (ptah status/approve: the cluster cannot be"
            " used; approve --wait: the resource is gone)",
        ),
        (3, "ptah approve --wait: not settled before the timeout"),
        *((c.exit_code, f"{c.meaning} [{c.reason}]") for c in CLASSES),
    ]
    return "\n".join(f"  {code:>3}  {text}" for code, text in rows)


class Failure(Exception):
    """A failure of input or environment, raised by a command with its class and line."""

    def __init__(self, failure: FailureClass, message: str) -> None:
        super().__init__(message)
        self.failure = failure
