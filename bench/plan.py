"""Plan performance on a generated PostgreSQL schema (1,000 tables), beside migra.

Figures are printed, not asserted. Needs the PostgreSQL from `bash hack/databases.sh`
(PTAH_TEST_PG_BENCH_URL, from the env or ${PTAH_CACHE}/db/env). Each size runs in a
database of its own, created for the run and dropped after it (so the benchmark
re-runs cleanly on a warm server, and helpers sharing the server do not collide), and
in a process of its own (so its peak memory is its own). Per size: the plan with
changes (the desired normalisation not cached), the no-op plan (desired = current),
and the re-plan from the cache, each with where its time went: the confinement check
and preparation of the desired file, the scratch database's create, load, inspection
and drop, the census, the target's inspection, and the diff. The reference (migra +
schemainspect) runs in MIGRA_PYTHON (default: this interpreter), at 1,000 tables, in
the same run, against the same server: it loads the desired DDL statement by
statement into a scratch database, inspects both sides and diffs.

    .venv/bin/python bench/plan.py [--tables 1000] [--changed 10]

With ``--tables`` other than 1,000 the 1,000-table run is made too, as the reference
of the ratios (time and peak memory: linear growth is x10 at 10,000).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import secrets
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from ptah.engines import planner
from ptah.engines.connect import open_target


def schema(tables: int, changed: int) -> str:
    out = ["CREATE SCHEMA bench;"]
    for i in range(tables):
        ref = f"bench.t{i - 1:04d}" if i else f"bench.t{i:04d}"
        extra = ",\n  c8 text" if i < changed else ""
        out.append(
            f"CREATE TABLE bench.t{i:04d} (\n"
            "  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,\n"
            f"  parent_id bigint REFERENCES {ref}(id),\n  name text NOT NULL,\n"
            f"  qty integer NOT NULL DEFAULT 0 CHECK (qty >= 0),\n  price numeric(12,2),\n"
            "  created_at timestamptz NOT NULL DEFAULT now(),\n  flag boolean,\n"
            f"  note varchar(200){extra}\n);"
        )
        idx2 = "(lower(name))" if i < changed else "(created_at)"
        out.append(f"CREATE INDEX t{i:04d}_parent ON bench.t{i:04d} (parent_id);")
        out.append(f"CREATE INDEX t{i:04d}_second ON bench.t{i:04d} {idx2};")
    return "\n".join(out) + "\n"


MIGRA = textwrap.dedent(
    """
    import sys, time, secrets
    from sqlalchemy import create_engine, text
    from migra import Migration
    url, desired_file = sys.argv[1], sys.argv[2]
    sa = url.replace("postgresql://", "postgresql+psycopg2://")
    base = sa.rsplit("/", 1)[0]
    admin = create_engine(base + "/postgres", isolation_level="AUTOCOMMIT")
    name = "migra_scratch_" + secrets.token_hex(4)
    t0 = time.perf_counter()
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}" TEMPLATE template0'))
    scratch = create_engine(base + "/" + name, isolation_level="AUTOCOMMIT")
    try:
        with scratch.connect() as c:
            for stmt in open(desired_file).read().split(";\\n"):
                if stmt.strip():
                    c.exec_driver_sql(stmt)
        t1 = time.perf_counter()
        target = create_engine(sa)
        with target.connect() as a, scratch.connect() as b:
            m = Migration(a, b)
            t2 = time.perf_counter()
            m.set_safety(False)
            m.add_all_changes()
            n = len([s for s in m.statements if s.strip()])
            t3 = time.perf_counter()
        print(f"{t3 - t0:.3f} {t1 - t0:.3f} {t2 - t1:.3f} {t3 - t2:.3f} {n}")
    finally:
        scratch.dispose()
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    """
)


def bench_url() -> str:
    url = os.environ.get("PTAH_TEST_PG_BENCH_URL")
    if url:
        return url
    env = Path(os.environ.get("PTAH_CACHE", Path.home() / ".cache/ptah")) / "db/env"
    for line in env.read_text().splitlines():
        if line.startswith("PTAH_TEST_PG_BENCH_URL="):
            return line.split("=", 1)[1]
    raise SystemExit("PTAH_TEST_PG_BENCH_URL missing: run `bash hack/databases.sh`")


PHASES = (
    ("confine", "confine+prepare"),
    ("create", "scratch create"),
    ("load", "scratch load"),
    ("scratch_inspect", "scratch inspect"),
    ("drop", "scratch drop"),
    ("census", "census"),
    ("inspect", "target inspect"),
    ("diff", "diff"),
)


def private_database(url: str, tag: str) -> tuple[str, str]:
    """A fresh database on the bench server: (its URL, its name)."""
    name = f"ptah_bench_{tag}_{secrets.token_hex(4)}"
    with open_target(url) as t:
        t.connection.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    return url.rsplit("/", 1)[0] + "/" + name, name


def drop_database(url: str, name: str) -> None:
    with open_target(url) as t:
        t.connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def load_current(url: str, sql: str, batch: int = 2000) -> None:
    """The target's current schema, committed in batches (the lock table is finite)."""
    statements = [s for s in sql.split(";\n") if s.strip()]
    with open_target(url) as t:
        for i in range(0, len(statements), batch):
            t.connection.execute((";\n".join(statements[i : i + batch]) + ";").encode())


def phases(plan: planner.Plan, desired: dict[str, Any] | None, wall: float) -> dict[str, float]:
    out = {k: float(v) for k, v in plan.timings.items()}
    scratch = ((desired or {}).get("_meta") or {}).get("scratchSeconds") or {}
    if "cacheHit" in out:
        scratch = {}
    out["confine"] = out.get("confine", 0.0) + float(scratch.get("prepare", 0.0))
    for key in ("create", "load", "drop"):
        out[key] = float(scratch.get(key, 0.0))
    out["scratch_inspect"] = float(scratch.get("inspect", 0.0))
    out["wall"] = wall
    return out


def measure(url: str, tables: int, changed: int) -> dict[str, Any]:
    """In this process: the three plans of one size, their phases and the peak memory."""
    from ptah.engines.postgres import scratch as pg_scratch

    current_sql = schema(tables, 0)
    desired_sql = schema(tables, changed)
    load_current(url, current_sql)
    seen: dict[str, Any] = {}
    real = pg_scratch.normalise

    def keep(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        seen["desired"] = result[0]
        return result

    pg_scratch.normalise = keep  # type: ignore[assignment]
    cache = tempfile.mkdtemp(prefix="ptah-bench-")
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out: dict[str, Any] = {"tables": tables}
    with open_target(url) as t:
        for label, sql, cache_dir in (
            ("changes", desired_sql, cache),
            ("noop", current_sql, None),
            ("cached", desired_sql, cache),
        ):
            seen.clear()
            t0 = time.perf_counter()
            plan = planner.plan(t, sql, cache_dir=cache_dir)
            wall = time.perf_counter() - t0
            out[label] = phases(plan, seen.get("desired"), wall)
            out[label]["statements"] = len(plan.statements)
            if label == "changes":
                out["peak_mb"] = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024
    return out


def run_size(url: str, tables: int, changed: int) -> dict[str, Any]:
    """One size in a database and a process of its own."""
    db_url, name = private_database(url, str(tables))
    try:
        proc = subprocess.run(
            [sys.executable, __file__, "--measure", str(tables), "--changed", str(changed)],
            env={**os.environ, "PTAH_TEST_PG_BENCH_URL": db_url},
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise SystemExit(f"{tables} tables: {proc.stderr.strip()[-1500:]}")
        return dict(json.loads(proc.stdout.strip().splitlines()[-1]))
    finally:
        drop_database(url, name)


def migra(url: str, tables: int, changed: int) -> dict[str, float] | None:
    db_url, name = private_database(url, "migra")
    try:
        load_current(db_url, schema(tables, 0))
        with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
            f.write(schema(tables, changed))
        py = os.environ.get("MIGRA_PYTHON", sys.executable)
        proc = subprocess.run([py, "-c", MIGRA, db_url, f.name], capture_output=True, text=True)
        if proc.returncode != 0:
            print("migra reference failed:", proc.stderr.strip().splitlines()[-1:])
            return None
        total, load, insp, diff, n = proc.stdout.split()
        return {
            "total": float(total),
            "load": float(load),
            "inspections": float(insp),
            "diff": float(diff),
            "statements": float(n),
        }
    finally:
        drop_database(url, name)


def show(r: dict[str, Any]) -> None:
    print(f"tables={r['tables']}: peak memory of the plan with changes +{r['peak_mb']:.0f} MB")
    head = "".join(f"{title:>17s}" for _, title in PHASES)
    print(f"  {'':16s}{'wall':>8s}{head}  statements")
    for label, title in (
        ("changes", "plan (changes)"),
        ("noop", "no-op plan"),
        ("cached", "re-plan cached"),
    ):
        ph = r[label]
        cells = "".join(f"{ph.get(key, 0.0):17.3f}" for key, _ in PHASES)
        print(f"  {title:16s}{ph['wall']:8.3f}{cells}  {ph['statements']}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tables", type=int, default=1000)
    ap.add_argument("--changed", type=int, default=10)
    ap.add_argument("--measure", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    url = bench_url()
    if args.measure is not None:  # the child: one size, in the database it was given
        print(json.dumps(measure(url, args.measure, args.changed)))
        return
    sizes = [1000] if args.tables == 1000 else [1000, args.tables]
    results = {n: run_size(url, n, args.changed) for n in sizes}
    for n in sizes:
        show(results[n])
    ref = results[1000]
    m = migra(url, 1000, args.changed)
    if m is not None:
        print(
            f"migra whole plan at 1000 tables {m['total']:.3f}s (load {m['load']:.3f}s, "
            f"inspections {m['inspections']:.3f}s, diff {m['diff']:.3f}s) "
            f"statements={m['statements']:.0f}"
        )
        print(f"ratio ptah/migra      {ref['changes']['wall'] / m['total']:6.3f}  (target <= 0.35)")
    print(
        f"no-op / changes       {ref['noop']['wall'] / ref['changes']['wall']:6.3f}  "
        "(target <= 1: the no-op plan is no slower)"
    )
    print(f"re-plan from cache    {ref['cached']['wall']:6.3f}s (target <= 0.2 s)")
    if args.tables != 1000:
        big = results[args.tables]
        k = args.tables / 1000
        print(
            f"{args.tables} tables: plan {big['changes']['wall']:.3f}s "
            f"(x{big['changes']['wall'] / ref['changes']['wall']:.1f} of 1000; linear x{k:.0f}), "
            f"peak memory +{big['peak_mb']:.0f} MB "
            f"(x{big['peak_mb'] / max(ref['peak_mb'], 1e-9):.1f} of 1000)"
        )


if __name__ == "__main__":
    main()
