"""The result frame: the only evidence of what a run did.

A frame is exactly one line of the runner's stdout::

    PTAH-RESULT-FRAME v1 <length> <sha256-hex> <json>

The length and digest cover the JSON payload, so a line cut short by a log
rotation or a killed container is recognised as truncated rather than parsed.
Everything else the runner prints goes through :func:`escape_line`, which makes
sure no SQL output, notice or error text can begin with the prefix: a migration
that ``RAISE NOTICE``s a forged frame produces an escaped line, never a frame.

The operator reads frames with :func:`parse_result_for`, which answers either
the one frame of the expected operation or the precise reason none counts.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ptah.engines.report import DatabaseIdentity, Outcome

# The line discipline lives in ``wire`` (no pydantic there: the runner prints frames
# without this module); named here too for readers of the frame. Whom a run talked to
# and how it ended are the engines' facts (``ptah.engines.report``).
from ptah.runner.wire import ESCAPE as ESCAPE
from ptah.runner.wire import PREFIX as PREFIX
from ptah.runner.wire import VERSION as VERSION
from ptah.runner.wire import assert_no_secret as assert_no_secret
from ptah.runner.wire import escape_line as escape_line
from ptah.runner.wire import frame_line

OperationType = Literal["identify", "plan", "apply", "history", "migrate"]


class ResultFrame(BaseModel):
    """The versioned payload of one frame: what the operator reads.

    The runner builds the same payload as plain JSON (``wire.payload``), so its start-up
    never pays for this model; tests/unit/test_frame.py holds the two to one shape.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: Literal["v1"] = "v1"
    operation_id: str = Field(alias="operationId")
    operation_type: OperationType = Field(alias="operationType")
    database: DatabaseIdentity | None
    outcome: Outcome
    reason: str = ""
    data: dict[str, Any] = Field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(
            self.model_dump(mode="json", by_alias=True), sort_keys=True, separators=(",", ":")
        )


def render(frame: ResultFrame) -> str:
    """The single stdout line for ``frame``."""
    return frame_line(frame.to_json())


class NoFrameReason(enum.StrEnum):
    NONE = "NoFrame"
    MULTIPLE = "MultipleFrames"
    OTHER_OPERATION = "OtherOperation"
    TRUNCATED = "Truncated"
    UNKNOWN_VERSION = "UnknownVersion"
    MALFORMED = "Malformed"


@dataclass(frozen=True)
class FrameVerdict:
    """Either the operation's frame, or why no frame counts."""

    frame: ResultFrame | None
    reason: NoFrameReason | None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.frame is not None


def _candidates(log_text: str) -> Iterable[str]:
    for raw in log_text.splitlines():
        # Kubernetes may prefix lines with a timestamp when asked to; Ptah never asks.
        if raw.startswith(PREFIX):
            yield raw


def _decode(line: str) -> tuple[ResultFrame | None, NoFrameReason | None, str]:
    parts = line.split(" ", 4)
    if len(parts) < 2 or parts[0] != PREFIX:
        return None, NoFrameReason.MALFORMED, "bad prefix"
    if parts[1] != VERSION:
        return None, NoFrameReason.UNKNOWN_VERSION, f"frame version {parts[1][:16]!r}"
    if len(parts) < 5:
        return None, NoFrameReason.TRUNCATED, "frame header incomplete"
    _, _, length, digest, payload = parts
    if not length.isdigit() or len(payload.encode()) != int(length):
        return None, NoFrameReason.TRUNCATED, "payload length differs from header"
    if hashlib.sha256(payload.encode()).hexdigest() != digest:
        return None, NoFrameReason.TRUNCATED, "payload digest differs from header"
    try:
        return ResultFrame.model_validate_json(payload), None, ""
    except ValidationError as exc:
        return None, NoFrameReason.MALFORMED, f"payload invalid: {exc.error_count()} errors"


def parse_result_for(log_text: str, operation_id: str) -> FrameVerdict:
    """The frame of ``operation_id`` in ``log_text``, or the reason none counts.

    Any frame-shaped line counts towards "more than one", even a broken one: a
    log holding two attempts at a frame is not evidence of a single run.
    """
    lines = list(_candidates(log_text))
    if not lines:
        return FrameVerdict(None, NoFrameReason.NONE, "no frame in the log")
    if len(lines) > 1:
        return FrameVerdict(None, NoFrameReason.MULTIPLE, f"{len(lines)} frame lines")
    frame, reason, detail = _decode(lines[0])
    if frame is None:
        return FrameVerdict(None, reason, detail)
    if frame.operation_id != operation_id:
        return FrameVerdict(
            None, NoFrameReason.OTHER_OPERATION, f"frame is for {frame.operation_id[:64]!r}"
        )
    return FrameVerdict(frame, None)
