"""Engine throughput against an idiomatic SimPy 4 model of the same M/M/c queue, in one run.

Workload: c = 100 one-core nodes, load 0.9 (lambda = 90/s, mean size 1 s), 10^6 jobs, FCFS
first-fit, through the same code path as `clusteremu run` (scenario dict -> loader -> Engine
-> per-job table and summary). Prints jobs per wall second for both and their ratio, the
mean response times (which must agree with each other and with Erlang C), and events per
second of EQUI on a 1,000-core pool.

A second row measures the Python policy path: a user's own first-fit placer written in
plain Python (`UserFirstFit` below, called back by the engine at every decision) on M/M/10
at load 0.9, against the SimPy model of the same M/M/10 queue. Runs of the two are
interleaved and the best of `--repeat` kept, so a busy machine slows both alike.

    python benchmarks/engine_vs_simpy.py [--jobs 1000000] [--python-jobs 200000] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from typing import Any

import numpy as np

from cluster.engine import Engine
from cluster.policies.base import Placement, PlacementView, Placer
from scenarios.loader import spec_from_dict


class UserFirstFit(Placer):
    """A first-fit placer as a user writes it in Python: FCFS, first node with room."""

    name = "user-first-fit"
    strict_fcfs = True  # never starts a job behind a blocked one

    def place(self, view: PlacementView) -> list[Placement]:
        free = view.free_cpu.tolist()  # ten nodes: plain Python beats numpy calls
        out = []
        for job, cpu in zip(view.queue.tolist(), view.request_cpu.tolist(), strict=True):
            k = next((k for k, room in enumerate(free) if room >= cpu), -1)
            if k < 0:
                break  # strict FCFS: nothing starts behind a job that fits nowhere
            free[k] -= cpu
            out.append(Placement(job, k))
        return out


def run_python_policy(jobs: int, servers: int = 10) -> tuple[float, float]:
    """Seconds and mean response of M/M/`servers` with `UserFirstFit` (Python path)."""
    spec = spec_from_dict(mmc_scenario(jobs, servers))
    start = time.perf_counter()
    result = Engine(spec, placer=UserFirstFit()).run()
    return time.perf_counter() - start, float(result.summary["mean_response_time_s"])


def mmc_scenario(jobs: int, servers: int = 100, load: float = 0.9) -> dict[str, Any]:
    return {
        "name": "bench-mmc",
        "seed": 1,
        "stop": {"jobs": jobs, "warmup_jobs": jobs // 10},
        "cluster": {
            "node_types": [{"name": "core", "cpu": 1, "memory_gb": 1}],
            "nodes": [{"type": "core", "count": servers}],
        },
        "workload": {
            "classes": [
                {
                    "name": "a",
                    "arrival": {"kind": "poisson", "rate_per_s": load * servers},
                    "size": {"kind": "exponential", "mean_s": 1.0},
                    "request": {"cpu": 1, "memory_gb": 0},
                }
            ]
        },
    }


def equi_scenario(jobs: int, cores: int = 1000, load: float = 0.9) -> dict[str, Any]:
    return {
        "name": "bench-equi",
        "seed": 1,
        "stop": {"jobs": jobs},
        "cluster": {"pools": [{"name": "cores", "cores": cores}]},
        "workload": {
            "classes": [
                {
                    "name": "a",
                    "arrival": {"kind": "poisson", "rate_per_s": load * cores / 10},
                    "size": {"kind": "exponential", "mean_s": 10.0},
                    "speedup": {"kind": "amdahl", "parallel_fraction": 0.95},
                    "pool": "cores",
                }
            ]
        },
    }


def run_engine(data: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    start = time.perf_counter()
    engine = Engine(spec_from_dict(data))
    result = engine.run()
    return time.perf_counter() - start, result.summary


def run_simpy(
    jobs: int, servers: int = 100, load: float = 0.9, seed: int = 1
) -> tuple[float, float]:
    """The textbook SimPy model: a source process and one process per job on a Resource."""
    import simpy

    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / (load * servers), jobs)
    sizes = rng.exponential(1.0, jobs)
    response = np.zeros(jobs)
    env = simpy.Environment()
    nodes = simpy.Resource(env, capacity=servers)

    def job(i: int) -> Any:
        arrived = env.now
        with nodes.request() as req:
            yield req
            yield env.timeout(sizes[i])
        response[i] = env.now - arrived

    def source() -> Any:
        for i in range(jobs):
            yield env.timeout(gaps[i])
            env.process(job(i))

    start = time.perf_counter()
    env.process(source())
    env.run()
    elapsed = time.perf_counter() - start
    return elapsed, float(response[jobs // 10 :].mean())


def erlang_c(arrival_rate: float, servers: int) -> float:
    a = arrival_rate
    log_terms = [k * math.log(a) - math.lgamma(k + 1) for k in range(servers)]
    top = servers * math.log(a) - math.lgamma(servers + 1) - math.log(1 - a / servers)
    m = max(max(log_terms), top)
    p_wait = math.exp(top - m) / (sum(math.exp(t - m) for t in log_terms) + math.exp(top - m))
    return p_wait / (servers - a) + 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs for each")
    parser.add_argument("--python-jobs", type=int, default=200_000, help="jobs of the M/M/10 row")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    run_engine(mmc_scenario(20_000))  # compile (cached on disk after the first run)
    engine_runs = [run_engine(mmc_scenario(args.jobs)) for _ in range(args.repeat)]
    simpy_runs = [run_simpy(args.jobs) for _ in range(args.repeat)]
    engine_s, summary = min(engine_runs, key=lambda r: r[0])
    simpy_s, simpy_mean = min(simpy_runs, key=lambda r: r[0])
    equi_s, equi_summary = min(
        (run_engine(equi_scenario(args.jobs)) for _ in range(args.repeat)), key=lambda r: r[0]
    )
    run_python_policy(2_000)  # compile the entries used by Python policies
    py_runs, simpy10_runs = [], []
    for _ in range(args.repeat):  # interleaved: a busy machine slows both alike
        py_runs.append(run_python_policy(args.python_jobs))
        simpy10_runs.append(run_simpy(args.python_jobs, servers=10))
    py_s, py_mean = min(py_runs)
    simpy10_s, simpy10_mean = min(simpy10_runs)
    out = {
        "python_policy_jobs": args.python_jobs,
        "python_policy_jobs_per_s": args.python_jobs / py_s,
        "simpy_mm10_jobs_per_s": args.python_jobs / simpy10_s,
        "python_policy_vs_simpy": simpy10_s / py_s,
        "python_policy_mean_response_s": py_mean,
        "simpy_mm10_mean_response_s": simpy10_mean,
        "erlang_c_mm10_mean_response_s": erlang_c(9.0, 10),
        "jobs": args.jobs,
        "repeat": args.repeat,
        "engine_first_run_jobs_per_s": args.jobs / engine_runs[0][0],
        "engine_jobs_per_s": args.jobs / engine_s,
        "simpy_jobs_per_s": args.jobs / simpy_s,
        "speedup_vs_simpy": simpy_s / engine_s,
        "engine_mean_response_s": summary["mean_response_time_s"],
        "simpy_mean_response_s": simpy_mean,
        "erlang_c_mean_response_s": erlang_c(90.0, 100),
        "equi_1000_cores_events_per_s": equi_summary["events"] / equi_s,
        "equi_1000_cores_jobs_per_s": args.jobs / equi_s,
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"M/M/100 at load 0.9, {args.jobs:,} jobs, best of {args.repeat} runs each")
    for label, key in (("engine ", "engine"), ("SimPy 4", "simpy")):
        rate, mean = out[f"{key}_jobs_per_s"], out[f"{key}_mean_response_s"]
        print(f"  {label}: {rate:>12,.0f} jobs/s  (mean T {mean:.4f} s)")
    print(f"  Erlang C mean T {out['erlang_c_mean_response_s']:.4f} s")
    print(
        f"  ratio engine / SimPy: {out['speedup_vs_simpy']:.1f}x "
        f"(engine's first run: {out['engine_first_run_jobs_per_s']:,.0f} jobs/s)"
    )
    print(
        f"Python first-fit (user policy) on M/M/10, {args.python_jobs:,} jobs: "
        f"{out['python_policy_jobs_per_s']:,.0f} jobs/s vs SimPy "
        f"{out['simpy_mm10_jobs_per_s']:,.0f} jobs/s -> {out['python_policy_vs_simpy']:.2f}x "
        f"(mean T {py_mean:.4f} s, SimPy {simpy10_mean:.4f} s, "
        f"Erlang C {out['erlang_c_mm10_mean_response_s']:.4f} s)"
    )
    print(
        f"EQUI, 1,000-core pool, Amdahl 0.95: {out['equi_1000_cores_events_per_s']:,.0f} events/s "
        f"({out['equi_1000_cores_jobs_per_s']:,.0f} jobs/s)"
    )


if __name__ == "__main__":
    main()
