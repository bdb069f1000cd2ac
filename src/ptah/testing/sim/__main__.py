"""``python -m ptah.testing.sim --schedules N --seed S``: run N seeded fault schedules.

Prints one summary line (schedules run, crash points covered by name out of all
durable writes, invariant violations) and, on a violation, the seed that
replays it. Exits non-zero on any violation.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor

from ptah.lifecycle.writes import DURABLE_WRITES
from ptah.testing.sim.schedule import ScheduleResult, run_schedule
from ptah.testing.sim.windows import tally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ptah.testing.sim", description=__doc__)
    parser.add_argument("--schedules", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0, help="first seed; schedule i uses seed+i")
    parser.add_argument("--jobs", type=int, default=0, help="worker processes (0: one per core)")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument(
        "--fail-fast",
        action="store_true",
        help="stop at the first schedule with a violation (the mutation suite's killer)",
    )
    parser.add_argument(
        "--min-window-count",
        type=int,
        default=0,
        help="print the contract windows reached and fail if any was reached by a "
        "controller stop in fewer schedules than this",
    )
    args = parser.parse_args(argv)
    seeds = range(args.seed, args.seed + args.schedules)
    _settle_collector()
    started = time.monotonic()
    results = list(run_schedules(seeds, args.jobs, args.fail_fast))
    code = report(results, time.monotonic() - started, args.verbose)
    if args.min_window_count and not args.fail_fast:
        code = max(code, window_report(results, args.min_window_count))
    return code


def _settle_collector() -> None:
    """The modules, models and schemas loaded so far live as long as the process: the
    cyclic collector is told to leave them be (``gc.freeze``; forked workers inherit
    it), and collects the young generation less often. Schedules build and drop many
    small dicts, few of them in cycles; when garbage is collected changes no result."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 20, 100)


def run_schedules(seeds: range, jobs: int = 0, fail_fast: bool = False) -> Iterator[ScheduleResult]:
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
        replay = f"python -m ptah.testing.sim --schedules 1 --seed {r.seed}"
        print(f"replay: {replay}  # {r.violations[0]}")
    return 1 if failing else 0


def window_report(results: list[ScheduleResult], minimum: int) -> int:
    """Per contract window, the schedules a fault landed in it; non-zero if a window
    was reached by a controller stop fewer than ``minimum`` times."""
    table = tally(results)
    causes = sorted({c for per in table.values() for c in per})
    causes = ["stop", *[c for c in causes if c != "stop"]]
    print(f"windows (schedules reaching each; gate: stop >= {minimum}):")
    print(f"  {'window':18} " + " ".join(f"{c[:12]:>12}" for c in causes))
    short = []
    for window, per in table.items():
        print(f"  {window:18} " + " ".join(f"{per.get(c, 0):>12}" for c in causes))
        if per.get("stop", 0) < minimum:
            short.append(window)
    faults: dict[str, int] = {}
    for r in results:
        for what in r.faults:
            faults[what] = faults.get(what, 0) + 1
    print("faults (schedules):", " ".join(f"{k}={v}" for k, v in sorted(faults.items())))
    if short:
        print(f"windows reached by a stop fewer than {minimum} times: {', '.join(short)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
