"""A migration directory as a ConfigMap carries it: the files plus their ``ptah.sum``."""

from __future__ import annotations

import tempfile
from pathlib import Path

from ptah.engines.versioned import sumfile
from ptah.engines.versioned.directory import SUM_FILE, read_directory


def with_sum(files: dict[str, str]) -> dict[str, str]:
    """``files`` plus the ``ptah.sum`` that ``ptah migrate hash`` would write for them.

    The runner refuses a directory without a sum file (``SumFileMissing``), so every
    ConfigMap directory a test creates carries one, computed by the same code the CLI
    uses (written to a scratch directory and read back, exactly as a user would)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name, text in files.items():
            (root / name).write_text(text)
        sumfile.write(read_directory([root]))
        return {**files, SUM_FILE: (root / SUM_FILE).read_text()}
