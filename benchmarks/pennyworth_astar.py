"""How far the A* planner scales: the largest batch (jobs) it solves within `--limit-s`
seconds (default 60), per SLO, with one VM type (t2.small) and with three.

For each shipped Pennyworth scenario (one per SLO) and each type set, batches of growing
size (`--sizes`, jobs) are drawn uniformly over the scenario's tasks (`--repeats` batches
per size, seeds 0, 1, ...; the same batches for both type sets) and solved by A* with a
wall-clock limit of `--limit-s` s each (no limit on vertices unless `--max-expanded`). A
size counts as solved when every batch of it finished within the limit; the sizes stop
growing at the first one that fails. Per size, stderr shows the slowest solve (s, wall
clock on this machine) and the most vertices expanded; stdout: the largest size solved,
its slowest solve (s) and the first size that failed. The shipped scenarios have 8 tasks;
the paper compares at 32 jobs over 10 tasks.

    python benchmarks/pennyworth_astar.py [--sizes 4,6,8,...,32] [--repeats 3] [--limit-s 60]
        [--slo max,rtpt,avg,percentile] [--types 1,3] [--max-expanded N] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import sys
import time
from typing import Any

from pennyworth_quality import batch, only_types

from cluster.policies.pennyworth.astar import SearchLimit, solve
from cluster.policies.pennyworth.problem import Problem, problem_from_spec
from scenarios.loader import load_scenario

SLOS = ("max", "rtpt", "avg", "percentile")
SIZES = (4, 6, 8, 10, 12, 14, 16, 20, 24, 28, 32)
TYPE_SETS = {1: "1 type", 3: "3 types"}
#: The one-type set: the cheapest type of the shipped scenarios.
ONE_TYPE = "t2.small"
_STOPPED = re.compile(r"after (\d+) vertices")


def peak_rss_mib() -> float:
    """This process's peak resident memory so far (MiB; Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def try_size(
    base: Problem, jobs: int, repeats: int, limit_s: float, max_expanded: int
) -> dict[str, Any]:
    """Solve `repeats` batches of `jobs` jobs; stop at the first that runs past a limit."""
    slowest, most, done = 0.0, 0, 0
    failed = ""
    for seed in range(repeats):
        problem = batch(base, seed, jobs)
        t0 = time.perf_counter()
        try:
            found = solve(problem, max_expanded=max_expanded, time_limit_s=limit_s)
        except SearchLimit as stop:
            seconds = time.perf_counter() - t0
            count = _STOPPED.search(str(stop))
            slowest = max(slowest, seconds)
            most = max(most, int(count[1]) if count else 0)
            failed = "time" if seconds >= limit_s else "vertices"
            break
        slowest = max(slowest, found.seconds)
        most = max(most, found.expanded)
        if found.seconds > limit_s:  # finished, but after the limit (one expansion late)
            failed = "time"
            break
        done += 1
    return {
        "jobs": jobs,
        "solved": not failed,
        "batches": done,
        "max_s": round(slowest, 2),
        "max_expanded": most,
        "stopped_by": failed or None,
        "peak_rss_mib": round(peak_rss_mib()),
    }


def largest(
    base: Problem, sizes: list[int], repeats: int, limit_s: float, max_expanded: int, label: str
) -> dict[str, Any]:
    tried = []
    for jobs in sizes:
        result = try_size(base, jobs, repeats, limit_s, max_expanded)
        tried.append(result)
        status = "ok" if result["solved"] else f"FAILED ({result['stopped_by']} limit)"
        print(
            f"{label:<20}{jobs:>4} jobs  max {result['max_s']:>7.2f} s"
            f"  {result['max_expanded']:>10,} vertices  peak {result['peak_rss_mib']} MiB"
            f"  {status}",
            file=sys.stderr,
            flush=True,
        )
        if not result["solved"]:
            break
    solved = [r for r in tried if r["solved"]]
    return {
        "largest": solved[-1]["jobs"] if solved else None,
        "largest_max_s": solved[-1]["max_s"] if solved else None,
        "largest_expanded": solved[-1]["max_expanded"] if solved else None,
        "first_failed": None if tried[-1]["solved"] else tried[-1]["jobs"],
        "tried": tried,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        default=",".join(map(str, SIZES)),
        help="batch sizes (jobs) to try, increasing, comma-separated (default %(default)s)",
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="random batches per size (default 3)"
    )
    parser.add_argument(
        "--limit-s", type=float, default=60.0, help="wall-clock limit per solve, s (default 60)"
    )
    parser.add_argument(
        "--max-expanded",
        type=int,
        default=sys.maxsize,
        help="also stop a solve after this many vertices (default: no limit)",
    )
    parser.add_argument(
        "--slo", default=",".join(SLOS), help="SLO kinds, comma-separated (default: all four)"
    )
    parser.add_argument(
        "--types", default="1,3", help="VM type sets: 1 (t2.small), 3 (all); default 1,3"
    )
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
        type_sets = [int(s) for s in args.types.split(",")]
    except ValueError as error:
        parser.error(f"--sizes and --types take comma-separated integers ({error})")
    if not sizes or min(sizes) < 1 or sizes != sorted(set(sizes)):
        parser.error(f"--sizes {args.sizes!r}: expected increasing positive integers")
    if any(n not in TYPE_SETS for n in type_sets):
        parser.error(f"--types {args.types!r}: expected some of 1, 3")
    if args.repeats < 1 or args.limit_s <= 0 or args.max_expanded < 1:
        parser.error("--repeats, --limit-s and --max-expanded must be > 0")
    kinds = args.slo.split(",")
    for kind in kinds:
        if kind not in SLOS:
            parser.error(f"--slo {kind!r}: expected some of {', '.join(SLOS)}")
    rows = []
    for kind in kinds:
        spec = load_scenario(f"pennyworth-{kind}")
        full = problem_from_spec(spec, spec.slo)
        for n in type_sets:
            base = full if n == 3 else only_types(full, [full.type_names.index(ONE_TYPE)])
            label = TYPE_SETS[n]
            row: dict[str, Any] = {"slo": kind, "types": label, "limit_s": args.limit_s}
            row.update(
                largest(
                    base, sizes, args.repeats, args.limit_s, args.max_expanded, f"{kind} {label}"
                )
            )
            rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=1))
        return

    def show(value: object, fmt: str = "") -> str:
        return "-" if value is None else format(value, fmt)

    print(f"{'SLO':<11}{'types':<8}{'largest':>8}{'its max s':>11}{'vertices':>12}{'fails at':>9}")
    for r in rows:
        failed = show(r["first_failed"]) if r["first_failed"] else f">{sizes[-1]}"
        print(
            f"{r['slo']:<11}{r['types']:<8}{show(r['largest']):>8}"
            f"{show(r['largest_max_s'], '.2f'):>11}{show(r['largest_expanded'], ','):>12}"
            f"{failed:>9}"
        )


if __name__ == "__main__":
    main()
