"""The Job builder, names, the admission envelope and runner defaults."""

from __future__ import annotations

from typing import Any

from ptah import podintent
from ptah.api.common import RunnerSpec, SecretKeyRef
from ptah.families.schema import SchemaFamily
from ptah.kube.memory import MemoryCluster
from ptah.lifecycle.context import Env, Pass
from ptah.lifecycle.reconcile import runner_spec
from ptah.workload import names
from ptah.workload.job import JobRequest, Owner, build_job, intent_drift


def _req(runner: RunnerSpec | None = None) -> JobRequest:
    return JobRequest(
        namespace="ns",
        name="ptah-apply-shop-abc",
        owner=Owner("ptah.io/v1alpha1", "PtahSchema", "shop", "uid-1"),
        operation_id="apply-1",
        operation_type="Apply",
        input_fingerprint="f" * 40,
        runner=runner or RunnerSpec(),
        args=["apply", "--plan", "/ptah/input/plan.json"],
        secret_ref=SecretKeyRef(name="db"),
        input_configmap="ptah-input-1",
    )


def test_job_name_is_a_label_value_and_folds_every_input() -> None:
    base: dict[str, Any] = dict(
        resource_name="a" * 80,
        resource_uid="u",
        op_type="Apply",
        operation_id="o",
        binding_epoch=1,
        input_fingerprint="f",
        attempt=1,
    )
    name = names.job_name(**base)
    assert len(name) <= 63 and name.startswith("ptah-apply-")
    for key, other in [("resource_uid", "v"), ("binding_epoch", 2), ("attempt", 2)]:
        assert names.job_name(**{**base, key: other}) != name


def test_live_job_with_server_defaults_matches_its_intent() -> None:
    req = _req()
    live = build_job(req)
    live["metadata"]["uid"] = "job-uid"
    live["spec"]["template"]["spec"]["dnsPolicy"] = "ClusterFirst"
    live["spec"]["template"]["metadata"]["labels"]["controller-uid"] = "x"
    assert intent_drift(live, req) is None
    live["spec"]["template"]["spec"]["containers"][0]["image"] = "evil/image"
    assert intent_drift(live, req) == "the Job's spec differs from its intent"
    live = build_job(req)
    live["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    assert intent_drift(live, req) == "the Job is not controlled by exactly this resource"


def test_security_context_is_part_of_the_admission_envelope() -> None:
    plain = _req()
    hardened = _req(RunnerSpec(security_context={"runAsNonRoot": True}))
    job = build_job(hardened)
    assert job["spec"]["template"]["spec"]["containers"][0]["securityContext"] == {
        "runAsNonRoot": True
    }
    snapshot = podintent.resolve(plain)
    assert not podintent.template_matches(snapshot, hardened)


def test_runner_defaults_are_overridden_field_by_field() -> None:
    env = Env(
        cluster=MemoryCluster(),
        runner_defaults={"image": "registry/ptah:1.0", "serviceAccountName": "ptah-runner"},
    )
    obj = {
        "metadata": {"name": "s", "namespace": "n", "uid": "u"},
        "spec": {"runner": {"image": "registry/ptah:2.0"}},
    }
    spec = runner_spec(Pass(env, SchemaFamily(), obj))
    assert spec.image == "registry/ptah:2.0"
    assert spec.service_account_name == "ptah-runner"


def test_operator_reads_runner_defaults_and_refuses_a_bad_file(tmp_path: Any) -> None:
    import json

    import pytest

    from ptah.operator.main import runner_defaults

    good = tmp_path / "good.json"
    good.write_text(json.dumps({"image": "r/ptah:1", "resources": {}, "tolerations": []}))
    assert runner_defaults(str(good)) == {"image": "r/ptah:1"}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"imagee": "typo"}))
    with pytest.raises(SystemExit, match="not valid runner defaults"):
        runner_defaults(str(bad))
    assert runner_defaults("") == {}
