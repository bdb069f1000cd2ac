"""The runner's operations: identify, plan, apply, history, migrate. Each returns its frame.

Every operation is a plain function of the :class:`~ptah.runner.emit.Run` it is given
(the opened target, the operation's id and type, the log) and its own inputs; it returns
the payload of its one frame. Nothing here opens a target, prints, or catches what it
cannot name: :func:`ptah.runner.emit.run_operation` owns all of that, the same for every
operation, schema or versioned.

The engines (the planner, the versioned engine) are imported inside the operations that
use them, not here: ``ptah-runner`` imports this module before it connects, and its
start-up reaches the database first. Frames are plain JSON (``wire.payload``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ptah import failures
from ptah.engines.base import EngineError

if TYPE_CHECKING:
    from ptah.engines.model import Statement
    from ptah.runner.emit import Run
    from ptah.runner.wire import Payload


def identify(run: Run) -> Payload:
    return run.frame("succeeded")


# What may stand before a desired file's first statement: blanks, comments (``#`` too:
# MariaDB's, and no statement of another engine starts with it) and empty statements.
_NOTHING = re.compile(r"(?:\s+|--[^\n]*|#[^\n]*|/\*.*?\*/|;)*", re.DOTALL)


def read_desired(desired_file: str) -> str:
    """The desired schema file's text, for ``ptah plan``/``apply`` and the runner alike.

    A file that holds no statement (empty, blanks, comments) is refused: planned, it
    would drop every table, view and index of the database, and an empty file is far
    more often a truncated copy or a wrong path than that wish. Raises
    :class:`ptah.failures.Failure` (InputUnreadable, InputInvalid)."""
    from ptah.engines.splitter import read_sql

    try:
        sql = read_sql(desired_file)
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise failures.Failure(
            failures.INPUT_UNREADABLE, f"cannot read the desired schema file {desired_file}: {why}"
        ) from None
    head = _NOTHING.match(sql, 1 if sql.startswith("\ufeff") else 0)
    if head is not None and head.end() == len(sql):
        raise failures.Failure(
            failures.INPUT_INVALID,
            f"the desired schema file {desired_file} holds no SQL statement"
            " (planned, it would drop every object of the database)",
        )
    return sql


def plan(
    run: Run,
    desired_file: str,
    cache_dir: str | None,
    ownership: str = "ignore",
    ignore: Sequence[str] = (),
    offline: Sequence[str] = (),
) -> Payload:
    try:
        desired_sql = read_desired(desired_file)
    except failures.Failure as exc:
        return run.frame("failed", exc.failure.reason, {"message": str(exc)})
    from ptah.engines import planner
    from ptah.engines.model import Online, PlanError, SchemaPolicy

    try:
        policy = SchemaPolicy(
            ownership=ownership, ignore=tuple(ignore), online=Online.from_off(tuple(offline))
        )
        result = planner.plan(
            run.target, desired_sql, dev_url=run.dev_url, cache_dir=cache_dir, policy=policy
        )
    except (EngineError, PlanError) as exc:
        return run.frame("failed", exc.reason, {"message": run.target.scrub(str(exc))})
    data = result.to_json()
    if result.cache is not None:
        data["cache"] = result.cache  # what the re-plan cache gave this plan
    return run.frame("succeeded", data=data)


def _read_plan(plan_file: str) -> tuple[list[Statement], str, str]:
    from ptah.engines.model import Statement

    try:
        raw = json.loads(Path(plan_file).read_bytes().decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise ValueError("not JSON this reader can hold (nested too deeply)") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("statements"), list):
        raise ValueError("no list of statements")
    before, after = raw.get("fingerprintBefore"), raw.get("fingerprintAfter", "")
    if not isinstance(before, str) or not before or not isinstance(after, str):
        raise ValueError("fingerprintBefore (or fingerprintAfter) is not a string")
    return [Statement.from_json(s) for s in raw["statements"]], before, after


def apply(
    run: Run,
    plan_file: str,
    allow_destructive: bool,
    realm: str | None = None,
    lock_seconds: float | None = None,
    lock_retries: int | None = None,
    allow_lock_heavy: bool = True,
) -> Payload:
    """Apply the plan under the realm's fence (``realm``: the claim's, when given), each
    statement under its lock timeout and retries (the environment's, unless given)."""
    from ptah.engines import fence

    try:
        key = fence.realm_of(run.identity.digest, realm)
    except fence.WrongRealm as exc:
        return run.frame("refused", exc.reason, {"message": str(exc)})
    try:
        statements, before, expected_after = _read_plan(plan_file)
    except OSError as exc:
        message = f"cannot read the plan {plan_file}: {exc.strerror or exc}"
        return run.frame("failed", failures.INPUT_UNREADABLE.reason, {"message": message})
    except ValueError as exc:
        message = f"the plan {plan_file} is not valid: {exc}"
        return run.frame("failed", failures.INPUT_INVALID.reason, {"message": message})
    from ptah.engines import planner
    from ptah.engines.ops import timeouts_from_env

    result = planner.apply(
        run.target,
        statements,
        before,
        allow_destructive=allow_destructive,
        expected_after=expected_after,
        timeouts=timeouts_from_env(lock_seconds, lock_retries),
        realm=key,
        allow_lock_heavy=allow_lock_heavy,
    )
    return run.frame(result.outcome, result.reason, result.to_json())


def _unusable_directory(run: Run, exc: Exception) -> Payload:
    """The frame of a migration directory (or version) that cannot be used: nothing ran."""
    from ptah.engines.versioned.directory import DirectoryUnreadable

    if isinstance(exc, OSError):
        where = f" {exc.filename}" if exc.filename else ""
        reason, message = (
            failures.INPUT_UNREADABLE.reason,
            f"migration directory: cannot read{where}: {exc.strerror}",
        )
    elif isinstance(exc, DirectoryUnreadable):
        reason, message = failures.INPUT_UNREADABLE.reason, f"migration directory: {exc}"
    else:
        reason, message = failures.INPUT_INVALID.reason, str(exc)
    return run.frame("refused", reason, {"message": message})


def history(run: Run, dirs: Sequence[Path], baseline: str | None = None) -> Payload:
    """Read the history table in a read-only transaction and compare it with the directory."""
    from ptah.engines.versioned import sumfile
    from ptah.engines.versioned.apply import pending_refusal
    from ptah.engines.versioned.dialects import Session
    from ptah.engines.versioned.directory import DirectoryError, Version, read_directory
    from ptah.engines.versioned.history import compare

    try:
        directory = read_directory(list(dirs))
        below = Version.parse(baseline) if baseline else None
    except (DirectoryError, OSError, ValueError) as exc:
        return _unusable_directory(run, exc)
    session = Session(run.target.connection, run.target.engine, run.log)
    session.begin(read_only=True)
    try:
        exists = session.history_exists()
        rows = session.read_history() if exists else []
    finally:
        session.rollback()
    reading = compare(directory, rows, history_exists=exists, database_digest=run.identity.digest)
    refused = pending_refusal(session, directory, reading, below)
    if refused is not None:
        run.log(f"history refused: {refused[0]}: {refused[1]}")
        return run.frame("refused", refused[0], {"message": refused[1]})
    data = reading.to_data()
    problems = sumfile.problems(directory)
    data.update(
        directoryHash=sumfile.compute(directory.summed).header,
        sumFileOk=not problems,
        sumFileProblems=problems,
    )
    run.log(
        f"history: {len(reading.applied)} applied, {len(reading.pending)} pending, "
        f"{len(reading.dirty)} dirty, {len(reading.mismatched)} mismatched"
    )
    return run.frame("succeeded", "", data)


def migrate(
    run: Run,
    dirs: Sequence[Path],
    to: str | None,
    baseline: str | None,
    lock_timeout: float,
    realm: str | None,
) -> Payload:
    """Apply pending files; refusals and SQL failures are frames, not exit codes."""
    from ptah.engines.versioned.apply import MigrateOptions
    from ptah.engines.versioned.apply import migrate as run_migrate
    from ptah.engines.versioned.dialects import Session
    from ptah.engines.versioned.directory import DirectoryError, Version, read_directory

    try:
        directory = read_directory(list(dirs))
        opts = MigrateOptions(
            operation_id=run.operation_id,
            to=Version.parse(to) if to else None,
            baseline=Version.parse(baseline) if baseline else None,
            lock_timeout=lock_timeout,
            realm=realm,
        )
    except (DirectoryError, OSError, ValueError) as exc:
        return _unusable_directory(run, exc)
    session = Session(run.target.connection, run.target.engine, run.log)
    result = run_migrate(session, directory, run.identity, opts, run.log, run.target.scrub)
    if result.outcome != "succeeded":
        run.log(f"migrate {result.outcome}: {result.reason}: {result.message}")
    else:
        run.log(f"migrate succeeded: applied {', '.join(result.applied) or 'nothing'}")
    return run.frame(result.outcome, result.reason, result.to_data(opts))
