"""The simulation itself: clean on the real lifecycle, and able to catch a broken one."""

from __future__ import annotations

from typing import Any

import pytest

from ptah.lifecycle import reconcile as lifecycle
from ptah.sim.__main__ import main
from ptah.sim.schedule import run_schedule


def test_schedules_hold_every_invariant() -> None:
    results = [run_schedule(seed) for seed in range(60)]
    assert [r.violations for r in results if r.violations] == []
    assert sum(len(r.crashes) for r in results) >= 40
    events: dict[str, int] = {}
    for r in results:
        for reason, n in r.events.items():
            events[reason] = events.get(reason, 0) + n
    # The schedules do reach the interesting places, not just the happy path.
    for reason in ("ApplySucceeded", "MigrateSucceeded", "OutcomeUncertain", "ProofSettled"):
        assert events.get(reason, 0) > 0, reason


def _violations(seeds: range) -> list[str]:
    return [v for s in seeds for v in run_schedule(s).violations]


def test_a_release_that_ignores_the_executor_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lifecycle, "may_still_write", lambda p, staged: False)
    found = _violations(range(1000, 1200))
    assert any("released while" in v for v in found)


def test_an_uncertain_outcome_dropped_instead_of_retained_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def drop(p: Any, op: Any, reason: str, detail: str, pods: Any = None) -> Any:
        return lifecycle._drop(p, op, reason, detail)

    monkeypatch.setattr(lifecycle, "_lost", drop)
    found = _violations(range(0, 60))
    assert any("neither an account nor a record" in v for v in found)


def test_cli_prints_one_summary_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--schedules", "5", "--seed", "3", "--jobs", "1"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].startswith("schedules=5 crash_points_covered=")
    assert "violations=0" in out[0]


def test_a_deterministic_failure_read_again_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The schedules reach readings that fail deterministically (a source that does not
    load), and the invariant sees a reading dispatched again on the same inputs."""
    counter = iter(range(10**9))
    monkeypatch.setattr(lifecycle, "_reading_inputs", lambda p, fp: f"changed-{next(counter)}")
    found = _violations(range(0, 30))
    assert any("failed deterministically, with the same inputs" in v for v in found)
