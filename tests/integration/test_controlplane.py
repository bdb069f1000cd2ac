"""The local control plane behaves like a cluster: real apiserver, controllers, Pods."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from lightkube.models.meta_v1 import ObjectMeta, OwnerReference
from lightkube.resources.core_v1 import ConfigMap

from ptah.testing.devcluster import images, podspec
from ptah.testing.devcluster.apiclient import ApiClient, ApiError
from support.wait import wait_for

if TYPE_CHECKING:
    from support.cluster import Cluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(agent_cluster: Any) -> Any:
    """On the process node agent: these are the agent's own behaviours (busybox
    mapped to host commands, process groups, path rewriting)."""
    return agent_cluster


JSON = dict[str, Any]


def _job(name: str, command: list[str], **spec: Any) -> JSON:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            **spec,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox", "command": command}],
                }
            },
        },
    }


def _job_condition(api: ApiClient, ns: str, name: str) -> str | None:
    job = api.get(f"/apis/batch/v1/namespaces/{ns}/jobs/{name}")
    for cond in job.get("status", {}).get("conditions") or []:
        if cond["type"] in ("Complete", "Failed") and cond["status"] == "True":
            return str(cond["type"])
    return None


def _job_pods(api: ApiClient, ns: str, name: str) -> list[JSON]:
    items = api.get(f"/api/v1/namespaces/{ns}/pods", params={"labelSelector": f"job-name={name}"})[
        "items"
    ]
    return list(items)


def _pod_processes(uid: str) -> list[int]:
    """Live processes carrying the pod's PTAH_POD_UID marker."""
    marker = f"PTAH_POD_UID={uid}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in environ.split(b"\0") and state != "Z":
            found.append(int(entry.name))
    return found


def test_job_echo_completes_and_kubectl_logs_returns_output(
    cluster: Cluster, namespace: str
) -> None:
    cluster.kubectl(
        "create",
        "job",
        "hello",
        "--image=busybox",
        "--",
        "sh",
        "-c",
        "echo hello from ptah",
        namespace=namespace,
    )
    cluster.kubectl(
        "wait", "--for=condition=complete", "job/hello", "--timeout=90s", namespace=namespace
    )
    logs = cluster.kubectl("logs", "job/hello", namespace=namespace).stdout
    assert logs == "hello from ptah\n"


def test_failing_command_with_backoff_limit_zero_fails_the_job(
    cluster: Cluster, namespace: str
) -> None:
    api = cluster.api()
    api.post(
        f"/apis/batch/v1/namespaces/{namespace}/jobs",
        _job("fails", ["sh", "-c", "echo about to fail; exit 7"], backoffLimit=0),
    )
    cond = cluster.wait_for(
        "job fails to finish", lambda: _job_condition(api, namespace, "fails"), timeout=90
    )
    assert cond == "Failed"
    (pod,) = _job_pods(api, namespace, "fails")
    assert pod["status"]["phase"] == "Failed"
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 7
    assert terminated["reason"] == "Error"
    logs = cluster.kubectl("logs", pod["metadata"]["name"], namespace=namespace).stdout
    assert logs == "about to fail\n"


def test_deleting_owner_garbage_collects_owned_config_map(cluster: Cluster, namespace: str) -> None:
    client = cluster.client(namespace)
    owner = client.create(ConfigMap(metadata=ObjectMeta(name="owner"), data={"a": "1"}))
    assert owner.metadata is not None and owner.metadata.uid
    client.create(
        ConfigMap(
            metadata=ObjectMeta(
                name="owned",
                ownerReferences=[
                    OwnerReference(
                        apiVersion="v1", kind="ConfigMap", name="owner", uid=owner.metadata.uid
                    )
                ],
            ),
            data={"b": "2"},
        )
    )
    client.delete(ConfigMap, "owner")
    api = cluster.api()
    cluster.wait_for(
        "owned ConfigMap to be garbage-collected",
        lambda: api.get_or_none(f"/api/v1/namespaces/{namespace}/configmaps/owned") is None,
        timeout=60,
    )


def test_ttl_seconds_after_finished_removes_job_and_pod(cluster: Cluster, namespace: str) -> None:
    api = cluster.api()
    api.post(
        f"/apis/batch/v1/namespaces/{namespace}/jobs",
        _job("short", ["echo", "done"], ttlSecondsAfterFinished=1),
    )
    cluster.wait_for(
        "job short to complete", lambda: _job_condition(api, namespace, "short"), timeout=90
    )
    assert _job_pods(api, namespace, "short"), "the finished Job's Pod exists before the TTL"
    cluster.wait_for(
        "TTL controller to delete the Job",
        lambda: api.get_or_none(f"/apis/batch/v1/namespaces/{namespace}/jobs/short") is None,
        timeout=60,
    )
    cluster.wait_for(
        "garbage collector to delete the Job's Pod",
        lambda: not _job_pods(api, namespace, "short"),
        timeout=60,
    )


GADGET_CRD: JSON = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.controlplane.test.ptah.io"},
    "spec": {
        "group": "controlplane.test.ptah.io",
        "scope": "Namespaced",
        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["size"],
                                "properties": {"size": {"type": "integer", "minimum": 1}},
                            },
                            "status": {
                                "type": "object",
                                "properties": {"observed": {"type": "integer"}},
                            },
                        },
                    }
                },
            }
        ],
    },
}


@pytest.fixture(scope="module")
def gadgets(cluster: Cluster) -> str:
    api = cluster.api()
    try:
        api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", GADGET_CRD)
    except ApiError as err:
        if err.status != 409:
            raise

    def established() -> bool:
        crd = api.get(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.controlplane.test.ptah.io"
        )
        return any(
            c["type"] == "Established" and c["status"] == "True"
            for c in crd.get("status", {}).get("conditions") or []
        )

    cluster.wait_for("CRD gadgets established", established, timeout=30)
    return "/apis/controlplane.test.ptah.io/v1"


def _create_gadget(api: ApiClient, base: str, ns: str, name: str, size: Any) -> JSON:
    body: JSON = {"apiVersion": "controlplane.test.ptah.io/v1", "kind": "Gadget"}
    body["metadata"] = {"name": name}
    body["spec"] = {"size": size}

    # A CRD just established can briefly 404 on its first create; retry that only.
    def create() -> JSON | None:
        try:
            return api.post(f"{base}/namespaces/{ns}/gadgets", body)
        except ApiError as err:
            if err.status != 404:
                raise
            return None

    created: JSON = wait_for("the gadgets endpoint", create, timeout=5, interval=0.1)
    return created


def test_status_patch_with_stale_resource_version_conflicts(
    cluster: Cluster, namespace: str, gadgets: str
) -> None:
    api = cluster.api()
    created = _create_gadget(api, gadgets, namespace, "w1", 3)
    stale = created["metadata"]["resourceVersion"]
    status_path = f"{gadgets}/namespaces/{namespace}/gadgets/w1/status"
    fresh = api.patch(
        status_path,
        {"metadata": {"resourceVersion": stale}, "status": {"observed": 1}},
        "application/merge-patch+json",
    )
    assert fresh["status"] == {"observed": 1}
    assert fresh["metadata"]["resourceVersion"] != stale
    with pytest.raises(ApiError) as excinfo:
        api.patch(
            status_path,
            {"metadata": {"resourceVersion": stale}, "status": {"observed": 2}},
            "application/merge-patch+json",
        )
    assert excinfo.value.status == 409
    assert json.loads(excinfo.value.body)["reason"] == "Conflict"
    # the status subresource ignores spec changes
    after = api.patch(
        status_path,
        {"spec": {"size": 99}, "status": {"observed": 3}},
        "application/merge-patch+json",
    )
    assert after["spec"] == {"size": 3}


def test_crd_structural_schema_rejects_invalid_object(
    cluster: Cluster, namespace: str, gadgets: str
) -> None:
    api = cluster.api()
    _create_gadget(api, gadgets, namespace, "ok", 1)
    for bad in ("big", 0):
        with pytest.raises(ApiError) as excinfo:
            _create_gadget(api, gadgets, namespace, f"bad-{bad}", bad)
        assert excinfo.value.status == 422
        assert json.loads(excinfo.value.body)["reason"] == "Invalid"


def test_deleting_running_pod_kills_its_process_group(cluster: Cluster, namespace: str) -> None:
    api = cluster.api()
    pod = api.post(
        f"/api/v1/namespaces/{namespace}/pods",
        {
            "metadata": {"name": "sleeper"},
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        # a child in the background and one in the foreground
                        "command": ["sh", "-c", "sleep 1000 & echo started; sleep 1001"],
                    }
                ],
            },
        },
    )
    uid = pod["metadata"]["uid"]
    path = f"/api/v1/namespaces/{namespace}/pods/sleeper"
    cluster.wait_for(
        "pod sleeper running",
        lambda: api.get(path)["status"].get("phase") == "Running",
        timeout=60,
    )
    procs = cluster.wait_for("sleeper's processes", lambda: len(_pod_processes(uid)) >= 3)
    assert procs
    cluster.wait_for(
        "sleeper's output",
        lambda: cluster.kubectl("logs", "sleeper", namespace=namespace).stdout == "started\n",
    )
    api.delete(path)
    cluster.wait_for("pod sleeper deleted", lambda: api.get_or_none(path) is None, timeout=60)
    leftover = _pod_processes(uid)
    for pid in leftover:  # keep the machine clean even when the assertion fails
        os.kill(pid, signal.SIGKILL)
    assert leftover == []


def test_env_and_volumes_from_secrets_config_maps_and_fields(
    cluster: Cluster, namespace: str
) -> None:
    api = cluster.api()
    ns_path = f"/api/v1/namespaces/{namespace}"
    api.post(f"{ns_path}/secrets", {"metadata": {"name": "s"}, "stringData": {"pw": "hunter2"}})
    api.post(f"{ns_path}/configmaps", {"metadata": {"name": "c"}, "data": {"conf": "x=1"}})
    script = (
        'echo "pw=$PW mode=$MODE pod=$POD ns=$NS"; cat /etc/app/conf; echo; '
        "cat /etc/secret/pw; echo; test -s /var/run/secrets/kubernetes.io/serviceaccount/token "
        "&& echo token; echo scratch > /scratch/f && cat /scratch/f"
    )
    api.post(
        f"{ns_path}/pods",
        {
            "metadata": {"name": "envvol"},
            "spec": {
                "restartPolicy": "Never",
                "volumes": [
                    {"name": "app", "configMap": {"name": "c"}},
                    {"name": "sec", "secret": {"secretName": "s"}},
                    {"name": "scratch", "emptyDir": {}},
                ],
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "command": ["sh", "-c", script],
                        "env": [
                            {
                                "name": "PW",
                                "valueFrom": {"secretKeyRef": {"name": "s", "key": "pw"}},
                            },
                            {
                                "name": "MODE",
                                "valueFrom": {"configMapKeyRef": {"name": "c", "key": "conf"}},
                            },
                            {
                                "name": "POD",
                                "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                            },
                            {
                                "name": "NS",
                                "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                            },
                        ],
                        "volumeMounts": [
                            {"name": "app", "mountPath": "/etc/app"},
                            {"name": "sec", "mountPath": "/etc/secret"},
                            {"name": "scratch", "mountPath": "/scratch"},
                        ],
                    }
                ],
            },
        },
    )
    cluster.wait_for(
        "pod envvol succeeded",
        lambda: api.get(f"{ns_path}/pods/envvol")["status"].get("phase") == "Succeeded",
        timeout=60,
    )
    logs = cluster.kubectl("logs", "envvol", namespace=namespace).stdout
    assert logs.splitlines() == [
        f"pw=hunter2 mode=x=1 pod=envvol ns={namespace}",
        "x=1",
        "hunter2",
        "token",
        "scratch",
    ]


def test_unmappable_image_without_command_fails_with_reason(
    cluster: Cluster, namespace: str
) -> None:
    api = cluster.api()
    path = f"/api/v1/namespaces/{namespace}/pods/nginx"
    api.post(
        f"/api/v1/namespaces/{namespace}/pods",
        {
            "metadata": {"name": "nginx"},
            "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
        },
    )
    pod = cluster.wait_for(
        "pod nginx failed",
        lambda: (p := api.get(path))["status"].get("phase") == "Failed" and p,
        timeout=60,
    )
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["reason"] == "ImageNotMappable"
    assert terminated["exitCode"] == 128


def _run_pod(cluster: Cluster, namespace: str, name: str, spec: JSON, timeout: float = 60) -> JSON:
    """Create a Pod and wait for a terminal phase; returns the Pod."""
    cluster.api().post(
        f"/api/v1/namespaces/{namespace}/pods", {"metadata": {"name": name}, "spec": spec}
    )
    return _finished_pod(cluster, namespace, name, timeout)


def _finished_pod(cluster: Cluster, namespace: str, name: str, timeout: float = 60) -> JSON:
    """Wait for Pod ``name`` to reach a terminal phase; returns the Pod."""
    api = cluster.api()
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    pod: JSON = cluster.wait_for(
        f"pod {name} to finish",
        lambda: (p := api.get(path))["status"].get("phase") in ("Succeeded", "Failed") and p,
        timeout=timeout,
    )
    return pod


def test_runner_image_without_command_runs_installed_ptah_runner(
    cluster: Cluster, namespace: str
) -> None:
    pod = _run_pod(
        cluster,
        namespace,
        "runner",
        {
            "restartPolicy": "Never",
            "containers": [{"name": "runner", "image": "ptah/ptah:dev", "args": ["--help"]}],
        },
    )
    assert pod["status"]["phase"] == "Succeeded"
    logs = cluster.kubectl("logs", "runner", namespace=namespace).stdout
    assert logs.startswith("usage: ptah-runner")


def test_init_containers_run_first_and_share_empty_dir(cluster: Cluster, namespace: str) -> None:
    mount = [{"name": "work", "mountPath": "/work"}]
    pod = _run_pod(
        cluster,
        namespace,
        "inits",
        {
            "restartPolicy": "Never",
            "volumes": [{"name": "work", "emptyDir": {}}],
            "initContainers": [
                {
                    "name": "first",
                    "image": "busybox",
                    "command": ["sh", "-c", "echo one > /work/order"],
                    "volumeMounts": mount,
                },
                {
                    "name": "second",
                    "image": "busybox",
                    "command": ["sh", "-c", "echo two >> /work/order"],
                    "volumeMounts": mount,
                },
            ],
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "command": ["cat", "/work/order"],
                    "volumeMounts": mount,
                }
            ],
        },
    )
    assert pod["status"]["phase"] == "Succeeded"
    assert [
        c["state"]["terminated"]["exitCode"] for c in pod["status"]["initContainerStatuses"]
    ] == [0, 0]
    assert cluster.kubectl("logs", "inits", namespace=namespace).stdout == "one\ntwo\n"


def test_active_deadline_seconds_kills_the_pod(cluster: Cluster, namespace: str) -> None:
    # The deadline is set once the container runs (a Pod's activeDeadlineSeconds may be
    # added after creation): set at creation, a start slower than the deadline on a
    # loaded machine leaves the container waiting, never started, never signalled.
    api = cluster.api()
    path = f"/api/v1/namespaces/{namespace}/pods/deadline"
    spec = {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "300"]}],
    }
    api.post(
        f"/api/v1/namespaces/{namespace}/pods", {"metadata": {"name": "deadline"}, "spec": spec}
    )

    def running() -> bool:
        statuses = api.get(path)["status"].get("containerStatuses") or []
        return bool(statuses) and "running" in statuses[0]["state"]

    cluster.wait_for("the container to run", running, timeout=60)
    t0 = time.monotonic()
    api.patch(path, {"spec": {"activeDeadlineSeconds": 1}})
    pod = _finished_pod(cluster, namespace, "deadline")
    assert time.monotonic() - t0 < 30
    assert pod["status"]["phase"] == "Failed"
    assert pod["status"]["reason"] == "DeadlineExceeded"
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["signal"] == 9
    assert _pod_processes(pod["metadata"]["uid"]) == []


# -- the mapping rules, without a cluster -------------------------------------------------


@pytest.mark.parametrize(
    ("image", "runner"),
    [
        ("ptah/ptah:dev", True),
        ("ptah", True),
        ("ghcr.io/acme/ptah@sha256:" + "0" * 64, True),
        ("localhost:5000/ptah:1.0", True),
        ("busybox", False),
        ("ptah/other:dev", False),
        ("registry:5000/ptahx", False),
    ],
)
def test_runner_image_rule(image: str, runner: bool) -> None:
    assert images.is_runner_image(image) is runner


def test_configured_runner_repositories(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTAH_RUNNER_IMAGES", "acme/migrator:1, other")
    repos = images.configured_runner_repositories(["x/y:2"])
    assert images.is_runner_image("acme/migrator:7", repos)
    assert images.is_runner_image("other", repos)
    assert images.is_runner_image("x/y", repos)
    assert not images.is_runner_image("acme/other", repos)


def test_entrypoint_rules(tmp_path: Path) -> None:
    assert images.entrypoint("busybox", ["sh", "-c"], ["echo"], (), tmp_path) == [
        "sh",
        "-c",
        "echo",
    ]
    assert images.entrypoint("ptah/ptah:dev", [], ["plan"], (), tmp_path) == [
        str(tmp_path / "ptah-runner"),
        "plan",
    ]
    with pytest.raises(images.ImageNotMappableError):
        images.entrypoint("nginx", [], ["x"], (), tmp_path)


def test_path_rewriting_and_expansion() -> None:
    mounts = {"/etc/app": Path("/s/root/c/etc/app"), "/etc/app/sub": Path("/s/sub")}
    text = "--config=/etc/app/x.yaml /etc/apps /etc/app /etc/app/sub/y a:/etc/app"
    assert podspec.rewrite_paths(text, mounts) == (
        "--config=/s/root/c/etc/app/x.yaml /etc/apps /s/root/c/etc/app /s/sub/y a:/s/root/c/etc/app"
    )
    assert podspec.expand("$(A)-$$(A)-$(B)", {"A": "1"}) == "1-$(A)-$(B)"
