"""The mutation suite: break one contract rule at a time and check that something notices.

Each ``*.mutant`` file beside this script is one small semantic break of one rule of
docs/mutation-lifecycle.md (format: tests/mutants/README.md). For each mutant this
copies the tree (src, tests, pyproject.toml) to a scratch directory, applies the
mutant's edits there (never to the working tree), and runs two killers against the
copy:

- ``sim``: ``python -m ptah.testing.sim --schedules N --seed S --fail-fast``;
- ``pytest``: ``pytest -x tests/unit tests/sim`` (the fast tiers).

A killer that exits non-zero (or runs past its time limit) kills the mutant. The
suite passes only when every mutant is killed by both killers, so the pytest
simulation tier is shown to kill each mutant on its own. A mutant whose search text
no longer occurs exactly once is STALE and fails the suite: the rule it broke has
moved, and the mutant must follow it.

    python tests/mutants/mutate.py [--stages sim,pytest] [--sim-schedules N] [names...]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
COPIED = ("src", "tests", "pyproject.toml")
STAGES = ("sim", "pytest")


@dataclass(frozen=True)
class Edit:
    path: str
    search: str
    replace: str


@dataclass(frozen=True)
class Mutant:
    name: str
    rule: str
    breaks: str
    killed_by: str
    edits: list[Edit] = field(default_factory=list)
    # The schedule that killed it last (header ``sim-seed:``, written by --record-seeds):
    # run first, alone; the sweep from --sim-seed follows only if it no longer kills.
    sim_seed: int | None = None


class MutantError(Exception):
    """A mutant file that cannot be parsed, or no longer applies."""


def parse(path: Path) -> Mutant:
    """Headers (``key: value``) until the first ``@@ <path>``; then edit blocks
    ``<<<<`` search ``====`` replace ``>>>>``, each line taken verbatim."""
    headers: dict[str, str] = {}
    edits: list[Edit] = []
    lines = path.read_text().splitlines(keepends=True)
    i = 0
    target: str | None = None
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith("@@ "):
            target = stripped[3:].strip()
        elif stripped == "<<<<":
            if target is None:
                raise MutantError(f"{path.name}:{i + 1}: an edit block before any '@@ <path>'")
            search, i = _block(lines, i + 1, "====", path)
            replace, i = _block(lines, i + 1, ">>>>", path)
            edits.append(Edit(target, search, replace))
        elif target is None and stripped and not stripped.startswith("#"):
            key, sep, value = stripped.partition(":")
            if not sep:
                raise MutantError(f"{path.name}:{i + 1}: expected 'key: value', got {stripped!r}")
            headers[key.strip().lower()] = value.strip()
        elif target is not None and stripped and not stripped.startswith("#"):
            raise MutantError(f"{path.name}:{i + 1}: text outside an edit block: {stripped!r}")
        i += 1
    for key in ("rule", "breaks"):
        if not headers.get(key):
            raise MutantError(f"{path.name}: missing header {key!r}")
    if not edits:
        raise MutantError(f"{path.name}: no edit block")
    seed = headers.get("sim-seed")
    if seed is not None and not seed.isdigit():
        raise MutantError(f"{path.name}: sim-seed must be a schedule number, got {seed!r}")
    return Mutant(
        path.stem,
        headers["rule"],
        headers["breaks"],
        headers.get("killed-by", ""),
        edits,
        int(seed) if seed is not None else None,
    )


def record_seed(path: Path, seed: int) -> None:
    """Write ``sim-seed: <seed>`` into the mutant's headers (replacing an older one)."""
    lines = path.read_text().splitlines(keepends=True)
    first_edit = next(i for i, line in enumerate(lines) if line.strip().startswith("@@ "))
    headers = [line for line in lines[:first_edit] if not line.lower().startswith("sim-seed:")]
    at = next(
        (i + 1 for i, line in enumerate(headers) if line.lower().startswith("killed-by:")),
        len(headers),
    )
    headers.insert(at, f"sim-seed: {seed}\n")
    path.write_text("".join(headers + lines[first_edit:]))


def _block(lines: list[str], start: int, end: str, path: Path) -> tuple[str, int]:
    out: list[str] = []
    i = start
    while i < len(lines):
        if lines[i].rstrip("\r\n") == end:
            return "".join(out), i
        out.append(lines[i])
        i += 1
    raise MutantError(f"{path.name}: block starting at line {start} has no {end!r}")


def apply(mutant: Mutant, tree: Path) -> None:
    """Apply every edit to the copy at ``tree``; each search must occur exactly once."""
    for edit in mutant.edits:
        target = tree / edit.path
        if not target.is_file():
            raise MutantError(f"{mutant.name}: {edit.path} does not exist")
        text = target.read_text()
        count = text.count(edit.search)
        if count != 1:
            raise MutantError(
                f"{mutant.name}: search text occurs {count} times in {edit.path} (must be once)"
            )
        target.write_text(text.replace(edit.search, edit.replace))


def copy_tree(root: Path, dest: Path) -> None:
    """Every file git tracks (the tests read charts, docs and manifests too), plus any
    new file under the copied directories; never .git or the virtualenv."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    names = listed.stdout.splitlines() if listed.returncode == 0 else []
    if not names:
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".mypy_cache")
        for name in COPIED:
            src = root / name
            if src.is_dir():
                shutil.copytree(src, dest / name, ignore=ignore)
            else:
                shutil.copy2(src, dest / name)
        return
    for name in names:
        src = root / name
        if not src.is_file():
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)


@dataclass
class Verdict:
    stage: str
    killed: bool
    detail: str
    seconds: float
    timed_out: bool = False


def run_sim(mutant: Mutant, tree: Path, args: argparse.Namespace) -> Verdict:
    """The simulation killer: the schedule that killed the mutant last, alone, when it
    lies within the sweep (the sweep would reach it, so the verdict is the sweep's);
    the whole sweep when there is none or it no longer kills (then the detail says so,
    and --record-seeds writes the new one)."""
    seed = mutant.sim_seed
    if seed is not None and args.hints and 0 <= seed - args.sim_seed < args.sim_schedules:
        hinted = run_stage("sim", tree, args, seeds=(seed, 1))
        if hinted.killed or hinted.timed_out:
            return hinted
        swept = run_stage("sim", tree, args)
        swept.seconds += hinted.seconds
        if swept.killed:
            swept.detail += f" (sim-seed {seed} no longer kills it)"
        return swept
    return run_stage("sim", tree, args)


def run_stage(
    stage: str, tree: Path, args: argparse.Namespace, seeds: tuple[int, int] | None = None
) -> Verdict:
    """One killer against the copy at ``tree``; ``seeds`` (first, count) narrows the
    simulation's sweep."""
    env = dict(os.environ, PYTHONPATH=str(tree / "src"), PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTEST_ADDOPTS", None)
    if stage == "sim":
        first, count = seeds or (args.sim_seed, args.sim_schedules)
        cmd = [
            sys.executable,
            "-m",
            "ptah.testing.sim",
            "--schedules",
            str(count),
            "--seed",
            str(first),
            "--fail-fast",
        ]
        if args.jobs:
            cmd += ["--jobs", str(args.jobs)]
    else:
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-x",
            "-q",
            "-p",
            "no:cacheprovider",
            "--timeout",
            str(args.timeout),
            "tests/unit",
            "tests/sim",
        ]
    started = time.monotonic()
    # Its own process group, so a killer that times out takes its workers with it
    # (the simulation's --jobs pool would otherwise outlive it and load the machine).
    proc = subprocess.Popen(
        cmd,
        cwd=tree,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        # A timeout proves nothing about the mutant: it is not counted as killed.
        return Verdict(
            stage, False, f"timed out after {args.timeout}s", time.monotonic() - started, True
        )
    seconds = time.monotonic() - started
    if proc.returncode == 0:
        return Verdict(stage, False, "", seconds)
    return Verdict(stage, True, _why(stage, out, proc.returncode), seconds)


def _why(stage: str, out: str, rc: int) -> str:
    """One line saying what killed the mutant."""
    if stage == "sim":
        for line in out.splitlines():
            if line.startswith("replay:"):
                # The seed says how many schedules it took (a shorter run would miss it).
                seed = re.search(r"--seed (\d+)", line)
                said = line.split("#", 1)[-1].strip()
                return f"seed {seed.group(1)}: {said}" if seed else said
    else:
        for line in out.splitlines():
            if line.startswith(("FAILED ", "ERROR ")):
                return line.split(" ", 1)[1].split(" - ")[0]
    tail = [line for line in out.splitlines() if line.strip()]
    return f"exit {rc}: {tail[-1] if tail else ''}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("names", nargs="*", help="mutants to run (default: all)")
    parser.add_argument("--stages", default=",".join(STAGES))
    parser.add_argument("--sim-schedules", type=int, default=2000)
    parser.add_argument("--sim-seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=0, help="simulation worker processes")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per killer")
    parser.add_argument(
        "--no-hints",
        dest="hints",
        action="store_false",
        help="sweep from --sim-seed for every mutant, ignoring its sim-seed header",
    )
    parser.add_argument(
        "--record-seeds",
        action="store_true",
        help="write each killing schedule into its mutant's sim-seed header",
    )
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    args = parser.parse_args(argv)
    stages = [s for s in args.stages.split(",") if s]
    unknown = set(stages) - set(STAGES)
    if unknown:
        parser.error(f"unknown stage(s): {', '.join(sorted(unknown))}")
    files = sorted(HERE.glob("*.mutant"))
    try:
        mutants = [parse(f) for f in files]
    except MutantError as exc:
        print(f"mutation: {exc}", file=sys.stderr)
        return 2
    if args.names:
        wanted = set(args.names)
        missing = wanted - {m.name for m in mutants}
        if missing:
            parser.error(f"no such mutant(s): {', '.join(sorted(missing))}")
        mutants = [m for m in mutants if m.name in wanted]
    if args.list:
        for m in mutants:
            print(f"{m.name:44} {m.rule}")
        return 0
    print(f"mutation: {len(mutants)} mutants, killers: {', '.join(stages)}", flush=True)
    with tempfile.TemporaryDirectory(prefix="ptah-mutation-base-") as base:
        # One snapshot of the tree for the whole run: edits made meanwhile do not leak in.
        copy_tree(ROOT, Path(base))
        problem = _sane(Path(base))
        if problem is None and "pytest" in stages:
            # A pytest killer that fails on the unmutated tree would kill every mutant.
            baseline = run_stage("pytest", Path(base), args)
            if baseline.killed or baseline.timed_out:
                problem = f"pytest fails before any mutation: {baseline.detail}"
        if problem:
            print(f"mutation: the unmutated tree does not run: {problem}", file=sys.stderr)
            return 2
        return _run_all(mutants, stages, Path(base), args)


def _sane(tree: Path) -> str | None:
    """A killer that fails on the unmutated tree would 'kill' every mutant."""
    env = dict(os.environ, PYTHONPATH=str(tree / "src"), PYTHONDONTWRITEBYTECODE="1")
    probe = (
        "import ptah.testing.sim.__main__, ptah.testing.sim.schedule;"
        " print(ptah.testing.sim.schedule.__file__)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], cwd=tree, env=env, capture_output=True, text=True
    )
    if proc.returncode != 0:
        return (proc.stderr.strip().splitlines() or ["?"])[-1]
    if not proc.stdout.strip().startswith(str(tree)):
        return f"ptah is imported from {proc.stdout.strip()}, not from the copy"
    return None


def _run_all(mutants: list[Mutant], stages: list[str], base: Path, args: argparse.Namespace) -> int:
    rows: list[tuple[Mutant, list[Verdict] | str]] = []
    started = time.monotonic()
    for m in mutants:
        with tempfile.TemporaryDirectory(prefix=f"ptah-mutant-{m.name}-") as tmp:
            tree = Path(tmp)
            shutil.copytree(base, tree, dirs_exist_ok=True)
            try:
                apply(m, tree)
            except MutantError as exc:
                rows.append((m, f"STALE: {exc}"))
                print(f"  {m.name}: STALE ({exc})", flush=True)
                continue
            verdicts = [
                run_sim(m, tree, args) if s == "sim" else run_stage(s, tree, args) for s in stages
            ]
        rows.append((m, verdicts))
        killer = next((v for v in verdicts if v.stage == "sim" and v.killed), None)
        found = re.match(r"seed (\d+):", killer.detail) if killer else None
        if args.record_seeds and found and int(found.group(1)) != m.sim_seed:
            record_seed(HERE / f"{m.name}.mutant", int(found.group(1)))
        summary = "  ".join(f"{v.stage}={_word(v)}({v.seconds:.0f}s)" for v in verdicts)
        print(f"  {m.name}: {summary}", flush=True)
    return table(rows, stages, time.monotonic() - started)


def table(rows: list[tuple[Mutant, list[Verdict] | str]], stages: list[str], seconds: float) -> int:
    print()
    print("| mutant | rule | " + " | ".join(stages) + " |")
    print("|---|---|" + "---|" * len(stages))
    bad = 0
    for m, result in rows:
        if isinstance(result, str):
            bad += 1
            print(f"| {m.name} | {m.rule} | " + " | ".join([_cell(result)] * len(stages)) + " |")
            continue
        cells = []
        for v in result:
            if not v.killed:
                bad += 1
                cells.append(f"**{_word(v)}** ({v.seconds:.0f}s)")
            else:
                cells.append(f"killed ({v.seconds:.0f}s): {_cell(v.detail)}")
        print(f"| {m.name} | {m.rule} | " + " | ".join(cells) + " |")
    killed = len(rows) - sum(
        1 for _, r in rows if isinstance(r, str) or any(not v.killed for v in r)
    )
    timed_out = sum(1 for _, r in rows if not isinstance(r, str) and any(v.timed_out for v in r))
    print()
    print(
        f"mutants={len(rows)} killed={killed} not_killed={len(rows) - killed}"
        f" timed_out={timed_out} seconds={seconds:.0f}"
    )
    return 1 if bad else 0


def _word(v: Verdict) -> str:
    if v.killed:
        return "killed"
    return "TIMED OUT" if v.timed_out else "SURVIVED"


def _cell(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("|", "/"))[:140]


if __name__ == "__main__":
    sys.exit(main())
