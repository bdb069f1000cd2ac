"""One run wrapper for every runner operation: the same failure has the same frame
(reason, exit code, one stdout line, no credential) whichever operation meets it, and
the one emitter bounds, scrubs and refuses the same way for all of them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ptah import failures
from ptah.engines.report import TEXT_LIMIT, DatabaseIdentity
from ptah.runner.emit import Output
from ptah.runner.frame import parse_result_for
from ptah.runner.wire import payload

IDENT = DatabaseIdentity(engine="sqlite", key={"path": "/x"})


def _args(op: str, tmp: Path) -> list[str]:
    extra = {
        "identify": [],
        "plan": ["--desired", str(tmp / "d.sql")],
        "apply": ["--plan", str(tmp / "p.json")],
        "history": ["--dir", str(tmp)],
        "migrate": ["--dir", str(tmp)],
    }[op]
    return [op, *extra]


def _run(op: str, tmp: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("PTAH_DB_URL", "PTAH_DEV_URL")}
    return subprocess.run(
        [sys.executable, "-m", "ptah.runner.main", *_args(op, tmp)],
        env={**base, "PTAH_OPERATION_ID": f"op-{op}", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("op", ["identify", "plan", "apply", "history", "migrate"])
@pytest.mark.parametrize(
    ("env", "failure"),
    [
        ({}, failures.BAD_URL),
        ({"PTAH_DB_URL": "postgresql://u:s3cretpw@127.0.0.1:1/db"}, failures.UNREACHABLE),
    ],
    ids=["missing-url", "unreachable"],
)
def test_every_operation_reports_a_missing_or_unreachable_target_alike(
    op: str, env: dict[str, str], failure: failures.FailureClass, tmp_path: Path
) -> None:
    proc = _run(op, tmp_path, env)
    assert proc.returncode == failure.exit_code, proc.stderr
    assert len(proc.stdout.splitlines()) == 1, proc.stdout
    frame = parse_result_for(proc.stdout + proc.stderr, f"op-{op}").frame
    assert frame is not None and frame.operation_type == op
    assert (frame.outcome, frame.reason) == ("failed", failure.reason)
    assert f"[{failure.reason}, exit {failure.exit_code}]" in proc.stderr
    assert "s3cretpw" not in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_emitter_bounds_and_scrubs_the_message_and_prints_one_frame(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = Output(secrets=["hunter22"])
    long = "boom hunter22 " + "x" * (3 * TEXT_LIMIT)
    out.frame(payload("op-1", "migrate", IDENT, "failed", "StatementFailed", {"message": long}))
    printed = capsys.readouterr().out
    frame = parse_result_for(printed, "op-1").frame
    assert frame is not None
    message = frame.data["message"]
    assert len(message) == TEXT_LIMIT and message.endswith("...")
    assert "hunter22" not in printed and message.startswith("boom ***")
    with pytest.raises(RuntimeError):
        out.frame(payload("op-1", "migrate", IDENT, "succeeded"))
    assert capsys.readouterr().out == ""


def test_a_frame_carrying_a_credential_outside_its_message_is_not_printed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A statement is never rewritten to hide a secret (it would apply other SQL): the
    frame is withheld, and the operator treats the missing frame as unknown."""
    out = Output(secrets=["hunter22"])
    data = {"statements": [{"sql": "ALTER ROLE app PASSWORD 'hunter22'"}]}
    with pytest.raises(ValueError):
        out.frame(payload("op-2", "plan", IDENT, "succeeded", "", data))
    assert capsys.readouterr().out == "" and not out.emitted
    assert data["statements"][0]["sql"].endswith("'hunter22'")  # never rewritten
