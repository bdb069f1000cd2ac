"""Stable digests of JSON-shaped values: the one way Ptah fingerprints anything."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def digest(value: Any, length: int = 64) -> str:
    """sha256 over the canonical JSON of ``value`` (strings hash as themselves)."""
    data = value if isinstance(value, str) else canonical(value)
    return hashlib.sha256(data.encode()).hexdigest()[:length]
