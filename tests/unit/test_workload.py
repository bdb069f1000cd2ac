"""The Job builder, names, the admission envelope and runner defaults."""

from __future__ import annotations

from typing import Any

from ptah import podintent
from ptah.api.common import RunnerSpec, SecretKeyRef
from ptah.families.schema import SchemaFamily
from ptah.lifecycle.context import Env, Pass
from ptah.lifecycle.hold import MARGIN_SECONDS, hold_seconds
from ptah.lifecycle.request import runner_spec
from ptah.testing.memory import MemoryCluster
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


def test_a_job_suspended_or_widened_by_hand_is_not_its_intent() -> None:
    """A Job suspended (its Pod deleted) and resumed, or given more parallelism or
    completions, runs its operation in another Pod: the intent check sees the edit."""
    req = _req()
    for field, value in [("suspend", True), ("parallelism", 2), ("completions", 3)]:
        live = build_job(req)
        live["spec"][field] = value
        assert intent_drift(live, req) == "the Job's spec differs from its intent", field


def test_runner_pods_carry_the_deadline_their_node_enforces_and_the_hold_bounds_it() -> None:
    """The Job's deadline is enforced through the API; the Pod's own, the same value, by
    its kubelet even when cut off. The hold covers both: the latest start plus the
    longest run plus the margin, and a changed deadline changes the admission envelope."""
    runner = RunnerSpec(active_deadline_seconds=120)
    job = build_job(_req(runner))
    assert job["spec"]["activeDeadlineSeconds"] == 120
    assert job["spec"]["template"]["spec"]["activeDeadlineSeconds"] == 120
    assert hold_seconds(runner.active_deadline_seconds) == 120 + 120 + MARGIN_SECONDS
    assert not podintent.template_matches(podintent.resolve(_req()), _req(runner))
    # The snapshot keeps the deadline the Job is built with: the hold's, whatever
    # spec.runner says by the time the release is staged.
    assert podintent.resolve(_req(runner)).active_deadline_seconds == 120


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


def test_runner_volumes_are_mounted_beside_ptahs_inputs() -> None:
    runner = RunnerSpec.model_validate(
        {
            "volumes": [{"name": "data", "hostPath": {"path": "/srv/db", "type": "Directory"}}],
            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        }
    )
    spec = build_job(_req(runner))["spec"]["template"]["spec"]
    assert [v["name"] for v in spec["volumes"]] == ["input", "data"]
    assert spec["volumes"][1]["hostPath"] == {"path": "/srv/db", "type": "Directory"}
    mounts = spec["containers"][0]["volumeMounts"]
    assert mounts[0] == {"name": "input", "mountPath": "/ptah/input", "readOnly": True}
    assert mounts[1] == {"name": "data", "mountPath": "/data"}  # writable: the database
    # The volumes are part of the admission envelope.
    assert podintent.resolve(_req(runner)).digest != podintent.resolve(_req()).digest


def test_runner_volumes_refuse_what_would_shadow_ptahs_inputs() -> None:
    import pydantic
    import pytest

    vol = {"name": "data", "emptyDir": {}}
    bad = [
        {"volumes": [vol], "volumeMounts": [{"name": "other", "mountPath": "/data"}]},
        {"volumes": [{"name": "input", "emptyDir": {}}]},
        {"volumes": [{"name": "migrations-0", "emptyDir": {}}]},
        {"volumes": [vol, vol]},
        {"volumes": [{"emptyDir": {}}]},
        {"volumes": [vol], "volumeMounts": [{"name": "data", "mountPath": "/ptah/input"}]},
        {"volumes": [vol], "volumeMounts": [{"name": "data", "mountPath": "/ptah"}]},
        {"volumes": [vol], "volumeMounts": [{"name": "data", "mountPath": "data"}]},
    ]
    for body in bad:
        with pytest.raises(pydantic.ValidationError) as err:
            RunnerSpec.model_validate(body)
        assert "runner.volume" in str(err.value), body
    assert RunnerSpec.model_validate(
        {"volumes": [vol], "volumeMounts": [{"name": "data", "mountPath": "/ptahdata"}]}
    ).volume_mounts


def test_runner_volumes_from_defaults_and_the_spec_wins() -> None:
    default = {
        "volumes": [{"name": "a", "emptyDir": {}}],
        "volumeMounts": [{"name": "a", "mountPath": "/a"}],
    }
    own = {
        "volumes": [{"name": "b", "emptyDir": {}}],
        "volumeMounts": [{"name": "b", "mountPath": "/b"}],
    }
    assert RunnerSpec.model_validate({**default, **own}).volumes == own["volumes"]
    assert RunnerSpec.model_validate(default).volume_mounts == default["volumeMounts"]


def _plan_req(runner: RunnerSpec) -> JobRequest:
    return JobRequest(
        **{
            **_req(runner).__dict__,
            "operation_type": "Plan",
            "args": ["plan", "--desired", "/ptah/input/desired.sql"],
        }
    )


def test_a_cache_volume_is_mounted_in_plan_pods_only() -> None:
    """A Plan Pod mounts the cache writable at /ptah/cache and is told where it is; an
    Apply Pod never sees it (it trusts no cache); with no cache the Pod is unchanged."""
    source = {"persistentVolumeClaim": {"claimName": "ptah-plan-cache"}}
    cached = RunnerSpec.model_validate({"cacheVolume": source})
    spec = build_job(_plan_req(cached))["spec"]["template"]["spec"]
    assert {"name": "plan-cache", **source} in spec["volumes"]
    (container,) = spec["containers"]
    assert {"name": "plan-cache", "mountPath": "/ptah/cache"} in container["volumeMounts"]
    assert {"name": "PTAH_CACHE_DIR", "value": "/ptah/cache"} in container["env"]
    # Apply: exactly the Pod it is without a cache.
    assert build_job(_req(cached)) == build_job(_req())
    # No cache: the Plan Pod has neither the volume nor the variable.
    plain = build_job(_plan_req(RunnerSpec()))["spec"]["template"]["spec"]
    assert all(v["name"] != "plan-cache" for v in plain["volumes"])
    assert all(e["name"] != "PTAH_CACHE_DIR" for e in plain["containers"][0]["env"])
    # The cache is part of the admission envelope.
    assert (
        podintent.resolve(_plan_req(cached)).digest
        != podintent.resolve(_plan_req(RunnerSpec())).digest
    )


def test_a_cache_volume_is_one_source_and_its_name_is_reserved() -> None:
    import pydantic
    import pytest

    for bad in (
        {"cacheVolume": {"name": "x", "emptyDir": {}}},
        {"cacheVolume": {"emptyDir": {}, "hostPath": {"path": "/c"}}},
        {"cacheVolume": {}},
        {"volumes": [{"name": "plan-cache", "emptyDir": {}}]},
    ):
        with pytest.raises(pydantic.ValidationError) as err:
            RunnerSpec.model_validate(bad)
        assert "runner." in str(err.value), bad
    # The installation's cache reaches every resource; one opts out with null.
    env = Env(cluster=MemoryCluster(), runner_defaults={"cacheVolume": {"emptyDir": {}}})
    meta = {"name": "s", "namespace": "n", "uid": "u"}
    assert runner_spec(Pass(env, SchemaFamily(), {"metadata": meta, "spec": {}})).cache_volume
    own = {"metadata": meta, "spec": {"runner": {"cacheVolume": None}}}
    assert runner_spec(Pass(env, SchemaFamily(), own)).cache_volume is None
