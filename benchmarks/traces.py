"""Real workloads in: import rows/s, import memory per row, and replay jobs/s with FCFS
placement, per trace format (docs/traces.md), on synthetic files in each published schema
(`benchmarks/trace_files.py`).

For each format: the files are generated (`--rows` jobs; Kubernetes YAML `--yaml-rows`),
then

* import: the reader in a fresh process (`clusteremu import`'s own code), best of
  `--repeat`; rows/s, and bytes per row = the rise of the child's peak resident memory
  over its memory before reading, divided by the rows;
* replay: the imported folder's scenario with `scheduler.placer.name=fcfs` (FCFS, first
  node with room; the compiled placer), loaded and run in this process after a warm-up
  run that compiles the loop, best of `--repeat`: jobs/s of the replay (the engine built
  on the jobs, the run, the per-job table and the summary, as `engine_vs_simpy.py` times
  its engine), and with the scenario and its table read too (end to end).

The Standard Workload Format row also replays the same jobs in SimPy (a `Container` of
the machine's processors, each job a process that takes its processors first come first
served, strict FCFS) in this process: the ratio of the two rates, and the mean waits (the
same policy: they must agree).

`--big` adds the acceptance case: 10^6 jobs of the Alibaba 2018 batch_instance schema.

    python benchmarks/traces.py [--rows 200000] [--yaml-rows 20000] [--repeat 3] [--big]
                                [--formats swf,alibaba-2018,...] [--json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trace_files import GENERATORS  # noqa: E402

#: The child that imports: RSS before and peak after reading (KB), seconds, rows.
CHILD = """
import resource, sys, time
from pathlib import Path
from clusteremu.cluster.traces.formats import reader
m = reader(sys.argv[1])
import pyarrow, numpy  # loaded before the baseline
def rss_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
before = rss_kb()
t0 = time.perf_counter()
trace = m.read([Path(p) for p in sys.argv[2:]], {})
dt = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(before, peak, dt, trace.jobs.num_rows, trace.report.rows_read)
"""


def import_in_child(fmt: str, files: list[Path]) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, fmt, *map(str, files)],
        capture_output=True,
        text=True,
        check=True,
    )
    before, peak, seconds, kept, read = done.stdout.split()
    rows = int(read)
    return {
        "seconds": float(seconds),
        "rows": rows,
        "kept": int(kept),
        "rows_per_s": rows / float(seconds),
        "bytes_per_row": (int(peak) - int(before)) * 1024.0 / max(rows, 1),
    }


def write_folder(fmt: str, files: list[Path], out: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "clusteremu", "import", fmt, *map(str, files), "--out", str(out)],
        capture_output=True,
        check=True,
    )
    return out / "scenario.yaml"


def replay(scenario: Path, repeat: int) -> dict[str, float]:
    """Best of `repeat`: reading the scenario and its table (s), and the replay (s: the
    engine built on the jobs, the run, the per-job table and the summary, as
    `benchmarks/engine_vs_simpy.py` times its engine)."""
    from clusteremu.cluster.engine import Engine
    from clusteremu.scenarios.loader import load_scenario

    best_read = best_replay = np.inf
    jobs = 0
    summary: dict[str, Any] = {}
    for _ in range(repeat):
        t0 = time.perf_counter()
        spec = load_scenario(str(scenario), ["scheduler.placer.name=fcfs"])
        t1 = time.perf_counter()
        result = Engine(spec).run()
        t2 = time.perf_counter()
        best_read, best_replay = min(best_read, t1 - t0), min(best_replay, t2 - t1)
        jobs = result.jobs.num_rows
        summary = result.summary
    return {
        "read_s": float(best_read),
        "replay_s": float(best_replay),
        "jobs": jobs,
        "jobs_per_s": jobs / best_replay,
        "end_to_end_jobs_per_s": jobs / (best_read + best_replay),
        "jobs_completed": summary["jobs_completed"],
        "mean_wait_s": summary["mean_wait_s"],
    }


def simpy_fcfs(scenario: Path, repeat: int) -> dict[str, float]:
    """The same jobs on one machine in SimPy, strict FCFS (a Container's gets wait in
    order: the first that cannot be served blocks the others)."""
    import pyarrow.parquet as pq
    import simpy
    import yaml

    data = yaml.safe_load(scenario.read_text())
    procs = float(data["cluster"]["node_types"][0]["cpu"])
    table = pq.read_table(
        scenario.parent / "jobs.parquet", columns=["arrival_s", "run_s", "request_cpu"]
    )
    arrival = table.column("arrival_s").to_numpy().tolist()
    run = table.column("run_s").to_numpy().tolist()
    cpu = table.column("request_cpu").to_numpy().tolist()
    best, waits = np.inf, 0.0
    for _ in range(repeat):
        t0 = time.perf_counter()
        env = simpy.Environment()
        machine = simpy.Container(env, capacity=procs, init=procs)
        total = [0.0]

        def job(env: Any, machine: Any, total: list[float], a: float, r: float, c: float) -> Any:
            yield machine.get(c)
            total[0] += env.now - a
            yield env.timeout(r)
            yield machine.put(c)

        def source(env: Any, machine: Any, total: list[float]) -> Any:
            for a, r, c in zip(arrival, run, cpu, strict=True):
                if a > env.now:
                    yield env.timeout(a - env.now)
                env.process(job(env, machine, total, a, r, c))

        env.process(source(env, machine, total))
        env.run()
        best = min(best, time.perf_counter() - t0)
        waits = total[0] / len(arrival)
    return {"seconds": float(best), "jobs_per_s": len(arrival) / best, "mean_wait_s": waits}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--yaml-rows", type=int, default=20_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--formats", default=",".join(GENERATORS))
    p.add_argument("--big", action="store_true", help="also 10^6 Alibaba 2018 instances")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    cases = [
        (f, args.yaml_rows if f == "kubernetes" else args.rows) for f in args.formats.split(",")
    ]
    if args.big:
        cases.append(("alibaba-2018", 1_000_000))
    rows_out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        warm = Path(tmp) / "warm"
        warm.mkdir()
        replay(write_folder("swf", GENERATORS["swf"](1000, warm), warm / "out"), 1)
        for fmt, n in cases:
            folder = Path(tmp) / f"{fmt}-{n}"
            folder.mkdir()
            files = GENERATORS[fmt](n, folder)
            imp = min(
                (import_in_child(fmt, files) for _ in range(args.repeat)),
                key=lambda r: r["seconds"],
            )
            scenario = write_folder(fmt, files, folder / "out")
            rep = replay(scenario, args.repeat)
            row: dict[str, Any] = {"format": fmt, "rows": n, "import": imp, "replay": rep}
            if fmt == "swf":
                base = simpy_fcfs(scenario, 1 if n > 200_000 else args.repeat)
                row["simpy"] = base
                row["replay_over_simpy"] = rep["jobs_per_s"] / base["jobs_per_s"]
            rows_out.append(row)
            if not args.json:
                extra = (
                    f"  SimPy {row['simpy']['jobs_per_s']:>10,.0f} jobs/s, ratio "
                    f"{row['replay_over_simpy']:.1f}x (mean wait {rep['mean_wait_s']:.6g} s "
                    f"vs SimPy {row['simpy']['mean_wait_s']:.6g} s)"
                    if "simpy" in row
                    else ""
                )
                print(
                    f"{fmt:<17} {n:>9,} rows  import {imp['rows_per_s']:>10,.0f} rows/s "
                    f"{imp['bytes_per_row']:>7,.0f} B/row  replay {rep['jobs_per_s']:>10,.0f} "
                    f"jobs/s (fcfs; {rep['end_to_end_jobs_per_s']:>9,.0f} with the table read)"
                    f"{extra}",
                    flush=True,
                )
    if args.json:
        print(json.dumps(rows_out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
