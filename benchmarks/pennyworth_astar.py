"""How far the exact planners scale: the largest batch (jobs) solved to proven optimality
within `--limit-s` seconds (default 60), per SLO, with one VM type (t2.small) and with
three.

Two kinds of knowledge (`--knowledge`):

- `mean` (default): the count-based A* (`astar.solve`) on the task means; jobs of a task
  are interchangeable. Batches of growing size (`--sizes`, jobs) are drawn uniformly over
  the scenario's tasks (`--repeats` batches per size, seeds 0, 1, ...; the same batches
  for both type sets).
- `actual`: the perfect-knowledge planner (`exact.solve_jobs`) on every job's actual run
  time. Batch i of n jobs: its tasks uniformly from seed i, its run times as the engine
  draws them for the scenario run with those counts and seed 1000 n + i (common random
  numbers with `clusteremu run` / `clusteremu solve --knowledge actual`).

A size counts as solved when every batch of it was proven optimal within the limit; the
sizes stop growing at the first one that fails. Per size, stderr shows the slowest solve
(s, wall clock on this machine) and its work (A*: vertices expanded; exact: search
nodes); stdout: the largest size solved, its slowest solve (s), the first size that
failed and (actual) the min / median / max seconds and proven count at `--report-size`
jobs (default 32, the paper's batch). The shipped scenarios have 10 tasks.

    python benchmarks/pennyworth_astar.py [--knowledge mean|actual] [--sizes 4,6,8,...,32]
        [--repeats 3] [--limit-s 60] [--slo max,rtpt,avg,percentile] [--types 1,3]
        [--max-expanded N] [--report-size 32] [--json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import resource
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies.pennyworth.astar import SearchLimit, solve
from clusteremu.cluster.policies.pennyworth.exact import engine_runtimes, job_problem, solve_jobs
from clusteremu.cluster.policies.pennyworth.problem import Problem, problem_from_spec
from clusteremu.scenarios.loader import load_scenario
from clusteremu.tuners.pennyworth_eval import batch_spec, with_counts

SLOS = ("max", "rtpt", "avg", "percentile")
SIZES = (4, 6, 8, 10, 12, 14, 16, 20, 24, 28, 32)
ACTUAL_SIZES = (16, 24, 32, 40, 48)
TYPE_SETS = {1: "1 type", 3: "3 types"}
#: The one-type set: the cheapest type of the shipped scenarios.
ONE_TYPE = "t2.small"
_STOPPED = re.compile(r"after (\d+) vertices")


def peak_rss_mib() -> float:
    """This process's peak resident memory so far (MiB; Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def only_types(problem: Problem, keep: list[int]) -> Problem:
    """`problem` with VM types `keep` only."""
    sd = problem.runtime_sd_s
    return dataclasses.replace(
        problem,
        type_names=tuple(problem.type_names[k] for k in keep),
        runtime_s=problem.runtime_s[:, keep],
        price_per_s=problem.price_per_s[keep],
        startup_usd=problem.startup_usd[keep],
        startup_delay_s=problem.startup_delay_s[keep],
        runtime_sd_s=None if sd is None else sd[:, keep],
    )


def draw_counts(n_tasks: int, seed: int, jobs: int) -> list[int]:
    """A batch of `jobs` jobs drawn uniformly over the tasks: jobs per task."""
    rng = np.random.default_rng(seed)
    return np.bincount(rng.integers(0, n_tasks, jobs), minlength=n_tasks).tolist()


#: One solve: (proven, seconds, work) for batch `seed` of `jobs` jobs.
Solver = Callable[[int, int], tuple[bool, float, int]]


def mean_solver(base: Problem, limit_s: float, max_expanded: int) -> Solver:
    def run(jobs: int, seed: int) -> tuple[bool, float, int]:
        problem = with_counts(base, draw_counts(len(base.task_names), seed, jobs))
        t0 = time.perf_counter()
        try:
            found = solve(problem, max_expanded=max_expanded, time_limit_s=limit_s)
        except SearchLimit as stop:
            count = _STOPPED.search(str(stop))
            return False, time.perf_counter() - t0, int(count[1]) if count else 0
        return found.seconds <= limit_s, found.seconds, found.expanded

    return run


def actual_solver(spec: SimulationSpec, keep: list[int], limit_s: float) -> Solver:
    def run(jobs: int, seed: int) -> tuple[bool, float, int]:
        counts = draw_counts(len(spec.classes), seed, jobs)
        one = batch_spec(spec, counts, 1000 * jobs + seed)
        assert one.slo is not None
        problem = problem_from_spec(one, one.slo)
        runtime, _ = engine_runtimes(one, problem)
        jp = job_problem(only_types(problem, keep), runtime[:, keep])
        found = solve_jobs(jp, time_limit_s=limit_s)
        return found.optimal and found.seconds <= limit_s, found.seconds, found.nodes

    return run


def try_size(run: Solver, jobs: int, repeats: int) -> dict[str, Any]:
    """Solve `repeats` batches of `jobs` jobs (all of them, to report every time)."""
    seconds: list[float] = []
    most = 0
    proven = 0
    for seed in range(repeats):
        ok, s, work = run(jobs, seed)
        seconds.append(s)
        most = max(most, work)
        proven += ok
    return {
        "jobs": jobs,
        "solved": proven == repeats,
        "proven": proven,
        "batches": repeats,
        "max_s": round(max(seconds), 2),
        "min_s": round(min(seconds), 2),
        "median_s": round(statistics.median(seconds), 2),
        "seconds": [round(s, 2) for s in seconds],
        "max_work": most,
        "peak_rss_mib": round(peak_rss_mib()),
    }


def largest(run: Solver, sizes: list[int], repeats: int, label: str) -> dict[str, Any]:
    tried = []
    for jobs in sizes:
        result = try_size(run, jobs, repeats)
        tried.append(result)
        status = "ok" if result["solved"] else f"FAILED ({result['proven']}/{repeats} proven)"
        print(
            f"{label:<20}{jobs:>4} jobs  max {result['max_s']:>7.2f} s"
            f"  {result['max_work']:>12,} work  peak {result['peak_rss_mib']} MiB  {status}",
            file=sys.stderr,
            flush=True,
        )
        if not result["solved"]:
            break
    solved = [r for r in tried if r["solved"]]
    return {
        "largest": solved[-1]["jobs"] if solved else None,
        "largest_max_s": solved[-1]["max_s"] if solved else None,
        "largest_work": solved[-1]["max_work"] if solved else None,
        "first_failed": None if tried[-1]["solved"] else tried[-1]["jobs"],
        "tried": tried,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--knowledge",
        choices=("mean", "actual"),
        default="mean",
        help="plan on task means (A*) or on actual run times (exact); default mean",
    )
    parser.add_argument(
        "--sizes",
        help="batch sizes (jobs) to try, increasing, comma-separated (default "
        f"{','.join(map(str, SIZES))}; actual: {','.join(map(str, ACTUAL_SIZES))})",
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
        help="mean: also stop a solve after this many vertices (default: no limit)",
    )
    parser.add_argument(
        "--report-size",
        type=int,
        default=32,
        help="the size whose min / median / max seconds are reported (default 32)",
    )
    parser.add_argument(
        "--slo", default=",".join(SLOS), help="SLO kinds, comma-separated (default: all four)"
    )
    parser.add_argument(
        "--types", default="1,3", help="VM type sets: 1 (t2.small), 3 (all); default 1,3"
    )
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    default_sizes = ACTUAL_SIZES if args.knowledge == "actual" else SIZES
    try:
        sizes = [int(s) for s in (args.sizes or ",".join(map(str, default_sizes))).split(",")]
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
        assert spec.slo is not None
        full = problem_from_spec(spec, spec.slo)
        for n in type_sets:
            keep = list(range(len(full.type_names)))
            if n == 1:
                keep = [full.type_names.index(ONE_TYPE)]
            label = TYPE_SETS[n]
            if args.knowledge == "actual":
                run = actual_solver(spec, keep, args.limit_s)
            else:
                run = mean_solver(only_types(full, keep), args.limit_s, args.max_expanded)
            row: dict[str, Any] = {
                "slo": kind,
                "types": label,
                "knowledge": args.knowledge,
                "limit_s": args.limit_s,
            }
            row.update(largest(run, sizes, args.repeats, f"{kind} {label}"))
            report = [r for r in row["tried"] if r["jobs"] == args.report_size]
            r = report[0] if report else try_size(run, args.report_size, args.repeats)
            row["report"] = {
                key: r[key] for key in ("jobs", "proven", "batches", "min_s", "median_s", "max_s")
            }
            rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=1))
        return

    def show(value: object, fmt: str = "") -> str:
        return "-" if value is None else format(value, fmt)

    size = args.report_size
    print(
        f"{'SLO':<11}{'types':<8}{'largest':>8}{'its max s':>11}{'fails at':>9}"
        f"   {size} jobs: proven  min / median / max s"
    )
    for r in rows:
        failed = show(r["first_failed"]) if r["first_failed"] else f">{sizes[-1]}"
        rep = r["report"]
        tail = (
            f"{rep['proven']}/{rep['batches']}  {rep['min_s']:.2f} / {rep['median_s']:.2f} / "
            f"{rep['max_s']:.2f}"
        )
        print(
            f"{r['slo']:<11}{r['types']:<8}{show(r['largest']):>8}"
            f"{show(r['largest_max_s'], '.2f'):>11}{failed:>9}   {tail}"
        )


if __name__ == "__main__":
    main()
