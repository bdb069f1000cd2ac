"""Plan performance on a generated 1,000-table PostgreSQL schema, beside migra (reference).

Figures are printed, not asserted. Needs the PostgreSQL from `bash hack/databases.sh`
(PTAH_TEST_PG_BENCH_URL, from the env or ${PTAH_CACHE}/db/env). The reference
(migra + schemainspect) runs in MIGRA_PYTHON (default: this interpreter), in
the same run, against the same server: it loads the desired DDL statement by
statement into a scratch database, inspects both sides and diffs.

    .venv/bin/python bench/plan.py [--tables 1000] [--changed 10]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tables", type=int, default=1000)
    ap.add_argument("--changed", type=int, default=10)
    args = ap.parse_args()
    url = bench_url()
    current_sql = schema(args.tables, 0)
    desired_sql = schema(args.tables, args.changed)
    with open_target(url) as t:
        # Table by table (autocommit): one DROP SCHEMA ... CASCADE of a thousand tables can
        # run out of the server's lock table on a busy shared server.
        for (name,) in t.connection.execute(
            "SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n"
            " ON n.oid = c.relnamespace WHERE n.nspname = 'bench' AND c.relkind = 'r'"
        ).fetchall():
            t.connection.execute(f"DROP TABLE IF EXISTS {name} CASCADE")
        t.connection.execute("DROP SCHEMA IF EXISTS bench CASCADE")
        t.connection.execute(current_sql.encode())
    cache = tempfile.mkdtemp(prefix="ptah-bench-")
    with open_target(url) as t:
        t0 = time.perf_counter()
        plan = planner.plan(t, desired_sql, cache_dir=cache)
        whole = time.perf_counter() - t0
        t0 = time.perf_counter()
        noop = planner.plan(t, current_sql)
        noop_t = time.perf_counter() - t0
        t0 = time.perf_counter()
        replan = planner.plan(t, desired_sql, cache_dir=cache)
        replan_t = time.perf_counter() - t0
    ph = plan.timings
    print(f"tables={args.tables} changed={args.changed}")
    print(
        f"ptah  whole plan      {whole:6.3f}s  (scratch load+inspect {ph['normalise']:.3f}s,"
        f" target inspect {ph['inspect']:.3f}s, diff {ph['diff']:.3f}s)"
        f"  statements={len(plan.statements)}"
    )
    print(f"ptah  no-op plan      {noop_t:6.3f}s  statements={len(noop.statements)}")
    print(
        f"ptah  re-plan cached  {replan_t:6.3f}s  (cache hit, target inspect"
        f" {replan.timings['inspect']:.3f}s)  statements={len(replan.statements)}"
    )
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(desired_sql)
    py = os.environ.get("MIGRA_PYTHON", sys.executable)
    proc = subprocess.run([py, "-c", MIGRA, url, f.name], capture_output=True, text=True)
    if proc.returncode != 0:
        print("migra reference failed:", proc.stderr.strip().splitlines()[-1:])
        return
    total, load, insp, diff, n = proc.stdout.split()
    print(
        f"migra whole plan      {float(total):6.3f}s  (load {load}s, inspections {insp}s,"
        f" diff {diff}s)  statements={n}"
    )
    print(
        f"ptah  census          {ph.get('census', 0.0):6.3f}s  (scratch and target, part of"
        " the inspections above)"
    )
    print(f"ratio ptah/migra      {whole / float(total):6.3f}  (target <= 0.6)")


if __name__ == "__main__":
    main()
