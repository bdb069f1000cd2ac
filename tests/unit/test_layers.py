"""The import graph points one way: api <- kube <- lifecycle <- families <- operator/cli,
and the in-Pod code (runner -> engines, the versioned engine among them) never reaches
the operator's side; the engines never import the runner. ``ptah.failures`` is a leaf
both sides share: it imports nothing of Ptah.

Inside the operator, only the composition root (``ptah.operator.main``) names the
families: the controller, mapping, metrics and runnables read what a family declares
(``Family``: its kind, label, watches, references) and what a pass reports
(``ptah.lifecycle.report``), never a family's module or kinds."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "ptah"

FORBIDDEN: dict[str, set[str]] = {
    "api": {"lifecycle", "families", "operator", "cli", "runner", "engines"},
    "kube": {"lifecycle", "families", "operator", "cli", "runner", "engines"},
    "lifecycle": {"families", "operator", "cli", "engines"},
    "targetlock": {"lifecycle", "families", "operator", "cli"},
    "podintent": {"lifecycle", "families", "operator", "cli"},
    "workload": {"lifecycle", "families", "operator", "cli"},
    "families": {"operator", "cli", "engines"},
    "runner": {"lifecycle", "families", "operator", "cli", "kube"},
    "engines": {"lifecycle", "families", "operator", "cli", "kube", "runner"},
    "operator": {"cli"},
}
# The test machinery (dev cluster, simulation, in-memory API) is not in the wheel or the
# image: no runtime package may import it; ``ptah dev`` (cli/dev.py) imports it lazily.
RUNTIME = (*FORBIDDEN, "cli")
MACHINERY_ALLOWED = {SRC / "cli" / "dev.py"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return {m.split(".")[1] for m in found if m.startswith("ptah.") and m.count(".") >= 1}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_point_one_way(package: str) -> None:
    offending = []
    for path in sorted((SRC / package).rglob("*.py")):
        bad = _imports(path) & FORBIDDEN[package]
        if bad:
            offending.append(f"{path.relative_to(SRC)} imports {sorted(bad)}")
    assert offending == []


@pytest.mark.parametrize("package", RUNTIME)
def test_no_runtime_package_imports_the_test_machinery(package: str) -> None:
    offending = [
        str(path.relative_to(SRC))
        for path in sorted((SRC / package).rglob("*.py"))
        if path not in MACHINERY_ALLOWED and "testing" in _imports(path)
    ]
    assert offending == []


def test_failures_is_a_leaf() -> None:
    assert _imports(SRC / "failures.py") == set()


FAMILY_NEUTRAL = ("controller.py", "mapping.py", "metrics.py", "runnables.py", "queue.py")
FAMILY_KINDS = {"SCHEMA", "MIGRATION", "ROLLOUT"}


@pytest.mark.parametrize("module", FAMILY_NEUTRAL)
def test_the_operator_knows_no_family(module: str) -> None:
    tree = ast.parse((SRC / "operator" / module).read_text())
    offending = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("ptah.families"):
                offending.append(node.module)
            if node.module == "ptah.kube.kinds":
                offending += sorted({a.name for a in node.names} & FAMILY_KINDS)
        elif isinstance(node, ast.Import):
            offending += [a.name for a in node.names if a.name.startswith("ptah.families")]
    assert offending == []


def test_no_module_imports_another_modules_private_names() -> None:
    """A name one module takes from another is part of that module's interface, so it
    is public: ``from ptah.x import _name`` means a rule lives in two places, or one
    module leans on another's internals."""
    offending = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ptah"):
                private = [a.name for a in node.names if a.name.startswith("_")]
                if private:
                    offending.append(f"{path.relative_to(SRC)}: {node.module} {private}")
    assert offending == []
