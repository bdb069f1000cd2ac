"""The digest that lets a plan reuse a PostgreSQL inspection covers every catalog the
inspection and the census read: a catalog added to them and not to the digest would let
a change there go unseen by a re-plan from the cache."""

from __future__ import annotations

import re
from pathlib import Path

from ptah.engines.postgres import graph, inspect, probe

# Read through other rows of the digest: role names (pg_authid is not readable).
THROUGH = {"pg_roles": "roles"}
# Read for what is not the schema: the inspecting session's own SET values, which a
# helper session takes on before it reads ahead (inspect.ReadAhead; the settings that
# change how the server prints are the digest's "session" row).
SESSION_STATE = {"pg_settings"}


def test_the_probe_reads_every_catalog_the_inspection_reads() -> None:
    read: set[str] = set()
    for module in (inspect, graph):
        text = Path(str(module.__file__)).read_text()
        read |= set(re.findall(r"(?:FROM|JOIN)\s+(?:pg_catalog\.)?(pg_[a-z_]+)\b", text))
        read |= set(re.findall(r"'(?:pg_catalog\.)?(pg_[a-z_]+)'::regclass", text))
        read |= set(re.findall(r"^\s+\"(pg_[a-z_]+)\",$", text, re.M))  # the census list
    assert "pg_attribute" in read and "pg_depend" in read  # the scan itself works
    missing = sorted(read - set(probe.CATALOGS) - set(THROUGH) - SESSION_STATE)
    assert missing == [], f"catalogs read but not in probe.CATALOGS: {missing}"
    assert all(f"'{row}'" in probe._PROBE for row in THROUGH.values())
