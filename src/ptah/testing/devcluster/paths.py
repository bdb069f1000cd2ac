"""Where the local control plane keeps its binaries and its clusters' state."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

#: Pinned in hack/controlplane/k8s/go.mod; the binary cache is keyed by it.
KUBERNETES_VERSION = "v1.37.2"
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kubectl")
#: The real node's binaries (hack/controlplane/build.sh builds them too).
NODE_COMPONENTS = ("kubelet", "kube-scheduler")


class MissingComponentError(RuntimeError):
    """A control-plane binary is not built; the message names it and the build command."""


def cache_root() -> Path:
    """``$PTAH_CACHE`` or ``~/.cache/ptah``."""
    env = os.environ.get("PTAH_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "ptah"


def binary_dir(version: str = KUBERNETES_VERSION) -> Path:
    return cache_root() / "controlplane" / version / "bin"


def default_state_dir(name: str = "default") -> Path:
    """A named dev cluster's state: ``<cache>/dev/<name>``."""
    return cache_root() / "dev" / name


def repo_root() -> Path | None:
    """The source checkout this package runs from, when it runs from one."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "hack" / "controlplane" / "build.sh").is_file():
            return parent
    return None


@dataclass(frozen=True)
class Binaries:
    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kubectl: Path
    kubelet: Path | None = None
    kube_scheduler: Path | None = None

    @classmethod
    def locate(cls, bin_dir: Path | None = None, real: bool = False) -> Binaries:
        """The built binaries (with ``real``, the node's too), or MissingComponentError
        naming each one absent."""
        where = bin_dir or binary_dir()
        found: dict[str, Path] = {}
        missing: list[str] = []
        for name in (*COMPONENTS, *NODE_COMPONENTS):
            path = where / name
            if path.is_file() and os.access(path, os.X_OK):
                found[name] = path
            elif name in COMPONENTS or real:
                missing.append(name)
        if missing:
            build = "hack/controlplane/build.sh"
            root = repo_root()
            if root is not None:
                build = str(root / build)
            raise MissingComponentError(
                f"local control plane component(s) missing: {', '.join(missing)} "
                f"(looked in {where}); build them with: bash {build}"
            )
        return cls(
            etcd=found["etcd"],
            kube_apiserver=found["kube-apiserver"],
            kube_controller_manager=found["kube-controller-manager"],
            kubectl=found["kubectl"],
            kubelet=found.get("kubelet"),
            kube_scheduler=found.get("kube-scheduler"),
        )


def venv_bin_dir() -> Path:
    """The bin directory of the Python environment running Ptah (for ``ptah-runner``)."""
    import sys

    return Path(sys.executable).parent


def which_in(name: str, first: Path) -> str | None:
    """``name`` from ``first`` if present there, else from PATH."""
    candidate = first / name
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    return shutil.which(name)
