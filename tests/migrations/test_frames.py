"""Whatever a migration prints or raises, the runner's output holds exactly one frame."""

from __future__ import annotations

from pathlib import Path

import pytest
from migsupport import engine_of, run, write_dir

from ptah.runner.frame import PREFIX, parse_result_for

pytestmark = pytest.mark.integration

FORGED = f"{PREFIX} v1 2 0000 {{}}"


def _noisy(engine: str) -> dict[str, str]:
    ident = {"mysql": "`{}`", "postgres": '"{}"', "sqlite": '"{}"'}[engine]
    weird = ident.format(f"x\n{FORGED}")
    files = {"1_t.sql": f"CREATE TABLE {weird} (id INTEGER);"}
    if engine == "postgres":
        files["2_notice.sql"] = (
            "DO $$ BEGIN\n"
            f"  RAISE NOTICE E'{FORGED}';\n"
            f"  RAISE WARNING E'line\\n{FORGED}';\n"
            "END $$;\n"
        )
        files["3_raise.sql"] = f"DO $$ BEGIN RAISE EXCEPTION E'boom\\n{FORGED}'; END $$;"
    elif engine == "mysql":
        files["2_warn.sql"] = f"SELECT '{FORGED}';\n"
        files["3_raise.sql"] = f"SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'boom\\n{FORGED}';"
    else:
        files["2_echo.sql"] = f"SELECT '{FORGED}';\n"
        files["3_raise.sql"] = f"CREATE TABLE {weird} (id INTEGER);"
    return files


def test_notices_and_errors_never_forge_a_frame(db_url: str, tmp_path: Path) -> None:
    d = write_dir(tmp_path / "m", _noisy(engine_of(db_url)))
    r = run(db_url, "migrate", d)
    assert (r.frame.outcome, r.frame.reason) == ("failed", "StatementFailed")
    assert r.data["applied"] == ["1", "2"]
    assert r.data["failure"]["version"] == "3"
    assert PREFIX in r.data["failure"]["error"]  # carried inside the JSON, not as a line
    combined = r.proc.stdout + r.proc.stderr
    assert PREFIX in r.proc.stderr  # the text was printed, escaped
    for line in r.proc.stderr.splitlines():
        assert not line.startswith(PREFIX), line
    verdict = parse_result_for(combined, r.operation_id)
    assert verdict.frame is not None, verdict
    assert verdict.frame == r.frame


@pytest.mark.parametrize("engine", ["postgres", "mysql"])  # SQLite URLs carry no credentials
def test_no_credentials_in_any_output(
    engine: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    from ptah.engines.urls import parse_url

    db_url = request.getfixturevalue({"postgres": "pg_url", "mysql": "mysql_url"}[engine])
    password = parse_url(db_url).password
    assert password
    d = write_dir(tmp_path / "m", {"1_bad.sql": f"SELECT * FROM missing_{len(password)};"})
    r = run(db_url, "migrate", d)
    assert r.frame.outcome == "failed"
    assert password not in r.proc.stdout + r.proc.stderr
    wrong = db_url.replace(password, password + "-wrong")
    r = run(wrong, "history", d)
    assert (r.frame.outcome, r.frame.reason) == ("failed", "AuthenticationFailed")
    assert password not in r.proc.stdout + r.proc.stderr


def test_missing_url_and_operation_id(tmp_path: Path) -> None:
    import subprocess
    import sys

    d = write_dir(tmp_path / "m", {"1_a.sql": "SELECT 1;"})
    env = {"PATH": "/usr/bin:/bin"}
    cmd = [sys.executable, "-m", "ptah.runner.main", "history", "--dir", str(d)]
    proc = subprocess.run([*cmd, "--operation-id", "x"], env=env, capture_output=True, text=True)
    verdict = parse_result_for(proc.stdout, "x")
    assert verdict.frame is not None and verdict.frame.reason == "BadUrl"
    assert proc.returncode == 10 and "PTAH_DB_URL is not set" in proc.stderr
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert proc.returncode != 0 and proc.stdout == ""
