"""Engine-neutral planning and applying, shared by the runner and `ptah plan/apply`.

``plan`` normalises the desired DDL (or reuses a cached normalisation keyed by
the source digest and the server version), inspects the target read-only,
diffs, and fingerprints both sides; with a cache, a plan whose source, target
probe, online policy and engines' code match a kept one is that plan again (only the
target's probe is read). ``apply`` runs a plan only on the schema it was computed
against.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ptah.engines import confine, fence
from ptah.engines.base import NothingRan, Target
from ptah.engines.model import (
    DESTRUCTIVE,
    LOCK_HEAVY,
    IgnoredInDesired,
    Plan,
    PlanError,
    Schema,
    SchemaPolicy,
    Statement,
    fingerprint,
    ignore_matcher,
)
from ptah.engines.ops import DriftedError, Progress, Timeouts, ops_for, timeouts_from_env
from ptah.engines.report import bounded
from ptah.engines.urls import DbUrl

# Bump when inspection output changes shape: cached normalisations become stale.
INSPECTOR_VERSION = "2"


def _sources_digest(paths: list[Path]) -> str | None:
    """A digest of the files ``paths`` (names and contents); None when there are none or
    one cannot be read, and then nothing keyed by it is cached."""
    h = hashlib.sha256()
    try:
        for path in paths:
            h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    except OSError:
        return None
    return h.hexdigest() if paths else None


def _code_digest(names: tuple[str, ...]) -> str | None:
    """A digest of the source of the modules ``names`` (see :func:`_sources_digest`)."""
    import importlib.util

    paths = []
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            return None
        paths.append(Path(spec.origin))
    return _sources_digest(paths)


def _confinement_digest(engine: str) -> str | None:
    """A digest of the confinement code that judges ``engine``'s sources (the shared rules,
    the engine's own, the splitter they read statements with); None when it cannot be
    read, and then a cached normalisation is checked again like any source."""
    return _code_digest(
        ("ptah.engines.confine", f"ptah.engines.{engine}.confine", "ptah.engines.splitter")
    )


def _inspection_digest(ops: Any) -> str | None:
    """A digest of the code a cached inspection came from (the engine's inspector and
    the fingerprint), so a changed inspector never reuses what the old one read."""
    modules = tuple(getattr(ops, "inspect_modules", ()))
    return _code_digest((*modules, "ptah.engines.model")) if modules else None


def _cache_path(cache_dir: str, key: str) -> Path:
    return Path(cache_dir) / f"desired-{key}.json"


def _load_cache(path: Path) -> tuple[Schema, list[str], str | None] | None:
    try:
        raw = json.loads(path.read_text())
        fp = raw.get("fingerprint")
        return raw["schema"], list(raw.get("warnings", [])), fp if isinstance(fp, str) else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


# Entries a cache directory keeps (the newest written); one shared by many targets
# would otherwise grow by one inspection per schema change, forever.
CACHE_ENTRIES = 256


def _store_cache(path: Path, schema: Schema, warnings: list[str], fp: str) -> None:
    _write_entry(path, {"schema": schema, "warnings": warnings, "fingerprint": fp})


def _write_entry(path: Path, entry: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Every runner is PID 1 in its container, and runners share one cache volume: the
        # temporary name is this writer's alone, so two writers never interleave one file.
        tmp = path.with_suffix(f".{os.getpid()}-{os.urandom(6).hex()}.tmp")
        # Compact, and without the encoder's cycle check (an entry is a tree read from a
        # server or a file): half the time of the default dump, 0.07 s -> 0.04 s for the
        # inspection of 1,000 tables, on the plan's path for the desired side's entry.
        tmp.write_text(json.dumps(entry, separators=(",", ":"), check_circular=False))
        tmp.replace(path)
        _prune(path.parent)
    except OSError:
        pass  # a cache that cannot be written only costs time


def _prune(directory: Path) -> None:
    """Drop the oldest entries past :data:`CACHE_ENTRIES` (a dropped entry costs one
    full reading; another runner pruning at once only finds some already gone)."""
    entries = []
    for entry in directory.glob("*.json"):
        with contextlib.suppress(OSError):
            entries.append((entry.stat().st_mtime, entry))
    for _, entry in sorted(entries, reverse=True)[CACHE_ENTRIES:]:
        entry.unlink(missing_ok=True)


@dataclass
class _Side:
    """One side of a plan: the schema, its fingerprint when a cache already had it, and
    where to keep both when it was not cached (None: nothing to store)."""

    schema: Schema
    fingerprint: str | None = None
    store: Path | None = None
    warnings: list[str] = field(default_factory=list)
    cached: bool = False
    settle_seconds: float = 0.0
    # The cache key this side was read under (None: not keyed), for the plan's own entry.
    key: str | None = None

    def settle(self) -> str:
        """The fingerprint; a side read afresh is stored with it (once: settling again
        only gives the fingerprint)."""
        if self.fingerprint is None:
            self.fingerprint = fingerprint(self.schema)
        if self.store is not None:
            _store_cache(self.store, self.schema, self.warnings, self.fingerprint)
            self.store = None
        return self.fingerprint


# Plans running in this process, and whether the cyclic collector was on before the first.
_collector = {"plans": 0, "was_on": False}
_collector_lock = threading.Lock()


@contextlib.contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """The cyclic garbage collector paused while a plan runs (reference counting still
    frees everything else at once). A plan makes millions of small objects, none of them
    in cycles: the words of every statement the check reads, two inspections, the diff.
    The collector traverses every live object at each of its older generations' runs,
    and those come more often the more objects a plan keeps: at 1,000 tables it took a
    fifth of the confinement check's time, at 10,000 more. It is switched back on when
    the last plan running in this process returns."""
    with _collector_lock:
        if _collector["plans"] == 0:
            _collector["was_on"] = gc.isenabled()
            gc.disable()
        _collector["plans"] += 1
    try:
        yield
    finally:
        with _collector_lock:
            _collector["plans"] -= 1
            if _collector["plans"] == 0 and _collector["was_on"]:
                gc.enable()


def plan(
    target: Target,
    desired_sql: str,
    dev_url: DbUrl | None = None,
    cache_dir: str | None = None,
    policy: SchemaPolicy | None = None,
) -> Plan:
    """The statements that take ``target`` to ``desired_sql``; the target is only read.

    No statement of the desired source runs before the check passed it
    (:mod:`ptah.engines.confine`): a statement that acts outside one database is
    refused, runs nowhere, and the plan is refused (an engine may create its empty
    scratch meanwhile, ``reserve_scratch``; one that checks the source itself,
    ``confines_while_loading``, loads each part of it once the check passed it, and
    drops the scratch with what it ran on a refusal). A cached
    normalisation is keyed by the source and by the confinement code that passed
    it, so a cache hit repeats a verdict this same code gave this same source (and
    runs nothing of it) instead of tokenizing the whole file again; any other cache
    key is checked first.
    """
    with _no_cycle_collection():
        return _plan_settled(target, desired_sql, dev_url, cache_dir, policy)


def _plan_settled(
    target: Target,
    desired_sql: str,
    dev_url: DbUrl | None,
    cache_dir: str | None,
    policy: SchemaPolicy | None,
) -> Plan:
    """:func:`plan`, its scratch dropped before it returns."""
    ops = ops_for(target)
    settle = getattr(ops, "settle", lambda: None)
    try:
        plan = _plan(ops, target, desired_sql, dev_url, cache_dir, policy or SchemaPolicy())
    except BaseException:
        with contextlib.suppress(Exception):  # the plan's own failure is the one to report
            settle()
        raise
    # A scratch the engine drops behind the plan is gone before the plan is returned.
    t0 = time.perf_counter()
    settle()
    plan.timings["waitScratchDrop"] = time.perf_counter() - t0
    return plan


def _plan(
    ops: Any,
    target: Target,
    desired_sql: str,
    dev_url: DbUrl | None,
    cache_dir: str | None,
    policy: SchemaPolicy,
) -> Plan:
    reused_plan = _reused_plan(ops, target, desired_sql, cache_dir, policy)
    if reused_plan is not None:
        return reused_plan
    timings: dict[str, float] = {}
    # Reading the target runs nothing of the source, so an engine whose target reading
    # uses its own connection reads it while the source is normalised: while the server
    # loads the scratch and the client only waits. It starts once the source is confined
    # (or found in the cache), not before: the confinement check is pure Python on the
    # plan's critical path, and a reading beside it would take its share of the
    # interpreter (at 1,000 tables the check took twice its own time).
    pool = ThreadPoolExecutor(1) if getattr(ops, "concurrent_inspect", False) else None
    reading: list[Future[tuple[_Side, float, bool]]] = []

    def start_reading() -> None:
        if pool is not None and not reading:
            reading.append(pool.submit(_read_target, ops, target, cache_dir))

    try:
        t0 = time.perf_counter()
        desired = _desired(
            ops, target, desired_sql, dev_url, cache_dir, timings, policy, start_reading
        )
        t1 = time.perf_counter()
        start_reading()
        current, inspect_seconds, reused = (
            reading[0].result() if reading else _read_target(ops, target, cache_dir)
        )
        t2 = time.perf_counter()
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
    timings.update(normalise=t1 - t0, inspect=inspect_seconds, waitInspect=t2 - t1)
    timings["targetFingerprint"] = current.settle_seconds
    if reused:
        timings["inspectionReused"] = 1.0
    t2 = time.perf_counter()
    # Managed objects spec.policy.ignore covers: refused in the desired source, taken out
    # of the target's schema for the diff, reported, and expected unchanged after apply.
    target_schema, left_alone, ignored = _split_ignored(ops, current.schema, desired.schema, policy)
    online = policy.online
    statements = ops.diff(target_schema, desired.schema, online)
    timings["diff"] = time.perf_counter() - t2
    warnings = list(desired.warnings)
    # What the plan cannot make as a direct load of the desired source would (an engine
    # that can say: PostgreSQL's column order), said rather than left silent.
    caveats = getattr(ops, "caveats", None)
    if caveats is not None:
        warnings += caveats(target_schema, desired.schema, online)
    refine = getattr(ops, "refine", None)
    if refine is not None and statements:
        # An engine that asks its server how each change runs (MariaDB's algorithms).
        t3 = time.perf_counter()
        statements, probed = refine(target, current.schema, statements, online, dev_url)
        warnings += probed
        timings["probe"] = time.perf_counter() - t3
    # The census (what inspection did not take in): on the target it is reported, and the
    # plan leaves those objects alone; on the desired side the engine refused them already.
    census = [s.schema.get("_meta", {}) for s in (current, desired)]
    timings["census"] = sum(
        float(m.get("censusSeconds", 0.0))
        for m, side in zip(census, (current, desired), strict=True)
        if not side.cached  # a cached side's census ran in an earlier plan
    )
    warnings += [
        f"not managed by Ptah, left as it is on the target: {item}"
        for item in census[0].get("unmanaged", [])
    ]
    warnings += [
        f"ignored by spec.policy.ignore, left as it is on the target: {item}" for item in ignored
    ]
    warnings += [
        f"index {name} is INVALID on the target (a concurrent build that failed or still"
        " runs): it serves no query and enforces nothing, so the plan builds it again"
        for name, index in sorted(current.schema.get("index", {}).items())
        if index.get("invalid")
    ]
    t3 = time.perf_counter()
    before, after = current.settle(), desired.settle()
    if left_alone:  # what the plan leaves alone is there after it, as it is now
        after = fingerprint(_joined(desired.schema, left_alone))
    timings["fingerprints"] = time.perf_counter() - t3
    plan = Plan(
        statements=statements,
        fingerprint_before=before,
        fingerprint_after=after,
        warnings=warnings,
        timings=timings,
        cache={"desired": desired.cached, "inspection": reused} if cache_dir else None,
    )
    if cache_dir and refine is None and desired.key and current.key:
        key = _plan_key(desired.key, current.key, policy)
        if key is not None:
            _store_plan(_plan_path(cache_dir, key), plan)
    return plan


def _split_ignored(
    ops: Any, current: Schema, desired: Schema, policy: SchemaPolicy
) -> tuple[Schema, Schema, list[str]]:
    """The target's schema without the managed objects ``policy.ignore`` covers (and what
    goes with them), those objects, and each one an entry covered, named for the plan's
    warnings. A desired schema that holds one is refused (:class:`IgnoredInDesired`):
    managed by the file and left alone by the policy at once, neither can win silently.
    An engine without ``split_ignored`` (SQLite: no census either) refuses a policy that
    ignores anything: an entry it would not honour would let the plan drop what the
    entry names."""
    if not policy.ignore:
        return current, {}, []
    split = getattr(ops, "split_ignored", None)
    if split is None:
        raise PlanError(
            f"spec.policy.ignore ({', '.join(policy.ignore)}) is not supported on this"
            " engine, and a plan that did not honour it could drop what it names: remove it",
            "Unsupported",
        )
    covers = ignore_matcher(policy.ignore)
    named = split(desired, covers)[2]
    if named:
        raise IgnoredInDesired(named)
    kept: Schema
    left: Schema
    kept, left, named = split(current, covers)
    return kept, left, named


def _joined(desired: Schema, left: Schema) -> Schema:
    """The desired schema with the target's objects the plan leaves alone: what the
    target holds after the plan ran (the fingerprint apply expects)."""
    joined = dict(desired)
    for kind, entries in left.items():
        joined[kind] = {**desired.get(kind, {}), **entries}
    return joined


# -- a whole plan, reused ------------------------------------------------------------------
# A plan is a function of the two sides it diffs and of the code that diffs them: the
# desired side's cache key (source, policy, server version, confinement and inspection
# code), the target's (its probe digest, read afresh from the target in every plan, and
# the inspection code), the online policy, and every module of the engines (the differ
# and what it imports). A re-plan from the cache whose target did not move is that
# plan again: the probe is the only work, the diff is not run again.


def _engines_digest() -> str | None:
    """A digest of every module of :mod:`ptah.engines` (names and sources); None when one
    cannot be read, and then no plan is reused or kept."""
    root = Path(__file__).parent
    # Sorted by the path below engines/ (two modules may share a file name); installed
    # without sources there are none, and nothing is kept.
    return _sources_digest(sorted(root.rglob("*.py"), key=lambda p: p.relative_to(root)))


def _plan_key(desired_key: str, current_key: str, policy: SchemaPolicy) -> str | None:
    code = _engines_digest()
    if code is None:
        return None
    text = f"{INSPECTOR_VERSION}:{desired_key}:{current_key}:{policy.online!r}:{code}"
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def _plan_path(cache_dir: str, key: str) -> Path:
    return Path(cache_dir) / f"plan-{key}.json"


def _store_plan(path: Path, plan: Plan) -> None:
    statements = [
        {"sql": s.sql, "hazards": list(s.hazards), "transaction": s.transaction, "lock": s.lock}
        for s in plan.statements
    ]
    entry = {
        "statements": statements,
        "fingerprintBefore": plan.fingerprint_before,
        "fingerprintAfter": plan.fingerprint_after,
        "warnings": plan.warnings,
    }
    _write_entry(path, entry)


def _load_plan(path: Path) -> Plan | None:
    try:
        raw = json.loads(path.read_text())
        statements = [
            Statement(
                sql=str(s["sql"]),
                hazards=tuple(str(h) for h in s["hazards"]),
                transaction=str(s["transaction"]),
                lock=str(s["lock"]),
            )
            for s in raw["statements"]
        ]
        return Plan(
            statements=statements,
            fingerprint_before=str(raw["fingerprintBefore"]),
            fingerprint_after=str(raw["fingerprintAfter"]),
            warnings=[str(w) for w in raw["warnings"]],
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _reused_plan(
    ops: Any, target: Target, desired_sql: str, cache_dir: str | None, policy: SchemaPolicy
) -> Plan | None:
    """The plan kept for this source and the target's current probe digest, if any.

    Only where a normalisation of this source is kept already (its key names the
    confinement code that passed it) and the engine reads its target by a probe; the
    probe is read from the target now, in a read-only transaction, as a reused
    inspection's is. None: plan in full (the probe is then read again, with the
    inspection, in one snapshot)."""
    probed = getattr(ops, "probed_inspect", None)
    if not cache_dir or probed is None or getattr(ops, "refine", None) is not None:
        return None
    t0 = time.perf_counter()
    desired_key = _desired_key(ops, target, desired_sql, policy)
    code = _inspection_digest(ops)
    if desired_key is None or code is None or not _cache_path(cache_dir, desired_key).exists():
        return None
    found: list[Plan] = []

    def reuse(digest: str) -> Schema | None:
        key = _plan_key(desired_key, _current_key(ops, target, code, digest), policy)
        kept = _load_plan(_plan_path(cache_dir, key)) if key is not None else None
        if kept is not None:
            found.append(kept)
        return {}  # never an inspection here: a plan not kept is planned in full

    probed(target, reuse)
    if not found:
        return None
    plan = found[0]
    plan.timings = {
        "cacheHit": 1.0,
        "inspectionReused": 1.0,
        "planReused": 1.0,
        "inspect": time.perf_counter() - t0,
    }
    plan.cache = {"desired": True, "inspection": True}
    return plan


def _read_target(ops: Any, target: Target, cache_dir: str | None) -> tuple[_Side, float, bool]:
    """The target's schema, timed, and settled (its fingerprint, and its cache entry when
    it was read afresh): where the engine reads the target beside the scratch, that work
    is done while the scratch loads instead of after the diff."""
    side, seconds, reused = _inspect_target(ops, target, cache_dir)
    t0 = time.perf_counter()
    side.settle()
    side.settle_seconds = time.perf_counter() - t0
    return side, seconds, reused


def _inspect_target(ops: Any, target: Target, cache_dir: str | None) -> tuple[_Side, float, bool]:
    """The target's schema, timed. With a cache and an engine that can say cheaply whether
    its catalogs moved (``probed_inspect``), the inspection read under the same digest
    is reused instead of read again; a digest never seen is read and then kept."""
    t0 = time.perf_counter()
    probed = getattr(ops, "probed_inspect", None)
    code = _inspection_digest(ops) if cache_dir and probed is not None else None
    if code is None or cache_dir is None or probed is None:
        return _Side(ops.inspect(target)), time.perf_counter() - t0, False
    found: dict[str, Any] = {}

    def reuse(digest: str) -> Schema | None:
        found["key"] = key = _current_key(ops, target, code, digest)
        found["path"] = Path(cache_dir) / f"current-{key}.json"
        cached = _load_cache(found["path"])
        if cached is None or cached[2] is None:
            return None
        found["fingerprint"] = cached[2]
        return cached[0]

    schema, _digest = probed(target, reuse)
    reused = "fingerprint" in found
    side = _Side(schema, found.get("fingerprint"), None if reused else found.get("path"))
    side.cached = reused
    side.key = found.get("key")
    return side, time.perf_counter() - t0, reused


def _current_key(ops: Any, target: Target, code: str, digest: str) -> str:
    """The cache key of the target's inspection read under probe ``digest``."""
    text = f"{INSPECTOR_VERSION}:{ops.version_key(target)}:{code}:{digest}"
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def _desired_key(ops: Any, target: Target, desired_sql: str, policy: SchemaPolicy) -> str | None:
    """The cache key of ``desired_sql``'s normalisation; None when the confinement code
    cannot be read (nothing is then cached for it)."""
    rules = _confinement_digest(target.engine)
    if rules is None:
        return None
    digest = hashlib.sha256(desired_sql.encode()).hexdigest()
    code = _inspection_digest(ops) or ""
    return hashlib.sha256(
        f"{INSPECTOR_VERSION}:{ops.version_key(target)}:{policy.key()}:{rules}:{code}:"
        f"{digest}".encode()
    ).hexdigest()[:40]


def _desired(
    ops: Any,
    target: Target,
    desired_sql: str,
    dev_url: DbUrl | None,
    cache_dir: str | None,
    timings: dict[str, float],
    policy: SchemaPolicy,
    read_target: Callable[[], None] = lambda: None,
) -> _Side:
    """The normalised desired schema, from the cache (source digest, server version,
    policy, confinement code, inspection code) or, once the source is confined, by
    loading it into a scratch. ``read_target`` is called (to start the target's reading)
    once the source passed the check, before its load, or once a cache entry for it is
    found, before that entry is read."""
    cache_file: Path | None = None
    key = _desired_key(ops, target, desired_sql, policy) if cache_dir else None
    if cache_dir and key is not None:
        cache_file = _cache_path(cache_dir, key)
        if cache_file.exists():
            read_target()
        cached = _load_cache(cache_file)
        if cached is not None:
            timings["cacheHit"] = 1.0
            store = None if cached[2] else cache_file
            return _Side(cached[0], cached[2], store, cached[1], cached=True, key=key)
    reserve = getattr(ops, "reserve_scratch", None)
    if reserve is not None:  # an empty scratch, made while the source is checked
        reserve(target, dev_url)
    tc = time.perf_counter()
    if getattr(ops, "confines_while_loading", False):
        # The engine checks the source itself, loading each part once it passed while
        # the check reads the next (the server's load beside the client's check).
        def passed() -> None:
            timings["confine"] = time.perf_counter() - tc
            read_target()

        desired, warnings = ops.normalise(target, desired_sql, dev_url, policy, confined=passed)
    else:
        confine.check(desired_sql, target.engine)
        timings["confine"] = time.perf_counter() - tc
        read_target()
        desired, warnings = ops.normalise(target, desired_sql, dev_url, policy)
    return _Side(desired, None, cache_file, list(warnings), key=key)


def current_fingerprint(target: Target) -> str:
    return fingerprint(ops_for(target).inspect(target))


@dataclass
class ApplyResult:
    """What apply did. ``outcome`` is succeeded, failed, refused or fenced (``reason``)."""

    outcome: str
    reason: str = ""
    message: str = ""
    progress: Progress = field(default_factory=Progress)
    total: int = 0
    fingerprint_before: str = ""
    fingerprint_after: str = ""
    expected_after: str = ""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "executed": self.progress.executed,
            "committed": self.progress.committed,
            "total": self.total,
            "fingerprintBefore": self.fingerprint_before,
            "fingerprintAfter": self.fingerprint_after,
        }
        if self.expected_after:
            data["fingerprintExpected"] = self.expected_after
            data["matchesExpected"] = self.expected_after == self.fingerprint_after
        if self.progress.failed_index is not None:
            data["failedStatement"] = self.progress.failed_index
        if self.message:
            data["message"] = self.message
        if self.progress.notes:
            data["notes"] = list(self.progress.notes)
        if self.progress.retries:
            data["lockRetries"] = list(self.progress.retries)
        if self.progress.seconds:
            data["statementSeconds"] = [
                round(self.progress.seconds.get(i, 0.0), 3) for i in range(self.progress.executed)
            ]
        return data


def apply(
    target: Target,
    statements: list[Statement],
    fingerprint_before: str,
    allow_destructive: bool = False,
    expected_after: str = "",
    timeouts: Timeouts | None = None,
    realm: str | None = None,
    fence_wait: float = 0.0,
    allow_lock_heavy: bool = True,
) -> ApplyResult:
    """Run ``statements`` if the target still has ``fingerprint_before``; else refuse.

    The whole run, from the fingerprint check to the fingerprint after, holds the
    realm's fence (:mod:`ptah.engines.fence`), keyed by ``realm`` (default: the
    digest of the opened database's identity); a run that cannot take it is
    ``fenced`` and touches nothing.
    """
    result = ApplyResult(
        outcome="succeeded",
        total=len(statements),
        fingerprint_before=fingerprint_before,
        expected_after=expected_after,
    )
    if not allow_destructive and any(DESTRUCTIVE in s.hazards for s in statements):
        result.outcome, result.reason = "refused", "DestructiveNotAllowed"
        result.message = (
            "the plan holds destructive statements and destructive changes are not allowed"
        )
        return result
    if not allow_lock_heavy and any(LOCK_HEAVY in s.hazards for s in statements):
        result.outcome, result.reason = "refused", "LockHeavyNotAllowed"
        result.message = (
            "the plan holds lock-heavy statements (they block the table's writers while they"
            " scan, rewrite or copy it) and the policy refuses them"
        )
        return result
    key = realm or target.identity().digest
    try:
        with fence.held(target.engine, target.connection, key, wait=fence_wait):
            return _apply_fenced(target, statements, fingerprint_before, timeouts, result)
    except fence.RealmBusy as exc:
        result.outcome, result.reason, result.message = "fenced", exc.reason, str(exc)
        return result


def _apply_fenced(
    target: Target,
    statements: list[Statement],
    fingerprint_before: str,
    timeouts: Timeouts | None,
    result: ApplyResult,
) -> ApplyResult:
    ops = ops_for(target)
    try:
        ops.execute(
            target, statements, fingerprint_before, timeouts or timeouts_from_env(), result.progress
        )
    except DriftedError as exc:
        result.outcome, result.reason = "refused", "TargetDrifted"
        result.message = (
            f"target fingerprint {exc.actual} differs from the plan's {fingerprint_before}"
        )
        result.fingerprint_after = exc.actual
        return result
    except Exception as exc:
        # A check before the first statement says why in its own word (DataNotConvertible).
        said = exc.reason if isinstance(exc, NothingRan) else "StatementFailed"
        result.outcome, result.reason = "failed", said
        result.message = bounded(target.scrub(f"{type(exc).__name__}: {exc}"))
    try:
        result.fingerprint_after = current_fingerprint(target)
    except Exception as exc:
        result.progress.notes.append(target.scrub(f"fingerprint after apply unavailable: {exc}"))
    if (
        result.outcome == "succeeded"
        and result.expected_after
        and result.fingerprint_after
        and result.fingerprint_after != result.expected_after
    ):
        # Every statement ran, but the schema is not the one the plan promised: that is a
        # failed convergence, never a success (the next plan starts from what is there).
        result.outcome, result.reason = "failed", "ExpectedSchemaNotReached"
        result.message = (
            f"all {result.total} statements ran, but the schema's fingerprint"
            f" {result.fingerprint_after} is not the plan's expected {result.expected_after}"
        )
    return result
