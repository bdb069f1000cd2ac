"""Every change the real node makes to the host, recorded before it is made and undone
by ``ptah dev down``.

The real node (containerd, runc, the kubelet, the CNI bridge plugin) changes machine-wide
state that outlives its processes: sysctls (the kubelet's kernel defaults, the bridge
plugin's ``ip_forward``), iptables chains (the kubelet's canaries), host directories
(``/var/log/containers``, the CNI result cache under ``/var/lib/cni``), cgroups, mounts,
the bridge and the nft table of the ``kubernetes`` Service. ``record`` writes what the
host looked like before the first start of a node into ``<node>/host-before.json``
(never overwritten while it exists, so a restart of ``up`` keeps the original);
``restore`` puts it back. ``snapshot`` is the comparable view a test uses to show that
``down`` left the host as it found it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

#: Sysctls the kubelet (protectKernelDefaults=false) and the bridge plugin (isGateway)
#: set; each is restored to its recorded value.
SYSCTLS = (
    "kernel.panic",
    "kernel.panic_on_oops",
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
    "net.ipv4.ip_forward",
    "net.ipv4.conf.all.forwarding",
    "net.ipv6.conf.all.forwarding",
)

#: Host paths a node may create outside its own directory (constants in the kubelet and
#: libcni, or defaults of containerd/runc that the node's config does not reach).
HOST_PATHS = (
    "/var/log/containers",
    "/var/log/pods",
    "/var/lib/cni",
    "/var/lib/kubelet",
    "/run/containerd",
    "/opt/containerd",
    "/etc/cni",
    "/var/run/netns",
    "/usr/libexec/kubernetes",
)

IPTABLES = ("iptables", "ip6tables")
CGROUP_V1 = Path("/sys/fs/cgroup")


def _sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


def read_sysctls() -> dict[str, str]:
    out: dict[str, str] = {}
    for name in SYSCTLS:
        with contextlib.suppress(OSError):
            out[name] = _sysctl_path(name).read_text().strip()
    return out


def _iptables_rules(tool: str) -> dict[str, list[str]]:
    """``table -> rules`` as ``iptables -S`` prints them (chains as ``-N``)."""
    out: dict[str, list[str]] = {}
    if shutil.which(tool) is None:
        return out
    for table in ("filter", "nat", "mangle"):
        proc = subprocess.run(
            [tool, "-w", "-t", table, "-S"], capture_output=True, text=True, check=False
        )
        if proc.returncode == 0:
            out[table] = proc.stdout.splitlines()
    return out


def cgroup_controllers() -> list[Path]:
    """The mounted cgroup v1 hierarchies (empty on a cgroup v2 host)."""
    if (CGROUP_V1 / "cgroup.controllers").exists():
        return []
    with contextlib.suppress(OSError):
        return sorted(
            p
            for p in CGROUP_V1.iterdir()
            if p.is_dir() and not p.is_symlink() and (p / "cgroup.procs").exists()
        )
    return []


def snapshot() -> dict[str, Any]:
    """What a node may change on the host, in a form two calls can compare."""
    links = subprocess.run(
        ["ip", "-o", "link", "show"], capture_output=True, text=True, check=False
    ).stdout
    nft = subprocess.run(
        ["nft", "list", "tables"], capture_output=True, text=True, check=False
    ).stdout
    mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    return {
        "sysctls": read_sysctls(),
        "iptables": {tool: _iptables_rules(tool) for tool in IPTABLES},
        "paths": {p: _tree(Path(p)) for p in HOST_PATHS},
        "links": sorted(line.split(":")[1].strip().split("@")[0] for line in links.splitlines()),
        "nft_tables": sorted(nft.splitlines()),
        "mounts": sorted(line.split()[4] for line in mounts),
        "run_dirs": sorted(p.name for p in Path("/run").glob("ptah-*")),
        "cgroups": {
            str(c): sorted(x.name for x in c.iterdir() if x.is_dir()) for c in cgroup_controllers()
        },
    }


def _tree(path: Path) -> list[str] | None:
    if not path.exists():
        return None
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def record(node_dir: Path) -> dict[str, Any]:
    """The host before this node's first start; kept while the file exists."""
    path = node_dir / "host-before.json"
    if path.exists():
        data: dict[str, Any] = json.loads(path.read_text())
        return data
    node_dir.mkdir(parents=True, exist_ok=True)
    data = {
        "sysctls": read_sysctls(),
        "iptables": {tool: _iptables_rules(tool) for tool in IPTABLES},
        "paths": {p: os.path.lexists(p) for p in HOST_PATHS},
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)
    return data


def restore(node_dir: Path, mine: list[str]) -> list[str]:
    """Undo what the node changed; ``mine`` are substrings naming this node's entries in
    shared host directories (its log dir, its network name). Returns what was undone."""
    path = node_dir / "host-before.json"
    if not path.exists():
        return []
    before: dict[str, Any] = json.loads(path.read_text())
    undone: list[str] = []
    for name, value in before.get("sysctls", {}).items():
        with contextlib.suppress(OSError):
            p = _sysctl_path(name)
            if p.read_text().strip() != value:
                p.write_text(value + "\n")
                undone.append(f"sysctl {name}={value}")
    for tool, tables in before.get("iptables", {}).items():
        undone += _restore_iptables(tool, tables)
    for host_path, existed in before.get("paths", {}).items():
        p = Path(host_path)
        if not existed and os.path.lexists(p):
            unmount_under(p)
            shutil.rmtree(p, ignore_errors=True)
            undone.append(f"removed {p}")
        elif existed and p.is_dir():
            for entry in list(p.rglob("*")):
                if any(m in str(entry) or m in _link_target(entry) for m in mine):
                    with contextlib.suppress(OSError):
                        if entry.is_dir() and not entry.is_symlink():
                            shutil.rmtree(entry)
                        else:
                            entry.unlink()
    path.unlink()
    return undone


def _link_target(p: Path) -> str:
    with contextlib.suppress(OSError):
        if p.is_symlink():
            return os.readlink(p)
    return ""


def _restore_iptables(tool: str, before: dict[str, list[str]]) -> list[str]:
    """Delete rules and chains that were not there before (rules first, then chains)."""
    undone: list[str] = []
    now = _iptables_rules(tool)
    for table, rules in now.items():
        old = set(before.get(table, []))
        new_rules = [r for r in rules if r not in old and r.startswith("-A ")]
        new_chains = [r.split()[1] for r in rules if r not in old and r.startswith("-N ")]
        for rule in new_rules:
            args = rule.split()
            args[0] = "-D"
            subprocess.run([tool, "-w", "-t", table, *args], capture_output=True, check=False)
        for chain in new_chains:
            subprocess.run([tool, "-w", "-t", table, "-F", chain], capture_output=True, check=False)
            subprocess.run([tool, "-w", "-t", table, "-X", chain], capture_output=True, check=False)
            undone.append(f"{tool} -t {table} -X {chain}")
    return undone


def mounts_under(root: Path) -> list[str]:
    """Mount points at or below ``root``, deepest first."""
    prefix = str(root.resolve())
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == prefix or point.startswith(prefix + "/"):
            out.append(point)
    return sorted(set(out), key=lambda p: (-p.count("/"), p))


def unmount_under(root: Path) -> list[str]:
    """Unmount (lazily, as a last resort) everything mounted below ``root``."""
    done: list[str] = []
    if not root.exists():
        return done
    for point in mounts_under(root):
        proc = subprocess.run(["umount", point], capture_output=True, check=False)
        if proc.returncode != 0:
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)
        done.append(point)
    return done


def remove_cgroup(name: str) -> list[str]:
    """Remove ``/<name>`` (and everything below it) from every v1 hierarchy; a cgroup
    can only be removed once empty, so children go first."""
    removed = []
    for ctrl in cgroup_controllers():
        top = ctrl / name
        if not top.exists():
            continue
        dirs = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
        for d in [*dirs, top]:
            with contextlib.suppress(OSError):
                d.rmdir()
        if not top.exists():
            removed.append(str(top))
    return removed


def make_cgroup(name: str) -> None:
    """``/<name>`` in every v1 hierarchy (the kubelet's cgroupRoot must exist); cpuset
    needs its cpus and mems copied from the parent before anything can join it."""
    for ctrl in cgroup_controllers():
        top = ctrl / name
        top.mkdir(exist_ok=True)
        for f in ("cpuset.cpus", "cpuset.mems"):
            src = ctrl / f
            if src.exists() and not (top / f).read_text().strip():
                (top / f).write_text(src.read_text())
