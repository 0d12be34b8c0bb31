"""Cost of WHAM's decision against EQUI's, inside the compiled loop (the WHAM paper's
allocators).

Runs the shipped Appendix H scenario (`scenarios/appendix-h.yaml`, mean-field rates) at
n = 256 cores with 10^6 jobs under EQUI and WHAM in one process, after a small warm-up run
that compiles both, and prints both wall times, their ratio (target: WHAM at most 2x EQUI)
and the normalised holding costs. Each allocator runs `--repeat` times, interleaved, and
the fastest run counts (the machine is shared; the minimum is the least disturbed).
`--all` adds GREEDY and FW-CAM; `--python` also times WHAM's Python decision path on a
shorter run (for reference).

    python benchmarks/allocators.py [--cores 256] [--jobs 1000000] [--repeat 3] [--all]
                                    [--python] [--json]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.runner import with_policies
from clusteremu.scenarios.loader import load_scenario


def timed_run(cores: int, jobs: int, allocator: str, python: bool = False) -> dict[str, Any]:
    spec = load_scenario(
        "appendix-h",
        [f"cluster.pools.0.cores={cores}", f"stop.jobs={jobs}", f"stop.warmup_jobs={jobs // 10}"],
    )
    engine = Engine(with_policies(spec, allocator=allocator), force_python_policies=python)
    start = time.perf_counter()
    result = engine.run()
    wall = time.perf_counter() - start
    return {
        "allocator": allocator,
        "python_path": python,
        "jobs": jobs,
        "cores": cores,
        "wall_s": wall,
        "events": result.summary["events"],
        "events_per_s": result.summary["events"] / wall,
        "normalised_holding_cost": result.summary["holding_cost_rate"] / cores,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cores", type=int, default=256)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="runs per allocator (fastest counts)")
    parser.add_argument("--all", action="store_true", help="also GREEDY and FW-CAM")
    parser.add_argument("--python", action="store_true", help="also WHAM's Python path")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    names = ["equi", "wham"] + (["greedy", "fw-cam"] if args.all else [])
    for name in names:  # compile everything outside the timed runs
        timed_run(args.cores, 2000, name)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for _ in range(max(args.repeat, 1)):
        for name in names:
            runs[name].append(timed_run(args.cores, args.jobs, name))
    rows = [min(runs[name], key=lambda r: r["wall_s"]) for name in names]
    for row in rows:
        row["all_wall_s"] = [r["wall_s"] for r in runs[row["allocator"]]]
    if args.python:
        short = max(args.jobs // 100, 2000)
        rows.append(timed_run(args.cores, short, "wham", python=True))
    equi = rows[0]["wall_s"]
    wham = rows[1]["wall_s"]
    out = {"rows": rows, "wham_over_equi": wham / equi}
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(
        f"Appendix H, n = {args.cores} cores, {args.jobs:,} jobs per run (compiled loop), "
        f"fastest of {max(args.repeat, 1)}"
    )
    for r in rows:
        path = "python" if r["python_path"] else "compiled"
        print(
            f"  {r['allocator']:<7} {path:<8} {r['jobs']:>9,} jobs  {r['wall_s']:8.2f} s  "
            f"{r['events_per_s'] / 1e6:6.2f} M events/s  cost/n {r['normalised_holding_cost']:.4f}"
        )
    print(f"WHAM / EQUI wall time: {wham / equi:.2f}x (target <= 2x)")


if __name__ == "__main__":
    main()
