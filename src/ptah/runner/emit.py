"""Output discipline for the runner: one frame on stdout, everything else escaped on stderr.

Pod logs merge stdout and stderr, so every non-frame line goes through
``wire.escape_line`` and every text is scrubbed of credentials first. The frame's
model is imported only when a frame is printed: logging must not cost the runner's
start-up the pydantic import.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ptah.engines.urls import scrub
from ptah.runner.wire import assert_no_secret, escape_line

if TYPE_CHECKING:
    from ptah.runner.frame import ResultFrame


class Output:
    """Prints log lines and exactly one frame; knows the secrets it must never print."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = tuple(s for s in secrets if s)
        self.emitted = False

    def log(self, text: str) -> None:
        sys.stderr.write(escape_line(scrub(text, *self.secrets)) + "\n")
        sys.stderr.flush()

    def frame(self, frame: ResultFrame) -> None:
        if self.emitted:
            raise RuntimeError("a run prints exactly one result frame")
        from ptah.runner.frame import render

        line = render(frame)
        assert_no_secret(line, self.secrets)
        sys.stderr.flush()
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        self.emitted = True
