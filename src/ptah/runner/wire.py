"""The frame as the runner prints it: the line, its payload as plain JSON, the identity.

Everything a runner process needs to print its one frame, and to print everything else
safely next to it (the prefix, the escaping of every other line, the refusal to print a
credential), lives here and imports nothing heavy: every Job pays its runner's start-up,
and a frame is a dozen JSON fields, not a reason to load pydantic. The operator reads
frames with the pydantic model in :mod:`ptah.runner.frame`, which validates this same
shape (tests/unit/test_frame.py holds the two to one shape).

A frame is exactly one line of the runner's stdout::

    PTAH-RESULT-FRAME v1 <length> <sha256-hex> <json>
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from ptah import failures
from ptah.engines.urls import strip_userinfo

if TYPE_CHECKING:
    from ptah.engines.report import DatabaseIdentity, Outcome
    from ptah.runner.frame import OperationType

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
        "IgnoredInDesired",  # the desired source creates what spec.policy.ignore covers
        "PlanError",
        "InputUnreadable",
        "InvalidMigration",
        "SumFileMissing",
        "SumFileMismatch",
        "UnknownTarget",
    }
    | failures.DETERMINISTIC  # a bad URL, refused credentials, no such database...
)


def one_line(text: str, limit: int = 480) -> str:
    """A frame's reason text as a status message or Event carries it: one line, no URL
    userinfo, bounded (the runner already scrubbed its own secrets)."""
    folded = " ".join(strip_userinfo(text).split())
    return folded if len(folded) <= limit else folded[: limit - 3] + "..."


Payload = dict[str, Any]


def payload(
    operation_id: str,
    operation_type: OperationType,
    database: DatabaseIdentity | None,
    outcome: Outcome | str,
    reason: str = "",
    data: dict[str, Any] | None = None,
) -> Payload:
    """The payload of one frame, with the field names the frame model reads (``outcome``
    one of ``Outcome``'s values: the operator refuses a frame with any other)."""
    return {
        "version": VERSION,
        "operationId": operation_id,
        "operationType": operation_type,
        "database": None if database is None else asdict(database),
        "outcome": outcome,
        "reason": reason,
        "data": data or {},
    }


def frame_line(text: str) -> str:
    """The single stdout line carrying the JSON payload ``text``."""
    import hashlib  # after the connection: see ptah.runner.main.AFTER_CONNECT

    digest = hashlib.sha256(text.encode()).hexdigest()
    return f"{PREFIX} {VERSION} {len(text.encode())} {digest} {text}"


def render_payload(frame: Payload) -> str:
    """The line for ``frame``, in the model's canonical JSON. A payload holding values
    plain JSON cannot say as they are (a timestamp read from a history table) is
    rendered by the model itself, which says them as the operator will read them."""
    try:
        text = json.dumps(frame, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        from ptah.runner.frame import ResultFrame

        text = ResultFrame.model_validate(frame).to_json()
    return frame_line(text)


def escape_line(text: str) -> str:
    """Make any non-frame output safe to print: no line may start with the prefix."""
    out = []
    for line in text.splitlines() or [""]:
        if line.lstrip().startswith(PREFIX) or line.startswith(ESCAPE):
            line = ESCAPE + line
        out.append(line)
    return "\n".join(out)


def assert_no_secret(line: str, secrets: Iterable[str]) -> None:
    """Refuse to print a frame that carries any known secret value."""
    for secret in secrets:
        if secret and len(secret) >= 4 and secret in line:
            raise ValueError("result frame would carry a credential; refusing to emit it")
