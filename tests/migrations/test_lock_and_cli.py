"""The realm fence refuses a second runner or makes it wait; the people's CLI prints
readable state."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from migsupport import fence_attempts, run, start, write_dir

from ptah.engines import fence
from ptah.engines.connect import open_target
from ptah.runner.frame import parse_result_for
from support.wait import wait_for

pytestmark = pytest.mark.integration


def test_held_fence_refuses_then_a_waiting_run_proceeds(db_url: str, tmp_path: Path) -> None:
    d = write_dir(tmp_path / "m", {"1_a.sql": "CREATE TABLE a (id INTEGER);"})
    with open_target(db_url) as holder:
        realm = holder.identity().digest
        with fence.held(holder.engine, holder.connection, realm):
            r = run(db_url, "migrate", d)
            assert (r.frame.outcome, r.frame.reason) == ("fenced", "RealmBusy")
            assert r.data["applied"] == []
            # --lock-timeout waits for the fence instead: it is released a moment later.
            with fence_attempts(db_url) as attempts:
                waiting, opid = start(db_url, "migrate", [d], "--lock-timeout", "60")

                def refused_again_and_waiting() -> bool:
                    assert waiting.poll() is None, waiting.communicate()
                    return attempts() >= 3

                wait_for("the waiting run refused, still trying", refused_again_and_waiting)
    out, err = waiting.communicate(timeout=120)
    frame = parse_result_for(out, opid).frame
    assert frame is not None and frame.data["applied"] == ["1"], (out, err)


def _ptah(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "ptah.cli.main", "migrate", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_cli_hash_status_apply(tmp_path: Path) -> None:
    d = write_dir(
        tmp_path / "m",
        {"1_init.sql": "CREATE TABLE a (id INTEGER);", "2_more.sql": "CREATE TABLE b (x int);"},
        sums=False,
    )
    assert _ptah("hash", "--check", str(d)).returncode == 1
    wrote = _ptah("hash", str(d))
    assert wrote.returncode == 0 and "2 files" in wrote.stdout
    assert _ptah("hash", "--check", str(d)).returncode == 0
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    applied = _ptah("apply", "--url", url, "--dir", str(d), "--to", "1")
    assert applied.returncode == 0, applied.stderr
    assert "applying 1_init.sql" in applied.stdout
    status = _ptah("status", "--url", url, "--dir", str(d))
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    assert any(line.startswith("1 ") and "applied" in line for line in lines), lines
    assert any(line.startswith("2 ") and "pending" in line for line in lines), lines
    assert "1 applied, 1 pending" in status.stdout
    (d / "1_init.sql").write_text("CREATE TABLE a (id BIGINT);")
    refused = _ptah("apply", "--url", url, "--dir", str(d))
    assert refused.returncode == 1 and "SumFileMismatch" in refused.stderr
