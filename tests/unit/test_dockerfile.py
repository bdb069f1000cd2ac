"""The Dockerfile names only things that exist.

No Docker engine runs here, so the image is not built; instead every COPY source must
exist in the build context and survive .dockerignore, every entrypoint must be a console
script in pyproject.toml, and the operator command the Helm chart runs must be a real
``ptah`` subcommand.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

from ptah.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuations joined and comments dropped."""
    out: list[tuple[str, str]] = []
    buf = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        word, _, rest = buf.partition(" ")
        out.append((word.upper(), rest.strip()))
        buf = ""
    return out


def scripts() -> dict[str, str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return dict(data["project"]["scripts"])


def ignored(rel: str) -> bool:
    """Whether .dockerignore keeps ``rel`` out of the context (last matching rule wins)."""
    verdict = False
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line[1:] if negate else line
        pattern = pattern.rstrip("/")
        parts = rel.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(fnmatch.fnmatch(p, pattern) for p in prefixes):
            verdict = not negate
    return verdict


def test_every_copy_source_exists_and_is_in_the_context() -> None:
    copies = [args for ins, args in instructions() if ins in ("COPY", "ADD")]
    assert copies
    for args in copies:
        words = shlex.split(args)
        if any(w.startswith("--from=") for w in words):
            continue  # from another stage
        sources = [w for w in words if not w.startswith("--")][:-1]
        for src in sources:
            path = ROOT / src
            assert path.exists(), f"Dockerfile copies {src}, which does not exist"
            assert not ignored(src.rstrip("/")), f".dockerignore excludes {src}"


def test_package_sources_survive_dockerignore() -> None:
    assert not ignored("src/ptah/cli/main.py")
    assert not ignored("src/ptah/api/resources.py")
    assert ignored("tests/unit/test_dockerfile.py")
    assert ignored(".venv")


def test_the_test_machinery_stays_out_of_the_image() -> None:
    for rel in ("src/ptah/testing", "src/ptah/testing/sim/world.py", "src/ptah/testing/memory.py"):
        assert ignored(rel), rel
    assert not ignored("src/ptah/kube/real.py") and not ignored("src/ptah/runner/main.py")


def exec_form(ins: str) -> list[str]:
    (args,) = [a for i, a in instructions() if i == ins][-1:]
    value = json.loads(args)
    assert isinstance(value, list), f"{ins} must be exec form (signals reach the process)"
    return [str(v) for v in value]


def test_entrypoint_is_the_runner_console_script() -> None:
    # Runner Jobs set no command (ptah.workload.job), so the image's entrypoint runs them.
    entry = exec_form("ENTRYPOINT")
    assert entry == ["ptah-runner"]
    assert scripts()["ptah-runner"] == "ptah.runner.main:main"
    module, _, func = scripts()["ptah-runner"].partition(":")
    assert (ROOT / "src" / (module.replace(".", "/") + ".py")).exists()
    assert func == "main"


def test_the_operator_command_the_chart_runs_exists() -> None:
    chart = (ROOT / "deploy/helm/ptah/templates/deployment.yaml").read_text()
    match = re.search(r"command: \[(.*)\]", chart)
    assert match, "the chart's Deployment sets an explicit command"
    command = [w.strip() for w in match.group(1).split(",")]
    assert command == ["ptah", "operator", "run"]
    assert scripts()["ptah"] == "ptah.cli.main:main"
    args = build_parser().parse_args(["operator", "run", "--leader-elect"])
    assert callable(args.func)


def test_base_image_matches_requires_python_and_user_is_numeric_non_root() -> None:
    froms = [a for i, a in instructions() if i == "FROM"]
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert ">=3.11" in requires
    assert all(f.split()[0] == "python:3.11-slim" for f in froms), froms
    (user,) = [a for i, a in instructions() if i == "USER"]
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "runAsNonRoot needs a numeric non-zero USER"
    chart_values = (ROOT / "deploy/helm/ptah/values.yaml").read_text()
    assert f"runAsUser: {uid}" in chart_values


@pytest.mark.parametrize("path", ["pyproject.toml", "README.md", "src/ptah/__init__.py"])
def test_files_pip_install_needs_are_copied(path: str) -> None:
    copied = " ".join(a for i, a in instructions() if i == "COPY")
    top = path.split("/")[0]
    assert top in copied, f"pip install . needs {path}"


def test_the_runtime_stage_byte_compiles_the_standard_library() -> None:
    """The base image has no stdlib bytecode and the runtime writes none, so without this
    step every runner Job compiles each stdlib module it imports (bench/startup.py)."""
    steps = instructions()
    last_from = max(n for n, (ins, _) in enumerate(steps) if ins == "FROM")
    runtime = steps[last_from:]
    compiles = [
        (n, shlex.split(args))
        for n, (ins, args) in enumerate(runtime)
        if ins == "RUN" and "compileall" in args
    ]
    assert compiles, "the runtime stage does not byte-compile the standard library"
    ((at, words),) = compiles
    assert words[:3] == ["python", "-m", "compileall"]
    (base,) = {a.split()[0] for i, a in steps if i == "FROM"}
    assert words[-1] == "/usr/local/lib/python" + base.split(":")[1].split("-")[0], words
    (user_at,) = [n for n, (ins, _) in enumerate(runtime) if ins == "USER"]
    assert at < user_at, "compile as root, before USER: the non-root user cannot write it"
    # What it leaves out is none of what the runner, the CLI or the operator import.
    exclude = re.compile(words[words.index("-x") + 1])
    code = "import sys, psycopg, pymysql, ptah.runner.main, ptah.cli.main, ptah.operator.main\n"
    code += "print('\\n'.join(str(getattr(m, '__file__', '') or '') for m in sys.modules.values()))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    stdlib = sysconfig.get_path("stdlib")
    loaded = [f for f in proc.stdout.splitlines() if f.startswith(stdlib + "/")]
    assert len(loaded) > 100
    assert not [f for f in loaded if exclude.search(f)]
