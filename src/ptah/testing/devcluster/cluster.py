"""``ptah dev up`` / ``down`` / ``status``: a real control plane on loopback.

Components, each a background process with a pid file under ``<state>/run`` and a log
under ``<state>/logs``:

* etcd (data in ``<state>/etcd``),
* kube-apiserver (RBAC and Node authorisation, service-account issuer and keys, client
  certificates from ``<state>/pki``, kubelet CA for ``pods/log``),
* kube-controller-manager (job, garbage-collector, ttl-after-finished, namespace,
  serviceaccount, serviceaccount-token, root-ca-cert-publisher and
  clusterrole-aggregation controllers; each with its own service-account credentials),
* the node: either the process node agent (``python -m ptah.testing.devcluster.agent``), or with
  ``node="real"`` a real one (:mod:`ptah.testing.devcluster.node`): containerd, the kubelet and
  kube-scheduler, with every default controller of kube-controller-manager.

Every listener binds 127.0.0.1 (the real node's apiserver and kubelet: its bridge
address); ports are chosen free on first ``up`` and kept in ``<state>/cluster.json``.
``up`` reuses running components and starts the missing ones; ``down`` stops only
processes recorded in this state dir, and for a real node undoes its host changes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from ptah.testing.devcluster import hostchanges, imagebuild, kubeconfig, node, paths, pki
from ptah.testing.devcluster.apiclient import ssl_context
from ptah.testing.devcluster.config import ClusterConfig, Ports, port_free
from ptah.testing.devcluster.filelock import file_lock
from ptah.testing.devcluster.procs import Proc
from ptah.testing.devcluster.runtime import kill_pod_processes

CONTROLLERS = (
    "job-controller",
    "garbage-collector-controller",
    "ttl-after-finished-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "clusterrole-aggregation-controller",
)
CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-controller-manager")
COMPONENTS = (*CONTROL_PLANE, "node-agent")
REAL_COMPONENTS = (*CONTROL_PLANE, *node.NODE_COMPONENTS)
SA_ISSUER = "https://kubernetes.default.svc.cluster.local"


class NotReadyError(RuntimeError):
    pass


@dataclass(frozen=True)
class ClusterInfo:
    config: ClusterConfig
    binaries: paths.Binaries
    started: tuple[str, ...]
    reused: tuple[str, ...]
    seconds: float

    @property
    def kubeconfig(self) -> Path:
        return self.config.kubeconfig

    @property
    def server(self) -> str:
        return self.config.server

    def _hello(self) -> str:
        if self.config.real:  # real containers: an image this node holds
            return (
                f"  ptah dev images --state-dir {self.config.state_dir}"
                "   # build and load ptah/ptah:dev\n"
                "  kubectl create job hello --image=ptah/ptah:dev -- sh -c 'echo hello'\n"
            )
        return "  kubectl create job hello --image=busybox -- sh -c 'echo hello'\n"

    def usage(self) -> str:
        return (
            f"cluster ready at {self.server} in {self.seconds:.1f}s "
            f"(started: {', '.join(self.started) or 'nothing'}; "
            f"reused: {', '.join(self.reused) or 'nothing'})\n"
            f"  export KUBECONFIG={self.kubeconfig}\n"
            f"  export PATH={self.binaries.kubectl.parent}:$PATH\n"
            f"  kubectl get nodes\n"
            f"{self._hello()}"
            f"  kubectl logs job/hello\n"
            f"state and logs: {self.config.state_dir}  (stop with: ptah dev down"
            f" --state-dir {self.config.state_dir})"
        )


def procs(state_dir: Path, real: bool | None = None) -> dict[str, Proc]:
    """This state dir's components (the real node's when ``real``, else the agent's;
    ``None``: what its saved config says)."""
    if real is None:
        try:
            real = ClusterConfig.load(state_dir).real
        except (OSError, ValueError, KeyError):
            real = False
    names = REAL_COMPONENTS if real else COMPONENTS
    return {name: Proc(state_dir / "run", name) for name in names}


def _locked(state_dir: Path) -> contextlib.AbstractContextManager[None]:
    return file_lock(state_dir / ".lock")


def _config(state_dir: Path, running: bool, runner_images: list[str], kind: str) -> ClusterConfig:
    """The saved config; fresh ports when nothing runs and a saved port is taken."""
    try:
        cfg = ClusterConfig.load(state_dir)
    except (OSError, ValueError, KeyError):
        cfg = ClusterConfig(state_dir=state_dir, ports=Ports.pick())
    if running and cfg.node != kind:
        raise NotReadyError(
            f"{state_dir} runs a {cfg.node} node; stop it first (ptah dev down) to use {kind}"
        )
    if not running and not all(port_free(p) for p in cfg.ports.all()):
        cfg.ports = Ports.pick()
    cfg.node = kind
    if kind == "real" and not running:
        cfg.net_index = node.pick_net(prefer=cfg.net_index).index
    elif kind != "real":
        cfg.net_index = 0
    for image in runner_images:
        if image not in cfg.runner_images:
            cfg.runner_images.append(image)
    cfg.save()
    return cfg


def _etcd_argv(b: paths.Binaries, cfg: ClusterConfig) -> list[str]:
    client = f"http://127.0.0.1:{cfg.ports.etcd_client}"
    peer = f"http://127.0.0.1:{cfg.ports.etcd_peer}"
    return [
        str(b.etcd),
        "--name=ptah",
        f"--data-dir={cfg.state_dir / 'etcd'}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=ptah={peer}",
        "--unsafe-no-fsync=true",  # a throwaway dev/test cluster: speed over durability
        "--quota-backend-bytes=2147483648",
        "--log-level=warn",
    ]


def _apiserver_argv(b: paths.Binaries, cfg: ClusterConfig) -> list[str]:
    p = cfg.pki
    return [
        str(b.kube_apiserver),
        f"--bind-address={cfg.host}",
        f"--advertise-address={cfg.host}",
        f"--secure-port={cfg.ports.apiserver}",
        f"--etcd-servers=http://127.0.0.1:{cfg.ports.etcd_client}",
        f"--tls-cert-file={p.crt('apiserver')}",
        f"--tls-private-key-file={p.key('apiserver')}",
        f"--client-ca-file={p.ca_crt}",
        "--authorization-mode=Node,RBAC",
        f"--service-account-issuer={SA_ISSUER}",
        f"--service-account-key-file={p.sa_pub}",
        f"--service-account-signing-key-file={p.sa_key}",
        "--service-cluster-ip-range=10.96.0.0/16",
        "--endpoint-reconciler-type=none",
        f"--kubelet-certificate-authority={p.ca_crt}",
        f"--kubelet-client-certificate={p.crt('apiserver-kubelet-client')}",
        f"--kubelet-client-key={p.key('apiserver-kubelet-client')}",
        "--kubelet-preferred-address-types=InternalIP",
        "--allow-privileged=true",
        "--profiling=false",
        f"--cert-dir={cfg.state_dir / 'run' / 'apiserver-certs'}",
        "--v=1",
    ]


def _controller_manager_argv(b: paths.Binaries, cfg: ClusterConfig) -> list[str]:
    p = cfg.pki
    kc = cfg.state_dir / "controller-manager.kubeconfig"
    return [
        str(b.kube_controller_manager),
        f"--kubeconfig={kc}",
        f"--authentication-kubeconfig={kc}",
        f"--authorization-kubeconfig={kc}",
        "--bind-address=127.0.0.1",
        f"--secure-port={cfg.ports.controller_manager}",
        f"--cert-dir={cfg.state_dir / 'run' / 'controller-manager-certs'}",
        f"--controllers={'*' if cfg.real else ','.join(CONTROLLERS)}",
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={p.sa_key}",
        f"--root-ca-file={p.ca_crt}",
        "--leader-elect=false",
        "--cluster-name=ptah-dev",
        "--concurrent-job-syncs=5",
        "--v=1",
    ]


def _agent_argv(cfg: ClusterConfig) -> list[str]:
    return [sys.executable, "-m", "ptah.testing.devcluster.agent", f"--state-dir={cfg.state_dir}"]


def _wait(
    what: str,
    probe: Callable[[], bool],
    deadline: float,
    log: Path | None,
    proc: Proc | None = None,
) -> None:
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc is not None and not proc.alive():
            last = RuntimeError(f"{proc.name} exited")
            break
        try:
            if probe():
                return
        except (httpx.HTTPError, OSError, KeyError, ValueError) as err:
            last = err
        time.sleep(0.1)
    tail = ""
    if log is not None and log.exists():
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
    raise NotReadyError(f"{what} not ready (last error: {last}); {log} ends:\n{tail}")


def up(
    state_dir: Path | None = None,
    timeout: float = 180.0,
    runner_images: list[str] | None = None,
    binaries: paths.Binaries | None = None,
    real: bool = False,
    forward_ports: list[int] | None = None,
) -> ClusterInfo:
    """Start (or reuse) the dev cluster in ``state_dir`` and wait until it is ready.

    ``real``: a real node (containerd, kubelet, kube-scheduler) instead of the process
    node agent. Ports are picked free but only bound later by the components; if another
    process took one in between, a fresh cluster is stopped and started once more on new
    ports. ``forward_ports``: host loopback TCP ports the real node's Pods reach at its
    bridge address (kept in the config; later calls add to them).
    """
    state_dir = (state_dir or paths.default_state_dir()).resolve()
    b = binaries or paths.Binaries.locate(real=real)
    if real:
        node.check_host()
        if b.kubelet is None or b.kube_scheduler is None:
            b = paths.Binaries.locate(b.kubectl.parent, real=True)
    fresh = not any(p.alive() for p in procs(state_dir).values())
    try:
        try:
            return _up(state_dir, timeout, runner_images, b, real, forward_ports or [])
        except NotReadyError as err:
            if not (fresh and "address already in use" in str(err).lower()):
                raise
            down(state_dir)
            (state_dir / "cluster.json").unlink(missing_ok=True)
            return _up(state_dir, timeout, runner_images, b, real, forward_ports or [])
    except BaseException:
        # A start that fails leaves nothing behind (processes, a real node's host
        # changes); logs stay in the state dir. A running cluster is left as it was.
        if fresh:
            down(state_dir)
        raise


def layout(cfg: ClusterConfig) -> node.NodeLayout:
    return node.NodeLayout(cfg.state_dir / "node")


def _up(
    state_dir: Path,
    timeout: float,
    runner_images: list[str] | None,
    b: paths.Binaries,
    real: bool,
    forward_ports: list[int],
) -> ClusterInfo:
    t0 = time.monotonic()
    deadline = t0 + timeout
    logs = state_dir / "logs"
    kind = "real" if real else "agent"
    with _locked(state_dir):
        ps = procs(state_dir, real)
        others = procs(state_dir, not real)
        running = {name for name, proc in {**others, **ps}.items() if proc.alive()}
        if running - set(ps):
            other = ", ".join(sorted(running - set(ps)))
            raise NotReadyError(
                f"{state_dir} runs the other kind of node ({other}); stop it: ptah dev down"
            )
        with node.net_lock(paths.cache_root()) if real else contextlib.nullcontext():
            cfg = _config(state_dir, bool(running), runner_images or [], kind)
            net = node.NodeNet(cfg.net_index)
            if real:
                cfg.forward_ports = sorted({*cfg.forward_ports, *forward_ports})
                cfg.save()
                lay = layout(cfg)
                hostchanges.record(lay.root)
                node.setup_network(net, cfg.ports.apiserver, cfg.forward_ports)
        pki.ensure(cfg.pki, server_ips=(cfg.host,) if real else ())
        kubeconfig.write(cfg.kubeconfig, cfg.server, cfg.pki, "admin")
        kubeconfig.write(
            state_dir / "controller-manager.kubeconfig", cfg.server, cfg.pki, "controller-manager"
        )
        admin = httpx.Client(
            verify=ssl_context(cfg.pki.ca_crt, cfg.pki.crt("admin"), cfg.pki.key("admin")),
            timeout=5.0,
        )
        started: list[str] = []

        def ensure(name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
            if name in running:
                return
            ps[name].start(argv, logs / f"{name}.log", env=env)
            started.append(name)

        try:
            ensure("etcd", _etcd_argv(b, cfg))
            etcd_url = f"http://127.0.0.1:{cfg.ports.etcd_client}/health"
            _wait(
                "etcd",
                lambda: httpx.get(etcd_url, timeout=2).json().get("health") == "true",
                deadline,
                logs / "etcd.log",
                ps["etcd"],
            )
            ensure("kube-apiserver", _apiserver_argv(b, cfg))
            _wait(
                "kube-apiserver",
                lambda: admin.get(f"{cfg.server}/readyz").status_code == 200,
                deadline,
                logs / "kube-apiserver.log",
                ps["kube-apiserver"],
            )
            ensure("kube-controller-manager", _controller_manager_argv(b, cfg))
            if real:
                node_name = _start_real_node(cfg, b, ensure, ps, deadline)
            else:
                env = dict(os.environ)
                env["PYTHONUNBUFFERED"] = "1"
                ensure("node-agent", _agent_argv(cfg), env)
                node_name = "node-agent"
            kcm = f"https://127.0.0.1:{cfg.ports.controller_manager}/healthz"
            _wait(
                "kube-controller-manager",
                lambda: httpx.get(kcm, verify=False, timeout=2).status_code == 200,
                deadline,
                logs / "kube-controller-manager.log",
                ps["kube-controller-manager"],
            )
            _wait(
                f"{node_name} (Node Ready)",
                lambda: _node_ready(admin, cfg),
                deadline,
                logs / f"{node_name}.log",
                ps[node_name],
            )
            _wait(
                "service accounts (token controller)",
                lambda: (
                    admin.get(
                        f"{cfg.server}/api/v1/namespaces/default/serviceaccounts/default"
                    ).status_code
                    == 200
                ),
                deadline,
                logs / "kube-controller-manager.log",
            )
            for name, proc in ps.items():
                if not proc.alive():
                    raise NotReadyError(f"{name} exited; see {logs / (name + '.log')}")
        finally:
            admin.close()
    reused = tuple(n for n in ps if n not in started)
    return ClusterInfo(cfg, b, tuple(started), reused, time.monotonic() - t0)


def _start_real_node(
    cfg: ClusterConfig,
    b: paths.Binaries,
    ensure: Callable[[str, list[str]], None],
    ps: dict[str, Proc],
    deadline: float,
) -> str:
    """containerd (with the pause image loaded), kube-scheduler, the kubelet."""
    assert b.kubelet is not None and b.kube_scheduler is not None
    lay = layout(cfg)
    net = node.NodeNet(cfg.net_index)
    logs = cfg.state_dir / "logs"
    node.write_configs(
        lay,
        net,
        cfg.node_name,
        cfg.ports.kubelet,
        cfg.pki.ca_crt,
        cfg.pki.crt("kubelet"),
        cfg.pki.key("kubelet"),
    )
    kubeconfig.write(lay.kubelet_kubeconfig, cfg.server, cfg.pki, "kubelet-client")
    kubeconfig.write(lay.scheduler_kubeconfig, cfg.server, cfg.pki, "scheduler")
    hostchanges.make_cgroup(net.cgroup_root)
    ensure("containerd", node.containerd_argv(lay))
    _wait(
        "containerd",
        lambda: node.runtime_ready(lay),
        deadline,
        logs / "containerd.log",
        ps["containerd"],
    )
    imagebuild.load_pause(lay)
    ensure("kube-scheduler", node.scheduler_argv(b.kube_scheduler, lay))
    ensure("kubelet", node.kubelet_argv(b.kubelet, lay, net, cfg.node_name))
    return "kubelet"


def _node_ready(client: httpx.Client, cfg: ClusterConfig) -> bool:
    resp = client.get(f"{cfg.server}/api/v1/nodes/{cfg.node_name}")
    if resp.status_code != 200:
        return False
    for cond in resp.json().get("status", {}).get("conditions", []):
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def down(state_dir: Path | None = None, purge: bool = False) -> list[str]:
    """Stop this state dir's processes (node first, etcd last) and, for a real node,
    undo every change it made to the host; return what was stopped and undone."""
    state_dir = (state_dir or paths.default_state_dir()).resolve()
    stopped: list[str] = []
    if not state_dir.exists():
        return stopped
    with _locked(state_dir):
        try:
            cfg: ClusterConfig | None = ClusterConfig.load(state_dir)
        except (OSError, ValueError, KeyError):
            cfg = None
        ps = procs(state_dir, real=True) | procs(state_dir, real=False)
        for name in (
            "kubelet",
            "node-agent",
            "kube-scheduler",
            "containerd",
            "kube-controller-manager",
            "kube-apiserver",
            "etcd",
        ):
            if ps[name].stop():
                stopped.append(name)
        if kill_pod_processes(state_dir):
            stopped.append("leftover pod processes")
        if cfg is not None and cfg.real:
            stopped += node.teardown(layout(cfg), node.NodeNet(cfg.net_index))
    if purge:
        shutil.rmtree(state_dir, ignore_errors=True)
    return stopped


def status(state_dir: Path | None = None) -> dict[str, int | None]:
    state_dir = (state_dir or paths.default_state_dir()).resolve()
    return {name: proc.pid() for name, proc in procs(state_dir).items()}
