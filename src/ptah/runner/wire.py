"""The frame's line discipline, apart from its payload model.

Everything a process needs to print safely next to a frame (the prefix, the
escaping of every other line, the refusal to print a credential) lives here and
imports nothing heavy: the runner logs before it has connected, and its start-up
must not pay for the payload's pydantic models until it has a frame to build
(:mod:`ptah.runner.frame` holds those, and the parser).
"""

from __future__ import annotations

from collections.abc import Iterable

PREFIX = "PTAH-RESULT-FRAME"
VERSION = "v1"
ESCAPE = "| "


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
