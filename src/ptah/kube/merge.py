"""JSON merge patch (RFC 7386) and JSON-value copying, without a JSON round-trip.

The in-memory cluster applies patches the way the API server does for
``application/merge-patch+json``: objects merge key by key, ``null`` deletes a
key, anything else (lists included) replaces the old value whole. These run on
every simulated write, so they walk plain dicts and lists directly.
"""

from __future__ import annotations

from typing import Any

_LEAVES = (str, int, float, bool, type(None))


def json_copy(value: Any) -> Any:
    """A deep copy of a JSON-shaped value; tuples become lists.

    Raises TypeError on anything JSON cannot carry (a datetime, a set), the same
    mistake the real port would hit when it serialises the request.
    """
    t = type(value)
    if t is dict:
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                raise TypeError(f"JSON object keys must be str, got {k!r}")
            out[k] = json_copy(v)
        return out
    if t is list or t is tuple:
        return [json_copy(v) for v in value]
    if t in _LEAVES:
        return value
    raise TypeError(f"not a JSON value: {value!r} ({t.__name__})")


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply ``patch`` to ``target`` and return the result (RFC 7386 ``MergePatch``).

    ``target`` is not modified; unchanged subtrees of it are shared with the
    result (callers treat stored objects as immutable). ``patch`` values are
    copied, so the caller may keep mutating its patch afterwards.
    """
    if type(patch) is not dict:
        return json_copy(patch)
    result: dict[str, Any] = dict(target) if type(target) is dict else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def merge_diff(old: Any, new: Any) -> Any:
    """The merge patch that turns ``old`` into ``new``: keys ``new`` lacks are sent as
    null, objects are diffed key by key, anything else is replaced whole. (A merge
    patch of ``new`` alone would leave behind every key ``new`` no longer has.)"""
    if type(old) is not dict or type(new) is not dict:
        return json_copy(new)
    out: dict[str, Any] = {k: None for k in old if k not in new}
    for key, value in new.items():
        if key in old and old[key] == value:
            continue
        out[key] = merge_diff(old.get(key), value)
    return out
