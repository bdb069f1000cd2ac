"""Output discipline for the runner: one frame on stdout, everything else escaped on stderr.

Pod logs merge stdout and stderr, so every non-frame line goes through
``wire.escape_line`` and every text is scrubbed of credentials first. The frame's
model is imported only when a frame is printed: logging must not cost the runner's
start-up the pydantic import.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ptah.engines.urls import scrub
from ptah.runner import failures
from ptah.runner.wire import (
    DatabaseIdentity,
    Payload,
    assert_no_secret,
    escape_line,
    render_payload,
)

if TYPE_CHECKING:
    from ptah.engines.base import Target
    from ptah.engines.urls import DbUrl
    from ptah.runner.frame import OperationType


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


Body = Callable[["Target", "DbUrl | None", Output], Payload]


def run_operation(operation_id: str | None, operation_type: OperationType, body: Body) -> int:
    """Open the target, run ``body``, print its one frame: every runner operation's frame
    goes out through here, and so does every failure to get as far as running one.

    A failure of input or environment (:mod:`ptah.runner.failures`) is a ``failed``
    frame whose reason is the class, one clear line on stderr, and the class's exit
    code; an operation that ran to its own outcome (succeeded, refused, failed by its
    SQL) exits 0: the frame, not the exit code, is the evidence the operator reads.
    """
    from ptah.engines.base import EngineError
    from ptah.engines.connect import bad_url, open_url
    from ptah.engines.urls import UrlError

    out = Output()
    prog = f"ptah-runner {operation_type}"
    if not operation_id:
        out.log(f"{prog}: no operation id (pass --operation-id or set PTAH_OPERATION_ID)")
        return failures.USAGE
    try:
        url, dev = _urls(out)
        target = open_url(url)
    except (UrlError, EngineError) as exc:
        err = bad_url(exc) if isinstance(exc, UrlError) else exc
        return _report(out, prog, _frame(operation_id, operation_type, None, err.reason, str(err)))
    with target:
        try:
            frame = body(target, dev, out)
        except Exception as exc:
            reason = exc.reason if isinstance(exc, EngineError) else failures.INTERNAL.reason
            if reason == failures.INTERNAL.reason:
                import traceback

                out.log(target.scrub(traceback.format_exc()))
            message = target.scrub(f"{type(exc).__name__}: {exc}")
            try:
                identity = target.identity()
            except Exception:
                identity = None
            frame = _frame(operation_id, operation_type, identity, reason, message)
    return _report(out, prog, frame)


def _urls(out: Output) -> tuple[DbUrl, DbUrl | None]:
    from ptah.engines.urls import UrlError, parse_url

    raw = os.environ.get("PTAH_DB_URL", "")
    if not raw:
        raise UrlError("PTAH_DB_URL is not set")
    url = parse_url(raw)
    out.secrets += url.secrets
    dev_raw = os.environ.get("PTAH_DEV_URL", "")
    try:
        dev = parse_url(dev_raw) if dev_raw else None
    except UrlError as exc:
        raise UrlError(f"PTAH_DEV_URL: {exc}") from None
    if dev is not None:
        out.secrets += dev.secrets
    return url, dev


def _frame(
    operation_id: str,
    operation_type: OperationType,
    identity: DatabaseIdentity | None,
    reason: str,
    message: str,
) -> Payload:
    from ptah.runner.operations import make_frame

    data = {"message": message[:2000]}
    return make_frame(operation_id, operation_type, identity, "failed", reason, data)


def _report(out: Output, prog: str, frame: Payload) -> int:
    """Print ``frame``; for a failure class, one line on stderr and the class's code."""
    reason = str(frame.get("reason") or "")
    code = failures.exit_code_for(reason) if frame.get("outcome") != "succeeded" else None
    if code is not None:
        said = " ".join(str((frame.get("data") or {}).get("message") or reason).split())
        out.log(f"{prog}: {said} [{reason}, exit {code}]")
    out.frame(frame)
    return code or failures.OK
