"""The real local Kubernetes control plane for tests (``ptah dev up``), registered as
fixtures by ``tests/conftest.py``.

* ``cluster`` (session) = ``real_cluster``: the integration and e2e tiers' cluster.
* ``agent_cluster`` (session): starts etcd, kube-apiserver, kube-controller-manager and
  the process node agent once per test session in a temporary state dir (or reuses the
  cluster in ``$PTAH_TEST_STATE_DIR`` if set, leaving it running afterwards), and stops
  what it started at the end; only the agent's own tests use it.
* ``real_cluster`` (session): the same control plane with a real node (kubelet on
  containerd and runc, ``ptah dev up --node real``) in its own state dir (or reused
  from ``$PTAH_TEST_REAL_STATE_DIR``), with the base and project images built from the
  Dockerfile and loaded (``ptah dev images``), and the test databases' ports forwarded
  to its bridge address (``Cluster.pod_url``). Several pytest processes (the xdist
  workers of ``hack/test.sh``) share one reused node: the first to arrive starts it and
  loads the images, under a lock in the state dir, and the others then find it running.
* ``namespace`` (function): a fresh namespace per test, with its ``default``
  ServiceAccount present, deleted afterwards.

If a control-plane binary is missing the fixture fails naming it (never skips under
``CI``); outside CI it skips with the same message and the build command.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from lightkube import Client, KubeConfig

from ptah.testing.devcluster import cluster as devcluster
from ptah.testing.devcluster import imagebuild, node, paths
from ptah.testing.devcluster.apiclient import ApiClient, ApiError, Credentials
from ptah.testing.devcluster.filelock import file_lock
from support.databases import db_env, missing
from support.wait import wait_for


@dataclass
class Cluster:
    """A ready local cluster: kubeconfig, kubectl, clients."""

    info: devcluster.ClusterInfo

    @property
    def kubeconfig(self) -> Path:
        return self.info.kubeconfig

    @property
    def state_dir(self) -> Path:
        return self.info.config.state_dir

    @property
    def kubectl_path(self) -> Path:
        return self.info.binaries.kubectl

    def kubectl(
        self,
        *args: str,
        namespace: str | None = None,
        check: bool = True,
        stdin: str | None = None,
        timeout: float = 120.0,
    ) -> subprocess.CompletedProcess[str]:
        argv = [str(self.kubectl_path), f"--kubeconfig={self.kubeconfig}"]
        if namespace:
            argv.append(f"--namespace={namespace}")
        argv += list(args)
        proc = subprocess.run(
            argv, input=stdin, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} failed ({proc.returncode}):\n"
                f"{proc.stdout}\n{proc.stderr}"
            )
        return proc

    def wait_established(self, *crds: str, timeout: float = 60.0) -> None:
        """Wait until each CRD (``ptahschemas.ptah.io``) is Established. Right after the
        create a CRD may have no status yet, and `kubectl wait` then fails at once
        ("accessor error: <nil>") instead of waiting: ask again until the deadline."""
        for crd in crds:
            deadline = time.monotonic() + timeout
            args = ("wait", "--for=condition=Established", f"crd/{crd}", f"--timeout={timeout}s")
            while self.kubectl(*args, check=False).returncode != 0:
                if time.monotonic() > deadline:
                    self.kubectl(*args)
                time.sleep(0.5)

    def client(self, namespace: str | None = None) -> Client:
        """A lightkube client (admin) for this cluster."""
        return Client(config=KubeConfig.from_file(str(self.kubeconfig)), namespace=namespace)

    @staticmethod
    def wait_for(
        what: str, probe: Callable[[], Any], timeout: float = 60.0, interval: float = 0.2
    ) -> Any:
        return wait_for(what, probe, timeout, interval)

    def node_pid(self) -> int:
        """The pid of what runs this cluster's Pods: the kubelet on a real node, the
        node agent otherwise (SIGSTOP it to freeze the node, SIGCONT to resume)."""
        name = "kubelet" if self.info.config.real else "node-agent"
        pid = devcluster.procs(self.state_dir)[name].pid()
        assert pid is not None, f"{name} is not running in {self.state_dir}"
        return pid

    @property
    def gateway(self) -> str:
        """Where Pods reach this machine (the apiserver's address on a real node)."""
        return self.info.config.host

    def pod_url(self, url: str) -> str:
        """``url`` as a Pod must write it: a loopback host becomes the node's bridge
        address, where the dev cluster forwards the database ports."""
        if not self.info.config.real:
            return url
        return re.sub(r"@(127\.0\.0\.1|localhost)([:/])", rf"@{self.gateway}\2", url, count=1)

    def kill_container(self, pod: dict[str, Any], sig: str = "SIGKILL") -> None:
        """Signal the Pod's first container through containerd, as an OOM kill or a
        crash would end it: the kubelet is not asked and the Pod object stays."""
        assert self.info.config.real, "containers exist on the real node only"
        (status,) = pod["status"]["containerStatuses"][:1]
        runtime, _, cid = status["containerID"].partition("://")
        assert runtime == "containerd" and cid, status
        node.ctr(devcluster.layout(self.info.config), "task", "kill", "--signal", sig, cid)

    @contextlib.contextmanager
    def network_cut(self, pod_ip: str, port: int) -> Iterator[None]:
        """Drop every packet between ``pod_ip`` and the bridge address's ``port`` (a
        forwarded database), both ways, until the block ends: a partition between a
        runner Pod and its database, the rest of the node untouched."""
        assert self.info.config.real, "the Pod network exists on the real node only"
        table = "ptah_cut_" + pod_ip.replace(".", "_") + f"_{port}"
        rules = f"""
table ip {table} {{
  chain from_pod {{
    type filter hook prerouting priority raw; policy accept;
    ip saddr {pod_ip} ip daddr {self.gateway} tcp dport {port} drop
  }}
  chain to_pod {{
    type filter hook postrouting priority srcnat + 10; policy accept;
    ip daddr {pod_ip} ip saddr {self.gateway} tcp sport {port} drop
  }}
}}
"""
        subprocess.run(["nft", "-f", "-"], input=rules, text=True, check=True)
        try:
            yield
        finally:
            subprocess.run(["nft", "delete", "table", "ip", table], check=True)

    def api(self) -> ApiClient:
        """A raw JSON client (admin), for checking exact HTTP status codes."""
        p = self.info.config.pki
        return ApiClient(Credentials(self.info.server, p.ca_crt, p.crt("admin"), p.key("admin")))


@pytest.fixture(scope="session")
def cluster(real_cluster: Cluster) -> Cluster:
    """The integration tier's cluster: the real node, shared with the e2e tier (whose
    conftest adds its runner defaults)."""
    return real_cluster


@pytest.fixture(scope="session")
def agent_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    try:
        binaries = paths.Binaries.locate()
    except paths.MissingComponentError as err:
        missing(str(err))
        raise
    reuse = os.environ.get("PTAH_TEST_STATE_DIR")
    state_dir = Path(reuse) if reuse else tmp_path_factory.mktemp("ptah-dev")
    info = devcluster.up(state_dir, timeout=180.0, binaries=binaries)
    try:
        yield Cluster(info)
    finally:
        if not reuse:
            devcluster.down(state_dir)


ROOT = Path(__file__).resolve().parents[2]


def database_ports() -> list[int]:
    """Loopback ports of the test databases (``${PTAH_CACHE}/db/env``, env first)."""
    urls = [v for k, v in os.environ.items() if k.startswith("PTAH_TEST_") and "://" in v]
    urls += list(db_env().values())
    ports = set()
    for url in urls:
        parts = urlsplit(url.strip())
        if parts.hostname in ("127.0.0.1", "localhost") and parts.port:
            ports.add(parts.port)
    return sorted(ports)


def start_real(state_dir: Path) -> devcluster.ClusterInfo:
    """A real node in ``state_dir`` whose Pods reach the test databases at its bridge
    address (a missing binary or host tool fails under CI, skips elsewhere)."""
    try:
        binaries = paths.Binaries.locate(real=True)
        node.check_host()
    except (paths.MissingComponentError, node.NodeSetupError) as err:
        missing(str(err))
        raise
    return devcluster.up(
        state_dir, timeout=180.0, binaries=binaries, real=True, forward_ports=database_ports()
    )


def load_images(info: devcluster.ClusterInfo) -> None:
    """The base and project images, built (cached layers) and loaded into the node."""
    log = info.config.state_dir / "logs" / "images.log"
    imagebuild.build_project(ROOT, log)
    lay = devcluster.layout(info.config)
    for name in (imagebuild.BASE_IMAGE, imagebuild.PROJECT_IMAGE):
        imagebuild.load(lay, name)


@contextlib.contextmanager
def setup_lock(state_dir: Path) -> Iterator[None]:
    """Held while one process starts (or reuses) the node in ``state_dir`` and loads its
    images: two processes starting the same node at once would race for its ports and
    import the same image twice."""
    with file_lock(state_dir / "setup.lock"):
        yield


@pytest.fixture(scope="session")
def real_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """``$PTAH_TEST_REAL_STATE_DIR``: reuse (and leave running) that real node."""
    reuse = os.environ.get("PTAH_TEST_REAL_STATE_DIR")
    state_dir = Path(reuse) if reuse else tmp_path_factory.mktemp("ptah-node")
    try:
        with setup_lock(state_dir):
            info = start_real(state_dir)
            load_images(info)
        yield Cluster(info)
    finally:
        if not reuse:
            devcluster.down(state_dir)


def runner_mount(directory: Path) -> dict[str, Any]:
    """Runner defaults (``spec.runner`` shape) that mount ``directory`` into every runner
    Pod at its own path, opened to the runner's uid (10001): a SQLite file or a
    migrations directory then means the same file on the host and in the container."""
    directory.chmod(0o777)
    volume = {"name": "host-data", "hostPath": {"path": str(directory), "type": "Directory"}}
    mount = {"name": "host-data", "mountPath": str(directory)}
    return {"volumes": [volume], "volumeMounts": [mount]}


def _ns_name(nodeid: str) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", nodeid.split("::")[-1].lower()).strip("-")[:40]
    return f"{base.strip('-') or 't'}-{uuid.uuid4().hex[:5]}"


@pytest.fixture
def namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    yield from _namespace(cluster, request)


@pytest.fixture
def real_namespace(real_cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    yield from _namespace(real_cluster, request)


def _namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    name = _ns_name(request.node.nodeid)
    api = cluster.api()
    try:
        api.post("/api/v1/namespaces", {"metadata": {"name": name}})
        wait_for(
            f"serviceaccount default in {name}",
            lambda: api.get_or_none(f"/api/v1/namespaces/{name}/serviceaccounts/default"),
            timeout=30,
        )
        yield name
    finally:
        with contextlib.suppress(ApiError):
            api.delete(f"/api/v1/namespaces/{name}")
        api.close()
