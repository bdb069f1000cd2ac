"""Read a migration directory: file names, versions, directives, and the merge of several.

A directory inside a runner Pod is assembled from one or more ConfigMaps (each is
capped at 1 MiB), so the reader accepts several paths and merges them. A version
that appears twice is an error, never a silent pick: which file "wins" would depend
on mount order.

Two naming schemes are accepted:

* Ptah's ``<version>_<description>.sql`` where version is dotted digits
  (``0001_init.sql``, ``2.1_add_index.sql``);
* Flyway's ``V<version>__<description>.sql`` where parts may be separated by ``.``
  or ``_`` (``V1_1__init.sql`` is version 1.1).

Beside them, as Flyway directories have them: *repeatable* files
``R__<description>.sql`` (no version; applied after the versioned ones, in name
order, whenever their checksum changes) and *undo* files
``U<version>__<description>.sql``, which are read, reported and covered by the
sum file but never run (Ptah does not undo).

Versions compare numerically part by part, and trailing zero parts do not count
(``1``, ``01`` and ``1.0`` are the same version, hence a duplicate). The canonical
spelling (``1.2``) is what the history table records.

Files whose name starts with ``.`` are skipped: Kubernetes mounts a ConfigMap with
``..data`` and timestamped hidden directories beside the real keys.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

SUM_FILE = "ptah.sum"
DIRECTIVE_PREFIX = "ptah:"
NO_TRANSACTION = "no-transaction"
KNOWN_DIRECTIVES = frozenset({NO_TRANSACTION})

_PTAH_NAME = re.compile(r"^(?P<version>\d+(?:\.\d+)*)_(?P<description>[^/]+)\.sql$")
_FLYWAY_NAME = re.compile(r"^V(?P<version>\d+(?:[._]\d+)*)__(?P<description>[^/]+)\.sql$")
_REPEATABLE_NAME = re.compile(r"^R__(?P<description>[^/]+)\.sql$")
_UNDO_NAME = re.compile(r"^U\d+(?:[._]\d+)*__(?P<description>[^/]+)\.sql$")
_DIRECTIVE = re.compile(r"^--\s*ptah:(?P<name>[A-Za-z0-9_-]+)\s*$")


class DirectoryError(ValueError):
    """The directory cannot be read as a migration directory; the message says which file."""


class DirectoryUnreadable(DirectoryError):
    """The directory is missing, not a directory, or cannot be listed."""


@dataclass(frozen=True, order=True)
class Version:
    """A migration version: numeric parts, trailing zeros dropped, ordered as a tuple."""

    parts: tuple[int, ...]

    @classmethod
    def parse(cls, text: str) -> Version:
        pieces = re.split(r"[._]", text.strip())
        if not pieces or not all(p.isdigit() for p in pieces):
            raise ValueError(f"not a version: {text!r} (expected digits separated by dots)")
        parts = [int(p) for p in pieces]
        while len(parts) > 1 and parts[-1] == 0:
            parts.pop()
        return cls(tuple(parts))

    def __str__(self) -> str:
        return ".".join(str(p) for p in self.parts)


@dataclass(frozen=True, kw_only=True)
class SqlFile:
    """One file of the directory, with its content and directives."""

    description: str
    name: str
    path: Path
    content: bytes
    directives: frozenset[str] = field(default_factory=frozenset)

    @property
    def checksum(self) -> str:
        """sha256 of the bytes as stored: what the history table records per file."""
        return hashlib.sha256(self.content).hexdigest()

    @property
    def transactional(self) -> bool:
        return NO_TRANSACTION not in self.directives

    @property
    def text(self) -> str:
        return self.content.decode("utf-8-sig")


@dataclass(frozen=True, kw_only=True)
class MigrationFile(SqlFile):
    """One versioned migration file."""

    version: Version


@dataclass(frozen=True)
class Directory:
    """The merged directory: versioned files in version order, repeatable and undo
    files in name order, and the sum file text if one exists."""

    paths: tuple[Path, ...]
    files: tuple[MigrationFile, ...]
    sum_text: str | None
    repeatables: tuple[SqlFile, ...] = ()
    undo: tuple[SqlFile, ...] = ()

    def by_version(self) -> dict[Version, MigrationFile]:
        return {f.version: f for f in self.files}

    @property
    def summed(self) -> tuple[SqlFile, ...]:
        """Every file the sum file covers, in its order: versioned, repeatable, undo."""
        return (*self.files, *self.repeatables, *self.undo)


def parse_name(name: str) -> tuple[Version, str] | None:
    """Version and description for a migration file name, or None if it is not one."""
    for pattern in (_PTAH_NAME, _FLYWAY_NAME):
        match = pattern.match(name)
        if match:
            version = Version.parse(match.group("version"))
            description = match.group("description").replace("_", " ").strip()
            return version, description
    return None


def parse_directives(text: str, name: str) -> frozenset[str]:
    """``-- ptah:<name>`` lines in the leading comment block of a file.

    Only the leading block counts, so a directive cannot hide half-way down a file.
    An unknown directive is an error: a typo in ``no-transaction`` would otherwise
    run CONCURRENTLY inside a transaction and fail only at apply time.
    """
    found: set[str] = set()
    for raw in text.lstrip("\ufeff").splitlines():
        line = raw.strip()
        if not line:
            continue
        if not line.startswith("--"):
            break
        match = _DIRECTIVE.match(line)
        if match:
            directive = match.group("name")
            if directive not in KNOWN_DIRECTIVES:
                known = ", ".join(sorted(KNOWN_DIRECTIVES))
                raise DirectoryError(f"{name}: unknown directive ptah:{directive} (known: {known})")
            found.add(directive)
    return frozenset(found)


def _read_file(entry: Path) -> tuple[bytes, str]:
    content = entry.read_bytes()
    try:
        return content, content.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DirectoryError(f"{entry}: not UTF-8 ({exc.reason})") from exc


@dataclass
class _Listing:
    files: list[MigrationFile] = field(default_factory=list)
    repeatables: list[SqlFile] = field(default_factory=list)
    undo: list[SqlFile] = field(default_factory=list)
    sum_text: str | None = None


def _read_one(path: Path) -> _Listing:
    if not path.is_dir():
        missing = "does not exist" if not path.exists() else "not a directory"
        raise DirectoryUnreadable(f"{path}: {missing}")
    try:
        entries = sorted(path.iterdir(), key=lambda p: p.name)
    except OSError as exc:
        raise DirectoryUnreadable(f"{path}: cannot list it: {exc.strerror}") from None
    out = _Listing()
    for entry in entries:
        name = entry.name
        if name.startswith(".") or not entry.is_file():
            continue
        if name == SUM_FILE:
            out.sum_text = entry.read_text(encoding="utf-8")
            continue
        if not name.endswith(".sql"):
            continue
        other = _REPEATABLE_NAME.match(name) or _UNDO_NAME.match(name)
        if other:
            content, text = _read_file(entry)
            unversioned = SqlFile(
                description=other.group("description").replace("_", " ").strip(),
                name=name,
                path=entry,
                content=content,
                directives=parse_directives(text, name),
            )
            (out.repeatables if name.startswith("R") else out.undo).append(unversioned)
            continue
        parsed = parse_name(name)
        if parsed is None:
            raise DirectoryError(
                f"{entry}: not a migration file name; expected <version>_<description>.sql, "
                "V<version>__<description>.sql, R__<description>.sql or "
                "U<version>__<description>.sql"
            )
        content, text = _read_file(entry)
        version, description = parsed
        out.files.append(
            MigrationFile(
                version=version,
                description=description,
                name=name,
                path=entry,
                content=content,
                directives=parse_directives(text, name),
            )
        )
    return out


def read_directory(paths: list[Path] | tuple[Path, ...] | Path) -> Directory:
    """Read and merge one or more directories; duplicate versions, duplicate repeatable
    names and differing sum files conflict."""
    if isinstance(paths, Path):
        paths = (paths,)
    paths = tuple(paths)
    if not paths:
        raise DirectoryError("no migration directory given")
    seen: dict[Version, MigrationFile] = {}
    named: dict[str, SqlFile] = {}
    sums: list[tuple[Path, str]] = []
    for path in paths:
        listing = _read_one(path)
        for f in listing.files:
            other = seen.get(f.version)
            if other is not None:
                raise DirectoryError(
                    f"version {f.version} appears twice: {other.path} and {f.path}"
                )
            seen[f.version] = f
        for u in [*listing.repeatables, *listing.undo]:
            twin = named.get(u.name)
            if twin is not None:
                raise DirectoryError(f"{u.name} appears twice: {twin.path} and {u.path}")
            named[u.name] = u
        if listing.sum_text is not None:
            sums.append((path, listing.sum_text))
    if len({text for _, text in sums}) > 1:
        where = ", ".join(str(p / SUM_FILE) for p, _ in sums)
        raise DirectoryError(f"different {SUM_FILE} files in the merged directories: {where}")
    ordered = tuple(sorted(seen.values(), key=lambda f: f.version))
    by_name = sorted(named.values(), key=lambda f: f.name)
    return Directory(
        paths=paths,
        files=ordered,
        sum_text=sums[0][1] if sums else None,
        repeatables=tuple(f for f in by_name if f.name.startswith("R")),
        undo=tuple(f for f in by_name if f.name.startswith("U")),
    )
