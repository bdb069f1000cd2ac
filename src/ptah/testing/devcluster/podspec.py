"""Turn a Pod's container into a local process plan: volumes, env, argv, paths.

Volume path rewriting (documented in docs/devcluster.md):

* The pod directory is ``<state>/pods/<namespace>/<pod>-<uid[:8]>``.
* Each volume is materialised once per pod at ``<pod-dir>/volumes/<volume-name>``:
  emptyDir is an empty directory; configMap, secret, downwardAPI and projected
  (secret, configMap, downwardAPI, serviceAccountToken) volumes are directories of files
  written when the pod starts (not refreshed later); hostPath is a symlink to the host
  path itself.
* Each container gets a root ``<pod-dir>/root/<container>``; a volumeMount at
  ``mountPath`` becomes the symlink ``<root>/<mountPath>`` to the volume directory (or
  to ``<volume>/<subPath>``).
* In ``command``, ``args``, ``env`` values and ``workingDir``, every occurrence of a
  mountPath as a whole path (followed by ``/``, the end, or a character that cannot be in
  a path segment) is replaced by its local path, longest mountPath first.
* The process runs in ``workingDir`` if set (under a mount: the mount's local path;
  otherwise ``<root>/<workingDir>``), else in its root. It gets
  ``PTAH_CONTAINER_ROOT`` (its root) to resolve any other in-container path itself.
"""

from __future__ import annotations

import base64
import math
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ptah.testing.devcluster import images

JSON = dict[str, Any]


class ConfigError(Exception):
    """The container cannot start yet (missing Secret/ConfigMap/key); retried later."""

    reason = "CreateContainerConfigError"


class Sources(Protocol):
    def secret(self, namespace: str, name: str) -> JSON | None: ...

    def config_map(self, namespace: str, name: str) -> JSON | None: ...

    def service_account_token(
        self, pod: JSON, audience: str | None, expiration_seconds: int
    ) -> str: ...


@dataclass
class ProcessPlan:
    name: str
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    root: Path
    mounts: dict[str, Path] = field(default_factory=dict)


def pod_dir(state_dir: Path, pod: JSON) -> Path:
    meta = pod["metadata"]
    return state_dir / "pods" / str(meta["namespace"]) / f"{meta['name']}-{str(meta['uid'])[:8]}"


# -- quantities ---------------------------------------------------------------------------

_SUFFIX = {
    "n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
    "P": 1e15, "E": 1e18, "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40,
    "Pi": 2.0**50, "Ei": 2.0**60,
}  # fmt: skip
_QTY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")


def parse_quantity(text: str) -> float:
    match = _QTY.match(text.strip())
    if not match or match.group(2) not in _SUFFIX:
        raise ValueError(f"not a quantity: {text!r}")
    return float(match.group(1)) * _SUFFIX[match.group(2)]


# -- env ----------------------------------------------------------------------------------

_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes ``$(VAR)`` expansion: unknown references stay, ``$$`` escapes."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return _VAR.sub(sub, text)


def field_ref(pod: JSON, path: str) -> str:
    meta = pod.get("metadata", {})
    spec = pod.get("spec", {})
    status = pod.get("status", {})
    simple: dict[str, Callable[[], str]] = {
        "metadata.name": lambda: str(meta.get("name", "")),
        "metadata.namespace": lambda: str(meta.get("namespace", "")),
        "metadata.uid": lambda: str(meta.get("uid", "")),
        "spec.nodeName": lambda: str(spec.get("nodeName", "")),
        "spec.serviceAccountName": lambda: str(spec.get("serviceAccountName", "")),
        "status.hostIP": lambda: str(status.get("hostIP", "127.0.0.1")),
        "status.hostIPs": lambda: str(status.get("hostIP", "127.0.0.1")),
        "status.podIP": lambda: str(status.get("podIP", "127.0.0.1")),
        "status.podIPs": lambda: str(status.get("podIP", "127.0.0.1")),
    }
    if path in simple:
        return simple[path]()
    for kind in ("labels", "annotations"):
        values: dict[str, str] = meta.get(kind) or {}
        if path == f"metadata.{kind}":
            return "\n".join(f'{k}="{v}"' for k, v in sorted(values.items()))
        m = re.fullmatch(rf"metadata\.{kind}\['(.+)'\]", path)
        if m:
            return values.get(m.group(1), "")
    raise ConfigError(f"unsupported fieldRef {path!r}")


def resource_ref(container: JSON, ref: JSON, node_allocatable: dict[str, str]) -> str:
    resource = str(ref.get("resource", ""))
    kind, _, name = resource.partition(".")
    resources = container.get("resources") or {}
    value = (resources.get(kind) or {}).get(name)
    if value is None and kind == "requests":
        value = (resources.get("limits") or {}).get(name)
    if value is None:
        value = node_allocatable.get(name, "0")
    divisor = parse_quantity(str(ref.get("divisor") or "1"))
    return str(math.ceil(parse_quantity(str(value)) / divisor))


def _decode(data: JSON | None, b64: bool) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for key, value in (data or {}).items():
        out[key] = base64.b64decode(value) if b64 else str(value).encode()
    return out


def secret_data(obj: JSON) -> dict[str, bytes]:
    return _decode(obj.get("data"), True) | _decode(obj.get("stringData"), False)


def config_map_data(obj: JSON) -> dict[str, bytes]:
    return _decode(obj.get("data"), False) | _decode(obj.get("binaryData"), True)


def _lookup(sources: Sources, ns: str, kind: str, ref: JSON) -> dict[str, bytes] | None:
    name = str(ref.get("name", ""))
    if kind == "secret":
        obj = sources.secret(ns, name)
        return None if obj is None else secret_data(obj)
    obj = sources.config_map(ns, name)
    return None if obj is None else config_map_data(obj)


def container_env(
    pod: JSON,
    container: JSON,
    sources: Sources,
    base: dict[str, str],
    node_allocatable: dict[str, str],
) -> dict[str, str]:
    ns = pod["metadata"]["namespace"]
    env = dict(base)
    for src in container.get("envFrom") or []:
        prefix = str(src.get("prefix") or "")
        for kind, key in (("configmap", "configMapRef"), ("secret", "secretRef")):
            ref = src.get(key)
            if ref is None:
                continue
            data = _lookup(sources, ns, kind, ref)
            if data is None:
                if ref.get("optional"):
                    continue
                raise ConfigError(f"{kind} {ns}/{ref.get('name')} not found")
            for k, v in data.items():
                env[prefix + k] = v.decode(errors="replace")
    for var in container.get("env") or []:
        name = str(var["name"])
        if "valueFrom" not in var:
            env[name] = expand(str(var.get("value", "")), env)
            continue
        vf = var["valueFrom"]
        if "fieldRef" in vf:
            env[name] = field_ref(pod, str(vf["fieldRef"]["fieldPath"]))
        elif "resourceFieldRef" in vf:
            env[name] = resource_ref(container, vf["resourceFieldRef"], node_allocatable)
        else:
            kind, key = (
                ("secret", "secretKeyRef")
                if "secretKeyRef" in vf
                else ("configmap", "configMapKeyRef")
            )
            ref = vf.get(key)
            if ref is None:
                raise ConfigError(f"unsupported valueFrom for env {name}")
            data = _lookup(sources, ns, kind, ref)
            item = None if data is None else data.get(str(ref["key"]))
            if item is None:
                if ref.get("optional"):
                    continue
                raise ConfigError(
                    f"env {name}: {kind} {ns}/{ref.get('name')} key {ref['key']!r} not found"
                )
            env[name] = item.decode(errors="replace")
    return env


# -- volumes ------------------------------------------------------------------------------


def _write_files(target: Path, files: dict[str, bytes], mode: int) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for rel, content in files.items():
        path = target / rel
        if ".." in Path(rel).parts or Path(rel).is_absolute():
            raise ConfigError(f"refusing volume item path {rel!r}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        path.chmod(mode)


def _select(data: dict[str, bytes], items: list[JSON] | None, what: str) -> dict[str, bytes]:
    if not items:
        return data
    out: dict[str, bytes] = {}
    for item in items:
        key = str(item["key"])
        if key not in data:
            raise ConfigError(f"{what}: key {key!r} not found")
        out[str(item["path"])] = data[key]
    return out


def _keyed_volume(
    sources: Sources, ns: str, kind: str, spec: JSON, name_field: str
) -> dict[str, bytes]:
    ref = {"name": spec.get(name_field, "")}
    data = _lookup(sources, ns, kind, ref)
    if data is None:
        if spec.get("optional"):
            return {}
        raise ConfigError(f"{kind} {ns}/{ref['name']} not found")
    return _select(data, spec.get("items"), f"{kind} {ns}/{ref['name']}")


def _downward(pod: JSON, spec: JSON) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for item in spec.get("items") or []:
        if "fieldRef" in item:
            value = field_ref(pod, str(item["fieldRef"]["fieldPath"]))
        else:
            ref = item.get("resourceFieldRef") or {}
            containers = {c["name"]: c for c in pod["spec"].get("containers", [])}
            value = resource_ref(containers.get(ref.get("containerName", ""), {}), ref, {})
        out[str(item["path"])] = value.encode()
    return out


def materialise_volumes(pod: JSON, pdir: Path, sources: Sources) -> dict[str, Path]:
    """Create every volume of ``pod`` under ``pdir/volumes``; returns name -> path."""
    ns = pod["metadata"]["namespace"]
    base = pdir / "volumes"
    base.mkdir(parents=True, exist_ok=True)
    result: dict[str, Path] = {}
    for vol in pod["spec"].get("volumes") or []:
        name = str(vol["name"])
        target = base / name
        result[name] = target
        if "hostPath" in vol:
            host = Path(vol["hostPath"]["path"])
            if vol["hostPath"].get("type") in ("DirectoryOrCreate", None, ""):
                host.mkdir(parents=True, exist_ok=True)
            if target.is_symlink() or target.exists():
                continue
            target.symlink_to(host)
            continue
        if target.exists():
            continue  # materialised by an earlier attempt
        tmp = base / f".{name}.tmp"
        if tmp.exists():
            shutil.rmtree(tmp)
        if "emptyDir" in vol:
            tmp.mkdir()
        elif "configMap" in vol:
            spec = vol["configMap"]
            mode = int(spec.get("defaultMode", 0o644))
            _write_files(tmp, _keyed_volume(sources, ns, "configmap", spec, "name"), mode)
        elif "secret" in vol:
            spec = vol["secret"]
            mode = int(spec.get("defaultMode", 0o644))
            _write_files(tmp, _keyed_volume(sources, ns, "secret", spec, "secretName"), mode)
        elif "downwardAPI" in vol:
            mode = int(vol["downwardAPI"].get("defaultMode", 0o644))
            _write_files(tmp, _downward(pod, vol["downwardAPI"]), mode)
        elif "projected" in vol:
            spec = vol["projected"]
            mode = int(spec.get("defaultMode", 0o644))
            files: dict[str, bytes] = {}
            for src in spec.get("sources") or []:
                if "secret" in src:
                    files |= _keyed_volume(sources, ns, "secret", src["secret"], "name")
                elif "configMap" in src:
                    files |= _keyed_volume(sources, ns, "configmap", src["configMap"], "name")
                elif "downwardAPI" in src:
                    files |= _downward(pod, src["downwardAPI"])
                elif "serviceAccountToken" in src:
                    sat = src["serviceAccountToken"]
                    token = sources.service_account_token(
                        pod, sat.get("audience"), int(sat.get("expirationSeconds", 3607))
                    )
                    files[str(sat["path"])] = token.encode()
            _write_files(tmp, files, mode)
        else:
            kinds = sorted(k for k in vol if k != "name")
            raise ConfigError(f"volume {name}: unsupported volume type {kinds}")
        tmp.rename(target)
    return result


# -- paths and argv -----------------------------------------------------------------------


def rewrite_paths(text: str, mounts: dict[str, Path]) -> str:
    """One pass over ``text`` (longest mount first in the alternation), so a path already
    rewritten into a local directory is never rewritten again by a shorter mount."""
    if not mounts:
        return text
    by_key = {m.rstrip("/") or "/": str(local) for m, local in mounts.items()}
    alternation = "|".join(re.escape(m) for m in sorted(by_key, key=len, reverse=True))
    pattern = re.compile(r"(?<![\w.\-/])(" + alternation + r")(?=/|$|[^\w.\-])")
    return pattern.sub(lambda m: by_key[m.group(1)], text)


def plan_container(
    pod: JSON,
    container: JSON,
    pdir: Path,
    volumes: dict[str, Path],
    sources: Sources,
    base_env: dict[str, str],
    runner_repositories: tuple[str, ...],
    bin_dir: Path,
    node_allocatable: dict[str, str],
) -> ProcessPlan:
    """Everything needed to start ``container``; raises ConfigError or ImageNotMappableError."""
    name = str(container["name"])
    root = pdir / "root" / name
    root.mkdir(parents=True, exist_ok=True)
    mounts: dict[str, Path] = {}
    for vm in container.get("volumeMounts") or []:
        vol = str(vm["name"])
        if vol not in volumes:
            raise ConfigError(f"volumeMount {vol!r} names no volume")
        mount_path = str(vm["mountPath"])
        local = root / mount_path.lstrip("/")
        source = volumes[vol] / str(vm.get("subPath") or "")
        local.parent.mkdir(parents=True, exist_ok=True)
        if local.is_symlink() or local.exists():
            local.unlink()
        local.symlink_to(source)
        mounts[mount_path] = local
    env = container_env(pod, container, sources, base_env, node_allocatable)
    # Only what the Pod spec supplied is a container path; the agent's own values (PATH to
    # its venv, the container root) are host paths, and a mount at e.g. /tmp must not
    # rewrite them when the agent itself lives under /tmp.
    env = {k: v if base_env.get(k) == v else rewrite_paths(v, mounts) for k, v in env.items()}
    env["PTAH_CONTAINER_ROOT"] = str(root)
    command = [rewrite_paths(expand(str(x), env), mounts) for x in container.get("command") or []]
    args = [rewrite_paths(expand(str(x), env), mounts) for x in container.get("args") or []]
    image = str(container.get("image", ""))
    argv = images.entrypoint(image, command, args, runner_repositories, bin_dir)
    working = container.get("workingDir")
    cwd = root
    if working:
        rewritten = rewrite_paths(str(working), mounts)
        cwd = Path(rewritten) if rewritten != working else root / str(working).lstrip("/")
    cwd.mkdir(parents=True, exist_ok=True)
    if "/" not in argv[0]:
        search = env.get("PATH", os.environ.get("PATH", ""))
        found = shutil.which(argv[0], path=search)
        if found is None:
            raise FileNotFoundError(f"executable {argv[0]!r} not found in PATH {search!r}")
        argv[0] = found
    return ProcessPlan(name=name, argv=argv, env=env, cwd=cwd, root=root, mounts=mounts)
