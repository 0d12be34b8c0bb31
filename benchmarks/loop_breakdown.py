"""Where the compiled loop's time goes on M/M/100 (ns per job), by part.

The whole loop is timed on M/M/100 at load 0.9 (FCFS first-fit, the compiled path). Each
part is then timed alone, by compiled code that calls the engine's own functions on a
state taken from the middle of that run (about 90 busy nodes, the heap holding their
completions), as many times as the run calls it per job:

* `heap`: one push and one pop of a completion (a job's two heap operations);
* `placement`: the first-fit search for a one-core job (the free-node bits), and a scan of
  the rows for comparison;
* `statistics`: moving the clock and its integrals (`advance_to`) twice (two events a job);
* the rest: the job's own columns (arrival, queue, start, completion, leaving), the choice
  of the next event and the loop's checks.

Interleaved, best of `--repeat`.

    python benchmarks/loop_breakdown.py [--jobs 1000000] [--repeat 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_vs_simpy import mmc_scenario  # noqa: E402

from clusteremu.cluster.engine import Engine  # noqa: E402
from clusteremu.cluster.fit_index import bits_search, node_fits  # noqa: E402
from clusteremu.cluster.kernel_heap import heap_pop, heap_push  # noqa: E402
from clusteremu.cluster.kernel_jobs import advance_to  # noqa: E402
from clusteremu.cluster.layout import FS, NF, NI, Event, Status  # noqa: E402
from clusteremu.cluster.state import EngineState  # noqa: E402
from clusteremu.scenarios.loader import spec_from_dict  # noqa: E402


@njit(cache=False, _nrt=False)
def _heap(t: tuple[Any, ...], n: int) -> float:  # type: ignore[type-arg]
    """n pushes and pops of completions at the heap's steady size."""
    s = EngineState(*t)
    total = 0.0
    for i in range(n):
        top = s.heap_t[0]
        heap_pop(s)
        heap_push(s, top + 0.5 + (i % 97) * 0.01, i % 1000, Event.COMPLETE)
        total += s.heap_t[0]
    return total


@njit(cache=False, _nrt=False)
def _bits(t: tuple[Any, ...], n: int) -> int:  # type: ignore[type-arg]
    s = EngineState(*t)
    found = 0
    nf, ni = s.nodes_f, s.nodes_i
    for _ in range(n):
        found += bits_search(
            s.fit_bits,
            nf[NF.FREE_CPU],
            nf[NF.FREE_MEM],
            nf[NF.FREE_SLOTS],
            ni[NI.STATUS],
            s.gpu_free,
            1.0,
            0.0,
            0.0,
            0,
        )
    return found


@njit(cache=False, _nrt=False)
def _scan(t: tuple[Any, ...], n: int) -> int:  # type: ignore[type-arg]
    s = EngineState(*t)
    found = 0
    for _ in range(n):
        for k in range(s.nodes_f.shape[1]):
            if node_fits(s.nodes_f, s.nodes_i, s.gpu_free, k, 1.0, 0.0, 0.0):
                found += k
                break
    return found


@njit(cache=False, _nrt=False)
def _clock(t: tuple[Any, ...], n: int) -> float:  # type: ignore[type-arg]
    s = EngineState(*t)
    now = s.fstate[FS.NOW]
    for _ in range(n):
        now += 1e-9
        advance_to(s, now)
    return s.fstate[FS.BUSY_AREA]


def _mid_run_state(jobs: int) -> tuple[Any, ...]:
    """A copy of the state halfway through an M/M/100 run."""
    engine = Engine(spec_from_dict(mmc_scenario(jobs)))
    engine.step(max_events=jobs)  # two events a job: halfway
    return tuple(np.array(a, copy=True) for a in engine.store.t)


def _best_ns(fn: Any, t: tuple[Any, ...], n: int, repeat: int, per_job: int = 1) -> float:
    fn(t, 10)
    best = min(_timed(fn, t, n) for _ in range(repeat))
    return best / n * 1e9 * per_job


def _timed(fn: Any, t: tuple[Any, ...], n: int) -> float:
    start = time.perf_counter()
    fn(t, n)
    return time.perf_counter() - start


def breakdown(jobs: int, repeat: int) -> dict[str, float]:
    spec = spec_from_dict(mmc_scenario(jobs))
    Engine(spec_from_dict(mmc_scenario(2_000))).run()  # compile
    loop = []
    for _ in range(repeat):
        engine = Engine(spec)
        start = time.perf_counter()
        while engine.step() != Status.FINISHED:
            pass
        loop.append((time.perf_counter() - start) / jobs * 1e9)
    t = _mid_run_state(200_000)
    n = 2_000_000
    heap = _best_ns(_heap, tuple(np.array(a, copy=True) for a in t), n, repeat)
    bits = _best_ns(_bits, t, n, repeat)
    scan = _best_ns(_scan, t, n, repeat)
    clock = _best_ns(_clock, tuple(np.array(a, copy=True) for a in t), n, repeat, per_job=2)
    whole = min(loop)
    return {
        "loop_ns_per_job": whole,
        "heap_ns": heap,
        "placement_bits_ns": bits,
        "placement_scan_ns": scan,
        "statistics_ns": clock,
        "rest_ns": whole - heap - bits - clock,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    row = breakdown(args.jobs, args.repeat)
    if args.json:
        print(json.dumps(row, indent=2))
        return
    print(f"M/M/100 at load 0.9, compiled first-fit, {args.jobs:,} jobs (ns per job):")
    print(f"  the loop         {row['loop_ns_per_job']:6.1f}")
    print(f"  heap (push+pop)  {row['heap_ns']:6.1f}")
    print(
        f"  placement        {row['placement_bits_ns']:6.1f}  "
        f"(a scan of the rows instead: {row['placement_scan_ns']:.1f})"
    )
    print(f"  statistics       {row['statistics_ns']:6.1f}  (the clock and integrals, 2 events)")
    print(f"  the rest         {row['rest_ns']:6.1f}  (job columns, next event, checks)")


if __name__ == "__main__":
    main()
