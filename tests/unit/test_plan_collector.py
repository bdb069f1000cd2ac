"""A plan runs with the cyclic garbage collector paused, and leaves it as it found it."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from ptah.engines import confine, planner
from ptah.engines.connect import open_target


def test_the_collector_is_paused_during_a_plan_and_on_again_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bool] = []
    real = confine.check

    def spy(sql: str, engine: str) -> object:
        seen.append(gc.isenabled())
        if "refuse" in sql:
            raise confine.StatementRefused(1, sql, "refused here")
        return real(sql, engine)  # type: ignore[arg-type]

    monkeypatch.setattr(confine, "check", spy)
    assert gc.isenabled()
    with open_target(f"sqlite:///{tmp_path / 'db.sqlite'}") as t:
        assert planner.plan(t, "CREATE TABLE a (id integer);").statements
        assert gc.isenabled()
        with pytest.raises(confine.StatementRefused):
            planner.plan(t, "-- refuse\nCREATE TABLE b (id integer);")
        assert gc.isenabled()
        gc.disable()  # a caller's own choice is kept
        try:
            planner.plan(t, "CREATE TABLE c (id integer);")
            assert not gc.isenabled()
        finally:
            gc.enable()
    assert seen == [False, False, False]
