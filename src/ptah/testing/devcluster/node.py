"""The real node: containerd + runc, a kubelet, kube-scheduler and Pod networking.

Everything lives under ``<state>/node`` (containerd's root, state and socket, runc's
root, the kubelet's root and Pod logs, CNI config and IPAM data); what cannot (the
bridge, its nft table, sysctls, cgroups, the kubelet's fixed host directories) is
recorded by :mod:`ptah.testing.devcluster.hostchanges` first and undone by :func:`teardown`.

Network (one per node, ``10.88.<n>.0/24``):

* the bridge ``ptah<n>`` is made by the dev cluster with the gateway ``10.88.<n>.1``;
  the apiserver and the kubelet listen there, and so may the test databases, so Pods
  reach them without any route off the bridge;
* Pods get an address from the CNI bridge plugin (host-local IPAM, ``ipMasq`` off) and
  a route for the Service range only, no default route;
* the ``kubernetes`` Service (10.96.0.1:443) is an nft DNAT to the apiserver (no
  kube-proxy), and an nft forward rule drops whatever would leave the bridge's subnet.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ptah.testing.devcluster import hostchanges
from ptah.testing.devcluster.filelock import file_lock

SERVICE_IP = "10.96.0.1"
SERVICE_CIDR = "10.96.0.0/16"
SUBNET_BASE = (10, 88)
PAUSE_IMAGE = "ptah.local/pause:1"
CNI_BIN = Path("/usr/lib/cni")
RUNC = "/usr/sbin/runc"
NODE_COMPONENTS = ("containerd", "kubelet", "kube-scheduler")
#: What the node needs from the host; named in the error when one is missing.
HOST_TOOLS = ("containerd", "containerd-shim-runc-v2", "runc", "ctr", "nft", "ip")


class NodeSetupError(RuntimeError):
    """The host lacks something the real node needs, or a host change failed."""


@dataclass(frozen=True)
class NodeNet:
    index: int

    @property
    def bridge(self) -> str:
        return f"ptah{self.index}"

    @property
    def subnet(self) -> str:
        return f"{SUBNET_BASE[0]}.{SUBNET_BASE[1]}.{self.index}.0/24"

    @property
    def gateway(self) -> str:
        return f"{SUBNET_BASE[0]}.{SUBNET_BASE[1]}.{self.index}.1"

    @property
    def nft_table(self) -> str:
        return f"ptah_node{self.index}"

    @property
    def cgroup_root(self) -> str:
        return f"ptah{self.index}"

    @property
    def cni_name(self) -> str:
        return f"ptah{self.index}"


@contextlib.contextmanager
def net_lock(cache: Path) -> Iterator[None]:
    """Held while a node picks its subnet and makes its bridge (nodes of other state
    dirs may start at the same time)."""
    with file_lock(cache / ".node-net.lock"):
        yield


def pick_net(prefer: int = 0) -> NodeNet:
    """A subnet index no interface on this machine uses (``prefer`` if it is free)."""
    out = subprocess.run(
        ["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, check=False
    ).stdout
    used: set[int] = set()
    for line in out.splitlines():
        addr = line.split()[3]
        net = ipaddress.ip_interface(addr).ip.packed
        if net[0] == SUBNET_BASE[0] and net[1] == SUBNET_BASE[1]:
            used.add(net[2])
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=False)
    for line in links.stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name.startswith("ptah") and name[4:].isdigit():
            used.add(int(name[4:]))
    if prefer and prefer not in used:
        return NodeNet(prefer)
    for i in range(1, 250):
        if i not in used:
            return NodeNet(i)
    raise NodeSetupError("no free 10.88.<n>.0/24 subnet for the node's bridge")


@dataclass(frozen=True)
class NodeLayout:
    """Paths of one node under ``<state>/node``."""

    root: Path

    @property
    def containerd_root(self) -> Path:
        return self.root / "containerd" / "root"

    @property
    def containerd_state(self) -> Path:
        return self.root / "containerd" / "state"

    @property
    def socket(self) -> Path:
        """containerd's socket; its ttrpc twin (``.ttrpc``) must fit a unix socket
        path (104 bytes), so a deep state dir gets a short one under /run (removed by
        ``teardown``)."""
        own = self.root / "containerd" / "containerd.sock"
        if len(str(own)) + len(".ttrpc") < 100:
            return own
        digest = hashlib.sha256(str(self.root).encode()).hexdigest()[:12]
        return RUN_DIR / f"ptah-node-{digest}" / "containerd.sock"

    @property
    def containerd_config(self) -> Path:
        return self.root / "containerd" / "config.toml"

    @property
    def cni_conf_dir(self) -> Path:
        return self.root / "cni" / "net.d"

    @property
    def cni_data(self) -> Path:
        return self.root / "cni" / "ipam"

    @property
    def kubelet_root(self) -> Path:
        return self.root / "kubelet"

    @property
    def pod_logs(self) -> Path:
        return self.root / "pod-logs"

    @property
    def kubelet_config(self) -> Path:
        return self.root / "kubelet-config.yaml"

    @property
    def kubelet_kubeconfig(self) -> Path:
        return self.root / "kubelet.kubeconfig"

    @property
    def scheduler_kubeconfig(self) -> Path:
        return self.root / "scheduler.kubeconfig"


def check_host() -> None:
    missing = [t for t in HOST_TOOLS if shutil.which(t) is None]
    if not Path(CNI_BIN / "bridge").exists():
        missing.append(f"CNI plugins ({CNI_BIN}/bridge)")
    if missing:
        raise NodeSetupError(
            "the real node needs: " + ", ".join(missing) + " (bash hack/node.sh installs them)"
        )


def _run(argv: list[str], check: bool = True, stdin: str | None = None) -> str:
    proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise NodeSetupError(f"{' '.join(argv)} failed: {proc.stderr.strip()}")
    return proc.stdout


def setup_network(net: NodeNet, apiserver_port: int, forward_ports: list[int]) -> None:
    """Bridge with the gateway address, the Service DNAT, the containment rule, and the
    host's loopback ``forward_ports`` (the test databases) at the gateway address.

    A forwarded connection is DNATed to 127.0.0.1 and SNATed from it, so the service
    sees a loopback client (its loopback-only authentication rules hold) and needs no
    listener on the bridge; the bridge alone gets ``route_localnet`` (it goes away with
    the bridge).
    """
    links = _run(["ip", "-o", "link", "show", net.bridge], check=False)
    if not links:
        _run(["ip", "link", "add", net.bridge, "type", "bridge"])
    addrs = _run(["ip", "-o", "-4", "addr", "show", "dev", net.bridge])
    if f" {net.gateway}/" not in addrs:
        _run(["ip", "addr", "add", f"{net.gateway}/24", "dev", net.bridge])
    _run(["ip", "link", "set", net.bridge, "up"])
    ports = sorted({p for p in forward_ports if p != apiserver_port})
    forward = ""
    if ports:
        Path(f"/proc/sys/net/ipv4/conf/{net.bridge}/route_localnet").write_text("1\n")
        dports = "{ " + ", ".join(str(p) for p in ports) + " }"
        forward = f"""
    iifname "{net.bridge}" ip daddr {net.gateway} tcp dport {dports} dnat to 127.0.0.1
  }}
  chain loopback_source {{
    type nat hook input priority 100; policy accept;
    ip saddr {net.subnet} ip daddr 127.0.0.1 tcp dport {dports} snat to 127.0.0.1"""
    dnat = (
        f'iifname "{net.bridge}" ip daddr {SERVICE_IP} tcp dport 443'
        f" dnat to {net.gateway}:{apiserver_port}"
    )
    _run(["nft", "delete", "table", "ip", net.nft_table], check=False)
    _run(
        ["nft", "-f", "-"],
        stdin=f"""
table ip {net.nft_table} {{
  chain service {{
    type nat hook prerouting priority dstnat; policy accept;
    {dnat}{forward}
  }}
  chain contain {{
    type filter hook forward priority filter - 10; policy accept;
    ip saddr {net.subnet} ip daddr != {net.subnet} drop
    ip daddr {net.subnet} ip saddr != {net.subnet} drop
  }}
}}
""",
    )


def teardown_network(net: NodeNet) -> list[str]:
    undone = []
    if _run(["nft", "list", "table", "ip", net.nft_table], check=False):
        _run(["nft", "delete", "table", "ip", net.nft_table], check=False)
        undone.append(f"nft table {net.nft_table}")
    if _run(["ip", "-o", "link", "show", net.bridge], check=False):
        _run(["ip", "link", "delete", net.bridge], check=False)
        undone.append(f"bridge {net.bridge}")
    return undone


def write_configs(
    layout: NodeLayout,
    net: NodeNet,
    node_name: str,
    kubelet_port: int,
    ca: Path,
    kubelet_crt: Path,
    kubelet_key: Path,
) -> None:
    for d in (
        layout.containerd_root,
        layout.containerd_state,
        layout.cni_conf_dir,
        layout.cni_data,
        layout.kubelet_root,
        layout.pod_logs,
    ):
        d.mkdir(parents=True, exist_ok=True)
    layout.socket.parent.mkdir(parents=True, exist_ok=True)
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    layout.containerd_config.write_text(
        f"""version = 2
root = "{layout.containerd_root}"
state = "{layout.containerd_state}"
oom_score = 0
[grpc]
  address = "{layout.socket}"
[ttrpc]
  address = "{layout.socket}.ttrpc"
[debug]
  level = "warn"
[plugins."io.containerd.internal.v1.opt"]
  path = "{layout.root / "containerd" / "opt"}"
[{cri}]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  max_container_log_line_size = 16384
[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
  discard_unpacked_layers = false
[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[{cri}.containerd.runtimes.runc.options]
  BinaryName = "{RUNC}"
  Root = "{layout.root / "runc"}"
  SystemdCgroup = false
[{cri}.cni]
  bin_dir = "{CNI_BIN}"
  conf_dir = "{layout.cni_conf_dir}"
  max_conf_num = 1
"""
    )
    conflist = {
        "cniVersion": "0.4.0",
        "name": net.cni_name,
        "plugins": [
            {
                "type": "bridge",
                "bridge": net.bridge,
                "isGateway": True,
                "isDefaultGateway": False,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": net.subnet, "gateway": net.gateway}]],
                    "routes": [{"dst": SERVICE_CIDR, "gw": net.gateway}],
                    "dataDir": str(layout.cni_data),
                },
            },
        ],
    }
    (layout.cni_conf_dir / "10-ptah.conflist").write_text(json.dumps(conflist, indent=2))
    kubelet = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": net.gateway,
        "port": kubelet_port,
        "readOnlyPort": 0,
        "healthzPort": 0,
        "authentication": {
            "x509": {"clientCAFile": str(ca)},
            "webhook": {"enabled": False},
            "anonymous": {"enabled": False},
        },
        "authorization": {"mode": "AlwaysAllow"},
        "tlsCertFile": str(kubelet_crt),
        "tlsPrivateKeyFile": str(kubelet_key),
        "containerRuntimeEndpoint": f"unix://{layout.socket}",
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": f"/{net.cgroup_root}",
        "failCgroupV1": False,
        "failSwapOn": False,
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "resolvConf": "",
        "clusterDomain": "cluster.local",
        "podLogsDir": str(layout.pod_logs),
        "volumePluginDir": str(layout.root / "volume-plugins"),
        "makeIPTablesUtilChains": False,
        "serializeImagePulls": False,
        "registerNode": True,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "evictionPressureTransitionPeriod": "10s",
        "nodeStatusReportFrequency": "10s",
        "syncFrequency": "5s",
        "fileCheckFrequency": "5s",
        "shutdownGracePeriod": "0s",
        "logging": {"format": "text"},
    }
    layout.kubelet_config.write_text(json.dumps(kubelet, indent=2))


def containerd_argv(layout: NodeLayout) -> list[str]:
    return ["containerd", "--config", str(layout.containerd_config)]


def kubelet_argv(kubelet: Path, layout: NodeLayout, net: NodeNet, node_name: str) -> list[str]:
    return [
        str(kubelet),
        f"--config={layout.kubelet_config}",
        f"--kubeconfig={layout.kubelet_kubeconfig}",
        f"--root-dir={layout.kubelet_root}",
        f"--cert-dir={layout.root / 'kubelet-pki'}",
        f"--hostname-override={node_name}",
        f"--node-ip={net.gateway}",
        "--v=1",
    ]


def scheduler_argv(scheduler: Path, layout: NodeLayout) -> list[str]:
    kc = layout.scheduler_kubeconfig
    return [
        str(scheduler),
        f"--kubeconfig={kc}",
        f"--authentication-kubeconfig={kc}",
        f"--authorization-kubeconfig={kc}",
        "--leader-elect=false",
        "--secure-port=0",
        "--v=1",
    ]


def ctr(layout: NodeLayout, *args: str) -> str:
    """``ctr`` against this node's containerd, in the kubelet's namespace."""
    return _run(["ctr", f"--address={layout.socket}", "--namespace=k8s.io", *args])


def runtime_ready(layout: NodeLayout) -> bool:
    try:
        return bool(ctr(layout, "version"))
    except NodeSetupError:
        return False


def _shim_pids(layout: NodeLayout) -> list[int]:
    """containerd shims serving this node (their command line names our socket)."""
    pids = []
    sock = str(layout.socket)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"containerd-shim-runc-v2") and sock.encode() in argv:
            pids.append(int(entry.name))
    return pids


def cgroup_pids(name: str) -> list[int]:
    """Every process in ``/<name>`` of any v1 hierarchy (the node's containers)."""
    pids: set[int] = set()
    for ctrl in hostchanges.cgroup_controllers():
        top = ctrl / name
        if not top.exists():
            continue
        for procs in top.rglob("cgroup.procs"):
            with contextlib.suppress(OSError):
                pids.update(int(x) for x in procs.read_text().split())
    return sorted(pids)


def kill_containers(layout: NodeLayout, net: NodeNet) -> int:
    """SIGKILL every container process and shim of this node; the count killed."""
    killed = 0
    for _ in range(20):
        pids = cgroup_pids(net.cgroup_root) + _shim_pids(layout)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        time.sleep(0.2)
    return killed


#: Where a deep state dir's containerd sockets go.
RUN_DIR = Path("/run")
#: containerd 1.6 puts every shim's socket here whatever its config says.
SHIM_SOCKET_DIR = Path("/run/containerd/s")


def container_ids(layout: NodeLayout) -> list[str]:
    """Ids of this node's sandboxes, containers and tasks (their names in the host's
    shared directories: libcni's result cache, the shim sockets)."""
    ids: set[str] = set()
    for d in (
        layout.containerd_root / "io.containerd.grpc.v1.cri" / "sandboxes",
        layout.containerd_root / "io.containerd.grpc.v1.cri" / "containers",
        layout.containerd_state / "io.containerd.runtime.v2.task" / "k8s.io",
    ):
        with contextlib.suppress(OSError):
            ids.update(p.name for p in d.iterdir())
    return sorted(ids)


def shim_sockets(layout: NodeLayout, ids: list[str]) -> list[Path]:
    """The shim sockets containerd derives from its address, namespace and task id."""
    out = []
    for i in ids:
        digest = hashlib.sha256(f"{layout.socket}/k8s.io/{i}".encode()).hexdigest()
        out.append(SHIM_SOCKET_DIR / digest)
    return out


def teardown(layout: NodeLayout, net: NodeNet) -> list[str]:
    """After containerd and the kubelet stopped: everything else this node left."""
    undone: list[str] = []
    ids = container_ids(layout)
    if kill_containers(layout, net):
        undone.append("container processes")
    for sock in shim_sockets(layout, ids):
        if sock.exists():
            sock.unlink()
    if layout.socket.parent.parent == RUN_DIR and layout.socket.parent.exists():
        shutil.rmtree(layout.socket.parent, ignore_errors=True)
        undone.append(f"removed {layout.socket.parent}")
    mounts = hostchanges.unmount_under(layout.root)
    if mounts:
        undone.append(f"{len(mounts)} mounts")
    undone += teardown_network(net)
    undone += [f"cgroup {c}" for c in hostchanges.remove_cgroup(net.cgroup_root)]
    undone += hostchanges.restore(layout.root, [str(layout.pod_logs), net.cni_name, *ids])
    return undone
