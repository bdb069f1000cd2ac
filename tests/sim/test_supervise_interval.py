"""The supervising poll: a pass over a dispatched Job that still runs comes back after
``supervise_seconds`` (the watches wake it for every move a waiting step reads), and the
operator refuses an interval that would let one late pass reach the Lease's expiry."""

from __future__ import annotations

import pytest

from ptah.cli.main import build_parser
from ptah.operator.main import settings_from
from support.lifecycle_harness import SIDES, MemoryHarness


@pytest.mark.parametrize("family", ["schema", "migration"])
def test_a_pass_over_a_running_job_renews_and_comes_back_after_the_supervise_interval(
    family: str,
) -> None:
    h = MemoryHarness(SIDES[family])
    h.create()
    while True:  # past the read-only Plan/History Job to the mutation's own
        h.run_to_stop("after", "write_job_uid")
        claim = h.claim()
        assert claim is not None
        if claim["type"] == h.mutation:
            break
    h.env.supervise_seconds = 17.0  # the controller started after the stop
    lease = h.lease()
    assert lease is not None
    h.clock.advance(1)
    result = h.one_pass()  # the Pod has not run yet: the Job is not terminal
    assert result.requeue_after == 17.0
    renewed = h.lease()
    assert renewed is not None and h.claim() == claim
    # The pass renewed the Lease: supervision is what keeps the database's Lease alive.
    assert renewed["spec"]["renewTime"] > lease["spec"]["renewTime"]
    # Once the Job ended, a step that waits on the API (the frame) polls at poll_seconds
    # or the run is accounted: never the long interval.
    h.run(lambda: h.claim() is None or h.claim() != claim)


def _operator_args(*extra: str) -> list[str]:
    return ["operator", "run", "--no-leader-elect", *extra]


def test_the_operator_refuses_a_supervise_interval_past_a_quarter_of_the_lease() -> None:
    parser = build_parser()
    ok = settings_from(parser.parse_args(_operator_args("--lease-duration=120")))
    assert ok.supervise_seconds == 30.0
    assert ok.supervise_seconds * 4 <= ok.lease_duration
    short = settings_from(parser.parse_args(_operator_args("--lease-duration=10")))
    assert short.supervise_seconds == 2.5  # unset: a quarter of a Lease shorter than 120 s
    for bad in ("--supervise-seconds=31", "--supervise-seconds=0", "--supervise-seconds=-1"):
        with pytest.raises(SystemExit) as exc:
            settings_from(parser.parse_args(_operator_args("--lease-duration=120", bad)))
        message = str(exc.value)
        assert "--supervise-seconds" in message and "\n" not in message
