"""What the lifecycle itself reads besides a family's own resources, so the operator
can watch it and map each change back to the resources it concerns.

Every lifecycle resource reads its target Secret (``spec.target.secretRef``, and
``devSecretRef``), its verification-policy ConfigMap, its approvals, plans, Jobs and
Pods, and the realm Leases of the lock namespace; a family adds what its own spec
reads (``Family.watches``, ``Family.references``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from ptah.kube.kinds import APPROVAL, CONFIGMAP, JOB, PLAN, POD, SECRET
from ptah.lifecycle.authorize import policy_name
from ptah.lifecycle.family import AnyFamily, References, Watch
from ptah.workload.job import LABEL_OPERATION

# Approvals are read whole: an approval names its resource in its spec. Jobs and Pods
# too: their status says whether an event moved anything a waiting step reads (the
# operator wakes an owner only then), where their metadata alone moves on every change.
# Only the runner's Jobs and Pods, which carry their operation's label: the others of the
# cluster never reach the operator (a runner Job relabelled leaves the watch as DELETED,
# which wakes its owner; a Job someone else put under a reserved name is read by the pass).
LIFECYCLE_WATCHES: tuple[Watch, ...] = (
    Watch(APPROVAL, metadata_only=False),
    Watch(PLAN),
    Watch(JOB, metadata_only=False, label_selector=LABEL_OPERATION),
    Watch(POD, metadata_only=False, label_selector=LABEL_OPERATION),
    Watch(CONFIGMAP),
    Watch(SECRET),
)


def referenced(family: AnyFamily, obj: dict[str, Any]) -> References:
    """Names of the ConfigMaps and Secrets ``obj`` (a resource of ``family``) reads."""
    spec = obj.get("spec") or {}
    target = spec.get("target") or {}
    secrets = frozenset(
        str(ref["name"])
        for ref in (target.get("secretRef"), target.get("devSecretRef"))
        if isinstance(ref, dict) and ref.get("name")
    )
    own = References(frozenset({policy_name(spec)}), secrets)
    return own | family.references(spec)


def merge_watches(*groups: Iterable[Watch]) -> tuple[Watch, ...]:
    """One watch per kind, in first-declared order; whole objects when any asks for them,
    and a label selector only when every watch of the kind asks for that same one."""
    merged: dict[str, Watch] = {}
    for group in groups:
        for w in group:
            known = merged.get(w.kind.kind)
            if known is None:
                merged[w.kind.kind] = w
                continue
            merged[w.kind.kind] = replace(
                known,
                metadata_only=known.metadata_only and w.metadata_only,
                label_selector=(
                    known.label_selector if known.label_selector == w.label_selector else ""
                ),
            )
    return tuple(merged.values())
