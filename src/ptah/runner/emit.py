"""Output discipline for the runner: one frame on stdout, everything else escaped on stderr.

Pod logs merge stdout and stderr, so every non-frame line goes through
``wire.escape_line`` and every text is scrubbed of credentials first. The frame is
printed from its plain-JSON payload (``wire``): the runner never loads pydantic.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from ptah.engines.urls import scrub
from ptah.runner.wire import Payload, assert_no_secret, escape_line, render_payload


class Output:
    """Prints log lines and exactly one frame; knows the secrets it must never print."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = tuple(s for s in secrets if s)
        self.emitted = False

    def log(self, text: str) -> None:
        sys.stderr.write(escape_line(scrub(text, *self.secrets)) + "\n")
        sys.stderr.flush()

    def frame(self, frame: Payload) -> None:
        if self.emitted:
            raise RuntimeError("a run prints exactly one result frame")
        line = render_payload(frame)
        assert_no_secret(line, self.secrets)
        sys.stderr.flush()
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        self.emitted = True
