"""``ptah dev up|images|down|status|kubeconfig``: the local control plane for the demo and
tests.

The control plane is test machinery (``ptah.testing.devcluster``), which the wheel and
the image leave out: the commands are always listed, and import it only when run, so an
installed ``ptah`` without it says so in one line instead of failing to start.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

Command = Callable[[argparse.Namespace], int]
MISSING = (
    "the test machinery (ptah.testing) is not installed here: `ptah dev` runs from a "
    "checkout's dev venv (bash hack/setup.sh)"
)


def _needs_machinery(command: Command) -> Command:
    """``command``, run only where ``ptah.testing`` can be imported."""

    def run(args: argparse.Namespace) -> int:
        try:
            import ptah.testing.devcluster  # noqa: F401
        except ModuleNotFoundError as exc:
            if not (exc.name or "").startswith("ptah.testing"):
                raise
            print(f"ptah dev {args.dev_command}: {MISSING}", file=sys.stderr)
            return 1
        return command(args)

    return run


def _state_dir(args: argparse.Namespace) -> Path:
    # ``cluster`` (httpx, cryptography, yaml) is imported by the commands that start or
    # stop one, not here: `ptah --help` stays light.
    from ptah.testing.devcluster import paths

    if args.state_dir is not None:
        return Path(args.state_dir)
    return paths.default_state_dir(args.name)


def _up(args: argparse.Namespace) -> int:
    from ptah.testing.devcluster import cluster, node, paths

    try:
        info = cluster.up(
            _state_dir(args),
            timeout=args.timeout,
            runner_images=args.runner_image,
            real=args.node == "real",
            forward_ports=args.forward_port,
        )
    except (paths.MissingComponentError, cluster.NotReadyError, node.NodeSetupError) as err:
        print(f"ptah dev up: {err}", file=sys.stderr)
        return 1
    print(info.usage())
    return 0


def _images(args: argparse.Namespace) -> int:
    """Build the base and project images (cached layers) and load them into the node."""
    from ptah.testing.devcluster import cluster, imagebuild, node, paths
    from ptah.testing.devcluster.config import ClusterConfig

    root = Path(args.context).resolve() if args.context else paths.repo_root()
    if root is None or not (root / "Dockerfile").is_file():
        print(
            "ptah dev images: no Dockerfile (run from a checkout or pass --context)",
            file=sys.stderr,
        )
        return 1
    state = _state_dir(args)
    log = state / "logs" / "images.log"
    try:
        for built in (imagebuild.build_base(log), imagebuild.build_project(root, log)):
            how = "cached" if built.cached else "built"
            print(f"{how:6} {built.name} in {built.seconds:.1f}s ({built.image_id[:12]})")
        cfg = ClusterConfig.load(state) if (state / "cluster.json").exists() else None
        if cfg is not None and cfg.real and args.load:
            lay = cluster.layout(cfg)
            for name in (imagebuild.BASE_IMAGE, imagebuild.PROJECT_IMAGE):
                loaded = imagebuild.load(lay, name)
                print(f"{'loaded' if loaded else 'present'} {name} in the node's containerd")
    except (imagebuild.ImageBuildError, node.NodeSetupError) as err:
        print(f"ptah dev images: {err}", file=sys.stderr)
        return 1
    return 0


def _down(args: argparse.Namespace) -> int:
    from ptah.testing.devcluster import cluster

    stopped = cluster.down(_state_dir(args), purge=args.purge)
    print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
    return 0


def _status(args: argparse.Namespace) -> int:
    from ptah.testing.devcluster import cluster

    state = _state_dir(args)
    pids = cluster.status(state)
    print(json.dumps({"state_dir": str(state), "pids": pids}, indent=2))
    return 0 if all(pids.values()) else 3


def _kubeconfig(args: argparse.Namespace) -> int:
    path = _state_dir(args) / "kubeconfig"
    if not path.exists():
        print(f"no kubeconfig at {path}; run: ptah dev up", file=sys.stderr)
        return 1
    print(path)
    return 0


def register(subparsers: Any) -> None:
    dev = subparsers.add_parser("dev", help="run a local Kubernetes control plane")
    sub = dev.add_subparsers(dest="dev_command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--state-dir", default=None, help="cluster state (default: <cache>/dev/<name>)"
    )
    common.add_argument("--name", default="default", help="dev cluster name")
    p = sub.add_parser("up", parents=[common], help="start or reuse the cluster; wait ready")
    p.add_argument("--timeout", type=float, default=180.0)
    p.add_argument(
        "--runner-image",
        action="append",
        default=[],
        help="extra image repository that runs ptah-runner (repeatable)",
    )
    p.add_argument(
        "--node",
        choices=("agent", "real"),
        default="agent",
        help="agent: Pods as local processes; real: kubelet on containerd and runc",
    )
    p.add_argument(
        "--forward-port",
        type=int,
        action="append",
        default=[],
        help="real node: a host loopback TCP port Pods reach at the bridge address"
        " (a database; repeatable)",
    )
    p.set_defaults(func=_needs_machinery(_up))
    p = sub.add_parser(
        "images", parents=[common], help="build the images from the Dockerfile; load them"
    )
    p.add_argument("--context", default=None, help="build context (default: this checkout)")
    p.add_argument(
        "--no-load", dest="load", action="store_false", help="build only, load into no node"
    )
    p.set_defaults(func=_needs_machinery(_images))
    p = sub.add_parser("down", parents=[common], help="stop the processes 'up' started")
    p.add_argument("--purge", action="store_true", help="also delete the state dir")
    p.set_defaults(func=_needs_machinery(_down))
    sub.add_parser("status", parents=[common], help="pids of the components").set_defaults(
        func=_needs_machinery(_status)
    )
    sub.add_parser("kubeconfig", parents=[common], help="print the kubeconfig path").set_defaults(
        func=_needs_machinery(_kubeconfig)
    )
