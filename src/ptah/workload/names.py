"""Deterministic names. A Job's name folds everything that identifies its claim, so no
other claim can produce it and a restarted controller can tell its own Job apart."""

from __future__ import annotations

import re

from ptah.api.digest import digest

_DNS = re.compile(r"[^a-z0-9-]+")


def label_safe(text: str, limit: int) -> str:
    return _DNS.sub("-", text.lower()).strip("-")[:limit].rstrip("-") or "x"


def operation_id(resource_uid: str, op_type: str, input_fingerprint: str, attempt: int) -> str:
    """The operation's identity, bound into the Job name and into the result frame."""
    return f"{op_type.lower()}-{digest([resource_uid, op_type, input_fingerprint, attempt], 20)}"


def job_name(
    *,
    resource_name: str,
    resource_uid: str,
    op_type: str,
    operation_id: str,
    binding_epoch: int,
    input_fingerprint: str,
    attempt: int,
) -> str:
    """``ptah-<op>-<resource>-<hash>``, at most 63 characters (a label value)."""
    folded = digest(
        [resource_uid, op_type, operation_id, binding_epoch, input_fingerprint, attempt], 12
    )
    return f"ptah-{op_type.lower()}-{label_safe(resource_name, 36)}-{folded}"


def lease_name(coordination_digest: str) -> str:
    return f"ptah-realm-{coordination_digest[:40]}"


def input_configmap_name(resource_uid: str, content_digest: str) -> str:
    """``ptah-input-<hash>`` of the owning resource and the content. The owner is part of
    the name: two resources with the same inputs must not share one ConfigMap, since
    garbage collection deletes it with its first owner while the other's Jobs mount it."""
    return f"ptah-input-{digest([resource_uid, content_digest], 20)}"


def plan_name(owner_name: str, plan_digest: str) -> str:
    return f"{label_safe(owner_name, 40)}-{plan_digest[:16]}"
