"""The sum file ``ptah.sum``: detect an edited, inserted, removed or reordered file.

Format (one line each, UTF-8, ``\\n`` separated)::

    ptah-sum v1 h1:<header>
    0001_init.sql h1:<cumulative hash 1>
    0002_users.sql h1:<cumulative hash 2>

The cumulative hash of line *i* covers the name and content of file *i* and every
file before it, so changing any earlier file changes every later line too; the
header hashes all file lines, so the one short value ``h1:<header>`` stands for the
whole directory (it is the ``directoryHash`` of history readings). Checking happens
before any statement runs. The versioned files come first in version order, then
the repeatable (``R__``) and undo (``U``) files in name order: a repeatable edited
or added is as visible as a versioned one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from ptah.engines.versioned.directory import SUM_FILE, Directory, SqlFile

HEADER = "ptah-sum v1"


@dataclass(frozen=True)
class SumLine:
    name: str
    digest: str


@dataclass(frozen=True)
class SumFile:
    header: str
    lines: tuple[SumLine, ...]

    def render(self) -> str:
        body = [f"{HEADER} h1:{self.header}"]
        body.extend(f"{line.name} h1:{line.digest}" for line in self.lines)
        return "\n".join(body) + "\n"


def compute(files: Sequence[SqlFile]) -> SumFile:
    """The sum file of ``files`` (a directory's :attr:`Directory.summed`)."""
    running = hashlib.sha256(b"ptah-sum v1").hexdigest()
    lines: list[SumLine] = []
    for f in files:
        h = hashlib.sha256()
        h.update(running.encode())
        h.update(b"\0")
        h.update(f.name.encode())
        h.update(b"\0")
        h.update(f.content)
        running = h.hexdigest()
        lines.append(SumLine(f.name, running))
    return SumFile(header=_header(lines), lines=tuple(lines))


def _header(lines: Sequence[SumLine]) -> str:
    text = "\n".join(f"{line.name} h1:{line.digest}" for line in lines)
    return hashlib.sha256(text.encode()).hexdigest()


def parse(text: str) -> SumFile:
    """Read a sum file; raise ValueError on anything but the exact format."""
    raw = [line for line in text.splitlines() if line.strip()]
    if not raw:
        raise ValueError(f"{SUM_FILE} is empty")
    first = raw[0].rsplit(" ", 1)
    if len(first) != 2 or first[0] != HEADER or not first[1].startswith("h1:"):
        raise ValueError(f"{SUM_FILE}: first line is not '{HEADER} h1:<hash>'")
    lines = []
    for number, line in enumerate(raw[1:], start=2):
        parts = line.rsplit(" ", 1)
        if len(parts) != 2 or not parts[1].startswith("h1:"):
            raise ValueError(f"{SUM_FILE}: line {number} is not '<file> h1:<hash>'")
        lines.append(SumLine(parts[0], parts[1][3:]))
    return SumFile(header=first[1][3:], lines=tuple(lines))


def problems(directory: Directory) -> list[str]:
    """Why the directory and its sum file disagree; empty when they agree.

    The first disagreement is classified (edited, inserted, removed, reordered) so a
    person sees what changed instead of "hash mismatch".
    """
    if directory.sum_text is None:
        return [f"no {SUM_FILE} in the directory; run `ptah migrate hash DIR`"]
    try:
        recorded = parse(directory.sum_text)
    except ValueError as exc:
        return [str(exc)]
    actual = compute(directory.summed)
    out: list[str] = []
    if _header(recorded.lines) != recorded.header:
        out.append(f"{SUM_FILE} header does not match its own lines (hand-edited?)")
    rec_names = [line.name for line in recorded.lines]
    act_names = [line.name for line in actual.lines]
    for i in range(max(len(rec_names), len(act_names))):
        rec = recorded.lines[i] if i < len(rec_names) else None
        act = actual.lines[i] if i < len(act_names) else None
        if rec == act:
            continue
        if rec is None and act is not None:
            out.append(f"{act.name}: added after the last file in {SUM_FILE}")
        elif act is None and rec is not None:
            out.append(f"{rec.name}: listed in {SUM_FILE} but missing from the directory")
        elif rec is not None and act is not None:
            if rec.name == act.name:
                out.append(f"{act.name}: edited since {SUM_FILE} was written")
            elif act.name not in rec_names:
                out.append(f"{act.name}: inserted before {rec.name}")
            elif rec.name not in act_names:
                out.append(f"{rec.name}: removed from the directory")
            else:
                out.append(f"{act.name}: reordered (expected {rec.name} here)")
        break
    return out


def write(directory: Directory) -> str:
    """Write the sum file where one already is, else into the first directory."""
    text = compute(directory.summed).render()
    holders = [p for p in directory.paths if (p / SUM_FILE).is_file()]
    for path in holders or [directory.paths[0]]:
        (path / SUM_FILE).write_text(text, encoding="utf-8")
    return text
