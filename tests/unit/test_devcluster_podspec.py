"""How the node agent turns a container into a local process: path rewriting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ptah.testing.devcluster.podspec import plan_container, rewrite_paths


class NoSources:
    def secret(self, namespace: str, name: str) -> Any:
        return None

    def config_map(self, namespace: str, name: str) -> Any:
        return None

    def service_account_token(self, pod: Any, audience: str | None, seconds: int) -> str:
        return ""


def test_a_rewritten_path_is_not_rewritten_again() -> None:
    mounts = {"/var/run/x": Path("/tmp/state/root/var/run/x"), "/tmp": Path("/tmp/s/root/tmp")}
    assert rewrite_paths("--kc /var/run/x/kc --dir /tmp/a", mounts) == (
        "--kc /tmp/state/root/var/run/x/kc --dir /tmp/s/root/tmp/a"
    )


def test_agent_paths_survive_a_tmp_mount(tmp_path: Path) -> None:
    """An agent (and its venv) living under /tmp, and a Pod mounting an emptyDir at /tmp:
    the agent's PATH must still find its executables."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    tool = bin_dir / "ptah"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    scratch = tmp_path / "vol"
    scratch.mkdir()
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": {}}
    container = {
        "name": "op",
        "image": "ptah/ptah:dev",
        "command": ["ptah", "operator", "run"],
        "args": ["--state=/tmp/here"],
        "env": [{"name": "WHERE", "value": "/tmp/x"}],
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
    plan = plan_container(
        pod,
        container,
        tmp_path / "pod",
        {"tmp": scratch},
        NoSources(),
        {"PATH": f"{bin_dir}:/usr/bin:/bin"},
        ("ptah",),
        bin_dir,
        {},
    )
    assert plan.argv[0] == str(tool)
    assert plan.env["PATH"].startswith(str(bin_dir))
    root = tmp_path / "pod" / "root" / "op"
    assert plan.env["WHERE"] == f"{root}/tmp/x"
    assert plan.argv[-1] == f"--state={root}/tmp/here"
