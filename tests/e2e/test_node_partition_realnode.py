"""The node partition of ``test_node_partition`` on the real node: the kubelet process is
paused (SIGSTOP) while containerd keeps the runner's container running, the running
Migrate Pod is force-deleted, the Job turns Failed and the runner writes on. The same
assertions: the Lease stays held until the runner's writes have ended, the record says
the Pod was deleted before it was seen to stop, and the release comes only on evidence.
"""

from __future__ import annotations

import pytest
from test_node_partition import (
    test_force_deleted_pod_on_a_paused_node_keeps_the_lease_until_the_runner_stops as test_paused_kubelet_keeps_the_lease_until_the_runner_stops,  # noqa: E501
)

# node_exclusive: it pauses the real node's kubelet, so nothing else may run on the
# machine meanwhile (hack/test.sh runs these first, one at a time).
pytestmark = [pytest.mark.integration, pytest.mark.node_exclusive]
E2E_NODE = "real"

__all__ = ["test_paused_kubelet_keeps_the_lease_until_the_runner_stops"]
