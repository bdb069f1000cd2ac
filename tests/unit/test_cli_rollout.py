"""``ptah approve rollout/NAME``, ``ptah status rollout/NAME`` and ``ptah wait`` on the
in-memory API (the rollout's children played as in test_rollout_controller)."""

from __future__ import annotations

import io

import pytest
from test_rollout_controller import NS, World

from ptah.cli.approve import approve
from ptah.cli.rollout import rollout_status, wait
from ptah.cli.status import CliError
from ptah.kube.kinds import APPROVAL, SCHEMA


def test_approve_shows_each_group_from_a_verified_plan_and_approves_once_per_group() -> None:
    w = World(4, maxParallel=3)
    w.run()
    s1 = w.waiting(0, ["ALTER TABLE t ADD COLUMN a TEXT"])
    w.run()
    out = io.StringIO()
    code = approve(w.api, NS, "rollout/r", yes=True, out=out, ask=None)
    assert code == 0
    text = out.getvalue()
    assert f"1 target: these 1 statement(s) (statements {s1[:12]}; shown from r-db-00)" in text
    assert "ALTER TABLE t ADD COLUMN a TEXT;" in text
    [a] = [
        x
        for x in w.api.system.list(APPROVAL, NS)
        if x["spec"]["resourceRef"]["kind"] == "PtahRollout"
    ]
    assert a["spec"]["planDigest"] == s1 and a["spec"]["resourceRef"]["name"] == "r"
    w.run()
    with pytest.raises(CliError, match="no target of rollout r waits for a decision"):
        approve(w.api, NS, "rollout/r", yes=True, out=io.StringIO(), ask=None)


def test_approve_asks_and_refuses_without_a_terminal_or_an_answer() -> None:
    w = World(2)
    w.run()
    w.waiting(0, ["ALTER TABLE t ADD COLUMN a TEXT"])
    w.run()
    with pytest.raises(CliError, match="pass --yes"):
        approve(w.api, NS, "rollout/r", yes=False, out=io.StringIO(), ask=None)
    assert approve(w.api, NS, "rollout/r", yes=False, out=io.StringIO(), ask=lambda _: "n") == 1
    assert [x for x in w.api.system.list(APPROVAL, NS)] == []


def test_approve_refuses_a_group_whose_plan_no_longer_matches() -> None:
    w = World(2)
    w.run()
    w.waiting(0, ["ALTER TABLE t ADD COLUMN a TEXT"])
    w.run()
    # The child replanned other statements since the rollout last looked.
    w.api.system.patch(SCHEMA, NS, "r-db-00", {"status": {"currentPlan": None}}, "status")
    w.waiting(0, ["DROP TABLE t"])
    with pytest.raises(CliError, match="no longer has the statements"):
        approve(w.api, NS, "rollout/r", yes=True, out=io.StringIO(), ask=None)


def test_status_table_filters_by_phase() -> None:
    w = World(3)
    w.run()
    w.failed(0)
    w.run()
    out = io.StringIO()
    rollout_status(w.api, NS, "r", out)
    text = out.getvalue()
    assert "rollout/r: Stopped" in text and "STOPPED by db-00" in text
    assert "db-01" in text and "Pending" in text
    out = io.StringIO()
    rollout_status(w.api, NS, "r", out, phase="failed")
    rows = out.getvalue().split("\n\n", 1)[1]
    assert "db-00" in rows and "db-01" not in rows


def test_wait_exits_0_once_the_digest_holds_and_1_on_timeout() -> None:
    w = World(1)
    w.run()
    w.ready(0, source="abc123")
    w.run()
    ticks = iter(range(100))
    kw = {"sleep": lambda _: None, "clock": lambda: float(next(ticks))}
    assert wait(w.api, NS, "rollout/r", "h1:abc123", io.StringIO(), timeout=5, **kw) == 0
    assert wait(w.api, NS, "schema/r-db-00", "abc123", io.StringIO(), timeout=5, **kw) == 0
    out = io.StringIO()
    assert wait(w.api, NS, "rollout/r", "other", out, timeout=3, **kw) == 1
    assert "timed out" in out.getvalue()
    assert wait(w.api, NS, "rollout/absent", "x", io.StringIO(), timeout=3, **kw) == 2
    with pytest.raises(CliError, match="rollout/NAME"):
        wait(w.api, NS, "bogus/x", "x", io.StringIO(), timeout=1, **kw)


def test_the_overall_status_names_each_rollout_and_its_stop() -> None:
    from ptah.cli.status import status

    w = World(3)
    w.run()
    w.failed(0)
    w.run()
    out = io.StringIO()
    assert status(w.api, NS, out) == 0
    text = out.getvalue()
    assert "schema/r-db-00" in text
    assert "rollout/r: Stopped, wave 0 of 2, 0/3 Ready, stopped by db-00 (ApplyFailed)" in text
