"""Scale: 10^7 jobs on 100,000 nodes with the compiled first-fit placer, its memory per job
and per node.

The shipped M/M/c scenario (`mm-c`: one-core nodes, exponential sizes of mean 1 s, FCFS
first-fit) on `--nodes` nodes at load `--load` (arrival rate load x nodes per s), stopped
after `--jobs` jobs: the command

    clusteremu run mm-c --set cluster.nodes.0.count=100000 \\
        --set workload.classes.0.arrival.rate_per_s=80000 --set stop.jobs=10000000

through the same code (scenario -> loader -> Engine -> per-job table and summary), in
phases: building the engine (drawing the jobs), the event loop, the per-job table and
summary. A small run first compiles or loads the loop, so the figures are those of a warm
process. Prints wall seconds per phase, jobs per wall second, the peak resident memory, and
bytes per job and per node: from the layout (`clusteremu.cluster.state.layout_bytes`), allocated by
the engine, and resident (the rise of the peak RSS over the process before the run, table
included, divided by the jobs). `--scan` runs without the index of free capacity (each
placement scans the node rows: the engine before the index).

    python benchmarks/scale.py [--jobs 10000000] [--nodes 100000] [--load 0.8] [--scan] [--json]
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from typing import Any

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.engine.sinks import StreamSink
from clusteremu.cluster.layout import Status
from clusteremu.cluster.state import layout_bytes, max_gpus
from clusteremu.scenarios.loader import load_scenario

#: Per-job arrays of the engine's state (the heap: two entries per job and per node row).
JOB_ARRAYS = (
    "jobs_f",
    "jobs_i",
    "queue",
    "members",
    "alloc_out",
    "decisions",
    "decision_setup_s",
    "wait_i",
    "wait_f",
    "run_by_type",
)
NODE_ARRAYS = ("nodes_f", "nodes_i", "gpu_free", "cached", "fault_draws")
HEAP = ("heap_t", "heap_j", "heap_k")


def rss_mb() -> float:
    """Resident memory now, MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def peak_rss_mb() -> float:
    """Peak resident memory of the process so far, MB (Linux reports kB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(
    jobs: int, nodes: int, load: float, scan: bool, stream: bool = False, out: str | None = None
) -> dict[str, Any]:
    spec = load_scenario(
        "mm-c",
        [
            f"cluster.nodes.0.count={nodes}",
            f"workload.classes.0.arrival.rate_per_s={load * nodes:g}",
            f"stop.jobs={jobs}",
        ],
    )
    before_mb = rss_mb()
    t0 = time.perf_counter()
    sink = StreamSink(out) if stream else None
    engine = Engine(spec, fit_index=False if scan else None, sink=sink, compact_every=1 << 19)
    t1 = time.perf_counter()
    while engine.step() != Status.FINISHED:
        pass
    t2 = time.perf_counter()
    result = engine.result()
    t3 = time.perf_counter()
    s = engine.store.s
    rows = s.nodes_f.shape[1]
    entry = sum(getattr(s, name).itemsize for name in HEAP)  # bytes of one heap entry
    job_bytes = sum(getattr(s, name).nbytes for name in JOB_ARRAYS) + 2 * jobs * entry
    node_bytes = sum(getattr(s, name).nbytes for name in NODE_ARRAYS)
    node_bytes += (s.heap_t.size - 2 * jobs) * entry
    layout = layout_bytes(gpus=max_gpus(spec), fit_index_rows=0 if scan else rows)
    peak_mb = peak_rss_mb()
    return {
        "jobs": jobs,
        "nodes": nodes,
        "load": load,
        "index": not scan,
        "build_s": t1 - t0,
        "loop_s": t2 - t1,
        "result_s": t3 - t2,
        "wall_s": t3 - t0,
        "jobs_per_s": jobs / (t3 - t0),
        "events": engine.events,
        "mean_response_time_s": result.summary["mean_response_time_s"],
        "peak_rss_mb": peak_mb,
        "rss_before_mb": before_mb,
        "resident_bytes_per_job": (peak_mb - before_mb) * 2**20 / jobs,
        "table_bytes_per_job": result.jobs.nbytes / jobs,
        "parquet_bytes_per_row": sink.table_bytes / jobs if sink is not None and out else None,
        "layout_bytes_per_job": layout["per_job"],
        "allocated_bytes_per_job": job_bytes / jobs,
        "layout_bytes_per_node": layout["per_node"],
        "allocated_bytes_per_node": node_bytes / rows,
        "index_bytes_per_node": s.fit_index.nbytes / rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000_000)
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--load", type=float, default=0.8)
    parser.add_argument("--scan", action="store_true", help="no index: scan the node rows")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--stream", action="store_true", help="compact job rows, stream results (StreamSink)"
    )
    parser.add_argument("--out", help="with --stream: write the per-job Parquet table here")
    args = parser.parse_args()

    run(30_000, 1_000, args.load, args.scan)  # compile or load the loop
    out = run(args.jobs, args.nodes, args.load, args.scan, args.stream, args.out)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    how = "index of free capacity" if out["index"] else "scan of the node rows"
    print(
        f"mm-c: {args.jobs:,} jobs on {args.nodes:,} one-core nodes at load {args.load}, "
        f"first-fit through the {how}"
    )
    print(
        f"  wall {out['wall_s']:.1f} s ({out['jobs_per_s']:,.0f} jobs/s): build "
        f"{out['build_s']:.1f} s, loop {out['loop_s']:.1f} s, table and summary "
        f"{out['result_s']:.1f} s; mean response {out['mean_response_time_s']:.4f} s"
    )
    print(
        f"  peak RSS {out['peak_rss_mb']:,.0f} MB ({out['rss_before_mb']:,.0f} MB before the "
        f"run): {out['resident_bytes_per_job']:.0f} B per job resident, the per-job table "
        f"included ({out['table_bytes_per_job']:.0f} B)"
    )
    if out["parquet_bytes_per_row"] is not None:
        print(f"  Parquet table: {out['parquet_bytes_per_row']:.1f} B per row (zstd)")
    print(
        f"  per job: {out['layout_bytes_per_job']} B from the layout, "
        f"{out['allocated_bytes_per_job']:.0f} B allocated"
    )
    print(
        f"  per node: {out['layout_bytes_per_node']} B from the layout, "
        f"{out['allocated_bytes_per_node']:.0f} B allocated, index "
        f"{out['index_bytes_per_node']:.0f} B"
    )


if __name__ == "__main__":
    main()
