"""A dev cluster's configuration, persisted as ``<state>/cluster.json``."""

from __future__ import annotations

import json
import socket
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ptah.testing.devcluster.pki import Pki

NODE_NAME = "ptah-local"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@dataclass
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    kubelet: int

    @classmethod
    def pick(cls) -> Ports:
        chosen: list[int] = []
        while len(chosen) < 5:
            p = free_port()
            if p not in chosen:
                chosen.append(p)
        return cls(*chosen)

    def all(self) -> list[int]:
        return list(asdict(self).values())


@dataclass
class ClusterConfig:
    state_dir: Path
    ports: Ports
    node_name: str = NODE_NAME
    runner_images: list[str] = field(default_factory=list)
    #: "agent": the process node agent; "real": kubelet on containerd (devcluster.node).
    node: str = "agent"
    #: The real node's subnet 10.88.<net_index>.0/24 (0 with the agent).
    net_index: int = 0
    #: Host loopback TCP ports the real node's Pods reach at its bridge address.
    forward_ports: list[int] = field(default_factory=list)

    @property
    def real(self) -> bool:
        return self.node == "real"

    @property
    def host(self) -> str:
        """Where the apiserver listens: loopback, or the real node's bridge address
        (so that Pods reach it through the ``kubernetes`` Service)."""
        if self.real:
            return f"10.88.{self.net_index}.1"
        return "127.0.0.1"

    @property
    def server(self) -> str:
        return f"https://{self.host}:{self.ports.apiserver}"

    @property
    def pki(self) -> Pki:
        return Pki(self.state_dir / "pki")

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def path(self) -> Path:
        return self.state_dir / "cluster.json"

    @classmethod
    def load(cls, state_dir: Path) -> ClusterConfig:
        data = json.loads((state_dir / "cluster.json").read_text())
        return cls(
            state_dir=state_dir,
            ports=Ports(**data["ports"]),
            node_name=data.get("node_name", NODE_NAME),
            runner_images=list(data.get("runner_images", [])),
            node=str(data.get("node", "agent")),
            net_index=int(data.get("net_index", 0)),
            forward_ports=[int(p) for p in data.get("forward_ports", [])],
        )

    def save(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        data = {
            "ports": asdict(self.ports),
            "node_name": self.node_name,
            "runner_images": self.runner_images,
            "node": self.node,
            "net_index": self.net_index,
            "forward_ports": self.forward_ports,
            "server": self.server,
            "kubeconfig": str(self.kubeconfig),
        }
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        tmp.replace(self.path)
