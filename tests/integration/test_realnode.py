"""The real node: Pods in real containers (kubelet, containerd, runc) from images built
from the Dockerfile, reaching the apiserver through the ``kubernetes`` Service and
nothing beyond the bridge; ``ptah dev down`` leaves the host as it found it."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ptah.testing.devcluster import cluster as devcluster
from ptah.testing.devcluster import hostchanges, imagebuild, node

if TYPE_CHECKING:
    from support.cluster import Cluster

# node_exclusive: it compares the host before and after a node of its own, so nothing
# else may run on the machine meanwhile (hack/test.sh runs these first, one at a time).
pytestmark = [pytest.mark.integration, pytest.mark.node_exclusive]

JSON = dict[str, Any]
RESTRICTED = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}


def _job(name: str, image: str, command: list[str], **pod: Any) -> JSON:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": image, "command": command}],
                    **pod,
                }
            },
        },
    }


def _finished(c: Cluster, ns: str, name: str) -> str | None:
    job = c.api().get(f"/apis/batch/v1/namespaces/{ns}/jobs/{name}")
    for cond in job.get("status", {}).get("conditions") or []:
        if cond["type"] in ("Complete", "Failed") and cond["status"] == "True":
            return str(cond["type"])
    return None


def _run_job(c: Cluster, ns: str, body: JSON, timeout: float = 90) -> str:
    """Create the Job, wait for Complete, return its Pod's log."""
    name = body["metadata"]["name"]
    c.kubectl("apply", "-f", "-", namespace=ns, stdin=json.dumps(body))
    outcome = c.wait_for(f"job {name} finished", lambda: _finished(c, ns, name), timeout)
    logs = c.kubectl("logs", f"job/{name}", namespace=ns, check=False)
    assert outcome == "Complete", f"job {name}: {outcome}\n{logs.stdout}{logs.stderr}"
    return logs.stdout


def test_job_runs_in_a_real_container(real_cluster: Cluster, real_namespace: str) -> None:
    """The base image's shell runs in its own network namespace on the bridge."""
    out = _run_job(
        real_cluster,
        real_namespace,
        _job(
            "hello",
            "python:3.11-slim",
            ["sh", "-c", "echo hello from $(hostname); cat /proc/1/cgroup"],
        ),
    )
    pod = real_cluster.api().get(
        f"/api/v1/namespaces/{real_namespace}/pods", params={"labelSelector": "job-name=hello"}
    )["items"][0]
    assert f"hello from {pod['metadata']['name']}" in out
    net = node.NodeNet(real_cluster.info.config.net_index)
    prefix = net.gateway.rsplit(".", 1)[0] + "."
    assert pod["status"]["podIP"].startswith(prefix) and pod["status"]["podIP"] != net.gateway
    assert pod["status"]["containerStatuses"][0]["containerID"].startswith("containerd://")
    assert f"/{net.cgroup_root}/kubepods" in out  # the container's cgroup is the kubelet's


def test_runner_image_reaches_the_apiserver_only(
    real_cluster: Cluster, real_namespace: str
) -> None:
    """The project image, non-root with a read-only root filesystem, calls the API
    through the ``kubernetes`` Service; an address off the bridge is unreachable."""
    script = """
import httpx, os, socket
sa = "/var/run/secrets/kubernetes.io/serviceaccount"
host = os.environ["KUBERNETES_SERVICE_HOST"]
r = httpx.get(f"https://{host}:443/version", verify=sa + "/ca.crt",
              headers={"Authorization": "Bearer " + open(sa + "/token").read()})
print("api", r.status_code, r.json()["gitVersion"], "uid", os.getuid())
s = socket.socket(); s.settimeout(3)
try:
    s.connect(("198.51.100.7", 443)); print("outside reachable")
except OSError as e:
    print("outside unreachable", type(e).__name__)
try:
    open("/probe", "w"); print("rootfs writable")
except OSError:
    print("rootfs read-only")
"""
    body = _job(
        "api",
        "ptah/ptah:dev",
        ["python", "-c", script],
        securityContext={
            "runAsNonRoot": True,
            "runAsUser": 10001,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    )
    body["spec"]["template"]["spec"]["containers"][0]["securityContext"] = RESTRICTED
    out = _run_job(real_cluster, real_namespace, body)
    assert "api 200 v1.37.2 uid 10001" in out
    assert "outside unreachable" in out
    assert "rootfs read-only" in out


def test_runner_entrypoint_is_the_images(real_cluster: Cluster, real_namespace: str) -> None:
    """No command: the image's ENTRYPOINT (ptah-runner) runs, as runner Jobs use it."""
    body = _job("entry", "ptah/ptah:dev", [])
    c0 = body["spec"]["template"]["spec"]["containers"][0]
    del c0["command"]
    c0["args"] = ["--help"]
    out = _run_job(real_cluster, real_namespace, body)
    assert "usage: ptah-runner" in out


def _host_view(state: Path, net: node.NodeNet, snap: JSON | None = None) -> JSON:
    """The host as ``snapshot`` shows it, less what other nodes (other state dirs) and
    image builds may add or remove meanwhile: their bridges, nft tables and cgroups
    (``ptah<n>``, ``buildah-*``), veths and volume mounts (this node's are checked
    apart: ``ip link ... master``, mounts under its state dir)."""
    snap = dict(snap or hostchanges.snapshot())
    lay = node.NodeLayout(state / "node" / "node")
    own = {net.bridge, net.nft_table, lay.socket.parent.name}

    def other(name: str) -> bool:
        pattern = r"(ptah\d+|ptah_node\d+|buildah-.*|ptah-node-[0-9a-f]+)"
        return name not in own and bool(re.fullmatch(pattern, name))

    snap["links"] = [x for x in snap["links"] if not x.startswith("veth") and not other(x)]
    snap["nft_tables"] = [t for t in snap["nft_tables"] if not other(t.split()[-1])]
    snap["cgroups"] = {k: [x for x in v if not other(x)] for k, v in snap["cgroups"].items()}
    snap["run_dirs"] = [x for x in snap["run_dirs"] if not other(x)]
    roots = (str(state), *hostchanges.HOST_PATHS)
    snap["mounts"] = [m for m in snap["mounts"] if m.startswith(roots)]
    return snap


def test_down_undoes_every_host_change(tmp_path: Path) -> None:
    """Before ``up`` == after ``down``: sysctls, iptables, nft tables, links, mounts,
    cgroups and the kubelet's host directories; and nothing of the node still runs."""
    from support.cluster import Cluster, start_real

    state = tmp_path / "node"
    snap0 = hostchanges.snapshot()
    info = start_real(state)
    c = Cluster(info)
    net = node.NodeNet(info.config.net_index)
    assert net.bridge not in snap0["links"]
    assert f"table ip {net.nft_table}" not in snap0["nft_tables"]
    before = _host_view(tmp_path, net, snap0)
    lay = devcluster.layout(info.config)
    try:
        imagebuild.load(lay, imagebuild.BASE_IMAGE)
        c.kubectl("create", "namespace", "down")
        c.wait_for(
            "default serviceaccount",
            lambda: c.api().get_or_none("/api/v1/namespaces/down/serviceaccounts/default"),
        )
        _run_job(c, "down", _job("sleeper", "python:3.11-slim", ["sleep", "0.1"]))
        c.kubectl(
            "run",
            "long",
            "--image=python:3.11-slim",
            "--restart=Never",
            "--",
            "sleep",
            "600",
            namespace="down",
        )
        c.kubectl("wait", "--for=condition=Ready", "pod/long", "--timeout=60s", namespace="down")
        during = _host_view(tmp_path, net)
        ids = node.container_ids(lay)
        assert ids and any(s.exists() for s in node.shim_sockets(lay, ids))
        assert during != before, "the node changed nothing on the host?"
        assert net.bridge in during["links"] and f"table ip {net.nft_table}" in during["nft_tables"]
        veths = subprocess.run(
            ["ip", "-o", "link", "show", "master", net.bridge],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        assert "veth" in veths
    finally:
        stopped = devcluster.down(state)
    assert "kubelet" in stopped and "containerd" in stopped
    after = _host_view(tmp_path, net)
    alone = not [x for x in snap0["links"] if x.startswith("ptah")]
    if not alone:
        # Other nodes run: the kubelet's fixed host directories are shared with them,
        # and their Pods come and go. What appeared there and is still there must not
        # be this node's (its container ids, log dir, network name).
        mine = [*ids, str(lay.pod_logs), net.cni_name]
        for path, entries in after.pop("paths").items():
            new = set(entries or []) - set(before["paths"][path] or [])
            assert not [e for e in new if any(m in e for m in mine)], (path, new)
        before.pop("paths")
    assert after == before, _diff(before, after)
    assert not [s for s in node.shim_sockets(lay, ids) if s.exists()]
    assert not node.cgroup_pids(net.cgroup_root)
    assert not hostchanges.mounts_under(state)
    left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _mentions(p, state)]
    assert not left, f"processes of the node still run: {left}"
    # A second down finds nothing more to do.
    assert devcluster.down(state) == []


def _mentions(proc: Path, state: Path) -> bool:
    try:
        return str(state).encode() in (proc / "cmdline").read_bytes()
    except OSError:
        return False


def _diff(before: JSON, after: JSON) -> str:
    lines = []
    for key in sorted(set(before) | set(after)):
        if before.get(key) != after.get(key):
            lines.append(f"{key}: before={before.get(key)!r}\n   after={after.get(key)!r}")
    return "host changed by up/down:\n" + "\n".join(lines)


def test_a_failed_start_leaves_nothing_behind(tmp_path: Path) -> None:
    """``up`` that cannot get ready (here: no time at all) stops what it started and
    undoes the node's host changes, so no bridge, nft table or process outlives it."""
    from ptah.testing.devcluster import config, paths

    try:
        binaries = paths.Binaries.locate(real=True)
        node.check_host()
    except (paths.MissingComponentError, node.NodeSetupError) as err:
        from support.cluster import _missing

        _missing(str(err))
        raise
    state = tmp_path / "failing"
    with pytest.raises(devcluster.NotReadyError):
        devcluster.up(state, timeout=0.5, binaries=binaries, real=True)
    cfg = config.ClusterConfig.load(state)
    net = node.NodeNet(cfg.net_index)
    assert cfg.real and net.index
    assert all(p.pid() is None for p in devcluster.procs(state).values())
    snap = hostchanges.snapshot()
    assert net.bridge not in snap["links"]
    assert f"table ip {net.nft_table}" not in snap["nft_tables"]
    assert not (state / "node" / "host-before.json").exists()
