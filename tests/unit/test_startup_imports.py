"""Start-up discipline: what each entry point imports before it first talks to the outside.

Every runner Job pays the runner's start-up before its first database round trip, so the
runner must not load the frame's models (pydantic), the planner (sqlglot), the operator's
libraries or another engine's driver before it connects; ``ptah --help`` must not load
any of them at all. (Time itself is measured by ``bench/startup.py``, not here.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ptah.runner.main import LATE_PACKAGES

# On SQLite, neither of the other engines' drivers may load either.
HEAVY = (*LATE_PACKAGES, "psycopg", "pymysql")

# Record the heavy packages loaded at the moment the runner opens its database, run the
# operation, and print the record as the last stderr line.
PROBE = """
import json, sys
import ptah.engines.connect as connect
import ptah.runner.main as main
HEAVY = set(json.loads(sys.argv[1]))
seen = []
real = connect.open_url
def probe(url):
    seen.append(sorted({n.split(".")[0] for n in sys.modules} & HEAVY))
    return real(url)
connect.open_url = probe
main.open_url = probe
code = main.main(sys.argv[2:])
end = sorted({n.split(".")[0] for n in sys.modules} & HEAVY)
sys.stderr.write("\\nPROBE " + json.dumps({"code": code, "seen": seen, "end": end}) + "\\n")
"""


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PTAH_")}
    env["PTAH_DB_URL"] = f"sqlite:///{tmp_path}/db.sqlite"
    env["PTAH_OPERATION_ID"] = "op-startup"
    return env


def _probe(args: list[str], tmp_path: Path) -> tuple[dict[str, object], str]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(HEAVY), *args],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("PROBE "), proc.stderr[-2000:]
    return json.loads(last.split(" ", 1)[1]), proc.stdout


@pytest.mark.parametrize("operation", ["identify", "plan", "apply", "history", "migrate"])
def test_runner_connects_before_loading_heavy_packages(operation: str, tmp_path: Path) -> None:
    desired = tmp_path / "desired.sql"
    desired.write_text("CREATE TABLE t (id integer PRIMARY KEY);\n")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"statements": [], "fingerprintBefore": "x"}))
    migrations = tmp_path / "migrations"
    migrations.mkdir()
    (migrations / "1_a.sql").write_text("CREATE TABLE a (id integer);\n")
    args = {
        "identify": ["identify"],
        "plan": ["plan", "--desired", str(desired)],
        "apply": ["apply", "--plan", str(plan)],
        "history": ["history", "--dir", str(migrations)],
        "migrate": ["migrate", "--dir", str(migrations)],
    }[operation]
    record, stdout = _probe(args, tmp_path)
    assert record["code"] == 0
    # It did connect (once), and it printed its frame after connecting.
    assert record["seen"] == [[]], f"loaded before connecting: {record['seen']}"
    assert stdout.count("PTAH-RESULT-FRAME v1 ") == 1
    # The frame itself costs no pydantic: only planning and applying load the SQL parser.
    assert record["end"] == (["sqlglot"] if operation in ("plan", "apply") else [])


def test_runner_frame_still_printed_when_the_url_is_bad(tmp_path: Path) -> None:
    env = {**_env(tmp_path), "PTAH_DB_URL": "nosuch://x"}
    proc = subprocess.run(
        [sys.executable, "-m", "ptah.runner.main", "identify"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 10  # BadUrl
    assert proc.stdout.startswith("PTAH-RESULT-FRAME v1 ")
    assert '"reason":"BadUrl"' in proc.stdout


def test_ptah_help_loads_no_heavy_package() -> None:
    code = (
        "import json, sys\n"
        "import ptah.cli.main as m\n"
        "try:\n"
        "    m.main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = set(json.loads(sys.argv[1]))\n"
        "print('LOADED', json.dumps(sorted({n.split('.')[0] for n in sys.modules} & heavy)))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "usage: ptah" in proc.stdout
    loaded = json.loads(proc.stdout.strip().splitlines()[-1].split(" ", 1)[1])
    assert loaded == []
