"""The frame's line discipline, apart from its payload model.

Everything a process needs to print safely next to a frame (the prefix, the
escaping of every other line, the refusal to print a credential) lives here and
imports nothing heavy: the runner logs before it has connected, and its start-up
must not pay for the payload's pydantic models until it has a frame to build
(:mod:`ptah.runner.frame` holds those, and the parser).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

PREFIX = "PTAH-RESULT-FRAME"
VERSION = "v1"
ESCAPE = "| "

# Failures the same inputs reproduce: a reading that ends with one of these is not
# retried; the operator stalls until the source, spec, policy or Secret changes.
# Every other failure (unreachable database, lock timeout, missing frame) is
# transient and retried with back-off.
DETERMINISTIC_REASONS = frozenset(
    {
        "DesiredSchemaInvalid",  # the desired source does not load
        "StatementRefused",  # it acts outside its database (ptah.engines.confine)
        "Unsupported",  # an object the planner cannot plan
        "PlanError",
        "InputUnreadable",
        "InvalidDirectory",  # the migration directory cannot be read
        "InvalidMigration",
        "SumFileMissing",
        "SumFileMismatch",
        "UnknownTarget",
    }
)
# Any userinfo in any URL-looking text: scheme://user:pass@
_USERINFO = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]*@")


def strip_userinfo(text: str) -> str:
    """``text`` with the userinfo of every URL in it replaced: ``scheme://***@host``."""
    return _USERINFO.sub(r"\1***@", text)


def one_line(text: str, limit: int = 480) -> str:
    """A frame's reason text as a status message or Event carries it: one line, no URL
    userinfo, bounded (the runner already scrubbed its own secrets)."""
    folded = " ".join(strip_userinfo(text).split())
    return folded if len(folded) <= limit else folded[: limit - 3] + "..."


def escape_line(text: str) -> str:
    """Make any non-frame output safe to print: no line may start with the prefix."""
    out = []
    for line in text.splitlines() or [""]:
        if line.lstrip().startswith(PREFIX) or line.startswith(ESCAPE):
            line = ESCAPE + line
        out.append(line)
    return "\n".join(out)


def assert_no_secret(frame_line: str, secrets: Iterable[str]) -> None:
    """Refuse to print a frame that carries any known secret value."""
    for secret in secrets:
        if secret and len(secret) >= 4 and secret in frame_line:
            raise ValueError("result frame would carry a credential; refusing to emit it")
