"""Stable digests of JSON-shaped values: the one way Ptah fingerprints anything."""

from __future__ import annotations

import hashlib
import json
import marshal
from functools import lru_cache
from typing import Any

# What ``json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)`` builds on
# every call, built once (an encoder keeps no state between calls).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str)
_MARSHAL_VERSION = 2  # no refs, no interned flags: the bytes depend only on the value


def canonical(value: Any) -> str:
    return _CANONICAL.encode(value)


def digest(value: Any, length: int = 64) -> str:
    """sha256 over the canonical JSON of ``value`` (strings hash as themselves).

    Passes fingerprint the same specs, sources and Pod templates over and over, so the
    digest of a value seen before comes from a bounded cache, keyed by the value's
    ``marshal`` encoding: equal keys mean equal values (same types, same order), whose
    canonical JSON is the same. A value marshal cannot encode is digested uncached."""
    if isinstance(value, str):
        return _sha256(value)[:length]
    try:
        key = marshal.dumps(value, _MARSHAL_VERSION)
    except ValueError:
        return _sha256(canonical(value))[:length]
    return _digest_of(key)[:length]


def _sha256(data: str) -> str:
    return hashlib.sha256(data.encode()).hexdigest()


@lru_cache(maxsize=256)
def _digest_of(key: bytes) -> str:
    return _sha256(canonical(marshal.loads(key)))
