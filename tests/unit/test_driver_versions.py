"""psycopg loads without importlib.metadata once ptah's PostgreSQL engine is imported,
and its version modules say what the installed distributions say."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ptah.engines.postgres import dist_info_version

REPORT = """
import json, sys, types
{before}
import psycopg, psycopg_binary
report = {{
    "metadata_loaded": "importlib.metadata" in sys.modules,
    "finders": [type(f).__name__ for f in sys.meta_path],
    "versions": [psycopg.__version__, psycopg_binary.__version__, psycopg._cmodule.__version__],
    "names": {{
        n: sorted(
            k for k, v in vars(sys.modules[n]).items()
            if (not k.startswith("_") or k == "__version__") and not isinstance(v, types.ModuleType)
        )
        for n in ("psycopg.version", "psycopg_binary.version")
    }},
    "bound": [psycopg.version.__version__, psycopg_binary.version.__version__],
}}
from importlib import metadata
report["installed"] = [metadata.version("psycopg"), metadata.version("psycopg-binary")]
print(json.dumps(report))
"""


def _report(before: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", REPORT.format(before=before)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    report: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return report


def test_the_engine_loads_psycopg_without_importlib_metadata() -> None:
    preset = _report("import ptah.engines.postgres.target")
    plain = _report("")
    assert preset["metadata_loaded"] is False
    assert plain["metadata_loaded"] is True  # so the check above could have failed
    installed = preset["installed"]
    assert isinstance(installed, list)
    assert preset["versions"] == [installed[0], installed[1], installed[1]]
    assert preset["bound"] == [installed[0], installed[1]]
    # The preset modules carry every name psycopg's own ones define but the modules they
    # import: a psycopg that adds one to its version module fails here, not in a Job.
    assert preset["names"] == plain["names"]
    assert "DriverVersions" not in preset["finders"]  # gone once both loaded


def test_without_a_dist_info_the_version_modules_run_as_they_are() -> None:
    fallback = _report(
        "import ptah.engines.postgres as p\np.dist_info_version = lambda where, package: None"
    )
    assert fallback["metadata_loaded"] is True
    assert fallback["versions"] == [*fallback["installed"], fallback["installed"][1]]  # type: ignore[misc]


def test_dist_info_version_needs_exactly_one(tmp_path: Path) -> None:
    assert dist_info_version(str(tmp_path), "psycopg") is None
    (tmp_path / "psycopg-3.3.9.dist-info").mkdir()
    (tmp_path / "psycopg_binary-3.3.9.dist-info").mkdir()
    assert dist_info_version(str(tmp_path), "psycopg") == "3.3.9"
    assert dist_info_version(str(tmp_path), "psycopg_binary") == "3.3.9"
    (tmp_path / "psycopg-3.3.8.dist-info").mkdir()
    assert dist_info_version(str(tmp_path), "psycopg") is None
    assert dist_info_version(str(tmp_path / "missing"), "psycopg") is None
