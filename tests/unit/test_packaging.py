"""The product runs without its test machinery: the wheel leaves ``ptah.testing`` out
(pyproject's ``packages.find``), and ``ptah.sim`` (the short ``python -m ptah.sim``) too,
and everything the image runs starts without it, while
``ptah dev`` says in one line that it needs a checkout's dev venv."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from setuptools import find_packages

ROOT = Path(__file__).resolve().parents[2]

# Run with ptah.testing made unimportable, as in an installed wheel or the image.
_WITHOUT_MACHINERY = """
import importlib.abc, sys
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "ptah.testing" or name.startswith("ptah.testing."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Absent())
"""


def _without_machinery(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT_MACHINERY + code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def test_the_wheel_leaves_out_the_test_machinery() -> None:
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    options = find["packages"]["find"]
    packages = set(find_packages(where=str(ROOT / options["where"][0]), exclude=options["exclude"]))
    machinery = {p for p in packages if p.startswith("ptah.testing") or p == "ptah.sim"}
    assert not machinery, sorted(packages)
    for runtime in ("ptah.runner", "ptah.engines.versioned", "ptah.operator", "ptah.kube"):
        assert runtime in packages, runtime
    assert not (ROOT / "src" / "ptah" / "kube" / "memory.py").exists()


def test_the_operator_and_the_runner_start_without_it() -> None:
    proc = _without_machinery(
        "import ptah.operator.main, ptah.runner.main, ptah.cli.main\n"
        "ptah.cli.main.build_parser().parse_args(['operator', 'run', '--help'])\n"
    )
    assert proc.returncode == 0, proc.stderr
    assert "usage:" in proc.stdout


def test_ptah_dev_says_in_one_line_that_it_needs_the_machinery() -> None:
    proc = _without_machinery(
        "import ptah.cli.main\nraise SystemExit(ptah.cli.main.main(['dev', 'status']))\n"
    )
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ptah dev status: "), proc.stderr
    assert "ptah.testing" in lines[0] and "Traceback" not in proc.stderr


def test_the_short_simulation_command_is_the_simulation() -> None:
    """``python -m ptah.sim`` (the command issue 11 names) runs the same schedules as
    ``python -m ptah.testing.sim``: same summary line for the same seeds."""
    args = ["--schedules", "3", "--seed", "11", "--jobs", "1"]

    def summary(module: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-m", module, *args],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.split(" seconds=")[0]

    short = summary("ptah.sim")
    assert short.startswith("schedules=3 "), short
    assert short == summary("ptah.testing.sim")
