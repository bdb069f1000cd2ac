"""Which local program a container runs: the image -> entrypoint mapping.

There are no images here, only this machine's programs. The rule, in order:

1. A container with an explicit ``command`` runs that command with ``args`` appended.
   ``command[0]`` is looked up on PATH (the agent's Python environment's ``bin`` first),
   so ``kubectl create job x --image=busybox -- sh -c 'echo hi'`` runs the host's ``sh``.
   The image is not consulted at all.
2. A container without ``command`` whose image is a Ptah runner image runs the
   ``ptah-runner`` installed next to the agent's Python (``sys.executable``'s directory)
   with the container's ``args``. An image is a runner image when its repository's last
   path component is ``ptah`` (``ptah/ptah:dev``, ``ghcr.io/acme/ptah@sha256:...``,
   ``ptah``) or its repository is listed in ``PTAH_RUNNER_IMAGES`` (comma separated) or
   passed with ``ptah dev up --runner-image``.
3. Anything else cannot be mapped: the container terminates at once with reason
   ``ImageNotMappable`` and exit code 128, and it is not restarted.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

RUNNER_PROGRAM = "ptah-runner"
RUNNER_LAST_COMPONENT = "ptah"


class ImageNotMappableError(Exception):
    reason = "ImageNotMappable"


def repository(image: str) -> str:
    """``registry/path/name`` without tag or digest."""
    name = image.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        name = name[:colon]
    return name


def configured_runner_repositories(extra: Iterable[str] = ()) -> tuple[str, ...]:
    env = os.environ.get("PTAH_RUNNER_IMAGES", "")
    listed = [repository(x.strip()) for x in env.split(",") if x.strip()]
    listed += [repository(x) for x in extra]
    return tuple(listed)


def is_runner_image(image: str, runner_repositories: Iterable[str] = ()) -> bool:
    repo = repository(image)
    if repo.rsplit("/", 1)[-1] == RUNNER_LAST_COMPONENT:
        return True
    return repo in set(runner_repositories)


def entrypoint(
    image: str,
    command: list[str],
    args: list[str],
    runner_repositories: Iterable[str],
    bin_dir: Path,
) -> list[str]:
    """The argv before path lookup; raises ImageNotMappableError."""
    if command:
        return [*command, *args]
    if is_runner_image(image, runner_repositories):
        return [str(bin_dir / RUNNER_PROGRAM), *args]
    raise ImageNotMappableError(
        f"image {image!r} has no local entrypoint: give the container a command, or use "
        f"a Ptah runner image (repository ending in '/{RUNNER_LAST_COMPONENT}' or listed "
        "in PTAH_RUNNER_IMAGES)"
    )
