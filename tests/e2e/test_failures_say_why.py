"""Failures say why, and only transient ones retry: on the real control plane, with the
operator as its own process and real runner Jobs.

* A desired source that does not load is ``Stalled`` with the engine's message and the
  desired file's line, in the condition and in one Event; it dispatches no further Plan
  Job however often the operator looks (counted after a barrier: the operator's own
  per-resource pass count has grown past two pokes), and becomes Ready once fixed.
* An unreachable database is ``Retrying``: the reason is in status, the pause between
  readings doubles up to the configured ceiling, and the next attempt's time is shown.
"""

from __future__ import annotations

from typing import Any

import pytest
from e2esupport import (
    Operator,
    events,
    jobs_of,
    ready,
    schema,
    secret,
    set_sql,
    uid_of,
    wait_for,
    wait_passes,
    wait_status,
)

from ptah.kube.clock import parse_rfc3339
from ptah.kube.kinds import SCHEMA
from ptah.kube.real import RealCluster

pytestmark = pytest.mark.integration

BROKEN = (
    "CREATE TABLE teams (id INTEGER PRIMARY KEY);\n"
    "-- the users of a team\n"
    "\n"
    "CREATE TABLE users (id INTEGER PRIMARY KEY, team INTEGER REFERENCES,);\n"
)
FIXED = BROKEN.replace("REFERENCES,", "REFERENCES teams (id)")


def _stalled(s: dict[str, Any]) -> dict[str, Any] | None:
    return next(
        (c for c in s.get("conditions") or [] if c["type"] == "Stalled" and c["status"] == "True"),
        None,
    )


def test_a_source_that_does_not_load_stalls_with_its_line_then_fixed_is_ready(
    kube: RealCluster, namespace: str, operator: Operator, tmp_path: Any
) -> None:
    secret(kube, namespace, "db", f"sqlite:///{tmp_path}/app.db")
    operator.start()
    schema(kube, namespace, "broken", BROKEN, "db", "sqlite")
    s = wait_status(
        kube,
        namespace,
        "broken",
        "Stalled",
        lambda s: _stalled(s) is not None,
        log=operator.log_path,
    )
    cond = _stalled(s)
    assert cond is not None
    assert cond["reason"] == "DesiredSchemaInvalid", cond
    assert "line 4:" in cond["message"] and "syntax error" in cond["message"], cond
    assert "\n" not in cond["message"]
    assert s["phase"] == "Blocked" and s["readingFailure"]["retry"] is False
    uid = uid_of(kube, namespace, "broken")
    plans_before = len(jobs_of(kube, namespace, uid, "Plan"))
    assert plans_before == 1

    # Barrier: the operator looked again (twice), inputs unchanged; then nothing re-ran.
    wait_passes(kube, operator, SCHEMA, namespace, "broken", timeout=30)
    assert len(jobs_of(kube, namespace, uid, "Plan")) == plans_before
    failed = [e for e in events(kube, namespace, "broken") if e["reason"] == "ReadingFailed"]
    assert len(failed) == 1 and "line 4:" in failed[0]["message"], failed
    assert "\n" not in failed[0]["message"]

    set_sql(kube, namespace, "broken", FIXED)
    s = wait_status(kube, namespace, "broken", "Ready after the fix", ready, log=operator.log_path)
    assert s.get("readingFailure") is None and _stalled(s) is None
    # one failed reading, one plan of the fix, one verifying reading after the apply
    assert len(jobs_of(kube, namespace, uid, "Plan")) == plans_before + 2


def test_an_unreachable_database_backs_off_to_the_ceiling(
    kube: RealCluster, namespace: str, operator: Operator
) -> None:
    password = "e2e-secret-pw-unreachable"
    secret(kube, namespace, "gone", f"postgresql://ptah:{password}@127.0.0.1:9/nowhere")
    operator.start(retry_ceiling_seconds="4")  # --poll-seconds is 1: pauses 2, 4, 4, ...
    schema(kube, namespace, "gone", "CREATE TABLE t (id int);", "gone", "postgres")
    seen: dict[int, dict[str, Any]] = {}

    def failures() -> bool:
        s = kube.get(SCHEMA, namespace, "gone").get("status") or {}  # type: ignore[union-attr]
        n = int(s.get("readingFailures") or 0)
        if n and s.get("readingFailure") and s.get("nextReadingAfter"):
            seen.setdefault(n, s)
        return n >= 4

    wait_for("four failed readings", failures, timeout=120, interval=0.2)
    s = seen[max(seen)]
    failure = s["readingFailure"]
    assert failure["retry"] is True and failure["reason"] == "TargetUnavailable", failure
    assert s["phase"] == "Retrying" and _stalled(s) is None
    assert "reading again at" in next(
        c["message"] for c in s["conditions"] if c["type"] == "Reconciling"
    )
    pauses = {
        n: (
            parse_rfc3339(x["nextReadingAfter"]) - parse_rfc3339(x["readingFailure"]["at"])
        ).total_seconds()
        for n, x in seen.items()
    }
    for n, pause in pauses.items():
        assert abs(pause - min(4.0, 2.0**n)) <= 1.5, pauses
    # Bounded dispatch: one Plan Job per failed reading, no more.
    uid = uid_of(kube, namespace, "gone")
    s_now = kube.get(SCHEMA, namespace, "gone")["status"]  # type: ignore[index]
    assert len(jobs_of(kube, namespace, uid, "Plan")) <= int(s_now["readingFailures"]) + 1
    blob = repr(kube.get(SCHEMA, namespace, "gone")) + repr(events(kube, namespace, "gone"))
    assert password not in blob
