"""Start-up discipline: what each entry point imports before it first talks to the outside.

Every runner Job pays the runner's start-up before its first database round trip, so the
runner must not load the frame's models (pydantic), the planner (sqlglot), the operator's
libraries or another engine's driver before it connects, nor, before its own driver, what
only the opened target needs (``AFTER_CONNECT``) or the heavy stdlib a driver may bring
(``STDLIB_HEAVY``: loaded by ptah first, it would cost the SQLite runner, and every
runner if a driver stopped loading it); ``ptah --help`` must not load any of them at all.
(Time itself is measured by ``bench/startup.py``, not here.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ptah import failures
from ptah.runner.main import AFTER_CONNECT, LATE_PACKAGES

DRIVERS = {"postgres": "psycopg", "mysql": "pymysql"}
# What psycopg's import pulls in (asyncio alone is a third of it): none of it is the
# runner's to load.
STDLIB_HEAVY = ("asyncio", "ssl", "importlib.metadata", "email", "logging", "ctypes")
# On SQLite, neither of the other engines' drivers may load either.
HEAVY = (*LATE_PACKAGES, *DRIVERS.values(), *AFTER_CONNECT, *STDLIB_HEAVY)

# Record the heavy modules loaded at the moment the runner opens its database, and when
# its driver's import begins, run the operation, and print the record as the last stderr
# line. A heavy name is a package or a dotted module ("importlib.metadata").
PROBE = """
import gc, json, sys
import ptah.engines.connect as connect
import ptah.runner.main as main
HEAVY = set(json.loads(sys.argv[1]))
DRIVER = sys.argv[2]
def heavy():
    return sorted(n for n in HEAVY if n in sys.modules)
seen, at_driver = [], []
real = connect.open_url
def probe(url):
    seen.append(heavy())
    return real(url)
connect.open_url = probe
class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == DRIVER and not at_driver:
            at_driver.append({"heavy": heavy(), "collector": gc.isenabled()})
        return None
sys.meta_path.insert(0, Watch())
code = main.main(sys.argv[3:])
record = {"code": code, "seen": seen, "driver": at_driver, "end": heavy()}
record["collector_after"] = gc.isenabled()
sys.stderr.write("\\nPROBE " + json.dumps(record) + "\\n")
"""


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PTAH_")}
    env["PTAH_DB_URL"] = f"sqlite:///{tmp_path}/db.sqlite"
    env["PTAH_OPERATION_ID"] = "op-startup"
    return env


def _probe(
    args: list[str], tmp_path: Path, url: str | None = None, driver: str = ""
) -> tuple[dict[str, Any], str]:
    env = _env(tmp_path)
    if url is not None:
        env["PTAH_DB_URL"] = url
    record, proc = _run_probe([PROBE, json.dumps(HEAVY), driver, *args], env)
    return record, proc.stdout


def _run_probe(
    argv: list[str], env: dict[str, str]
) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    """Run ``python -c argv...`` and read the record its last stderr line carries."""
    proc = subprocess.run(
        [sys.executable, "-c", *argv], env=env, capture_output=True, text=True, timeout=120
    )
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("PROBE "), proc.stderr[-2000:]
    return json.loads(last.split(" ", 1)[1]), proc


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
    # The frame itself costs no pydantic: only planning and applying load the SQL parser,
    # and a History reading that has a file pending, which it reads for what reaches
    # outside the target database (ptah.engines.versioned.confine; migrate here stops at
    # the missing sum file, before it reads a file).
    end = set(record["end"])
    late = ["sqlglot"] if operation in ("plan", "apply", "history") else []
    assert sorted(end & {*LATE_PACKAGES, *DRIVERS.values()}) == late
    # What waits for the open target did load by the end (the frame line is hashed), so
    # the check at the open could have seen it.
    assert "hashlib" in end


@pytest.mark.parametrize("engine", sorted(DRIVERS))
def test_runner_loads_its_driver_first(engine: str, tmp_path: Path) -> None:
    """On PostgreSQL and MariaDB the driver is the start-up: when its import begins, the
    runner has loaded nothing heavy of its own, and the collector is paused for it (and
    running again afterwards). Port 1 refuses at once: the open fails, after the import."""
    driver = DRIVERS[engine]
    scheme = "postgresql" if engine == "postgres" else "mysql"
    url = f"{scheme}://ptah@127.0.0.1:1/startup"
    record, stdout = _probe(["identify"], tmp_path, url, driver)
    # Nothing listens on port 1: the driver loaded and tried.
    assert record["code"] == failures.UNREACHABLE.exit_code
    assert f'"reason":"{failures.UNREACHABLE.reason}"' in stdout
    assert record["driver"] == [{"heavy": [], "collector": False}], record["driver"]
    assert record["collector_after"] is True
    # The driver's import is what brings these, so the probe could have seen them.
    if engine == "postgres":
        assert {"asyncio", "logging"} <= set(record["end"]), record["end"]


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
    heavy = (*LATE_PACKAGES, *DRIVERS.values(), *STDLIB_HEAVY)
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
        [sys.executable, "-c", code, json.dumps(heavy)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "usage: ptah" in proc.stdout
    loaded = json.loads(proc.stdout.strip().splitlines()[-1].split(" ", 1)[1])
    assert loaded == []


# Record, as the runner opens its target, once the engine's driver is imported (what the
# open imports first), which of STARTUP_DEFERRED have run; the runner is imported first,
# as its console script does.
DEFERRED_PROBE = """
import importlib, json, sys
import ptah.runner.main as main
import ptah.engines.connect as connect
from ptah.engines.deferred import _DeferredModule
ran = []
real = connect.open_url
def probe(url):
    importlib.import_module(f"ptah.engines.{url.engine}.target")
    ran.append(sorted(n for n in main.STARTUP_DEFERRED
                      if n in sys.modules and type(sys.modules[n]) is not _DeferredModule))
    return real(url)
connect.open_url = probe
code = main.main(sys.argv[1:])
sys.stderr.write("\\nPROBE " + json.dumps({"code": code, "ran": ran}) + "\\n")
"""


@pytest.mark.parametrize("scheme", ["sqlite", "postgresql", "mysql"])
def test_runner_start_up_stdlib_has_not_run_when_the_target_opens(
    scheme: str, tmp_path: Path
) -> None:
    """The guard of ``STARTUP_DEFERRED``: nothing the runner or its driver imports reads
    one of those modules before the target is open. If a Python or driver version starts
    to, this fails (the module then runs where it is read: nothing breaks, the start-up
    grows), and the name should leave the list. (A failure to open may read them: PyMySQL
    keeps the traceback of a refused connection. Port 1 refuses at once.)"""
    env = _env(tmp_path)
    if scheme != "sqlite":
        env["PTAH_DB_URL"] = f"{scheme}://ptah@127.0.0.1:1/startup"
    record, proc = _run_probe([DEFERRED_PROBE, "identify"], env)
    assert record["ran"] == [[]], record
    expected = failures.OK if scheme == "sqlite" else failures.UNREACHABLE.exit_code
    assert record["code"] == expected, proc.stderr[-2000:]


def test_runner_start_up_stdlib_runs_once_read() -> None:
    """Each of ``STARTUP_DEFERRED`` is the module as soon as it is read: a traceback still
    shows its source lines (linecache, tokenize), and shutil, imported with bz2 and lzma
    deferred, still offers the archive formats that need them."""
    code = """
import sys, types
import ptah.runner.main as main
from ptah.engines.deferred import _DeferredModule
import bz2, copy, linecache, lzma, signal, textwrap, tokenize
assert all(type(sys.modules[n]) is _DeferredModule for n in main.STARTUP_DEFERRED), [
    (n, type(sys.modules[n])) for n in main.STARTUP_DEFERRED]
import json, shutil, traceback
assert {"bztar", "xztar"} <= {name for name, _ in shutil.get_archive_formats()}
assert bz2.decompress(bz2.compress(b"ptah")) == b"ptah"
assert lzma.decompress(lzma.compress(b"ptah")) == b"ptah"
assert copy.deepcopy({"a": [1]}) == {"a": [1]}
assert textwrap.fill("a b", width=1) == "a\\nb"
assert signal.Signals.SIGTERM == signal.SIGTERM
try:
    json.loads("{")
except ValueError:
    text = traceback.format_exc()
assert "return _default_decoder.decode(s)" in text, text
assert all(type(sys.modules[n]) is types.ModuleType for n in main.STARTUP_DEFERRED)
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "ok"
