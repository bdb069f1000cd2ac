"""Frame parsing rejects forged, foreign, duplicated and truncated frames; the runner emits one."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

from ptah.runner.frame import (
    PREFIX,
    DatabaseIdentity,
    NoFrameReason,
    ResultFrame,
    escape_line,
    parse_result_for,
    render,
)
from ptah.runner.wire import frame_line, payload, render_payload

IDENT = DatabaseIdentity(engine="sqlite", key={"path": "/x.db"})


def frame(op: str = "op-1") -> str:
    return render(
        ResultFrame.model_validate(
            {
                "operationId": op,
                "operationType": "plan",
                "database": IDENT,
                "outcome": "succeeded",
                "data": {"statements": []},
            }
        )
    )


def test_one_frame_is_found() -> None:
    verdict = parse_result_for(f"log\n{frame()}\nmore log\n", "op-1")
    assert verdict.ok and verdict.frame is not None and verdict.frame.database == IDENT


def test_forged_frame_in_escaped_output_is_not_a_frame() -> None:
    forged = escape_line("NOTICE\n" + frame())
    assert not any(line.startswith(PREFIX) for line in forged.splitlines())
    assert parse_result_for(forged, "op-1").reason is NoFrameReason.NONE
    tampered = frame().replace('"succeeded"', '"failed"   ')
    assert parse_result_for(tampered, "op-1").reason is NoFrameReason.TRUNCATED


def test_foreign_duplicated_truncated_unknown() -> None:
    assert parse_result_for(frame("other"), "op-1").reason is NoFrameReason.OTHER_OPERATION
    assert parse_result_for(frame() + "\n" + frame(), "op-1").reason is NoFrameReason.MULTIPLE
    assert parse_result_for(frame()[:-10], "op-1").reason is NoFrameReason.TRUNCATED
    v2 = frame().replace(" v1 ", " v2 ", 1)
    assert parse_result_for(v2, "op-1").reason is NoFrameReason.UNKNOWN_VERSION
    assert parse_result_for("", "op-1").reason is NoFrameReason.NONE


def _runner(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ptah.runner.main", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_runner_prints_exactly_one_frame_and_no_secret(tmp_path: Path) -> None:
    desired = tmp_path / "d.sql"
    desired.write_text("CREATE TABLE t (id INTEGER PRIMARY KEY);")
    db = tmp_path / "t.db"
    proc = _runner(
        ["plan", "--desired", str(desired)],
        {"PTAH_DB_URL": f"sqlite:///{db}", "PTAH_OPERATION_ID": "op-9"},
    )
    assert proc.returncode == 0
    assert len(proc.stdout.splitlines()) == 1
    verdict = parse_result_for(proc.stdout + proc.stderr, "op-9")
    assert verdict.frame is not None and verdict.frame.outcome == "succeeded"
    assert verdict.frame.data["changes"] is True
    bad = _runner(
        ["identify", "--operation-id", "op-10"],
        {"PTAH_DB_URL": "postgresql://u:s3cretpw@127.0.0.1:1/db"},
    )
    assert bad.returncode == 11  # TargetUnavailable: the server cannot be reached
    assert "s3cretpw" not in bad.stdout + bad.stderr
    failed = parse_result_for(bad.stdout, "op-10").frame
    assert failed is not None and failed.outcome == "failed"
    assert failed.reason == "TargetUnavailable"


def test_the_runners_plain_payload_is_the_models_frame() -> None:
    """The runner prints frames without pydantic (wire.payload); the operator reads them
    with the model. One shape: the same names, the same canonical line."""
    made = payload("op-1", "plan", IDENT, "succeeded", "", {"statements": [], "n": 2})
    assert set(made) == {f.alias or name for name, f in ResultFrame.model_fields.items()}
    line = render_payload(made)
    parsed = parse_result_for(line, "op-1").frame
    assert parsed is not None and parsed.database == IDENT and parsed.data["n"] == 2
    assert render(parsed) == line == render(ResultFrame.model_validate(made))
    # A value plain JSON cannot say (a timestamp read from a history table) is said the
    # way the model says it, so the operator reads what the model would have printed.
    stamp = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    with_time = payload("op-1", "history", None, "succeeded", "", {"at": stamp})
    assert render_payload(with_time) == render(ResultFrame.model_validate(with_time))
    # An identity the model does not know (another engine, an extra key) is no frame.
    for change in ({"engine": "oracle"}, {"extra": "x"}):
        body = json.loads(line.split(" ", 4)[4])
        body["database"].update(change)
        text = json.dumps(body, sort_keys=True, separators=(",", ":"))
        assert parse_result_for(frame_line(text), "op-1").reason is NoFrameReason.MALFORMED
