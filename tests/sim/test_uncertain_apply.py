"""The in-memory-only part of the durable-write tests: a Pod killed mid-run, which the
simulated kubelet can time exactly (tests/e2e kills a real one)."""

from __future__ import annotations

from ptah.kube.kinds import JOB
from ptah.testing.sim.kubelet import NS
from support.lifecycle_harness import SIDES, MemoryHarness


def test_uncertain_apply_is_settled_only_by_a_reading() -> None:
    """The Apply Pod deleted mid-run: uncertain, then a Plan reading proves it."""
    h = MemoryHarness(SIDES["schema"])
    h.create(approval="Always")
    h.run(lambda: h.phase() == "WaitingForApproval")
    h.approve(h.status()["currentPlan"]["digest"])
    h.job_creates = 0
    h.run_to_stop("after", "write_job_uid")
    claim = h.claim()
    assert claim is not None
    for _ in range(3):
        h.kubelet.step()  # the Pod runs its statements
    # The simulated kubelet is deterministic: by now the Apply took effect, so only the
    # reading can say so (the Pod leaves no frame).
    assert h.tables() == h.desired_tables()
    h.admin.delete(JOB, NS, claim["jobName"], propagation="Background")
    h.kubelet.step()
    h.run(lambda: h.status().get("pendingObservation") is not None)
    assert h.status()["lastMutation"]["outcome"] == "Uncertain"
    h.run(lambda: h.status().get("pendingObservation") is None, passes=400)
    assert h.job_creates == 1
    # Converged: proved by the reading, and no Apply attributed to it.
    assert h.tables() == h.desired_tables()
    assert h.status()["lastMutation"]["outcome"] == "Converged"
