"""The Job builder, and the semantic comparison of a live Job against its intent.

A Job is built from a :class:`JobRequest` alone, so rebuilding it on a later pass
gives the same object, and the same admission digest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ptah.api.common import CACHE_VOLUME, OperationType, RunnerSpec, SecretKeyRef
from ptah.api.digest import digest

LABEL_OPERATION = "ptah.io/operation-id"
LABEL_OWNER_UID = "ptah.io/owner-uid"
LABEL_OPERATION_TYPE = "ptah.io/operation-type"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
ANNOTATION_ADMISSION = "ptah.io/admission-digest"
ANNOTATION_INPUT = "ptah.io/input-fingerprint"
CONTAINER = "runner"
INPUT_MOUNT = "/ptah/input"
CACHE_MOUNT = "/ptah/cache"
CACHE_ENV = "PTAH_CACHE_DIR"
# The operations whose runner reads and writes the re-plan cache: a reading that plans.
# An Apply never trusts a cache (it checks the target's real fingerprint before it
# writes), so its Pod does not mount one.
CACHED_OPERATIONS: frozenset[OperationType] = frozenset({"Plan"})


@dataclass(frozen=True)
class Owner:
    api_version: str
    kind: str
    name: str
    uid: str

    def reference(self) -> dict[str, Any]:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


@dataclass(frozen=True)
class Mount:
    name: str
    path: str
    source: dict[str, Any]


@dataclass(frozen=True)
class JobRequest:
    """Everything a Job is built from: the claim's identity and the family's inputs."""

    namespace: str
    name: str
    owner: Owner
    operation_id: str
    operation_type: str
    input_fingerprint: str
    runner: RunnerSpec
    args: list[str]
    secret_ref: SecretKeyRef
    dev_secret_ref: SecretKeyRef | None = None
    input_configmap: str | None = None
    mounts: list[Mount] = field(default_factory=list)
    # A mutating run's realm (its Lease's coordination digest): the runner fences on it
    # and refuses to write a database whose identity is another (ptah.engines.fence).
    realm: str | None = None


def pod_spec(req: JobRequest) -> dict[str, Any]:
    """The Pod spec: what the admission envelope's digest covers."""
    env: list[dict[str, Any]] = [
        {"name": "PTAH_OPERATION_ID", "value": req.operation_id},
        {
            "name": "PTAH_DB_URL",
            "valueFrom": {"secretKeyRef": {"name": req.secret_ref.name, "key": req.secret_ref.key}},
        },
    ]
    if req.realm:
        env.append({"name": "PTAH_REALM", "value": req.realm})
    cache = _cache_volume(req)
    if cache is not None:
        env.append({"name": CACHE_ENV, "value": CACHE_MOUNT})
    if req.dev_secret_ref is not None:
        env.append(
            {
                "name": "PTAH_DEV_URL",
                "valueFrom": {
                    "secretKeyRef": {
                        "name": req.dev_secret_ref.name,
                        "key": req.dev_secret_ref.key,
                    }
                },
            }
        )
    mounts = list(req.mounts)
    if req.input_configmap:
        mounts.insert(0, Mount("input", INPUT_MOUNT, {"configMap": {"name": req.input_configmap}}))
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": req.runner.image,
        "args": list(req.args),
        "env": env,
    }
    volume_mounts = [{"name": m.name, "mountPath": m.path, "readOnly": True} for m in mounts]
    if cache is not None:
        volume_mounts.append({"name": CACHE_VOLUME, "mountPath": CACHE_MOUNT})
    volume_mounts += [dict(m) for m in req.runner.volume_mounts or []]
    if volume_mounts:
        container["volumeMounts"] = volume_mounts
    if req.runner.resources:
        container["resources"] = req.runner.resources
    if req.runner.security_context:
        container["securityContext"] = req.runner.security_context
    # The Pod's own deadline, beside the Job's: the Job controller enforces the Job's
    # through the API, which a node cut off from it cannot hear; the kubelet enforces the
    # Pod's on its own. Together they bound how long a runner can live (ptah.lifecycle.hold).
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "activeDeadlineSeconds": req.runner.active_deadline_seconds,
        "containers": [container],
    }
    volumes = [{"name": m.name, **m.source} for m in mounts]
    if cache is not None:
        volumes.append(cache)
    volumes += [dict(v) for v in req.runner.volumes or []]
    if volumes:
        spec["volumes"] = volumes
    if req.runner.service_account_name:
        spec["serviceAccountName"] = req.runner.service_account_name
    if req.runner.node_selector:
        spec["nodeSelector"] = req.runner.node_selector
    if req.runner.tolerations:
        spec["tolerations"] = req.runner.tolerations
    if req.runner.pod_security_context:
        spec["securityContext"] = req.runner.pod_security_context
    return spec


def _cache_volume(req: JobRequest) -> dict[str, Any] | None:
    """The re-plan cache's volume when the runner settings name one and the operation
    plans; None otherwise, and then the Pod is exactly what it was without a cache."""
    source = req.runner.cache_volume
    if not source or req.operation_type not in CACHED_OPERATIONS:
        return None
    return {"name": CACHE_VOLUME, **source}


def admission_digest(req: JobRequest) -> str:
    return digest(pod_spec(req))


def labels(req: JobRequest) -> dict[str, str]:
    return {
        LABEL_OPERATION: req.operation_id,
        LABEL_OWNER_UID: req.owner.uid,
        LABEL_OPERATION_TYPE: req.operation_type,
        LABEL_MANAGED_BY: "ptah",
    }


def build_job(req: JobRequest) -> dict[str, Any]:
    """The Job for ``req``. No TTL: the TTL is set only once the outcome is read."""
    adm = admission_digest(req)
    annotations = {ANNOTATION_ADMISSION: adm, ANNOTATION_INPUT: req.input_fingerprint}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": req.name,
            "namespace": req.namespace,
            "labels": labels(req),
            "annotations": annotations,
            "ownerReferences": [req.owner.reference()],
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": req.runner.active_deadline_seconds,
            # Spelled out though they are the API's defaults, so the intent check sees a
            # person's edit of them: a Job suspended and resumed, or given more
            # parallelism, runs its operation in another Pod.
            "suspend": False,
            "parallelism": 1,
            "completions": 1,
            "template": {
                "metadata": {"labels": labels(req), "annotations": {ANNOTATION_ADMISSION: adm}},
                "spec": pod_spec(req),
            },
        },
    }


def _covers(live: Any, want: Any) -> bool:
    """True when every field of ``want`` has the same value in ``live``.

    The API server adds defaults (dnsPolicy, terminationMessagePath, selector,
    controller-uid labels...), so the comparison is of what Ptah asked for, with
    lists matched element by element and of equal length.
    """
    if isinstance(want, dict):
        if live == want:  # equal JSON values cover each other (the usual case, at C speed)
            return True
        return isinstance(live, dict) and all(_covers(live.get(k), v) for k, v in want.items())
    if isinstance(want, list):
        return (
            isinstance(live, list)
            and len(live) == len(want)
            and all(_covers(a, b) for a, b in zip(live, want, strict=True))
        )
    return bool(live == want)


def intent_drift(live: dict[str, Any], req: JobRequest) -> str | None:
    """Why the live Job is not the one ``req`` builds, or None when it is.

    The whole intent is compared: owner reference (exactly one controller, this
    resource), labels, annotations, and a semantic comparison of the spec.
    """
    want = build_job(req)
    meta = live.get("metadata", {})
    controllers = [r for r in meta.get("ownerReferences", []) if r.get("controller")]
    if len(controllers) != 1 or controllers[0].get("uid") != req.owner.uid:
        return "the Job is not controlled by exactly this resource"
    if not _covers(meta.get("labels", {}), want["metadata"]["labels"]):
        return "the Job's labels differ from its intent"
    if not _covers(meta.get("annotations", {}), want["metadata"]["annotations"]):
        return "the Job's annotations differ from its intent"
    live_spec = dict(live.get("spec", {}))
    if not _covers(live_spec, want["spec"]):
        return "the Job's spec differs from its intent"
    return None
