"""The runner Job a claim asks for: the installation's runner defaults under the
resource's own."""

from __future__ import annotations

from ptah.api.common import ActiveOperation, RunnerSpec, SecretKeyRef
from ptah.api.parsed import parse
from ptah.lifecycle.context import Pass
from ptah.workload.job import JobRequest, Mount, Owner


def runner_spec(p: Pass) -> RunnerSpec:
    """The runner settings: the installation's defaults, overridden field by field by the
    resource's own spec.runner."""
    return parse(RunnerSpec, {**p.env.runner_defaults, **(p.spec.get("runner") or {})})


def job_request(p: Pass, op: ActiveOperation) -> JobRequest:
    target = p.spec["target"]
    dev = target.get("devSecretRef")
    return JobRequest(
        namespace=p.namespace,
        name=op.job_name,
        owner=Owner(p.family.kind.api_version, p.family.kind.kind, p.name, p.uid),
        operation_id=op.operation_id,
        operation_type=op.type,
        input_fingerprint=op.input_fingerprint,
        runner=runner_spec(p),
        args=list(op.args),
        secret_ref=SecretKeyRef.model_validate(target["secretRef"]),
        dev_secret_ref=SecretKeyRef.model_validate(dev) if dev else None,
        input_configmap=op.input_config_map,
        mounts=[Mount(m.name, m.path, m.source) for m in op.mounts],
        realm=op.expected_database if op.mutating else None,
    )
