"""The one in-Pod run wrapper and output discipline of every runner operation.

:func:`run_operation` opens the target, hands the operation a :class:`Run` and prints
the one frame it returns, or the frame of the failure that stopped it; no operation
prints, opens or frames anything itself. :class:`Output` is the only writer: one frame
on stdout (a second is refused), everything else escaped on stderr (Pod logs merge the
two, so no other line may look like a frame), every text scrubbed of the credentials of
both URLs, a frame's message bounded by the engines' one rule (``report.bounded``).
The frame's model is imported only when a payload needs it: logging must not cost the
runner's start-up the pydantic import.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ptah import failures
from ptah.engines.urls import scrub
from ptah.runner.wire import Payload, assert_no_secret, escape_line, payload, render_payload

if TYPE_CHECKING:
    from ptah.engines.base import Target
    from ptah.engines.report import DatabaseIdentity
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
        """Print ``frame``, its message scrubbed and bounded; refuse a second frame, and
        a frame still carrying a credential (then none is printed: no evidence is better
        than a leaked password, and the operator treats a missing frame as unknown)."""
        if self.emitted:
            raise RuntimeError("a run prints exactly one result frame")
        data = frame.get("data") or {}
        if isinstance(data.get("message"), str):
            from ptah.engines.report import bounded

            message = bounded(scrub(data["message"], *self.secrets))
            frame = {**frame, "data": {**data, "message": message}}
        line = render_payload(frame)
        assert_no_secret(line, self.secrets)
        sys.stderr.flush()
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        self.emitted = True


@dataclass(frozen=True)
class Run:
    """One runner operation under way: what its frame will say it is, the opened target
    and whom it turned out to be (asked of the database before the operation starts),
    the scratch URL, and the only place it may say anything besides its frame."""

    operation_id: str
    operation_type: OperationType
    target: Target
    identity: DatabaseIdentity
    dev_url: DbUrl | None
    out: Output

    @classmethod
    def on(
        cls,
        target: Target,
        operation_type: OperationType,
        operation_id: str,
        dev_url: DbUrl | None = None,
    ) -> Run:
        """A run on a target opened already (a test, a tool); it logs to stderr."""
        out = Output(target.url.secrets)
        return cls(operation_id, operation_type, target, target.identity(), dev_url, out)

    def log(self, text: str) -> None:
        self.out.log(self.target.scrub(text))

    def frame(self, outcome: str, reason: str = "", data: dict[str, Any] | None = None) -> Payload:
        """The operation's frame: ``outcome`` one of ``engines.report.Outcome``."""
        return payload(self.operation_id, self.operation_type, self.identity, outcome, reason, data)


Body = Callable[[Run], Payload]


def run_operation(operation_id: str | None, operation_type: OperationType, body: Body) -> int:
    """Open the target, run ``body``, print its one frame: every runner operation's frame
    goes out through here, and so does every failure to get as far as running one.

    A failure of input or environment (:mod:`ptah.failures`) is a ``failed`` frame whose
    reason is the class, one clear line on stderr, and the class's exit code; an
    operation that ran to its own outcome (succeeded, refused, failed by its SQL) exits
    0: the frame, not the exit code, is the evidence the operator reads.
    """
    from ptah.engines.base import EngineError
    from ptah.engines.connect import bad_url, open_url
    from ptah.engines.urls import UrlError

    out = Output()
    prog = f"ptah-runner {operation_type}"
    operation_id = (operation_id or "").strip()
    if not operation_id:
        out.log(f"{prog}: no operation id (pass --operation-id or set PTAH_OPERATION_ID)")
        return failures.USAGE
    try:
        url, dev = _urls(out)
        with _collector_paused():
            target = open_url(url)
    except (UrlError, EngineError) as exc:
        err = bad_url(exc) if isinstance(exc, UrlError) else exc
        return _report(out, prog, _failed(operation_id, operation_type, None, err.reason, str(err)))
    with target:
        identity: DatabaseIdentity | None = None
        try:
            identity = target.identity()
            frame = body(Run(operation_id, operation_type, target, identity, dev, out))
        except Exception as exc:
            reason = exc.reason if isinstance(exc, EngineError) else failures.INTERNAL.reason
            if reason == failures.INTERNAL.reason:
                import traceback

                out.log(target.scrub(traceback.format_exc()))
            message = target.scrub(f"{type(exc).__name__}: {exc}")
            frame = _failed(operation_id, operation_type, identity, reason, message)
    return _report(out, prog, frame)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Opening the target imports the engine's driver: some 50,000 objects allocated that
    live as long as the process, which costs about 70 runs of the cyclic collector (a tenth of
    psycopg's import) for nothing. Every Job pays it before its first round trip, so the
    collector waits until the target is open (or failed to open), then runs as before."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


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


def _failed(
    operation_id: str,
    operation_type: OperationType,
    identity: DatabaseIdentity | None,
    reason: str,
    message: str,
) -> Payload:
    return payload(operation_id, operation_type, identity, "failed", reason, {"message": message})


def _report(out: Output, prog: str, frame: Payload) -> int:
    """Print ``frame``; for a failure class, one line on stderr and the class's code."""
    reason = str(frame.get("reason") or "")
    code = failures.exit_code_for(reason) if frame.get("outcome") != "succeeded" else None
    if code is not None:
        said = " ".join(str((frame.get("data") or {}).get("message") or reason).split())
        out.log(f"{prog}: {said} [{reason}, exit {code}]")
    out.frame(frame)
    return code or failures.OK
