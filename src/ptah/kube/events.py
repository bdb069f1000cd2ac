"""The one Event builder: every Event the operator records (a lifecycle step, a phase
change, a rollout's progress) has the same shape, so ``kubectl describe`` and the tests
read them all alike."""

from __future__ import annotations

from ptah.kube import errors
from ptah.kube.clock import rfc3339
from ptah.kube.kinds import EVENT
from ptah.kube.port import Cluster, Obj

#: The apiserver keeps an Event's message short; a longer one is cut here, not refused.
MESSAGE_LIMIT = 1024


def record_event(
    cluster: Cluster, obj: Obj, reason: str, message: str, *, warning: bool, component: str
) -> None:
    """Create an Event about ``obj``. Best effort: an Event is telemetry, not a durable
    record, so a refused create is dropped rather than failing the pass."""
    meta = obj["metadata"]
    now = rfc3339(cluster.now())
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
        "involvedObject": {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
            "resourceVersion": meta.get("resourceVersion"),
        },
        "reason": reason,
        "message": message[:MESSAGE_LIMIT],
        "type": "Warning" if warning else "Normal",
        "source": {"component": component},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    try:
        cluster.create(EVENT, body)
    except errors.ApiError:
        return
