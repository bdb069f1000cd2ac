"""The RESET and SET that leave a relation's storage options in the desired file's order.

The server keeps the options a SET does not name where they are and appends the ones
it names, a changed one included (transformRelOptions); TOAST options are a list of
their own. These cases are the orders a partial SET would get wrong, and the ones it
gets right (where setting everything again would be needless churn)."""

from __future__ import annotations

import pytest

from ptah.engines.postgres.diff import storage_option_steps


def _server(was: list[str], reset: list[str], changed: list[str]) -> list[str]:
    """What the catalog lists after ``RESET (reset)`` and ``SET (changed)``."""

    def key(option: str) -> str:
        return option.split("=", 1)[0]

    named = {key(o) for o in changed}
    kept = [o for o in was if key(o) not in reset and key(o) not in named]
    lists = [
        [o for o in kept + changed if key(o).startswith("toast.") is toast]
        for toast in (False, True)
    ]
    return lists[0] + lists[1]


CASES = {
    "added after": (["fillfactor=80"], ["fillfactor=80", "autovacuum_enabled=false"], 1),
    "added before": (
        ["autovacuum_enabled=false"],
        ["fillfactor=80", "autovacuum_enabled=false"],
        2,
    ),
    "changed last": (
        ["fillfactor=80", "autovacuum_enabled=false"],
        ["fillfactor=80", "autovacuum_enabled=true"],
        1,
    ),
    "changed first": (
        ["fillfactor=80", "autovacuum_enabled=false"],
        ["fillfactor=70", "autovacuum_enabled=false"],
        2,
    ),
    "one gone": (["fillfactor=80", "autovacuum_enabled=false"], ["autovacuum_enabled=false"], 0),
    "toast changed, main kept": (
        ["fillfactor=80", "toast.autovacuum_enabled=false", "toast.vacuum_truncate=false"],
        ["fillfactor=80", "toast.autovacuum_enabled=true", "toast.vacuum_truncate=false"],
        3,
    ),
}


@pytest.mark.parametrize(("was", "now", "set_count"), CASES.values(), ids=CASES.keys())
def test_the_steps_leave_the_desired_order(was: list[str], now: list[str], set_count: int) -> None:
    reset, changed = storage_option_steps(was, now)
    assert _server(was, reset, changed) == now
    assert len(changed) == set_count  # only what must be named, or everything when needed
