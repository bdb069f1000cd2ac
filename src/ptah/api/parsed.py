"""Wire models parsed once per distinct wire value.

A pass parses the resource's status (and spec) each time it reads the resource,
and the value is the same as the last pass's nearly every time: a resource at
rest is read over and over. Validation is a pure function of the value, so the
model for a value seen before is taken from a bounded cache instead of being
validated again. The key is the value's ``marshal`` encoding at version 2 (no
back-references, no interning flags): equal keys mean equal values, with the
same types and the same key order, so they validate to equal models. A value
marshal cannot encode (anything but dicts, lists, str, int, float, bool, None
and the like) is validated as before, uncached; an invalid value raises the same
ValidationError each time (exceptions are not cached).

The model returned is shared by every caller that parsed an equal value: read
it, never change it (``model_copy`` makes a changed copy), as the lifecycle
already treats the status it parses once per pass.
"""

from __future__ import annotations

import marshal
from functools import lru_cache
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

_MARSHAL_VERSION = 2  # no refs, no interned flags: the bytes depend only on the value
_CACHED = 128  # distinct (model, value) pairs kept: one schedule's statuses and specs


def parse(model: type[M], value: Any) -> M:
    """``model.model_validate(value)``, from the cache when an equal value was parsed."""
    try:
        key = marshal.dumps(value, _MARSHAL_VERSION)
    except ValueError:  # not a plain value: validate it as it is
        return model.model_validate(value)
    parsed = _parse(model, key)
    assert isinstance(parsed, model)
    return parsed


@lru_cache(maxsize=_CACHED)
def _parse(model: type[BaseModel], key: bytes) -> BaseModel:
    return model.model_validate(marshal.loads(key))
