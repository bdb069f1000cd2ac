"""Online plans: how long a busy table's writer stalls while each change is applied.

For each change (PostgreSQL: a new index, a changed index, a foreign key, a check,
SET NOT NULL; MariaDB: a new index, a new column, a column type change) the change is
planned and applied against a table of ``--rows`` rows while a writer in another
connection inserts and updates in a loop; the writer's p99 and longest operation are
printed with online on and off, beside the apply's own time and the off/on ratio of
the longest stall.

    python bench/online.py [--engine postgres|mysql|both] [--rows 1000000]

The databases come from ``PTAH_TEST_PG_URL`` / ``PTAH_TEST_MYSQL_URL`` (or the cache's
db/env); each run uses a database of its own and drops it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from ptah.engines.connect import open_target
from ptah.engines.model import Online
from support import stall


def _env(name: str) -> str:
    value = os.environ.get(name)
    if value:
        return value
    cache = Path(os.environ.get("PTAH_CACHE", Path.home() / ".cache" / "ptah"))
    for line in (cache / "db" / "env").read_text().splitlines():
        key, _, val = line.partition("=")
        if key.strip() == name:
            return val.strip()
    raise SystemExit(f"{name} is not set; run `bash hack/databases.sh`")


def _database(admin_url: str, engine: str) -> str:
    name = "ptah_bench_online_" + uuid.uuid4().hex[:8]
    with open_target(admin_url) as admin:
        if engine == "postgres":
            admin.connection.execute(f'CREATE DATABASE "{name}"')
        else:
            with admin.connection.cursor() as cur:
                cur.execute(f"CREATE DATABASE `{name}`")
    return name


def _drop(admin_url: str, engine: str, name: str) -> None:
    with open_target(admin_url) as admin:
        if engine == "postgres":
            admin.connection.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        else:
            with admin.connection.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS `{name}`")


def run(engine: str) -> None:
    admin = _env("PTAH_TEST_PG_URL" if engine == "postgres" else "PTAH_TEST_MYSQL_URL")
    name = _database(admin, engine)
    url = admin.rsplit("/", 1)[0] + "/" + name
    base, changes = (
        (stall.PG_BASE, stall.PG_CHANGES)
        if engine == "postgres"
        else (stall.MY_BASE, stall.MY_CHANGES)
    )
    try:
        t0 = time.perf_counter()
        (stall.fill_postgres if engine == "postgres" else stall.fill_mysql)(url)
        print(f"\n{engine}: {stall.ROWS:,} rows in {time.perf_counter() - t0:.1f} s")
        head = f"{'change':<20} {'online':<7} {'apply s':>8} {'p99 s':>7} {'max s':>7}  plan"
        print(head)
        print("-" * len(head))
        for change, desired in changes.items():
            longest: dict[bool, float] = {}
            for on in (True, False):
                result = stall.change(url, desired, Online() if on else Online.off())
                longest[on] = result.writer.longest
                lock = ", ".join(sorted({s.lock for s in result.statements if s.lock}))
                print(
                    f"{change:<20} {'on' if on else 'off':<7} {result.seconds:>8.2f}"
                    f" {result.writer.p99:>7.3f} {result.writer.longest:>7.3f}"
                    f"  {len(result.statements)} statement(s); {lock}"
                    + ("" if result.result.outcome == "succeeded" else f" {result.result.reason}")
                )
                stall.converge(url, base)
            ratio = longest[False] / longest[True] if longest[True] else float("inf")
            print(f"{'':<20} {'off/on':<7} {'':>8} {'':>7} {ratio:>6.1f}x")
    finally:
        _drop(admin, engine, name)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=("postgres", "mysql", "both"), default="both")
    parser.add_argument("--rows", type=int, default=stall.ROWS)
    args = parser.parse_args()
    stall.ROWS = args.rows
    for engine in ("postgres", "mysql") if args.engine == "both" else (args.engine,):
        run(engine)
    return 0


if __name__ == "__main__":
    sys.exit(main())
