"""The simulation itself: clean on the real lifecycle, and able to catch a broken one.

The schedules here are the mutation suite's pytest killer (tests/mutants/): enough of
them that every mutant is killed by this tier on its own, so they run on every core and
stop at the first violation. PTAH_SIM_TEST_SCHEDULES overrides the count.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from ptah.lifecycle import claim, outcome, supervise
from ptah.testing.sim.__main__ import main, run_schedules
from ptah.testing.sim.invariants import RULES
from ptah.testing.sim.schedule import run_schedule

SCHEDULES = int(os.environ.get("PTAH_SIM_TEST_SCHEDULES", "800"))
MUTANTS = Path(__file__).resolve().parents[1] / "mutants"


# CPU-bound: its time is the machine's load, not a verdict; a run cut short proves nothing.
@pytest.mark.timeout(1800)
def test_schedules_hold_every_invariant() -> None:
    results = list(run_schedules(range(SCHEDULES), fail_fast=True))
    failing = [(r.seed, r.violations[0]) for r in results if r.violations]
    assert failing == [], f"replay: python -m ptah.testing.sim --schedules 1 --seed {failing[0][0]}"
    assert sum(len(r.crashes) for r in results) >= SCHEDULES // 2
    events: dict[str, int] = {}
    for r in results:
        for reason, n in [*r.events.items(), *r.faults.items()]:
            events[reason] = events.get(reason, 0) + n
    # The schedules do reach the interesting places, not just the happy path.
    for reason in (
        "ApplySucceeded",
        "MigrateSucceeded",
        "OutcomeUncertain",
        "ProofSettled",
        "fault:second-pod",
        "job-owner-changed",
        "fault:other-db",
        "fault:job-terminal-early",
        "outage",
        "starved",
        "stale-pass",
        "lease-race",
        "read-failed",
        "fault:frame-damaged",
        "holder-quiet",
        "lease-acquire-race",
        "fault:connect-refused",
        "secret-deleted-while-owed",
    ):
        assert events.get(reason, 0) > 0, reason
    # Two acquirers race for one Lease on many schedules, not by luck: a rival took it
    # while another's acquisition was on its way, and the API refused that one (409).
    racing = [
        r.seed
        for r in results
        if r.faults.get("lease-acquire-contended") and r.faults.get("lease-acquire-refused")
    ]
    assert len(racing) >= max(1, SCHEDULES // 160), racing


def test_every_violation_names_a_contract_rule() -> None:
    assert all(len(rule) > 30 for rule in RULES.values())


def test_the_mutants_still_apply_to_this_tree(tmp_path: Path) -> None:
    """A mutant whose search text moved away would be STALE in hack/mutation.sh."""
    sys.path.insert(0, str(MUTANTS))
    try:
        import mutate  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(MUTANTS))
    root = Path(__file__).resolve().parents[2]
    mutants = [mutate.parse(f) for f in sorted(MUTANTS.glob("*.mutant"))]
    assert len(mutants) >= 25
    for m in mutants:
        tree = tmp_path / m.name
        for edit in m.edits:
            target = tree / edit.path
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text((root / edit.path).read_text())
        mutate.apply(m, tree)


def test_cli_prints_one_summary_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--schedules", "5", "--seed", "3", "--jobs", "1"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].startswith("schedules=5 crash_points_covered=")
    assert "violations=0" in out[0]


def _violations(seeds: range) -> list[str]:
    return [v for s in seeds for v in run_schedule(s).violations]


def test_a_deterministic_failure_read_again_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The schedules reach readings that fail deterministically (a source that does not
    load), and the invariant sees a reading dispatched again on the same inputs."""
    counter = iter(range(10**9))
    for module in (claim, outcome, supervise):  # each step comparing a reading's inputs
        monkeypatch.setattr(module, "reading_inputs", lambda p, fp: f"changed-{next(counter)}")
    found = _violations(range(0, 30))
    assert any("failed deterministically, with the same inputs" in v for v in found)
