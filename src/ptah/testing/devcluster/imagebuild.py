"""Images for the real node, built without a registry and loaded into its containerd.

* the pause image (``ptah.local/pause:1``): a static C program built with gcc, the
  sandbox image containerd starts for every Pod;
* the base image (``python:3.11-slim``): Debian bookworm with Python 3.11 made by
  mmdebstrap from this machine's apt sources, so the Dockerfile's ``FROM`` resolves
  locally;
* the project image (``ptah/ptah:dev``): the repository's ``Dockerfile``, unmodified,
  built by ``buildah build --layers`` (cached layers: a warm rebuild reuses everything
  up to the first changed ``COPY``). RUN steps share the host network and see the
  machine's pip configuration and CA bundle, the only way out to the package index.

Images live in buildah's store under ``<cache>/images`` (kept between clusters, like
the binaries) and are copied into a node's containerd ``k8s.io`` namespace by
:func:`load`, which skips an image the node already holds at the same id.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ptah.testing.devcluster import node, paths

BASE_IMAGE = "docker.io/library/python:3.11-slim"
PROJECT_IMAGE = "docker.io/ptah/ptah:dev"
BASE_PACKAGES = ("python3.11", "python3.11-venv", "ca-certificates")
#: Files of the machine a RUN step sees (pip's index configuration and trust store).
BUILD_MOUNTS = ("/etc/pip.conf", "/etc/ssl/certs/ca-certificates.crt")

PAUSE_C = r"""/* The sandbox of every Pod: hold the namespaces, reap zombies, exit on TERM/INT. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static void quit(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, NULL, WNOHANG) > 0) {} }
int main(void) {
  struct sigaction q = {.sa_handler = quit}, r = {.sa_handler = reap};
  sigaction(SIGINT, &q, NULL);
  sigaction(SIGTERM, &q, NULL);
  sigaction(SIGCHLD, &r, NULL);
  for (;;) pause();
  return 0;
}
"""


class ImageBuildError(RuntimeError):
    """A build step failed; the message names the step and ends with its output."""


@dataclass(frozen=True)
class Built:
    name: str
    image_id: str
    seconds: float
    cached: bool


def store() -> Path:
    return paths.cache_root() / "images"


def _buildah_base() -> list[str]:
    s = store()
    return [
        "buildah",
        f"--root={s / 'storage'}",
        f"--runroot={s / 'run'}",
        "--storage-driver=overlay",
    ]


def buildah(*args: str, log: Path | None = None) -> str:
    argv = [*_buildah_base(), *args]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a") as fh:
            fh.write(f"$ {' '.join(argv)}\n{proc.stdout}{proc.stderr}\n")
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-25:])
        raise ImageBuildError(f"buildah {args[0]} failed ({proc.returncode}):\n{tail}")
    return proc.stdout


def image_id(name: str) -> str | None:
    proc = subprocess.run(
        [*_buildah_base(), "inspect", "--type=image", "--format={{.FromImageID}}", name],
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def _label(name: str, key: str) -> str | None:
    proc = subprocess.run(
        [*_buildah_base(), "inspect", "--type=image", name],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        return None
    data = json.loads(proc.stdout)
    labels = (data.get("OCIv1", {}).get("config") or {}).get("Labels") or {}
    value = labels.get(key)
    return str(value) if value is not None else None


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def build_pause(log: Path | None = None) -> Built:
    t0 = time.monotonic()
    stamp = _digest(PAUSE_C, "gcc -static -O2")
    if _label(node.PAUSE_IMAGE, "io.ptah.stamp") == stamp:
        return Built(node.PAUSE_IMAGE, image_id(node.PAUSE_IMAGE) or "", 0.0, True)
    with tempfile.TemporaryDirectory(prefix="ptah-pause-") as tmp:
        src, out = Path(tmp) / "pause.c", Path(tmp) / "pause"
        src.write_text(PAUSE_C)
        gcc = subprocess.run(
            ["gcc", "-static", "-O2", "-o", str(out), str(src)],
            capture_output=True,
            text=True,
            check=False,
        )
        if gcc.returncode != 0:
            raise ImageBuildError(f"gcc (pause image) failed: {gcc.stderr.strip()}")
        ctr = buildah("from", "scratch", log=log).strip()
        try:
            buildah("copy", "--chmod=0755", ctr, str(out), "/pause", log=log)
            buildah(
                "config",
                '--entrypoint=["/pause"]',
                f"--label=io.ptah.stamp={stamp}",
                ctr,
                log=log,
            )
            buildah("commit", "--rm", ctr, node.PAUSE_IMAGE, log=log)
        except ImageBuildError:
            buildah("rm", ctr)
            raise
    return Built(node.PAUSE_IMAGE, image_id(node.PAUSE_IMAGE) or "", time.monotonic() - t0, False)


def _apt_sources() -> list[str]:
    """This machine's Debian sources (mmdebstrap reads deb822 or one-line files)."""
    found: list[str] = []
    for f in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        if "debian-archive-keyring" in f.read_text():
            found.append(str(f))
    legacy = Path("/etc/apt/sources.list")
    if legacy.exists() and any(
        line.startswith("deb ") and "debian" in line for line in legacy.read_text().splitlines()
    ):
        found.append(str(legacy))
    if not found:
        raise ImageBuildError("no Debian apt sources on this machine for the base image")
    return found


def build_base(log: Path | None = None, suite: str = "bookworm") -> Built:
    """``python:3.11-slim`` from mmdebstrap; reused while its recipe is unchanged."""
    t0 = time.monotonic()
    sources = _apt_sources()
    recipe = [suite, *BASE_PACKAGES, *(Path(s).read_text() for s in sources)]
    stamp = _digest(*recipe)
    if _label(BASE_IMAGE, "io.ptah.stamp") == stamp:
        return Built(BASE_IMAGE, image_id(BASE_IMAGE) or "", 0.0, True)
    with tempfile.TemporaryDirectory(prefix="ptah-base-", dir=store()) as tmp:
        tar = Path(tmp) / "rootfs.tar"
        argv = [
            "mmdebstrap",
            "--variant=minbase",
            "--mode=root",
            f"--include={','.join(BASE_PACKAGES)}",
            '--customize-hook=chroot "$1" ln -sf /usr/bin/python3.11 /usr/local/bin/python',
            '--customize-hook=chroot "$1" ln -sf /usr/bin/python3.11 /usr/local/bin/python3',
            '--customize-hook=rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*',
            suite,
            str(tar),
            *sources,
        ]
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        if log is not None:
            with log.open("a") as fh:
                fh.write(f"$ {' '.join(argv)}\n{proc.stdout}{proc.stderr}\n")
        if proc.returncode != 0:
            tail = "\n".join(proc.stderr.splitlines()[-20:])
            raise ImageBuildError(f"mmdebstrap (base image) failed:\n{tail}")
        ctr = buildah("from", "scratch", log=log).strip()
        try:
            buildah("add", ctr, str(tar), "/", log=log)
            buildah(
                "config",
                "--env=PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin",
                "--env=LANG=C.UTF-8",
                '--cmd=["python3"]',
                f"--label=io.ptah.stamp={stamp}",
                ctr,
                log=log,
            )
            buildah("commit", "--rm", ctr, BASE_IMAGE, log=log)
        except ImageBuildError:
            buildah("rm", ctr)
            raise
    return Built(BASE_IMAGE, image_id(BASE_IMAGE) or "", time.monotonic() - t0, False)


def build_project(root: Path, log: Path | None = None, tag: str = PROJECT_IMAGE) -> Built:
    """The repository's Dockerfile as it is (base image first)."""
    build_base(log)
    t0 = time.monotonic()
    before = image_id(tag)
    mounts = [f"--volume={m}:{m}:ro" for m in BUILD_MOUNTS if os.path.exists(m)]
    buildah(
        "build",
        "--layers",
        "--pull=never",
        "--network=host",
        *mounts,
        f"--tag={tag}",
        f"--file={root / 'Dockerfile'}",
        str(root),
        log=log,
    )
    after = image_id(tag) or ""
    return Built(tag, after, time.monotonic() - t0, before == after)


def _loaded_path(layout: node.NodeLayout) -> Path:
    return layout.root / "images.json"


def load(layout: node.NodeLayout, name: str) -> bool:
    """Copy ``name`` from the build store into the node's containerd; False if it was
    already there at the same id."""
    want = image_id(name)
    if want is None:
        raise ImageBuildError(f"image {name} is not built (ptah dev images)")
    record_path = _loaded_path(layout)
    record: dict[str, str] = {}
    if record_path.exists():
        record = json.loads(record_path.read_text())
    present = name in node.ctr(layout, "images", "ls", "-q").split()
    if present and record.get(name) == want:
        return False
    with tempfile.TemporaryDirectory(prefix="ptah-load-", dir=store()) as tmp:
        archive = Path(tmp) / "image.tar"
        buildah("push", "--quiet", name, f"docker-archive:{archive}:{name}")
        node.ctr(layout, "images", "import", str(archive))
    record[name] = want
    record_path.write_text(json.dumps(record, indent=2))
    return True


def load_pause(layout: node.NodeLayout) -> None:
    store().mkdir(parents=True, exist_ok=True)
    build_pause()
    load(layout, node.PAUSE_IMAGE)


def clear_store() -> None:
    """Forget every built image and cached layer (the next build is cold)."""
    subprocess.run([*_buildah_base(), "rm", "--all"], capture_output=True, check=False)
    subprocess.run([*_buildah_base(), "rmi", "--all", "--force"], capture_output=True, check=False)
    shutil.rmtree(store(), ignore_errors=True)
