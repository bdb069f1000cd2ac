"""A fenced Apply is accounted as what it is: a certain refusal, nothing ran.

The real control plane and the real ``ptah-runner`` against SQLite. The test holds the
realm's fence itself (as a second writer the Lease never saw would), so the runner's
Apply comes back ``fenced``. The lifecycle must record it as ``Fenced`` (no
uncertainty record, nothing to prove), hand the Lease back, read again after a pause,
and converge once the fence is free.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Any

import pytest

from ptah.engines import fence
from ptah.kube.kinds import EVENT
from ptah.kube.real import RealCluster
from support.lifecycle_harness import SIDES, RealHarness

pytestmark = pytest.mark.integration

CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds"


def test_fenced_apply_is_a_certain_refusal_then_converges(
    cluster: Any, namespace: str, tmp_path: Path
) -> None:
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRDS))
    cluster.kubectl(
        "wait", "--for=condition=Established", "crd/ptahschemas.ptah.io", "--timeout=60s"
    )
    db = tmp_path / "shop.db"
    h = RealHarness(
        SIDES["schema"], RealCluster.from_kubeconfig(str(cluster.kubeconfig)), namespace, db
    )
    h.create(approval="Never")
    with open(fence.sqlite_fence_path(os.path.realpath(db)), "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        h.run(lambda: (h.status().get("lastMutation") or {}).get("outcome") == "Fenced")
        status = h.status()
        assert status.get("pendingObservation") is None, status
        assert status.get("activeOperation") is None, status
        assert status.get("currentPlan") is None, "a fenced plan must be read again"
        assert status.get("nextReadingAfter"), "the next reading must wait a pause"
        assert h.tables() == set(), "the fenced Apply ran something"
        fenced_id = status["lastMutation"]["operationId"]
        events = h.admin.list(EVENT, namespace)
        assert any(
            e.get("reason") == "ApplyFenced" and fenced_id in e.get("message", "") for e in events
        ), [e.get("reason") for e in events]
        h.run(lambda: not h.status().get("pendingLockRelease"))
        lease = h.lease()
        assert lease is not None and not lease["spec"].get("holderIdentity"), lease
    h.run(lambda: h.phase() == "Ready" and not h.status().get("pendingLockRelease"))
    assert h.desired_tables() <= h.tables()
    assert h.status()["lastMutation"]["outcome"] == "Succeeded"
