"""``python -m ptah.sim --schedules N --seed S``: run N seeded fault schedules.

Prints one summary line (schedules run, crash points covered by name out of all
durable writes, invariant violations) and, on a violation, the seed that
replays it. Exits non-zero on any violation.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor

from ptah.lifecycle.writes import DURABLE_WRITES
from ptah.sim.schedule import ScheduleResult, run_schedule


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ptah.sim", description=__doc__)
    parser.add_argument("--schedules", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0, help="first seed; schedule i uses seed+i")
    parser.add_argument("--jobs", type=int, default=0, help="worker processes (0: one per core)")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument(
        "--fail-fast",
        action="store_true",
        help="stop at the first schedule with a violation (the mutation suite's killer)",
    )
    args = parser.parse_args(argv)
    seeds = range(args.seed, args.seed + args.schedules)
    started = time.monotonic()
    results = list(_run(seeds, args.jobs, args.fail_fast))
    return report(results, time.monotonic() - started, args.verbose)


def _run(seeds: range, jobs: int, fail_fast: bool) -> Iterator[ScheduleResult]:
    """Schedules in seed order; with ``fail_fast``, none after the first violation."""
    if jobs == 1 or len(seeds) < 20:
        for seed in seeds:
            result = run_schedule(seed)
            yield result
            if fail_fast and result.violations:
                return
        return
    with ProcessPoolExecutor(max_workers=jobs or None) as pool:
        for result in pool.map(run_schedule, seeds, chunksize=4 if fail_fast else 16):
            yield result
            if fail_fast and result.violations:
                pool.shutdown(wait=False, cancel_futures=True)
                return


def report(results: list[ScheduleResult], seconds: float, verbose: bool) -> int:
    points = {f"{w}:{n}" for w in ("before", "after") for n in DURABLE_WRITES}
    covered = {c for r in results for c in r.crashes} & points
    failing = [r for r in results if r.violations]
    violations = sum(len(r.violations) for r in results)
    print(
        f"schedules={len(results)} crash_points_covered={len(covered)}/{len(points)} "
        f"writes_covered={len({c.split(':')[1] for c in covered})}/{len(DURABLE_WRITES)} "
        f"violations={violations} steps={sum(r.steps for r in results)} seconds={seconds:.1f}"
    )
    if verbose:
        print("uncovered:", " ".join(sorted(points - covered)))
        totals: dict[str, int] = {}
        for r in results:
            for reason, n in r.events.items():
                totals[reason] = totals.get(reason, 0) + n
        print("events:", " ".join(f"{k}={v}" for k, v in sorted(totals.items())))
    for r in failing[:10]:
        print(f"replay: python -m ptah.sim --schedules 1 --seed {r.seed}  # {r.violations[0]}")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
