"""Apply pending migration files in order, recording progress so no run is ever lost.

Order of a run, and why:

1. Check the directory against ``ptah.sum`` and split every file *before* taking
   any lock or touching the database: a broken directory is refused whole.
2. Take the realm's fence (:mod:`ptah.engines.fence`), the lock in the database
   that every mutating run holds for its whole run; a run that cannot take it is
   ``fenced`` and has touched nothing.
3. Read history and refuse on anything a person must look at first: a dirty row,
   an edited applied file, an applied version missing from the directory, a
   pending file below the highest applied one, or a non-empty database without
   history and without an explicit baseline. The history table is created only
   after these checks, so a refused run leaves the database untouched.
4. One file at a time. Where the engine can (PostgreSQL, SQLite), a file and its
   history row commit in one transaction: a killed run leaves nothing, and the
   file is simply pending again. Where it cannot (any MariaDB file, a
   ``-- ptah:no-transaction`` file), the row is written first and updated before
   and after every statement, so a killed run is found as *dirty* next time with
   the statement it stopped at.

On SQLite each iteration also re-reads history inside a ``BEGIN EXCLUSIVE``
transaction and applies the file in that same transaction, so a writer outside
Ptah cannot slip between the reading and the file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ptah.engines import fence
from ptah.engines.ops import timeouts_from_env
from ptah.engines.report import bounded
from ptah.engines.splitter import SplitError, Statement, split_statements
from ptah.engines.versioned import confine, sumfile
from ptah.engines.versioned.dialects import Session
from ptah.engines.versioned.directory import Directory, MigrationFile, SqlFile, Version
from ptah.engines.versioned.history import REPEATABLE, Reading, compare, dirty_entry, repeatable_key

if TYPE_CHECKING:  # annotations only
    from ptah.engines.report import DatabaseIdentity, Outcome

Progress = Callable[[str], None]
# BEGIN/COMMIT/ROLLBACK/END/START TRANSACTION as whole statements (BEGIN ATOMIC bodies
# and "BEGIN NOT ATOMIC" compound statements are not transaction control).
_TX_CONTROL = re.compile(
    r"^\s*(BEGIN(\s+(WORK|TRANSACTION|ISOLATION|READ|DEFERRED|IMMEDIATE|EXCLUSIVE)\b.*)?"
    r"|COMMIT\b.*|ROLLBACK\b.*|END(\s+(WORK|TRANSACTION))?|START\s+TRANSACTION\b.*"
    r"|SAVEPOINT\b.*|RELEASE\b.*)\s*$",
    re.IGNORECASE | re.DOTALL,
)


def runner_version() -> str:
    from importlib import metadata  # it scans site-packages: only when a row is written

    try:
        return metadata.version("ptah")
    except metadata.PackageNotFoundError:
        return "0+unknown"


@dataclass
class MigrateOptions:
    operation_id: str
    to: Version | None = None
    baseline: Version | None = None
    lock_timeout: float = 0.0  # how long to wait for the realm's fence
    realm: str | None = None  # the claim's realm ($PTAH_REALM); default: the opened one


@dataclass
class MigrateResult:
    """What a run did; ``to_data`` is the frame payload."""

    outcome: Outcome = "succeeded"
    reason: str = ""
    message: str = ""
    applied: list[str] = field(default_factory=list)
    repeatables_applied: list[str] = field(default_factory=list)
    statements_executed: int = 0
    partial: dict[str, Any] | None = None
    failure: dict[str, Any] | None = None
    reading: Reading | None = None
    directory_hash: str = ""
    baseline_recorded: str | None = None
    details: list[str] = field(default_factory=list)

    def to_data(self, opts: MigrateOptions) -> dict[str, Any]:
        return {
            "applied": list(self.applied),
            "repeatablesApplied": list(self.repeatables_applied),
            "statementsExecuted": self.statements_executed,
            "partial": self.partial,
            "failure": self.failure,
            "message": self.message,
            "details": list(self.details),
            "target": str(opts.to) if opts.to else None,
            "baselineRecorded": self.baseline_recorded,
            "directoryHash": self.directory_hash,
            "history": self.reading.to_data() if self.reading else None,
        }


class _Refused(Exception):
    def __init__(
        self,
        reason: str,
        message: str,
        details: list[str] | None = None,
        outcome: Outcome = "refused",
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.details = details or []
        self.outcome: Outcome = outcome


def split_directory(directory: Directory, dialect: Any) -> dict[str, list[Statement]]:
    """Every runnable file's statements by file name, or _Refused naming the file that
    cannot be split (undo files are never run, so never split)."""
    return {f.name: _split(f, dialect) for f in (*directory.files, *directory.repeatables)}


def _split(f: SqlFile, dialect: Any) -> list[Statement]:
    try:
        stmts = split_statements(f.text, dialect)
    except SplitError as exc:
        raise _Refused("InvalidMigration", f"{f.name}: {exc}") from None
    # A -- ptah:no-transaction file on PostgreSQL/SQLite runs in autocommit and may
    # manage its own transactions; everywhere else the runner owns them.
    if f.transactional or dialect == "mysql":
        _refuse_tx_control(f, stmts)
    return stmts


def _to_run(
    directory: Directory, reading: Reading, to: Version | None, baseline: Version | None
) -> list[SqlFile]:
    """The files a run would apply after ``reading``, in order: the pending versions up
    to ``to`` (above ``baseline`` where the run would record one: no history yet), then
    the pending repeatables."""
    by_version = directory.by_version()
    by_name = {f.name: f for f in directory.repeatables}
    below = baseline if not reading.rows else None
    files: list[SqlFile] = []
    for text in reading.pending:
        v = Version.parse(text)
        if to is not None and v > to:
            break
        if below is None or v > below:
            files.append(by_version[v])
    return files + [by_name[name] for name in reading.repeatables_pending if name in by_name]


def _confine(
    session: Session, files: list[SqlFile], statements: dict[str, list[Statement]]
) -> None:
    try:
        confine.check(session, [(f.name, statements[f.name]) for f in files])
    except confine.MigrationRefused as exc:
        raise _Refused(exc.reason, str(exc)) from None


def pending_refusal(
    session: Session, directory: Directory, reading: Reading, baseline: Version | None = None
) -> tuple[str, str] | None:
    """(reason, message) when a file ``reading`` has pending would be refused by a run
    (it cannot be split, holds transaction control, or reaches outside the target
    database: :mod:`.confine`), else None: the History reading refuses the plan of such
    a directory before anything runs, as Apply would."""
    files = _to_run(directory, reading, None, baseline)
    try:
        _confine(session, files, {f.name: _split(f, session.dialect) for f in files})
    except _Refused as exc:
        return exc.reason, str(exc)
    return None


def _refuse_tx_control(f: SqlFile, stmts: list[Statement]) -> None:
    for stmt in stmts:
        if _TX_CONTROL.match(stmt.text):
            raise _Refused(
                "InvalidMigration",
                f"{f.name} line {stmt.line}: transaction control ({stmt.text[:20]!r}) "
                "would end the runner's own transaction and split the file from its "
                "history row; remove it (each file already runs in one transaction "
                "where the engine allows)",
            )


def _refusal(reading: Reading, baseline: Version | None, empty: Callable[[], bool]) -> None:
    if reading.dirty:
        d = reading.dirty[0]
        raise _Refused(
            "Dirty",
            f"version {d['version']} stopped at statement {d['statement']} of {d['total']} "
            f"({d['state']}); resolve it (`ptah migrate resolve`) before migrating",
            [json.dumps(x, sort_keys=True) for x in reading.dirty],
        )
    if reading.mismatched:
        raise _Refused(
            "ChecksumMismatch",
            "applied files were edited: " + ", ".join(m["version"] for m in reading.mismatched),
        )
    if reading.missing_from_directory:
        raise _Refused(
            "MissingFromDirectory",
            "applied versions are not in the directory: "
            + ", ".join(reading.missing_from_directory),
        )
    late = [o["version"] for o in reading.out_of_order if o["state"] == "pending"]
    if late:
        raise _Refused(
            "OutOfOrder",
            "pending files are older than applied ones: " + ", ".join(late),
        )
    if not reading.rows and baseline is None and not empty():
        raise _Refused(
            "NeedsBaseline",
            "the database has objects but no migration history; "
            "pass --baseline VERSION (the version its schema already matches)",
        )


def _error_text(exc: BaseException, scrub: Callable[[str], str]) -> str:
    return bounded(scrub(f"{type(exc).__name__}: {exc}".strip()))


class _Run:
    def __init__(
        self,
        session: Session,
        directory: Directory,
        identity: DatabaseIdentity,
        opts: MigrateOptions,
        progress: Progress,
        scrub: Callable[[str], str],
    ) -> None:
        self.s = session
        self.directory = directory
        self.identity = identity
        self.opts = opts
        self.progress = progress
        self.scrub = scrub
        self.result = MigrateResult()
        self.statements: dict[str, list[Statement]] = {}

    def row(self, f: SqlFile, total: int, rank: int, kind: str = "migration") -> dict[str, Any]:
        key = json.dumps({"engine": self.identity.engine, "key": self.identity.key}, sort_keys=True)
        return {
            "version": _history_key(f, rank),
            "description": f.description[:512],
            "script": f.name[:512],
            "kind": kind if isinstance(f, MigrationFile) else REPEATABLE,
            "checksum": f.checksum,
            "transactional": 1,
            "statements_total": total,
            "statements_applied": 0,
            "statement_running": None,
            "installed_rank": rank,
            "started_at": self.s.now(),
            "finished_at": None,
            "error": None,
            "runner_version": runner_version()[:64],
            "database_digest": self.identity.digest,
            "database_identity": key,
            "operation_id": self.opts.operation_id[:253],
        }

    def read(self) -> Reading:
        exists = self.s.history_exists()
        rows = self.s.read_history() if exists else []
        return compare(self.directory, rows, history_exists=exists)

    def run(self) -> MigrateResult:
        r = self.result
        r.directory_hash = sumfile.compute(self.directory.summed).header
        problems = sumfile.problems(self.directory)
        if problems:
            missing = self.directory.sum_text is None
            raise _Refused(
                "SumFileMissing" if missing else "SumFileMismatch", problems[0], problems
            )
        self.statements = split_directory(self.directory, self.s.dialect)
        versions = {f.version for f in self.directory.files}
        if self.opts.to is not None and self.opts.to not in versions:
            raise _Refused("UnknownTarget", f"version {self.opts.to} is not in the directory")
        try:
            key = fence.realm_of(self.identity.digest, self.opts.realm)
        except fence.WrongRealm as exc:
            raise _Refused(exc.reason, str(exc)) from None
        if self.s.dialect == "sqlite":
            self.s.execute(f"PRAGMA busy_timeout = {int(timeouts_from_env().lock_seconds * 1000)}")
        try:
            with fence.held(self.s.dialect, self.s.conn, key, wait=self.opts.lock_timeout):
                self._loop()
        except fence.RealmBusy as exc:
            raise _Refused(exc.reason, str(exc), outcome="fenced") from None
        return r

    def _loop(self) -> None:
        lite = self.s.dialect == "sqlite"
        created = False
        while True:
            if lite:
                try:
                    self.s.begin_exclusive()
                except Exception as exc:
                    if "locked" in str(exc) or "busy" in str(exc):
                        raise _Refused("LockBusy", "the SQLite database stayed locked") from None
                    raise
            try:
                reading = self.read()
                self.result.reading = reading
                _refusal(reading, self.opts.baseline, self.s.database_is_empty)
                if not created:
                    # Before anything is written: every file this run would apply stays in
                    # the target database (:mod:`.confine`), or none runs.
                    files = _to_run(self.directory, reading, self.opts.to, self.opts.baseline)
                    _confine(self.s, files, self.statements)
                    self.s.create_history()
                    created = True
                if not reading.rows and self.opts.baseline is not None:
                    self._record_baseline(self.opts.baseline)
                    reading = self.read()
                    self.result.reading = reading
                nxt = self._next(reading)
                if nxt is None:
                    if lite:
                        self.s.commit()
                    return
                rank = 1 + max((int(x["installed_rank"]) for x in reading.rows), default=0)
            except BaseException:
                if lite:
                    self.s.rollback()
                raise
            self._apply(nxt, rank)
            if self.result.failure is not None:
                return

    def _next(self, reading: Reading) -> SqlFile | None:
        """The next pending version up to ``--to``; after the versions, the next repeatable."""
        by_version = self.directory.by_version()
        for text in reading.pending:
            v = Version.parse(text)
            if self.opts.to is not None and v > self.opts.to:
                break
            return by_version[v]
        by_name = {f.name: f for f in self.directory.repeatables}
        for name in reading.repeatables_pending:
            return by_name[name]
        return None

    def _record_baseline(self, version: Version) -> None:
        f = MigrationFile(
            version=version,
            description="<< baseline >>",
            name="<< baseline >>",
            path=self.directory.paths[0],
            content=b"",
        )
        values = self.row(f, 0, 0, kind="baseline")
        values["checksum"] = ""
        values["finished_at"] = values["started_at"]
        self.s.insert_history(values)
        self.result.baseline_recorded = str(version)
        self.progress(f"baseline recorded at version {version}")

    def _apply(self, f: SqlFile, rank: int) -> None:
        stmts = self.statements[f.name]
        transactional = f.transactional and self.s.dialect != "mysql"
        mode = "one transaction" if transactional else "statement by statement"
        self.progress(f"applying {f.name}: {len(stmts)} statements, {mode}")
        if transactional:
            self._apply_transactional(f, stmts, rank)
        else:
            self._apply_stepwise(f, stmts, rank)

    def _done(self, f: SqlFile, count: int) -> None:
        if isinstance(f, MigrationFile):
            self.result.applied.append(str(f.version))
        else:
            self.result.repeatables_applied.append(f.name)
        self.result.statements_executed += count

    def _apply_transactional(self, f: SqlFile, stmts: list[Statement], rank: int) -> None:
        r = self.result
        if self.s.dialect != "sqlite":  # SQLite is already inside BEGIN EXCLUSIVE
            self.s.begin()
        index = 0
        try:
            row = self.row(f, len(stmts), rank)
            for stmt in stmts:
                index += 1
                self.s.run_migration_sql(stmt.text)
            row.update(statements_applied=len(stmts), finished_at=self.s.now())
            self.s.insert_history(row)
            self.s.commit()
        except Exception as exc:
            self.s.rollback()
            error = _error_text(exc, self.scrub)
            self.progress(f"{f.name}: statement {index} failed, file rolled back: {error}")
            r.outcome, r.reason = "failed", "StatementFailed"
            r.message = f"{f.name} statement {index} (line {stmts[index - 1].line}) failed"
            r.failure = {
                "version": _history_key(f, rank),
                "script": f.name,
                "statement": index,
                "total": len(stmts),
                "line": stmts[index - 1].line if index else None,
                "error": error,
                "rolledBack": True,
            }
            return
        self._done(f, len(stmts))

    def _apply_stepwise(self, f: SqlFile, stmts: list[Statement], rank: int) -> None:
        r = self.result
        s = self.s
        version = _history_key(f, rank)
        row = self.row(f, len(stmts), rank)
        row["transactional"] = 0
        s.insert_history(row)
        if s.dialect == "sqlite":
            s.commit()  # the claim is durable before the first statement runs
        for index, stmt in enumerate(stmts, start=1):
            s.update_history(version, statement_running=index)
            try:
                if s.dialect == "mysql":
                    # DML commits together with its progress; DDL commits on its own.
                    s.begin()
                s.run_migration_sql(stmt.text)
                s.update_history(version, statements_applied=index, statement_running=None)
                if s.dialect == "mysql":
                    s.commit()
            except Exception as exc:
                error = _error_text(exc, self.scrub)
                if s.dialect == "mysql":
                    s.rollback()
                self.progress(f"{f.name}: statement {index} of {len(stmts)} failed: {error}")
                try:
                    s.update_history(version, error=error)
                except Exception as exc2:
                    self.progress(f"could not record the error: {_error_text(exc2, self.scrub)}")
                r.outcome, r.reason = "failed", "StatementFailed"
                r.message = (
                    f"{f.name} statement {index} of {len(stmts)} (line {stmt.line}) failed; "
                    "the file is partially applied"
                )
                r.statements_executed += index - 1
                rows = {str(x["version"]): x for x in s.read_history()}
                r.partial = dirty_entry(rows[version]) if version in rows else None
                r.failure = {
                    "version": version,
                    "script": f.name,
                    "statement": index,
                    "total": len(stmts),
                    "line": stmt.line,
                    "error": error,
                    "rolledBack": False,
                }
                return
            self.progress(f"{f.name}: statement {index}/{len(stmts)} done")
        s.update_history(version, finished_at=s.now())
        self._done(f, len(stmts))


def _history_key(f: SqlFile, rank: int) -> str:
    """A versioned file's row is keyed by its version; a repeatable's by its rank."""
    return str(f.version) if isinstance(f, MigrationFile) else repeatable_key(rank)


def migrate(
    session: Session,
    directory: Directory,
    identity: DatabaseIdentity,
    opts: MigrateOptions,
    progress: Progress,
    scrub: Callable[[str], str],
) -> MigrateResult:
    """Apply what is pending up to ``opts.to``; never raises for refusals or SQL errors."""
    run = _Run(session, directory, identity, opts, progress, scrub)
    try:
        result = run.run()
    except _Refused as exc:
        result = run.result
        result.outcome, result.reason, result.message = exc.outcome, exc.reason, str(exc)
        result.details = exc.details
        if exc.reason == "Dirty" and result.reading is not None and result.reading.dirty:
            result.partial = result.reading.dirty[0]  # where the earlier run stopped
        return result
    if result.outcome == "succeeded":
        try:
            result.reading = run.read()
        except Exception as exc:  # the work is done; a failed re-read must not hide it
            progress(f"could not re-read history: {_error_text(exc, scrub)}")
    return result
