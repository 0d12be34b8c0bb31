"""Engine throughput against an idiomatic SimPy 4 model of the same M/M/c queue, in one run.

Workload: c = 100 one-core nodes, load 0.9 (lambda = 90/s, mean size 1 s), 10^6 jobs, FCFS
first-fit, through the same code path as `clusteremu run` (scenario dict -> loader -> Engine
-> per-job table and summary). Prints jobs per wall second for both and their ratio, the
mean response times (which must agree with each other and with Erlang C), and events per
second of EQUI on a 1,000-core pool.

Further rows measure the Python policy path: placers a user writes in Python, called back
by the engine at every decision, on M/M/10 and M/M/100 at load 0.9, each against the SimPy
model of the same queue. `UserFirstFit` is a tuned first-fit (strict FCFS declared, Python
lists); `UserMostFreeNumpy` and `UserMostFreeLists` are written the plain way, from
docs/adding_a_policy.md and the `PlacementView` fields only (the node with the most free
cores among those that fit, FCFS), one with numpy and one with Python lists;
`DocsFirstRoom` is a strict-FCFS first-fit that scans the nodes in Python; `DocsFirstFit`
and `DocsMostFree` are that document's placers ("Python placers: what a call costs"), which
ask the view for the nodes each job fits (`fitting_nodes`, computed by compiled code)
instead of scanning them. Runs of a placer and SimPy are interleaved and the best of
`--repeat` kept, so a busy machine slows both alike.

    python benchmarks/engine_vs_simpy.py [--jobs 1000000] [--python-jobs 200000] [--json]
    python benchmarks/engine_vs_simpy.py --python-only [--python-jobs 200000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections import deque
from typing import Any

import numpy as np

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.policies.base import Placement, PlacementView, Placer
from clusteremu.scenarios.loader import spec_from_dict


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


class UserMostFreeNumpy(Placer):
    """Most free cores among the nodes that fit, FCFS, with numpy: written the plain way,
    from docs/adding_a_policy.md and the PlacementView fields only."""

    name = "user-most-free-numpy"

    def place(self, view: PlacementView) -> list[Placement]:
        free_cpu = view.free_cpu.copy()
        free_mem = view.free_memory_gb.copy()
        out = []
        for i in range(view.queue.size):
            cpu, mem = view.request_cpu[i], view.request_memory_gb[i]
            fits = view.active & (free_cpu >= cpu) & (free_mem >= mem)
            if not fits.any():
                break  # FCFS: nothing starts behind a job that fits nowhere
            k = int(np.argmax(np.where(fits, free_cpu, -np.inf)))
            free_cpu[k] -= cpu
            free_mem[k] -= mem
            out.append(Placement(int(view.queue[i]), k))
        return out


class UserMostFreeLists(Placer):
    """Most free cores among the nodes that fit, FCFS, with Python lists: written the plain
    way, from docs/adding_a_policy.md and the PlacementView fields only."""

    name = "user-most-free-lists"

    def place(self, view: PlacementView) -> list[Placement]:
        free_cpu = view.free_cpu.tolist()
        free_mem = view.free_memory_gb.tolist()
        active = view.active.tolist()
        out = []
        for job, cpu, mem in zip(
            view.queue.tolist(),
            view.request_cpu.tolist(),
            view.request_memory_gb.tolist(),
            strict=True,
        ):
            best = -1
            for k in range(len(free_cpu)):
                fits = active[k] and free_cpu[k] >= cpu and free_mem[k] >= mem
                if fits and (best < 0 or free_cpu[k] > free_cpu[best]):
                    best = k
            if best < 0:
                break  # FCFS: nothing starts behind a job that fits nowhere
            free_cpu[best] -= cpu
            free_mem[best] -= mem
            out.append(Placement(job, best))
        return out


class DocsFirstRoom(Placer):
    """A strict-FCFS first-fit that scans every node in Python (the example
    docs/adding_a_policy.md showed before `fitting_nodes`): the first up node with a free
    slot and room for the cores and memory."""

    name = "first-room"
    strict_fcfs = True

    def place(self, view: PlacementView) -> list[Placement]:
        cpu = view.free_cpu.tolist()  # one conversion per field, then plain Python
        mem = view.free_memory_gb.tolist()
        slots = view.free_slots.tolist()
        up = view.active.tolist()
        nodes = range(len(cpu))
        out = []
        for job, c, m, g in zip(
            view.queue.tolist(),
            view.request_cpu.tolist(),
            view.request_memory_gb.tolist(),
            view.request_gpu.tolist(),
            strict=True,
        ):
            fits = (k for k in nodes if cpu[k] >= c and mem[k] >= m and slots[k] >= 1 and up[k])
            k = next(fits, -1)
            if k < 0 or g > 0:
                break
            cpu[k] -= c  # later jobs of this call see what earlier ones took
            mem[k] -= m
            slots[k] -= 1
            out.append(Placement(job, k))
        return out


class DocsFirstFit(Placer):
    """docs/adding_a_policy.md's `FirstFit` ("Python placers"), as written there: strict
    FCFS, each waiting job to the first node `fitting_nodes` names."""

    name = "docs-first-fit"
    strict_fcfs = True

    def place(self, view: PlacementView) -> list[Placement]:
        out, taken = [], set()
        for i, job in enumerate(view.queue.tolist()):
            k = next((k for k in view.fitting_nodes(i) if k not in taken), -1)
            if k < 0:
                break  # strict FCFS: nothing starts behind a job that fits nowhere
            taken.add(k)  # one job per node and call: the engine asks again after an event
            out.append(Placement(job, k))
        return out


class DocsMostFree(Placer):
    """docs/adding_a_policy.md's `MostFree` ("Python placers"), as written there: each
    waiting job in order to the node with the most free cores among those it fits, strict
    FCFS."""

    name = "docs-most-free"
    strict_fcfs = True

    def place(self, view: PlacementView) -> list[Placement]:
        free = view.free_cpu
        out, taken = [], set()
        for i, job in enumerate(view.queue.tolist()):
            nodes = [k for k in view.fitting_nodes(i) if k not in taken]
            if not nodes:
                break  # nothing starts behind a job that fits nowhere
            k = max(nodes, key=free.__getitem__)
            taken.add(k)
            out.append(Placement(job, k))
        return out


class DocsMostFreeNumpy(Placer):
    """docs/adding_a_policy.md's `MostFreeNumpy` ("Python placers"), as written there: the
    most free cores among the nodes `fit_mask` marks, strict FCFS, with numpy."""

    name = "docs-most-free-numpy"
    strict_fcfs = True

    def place(self, view: PlacementView) -> list[Placement]:
        free = view.free_cpu
        out: list[Placement] = []
        taken: list[int] = []
        for i, job in enumerate(view.queue.tolist()):
            fits = view.fit_mask(i)
            if taken:
                fits[taken] = False  # one job per node and call
            if not fits.any():
                break  # nothing starts behind a job that fits nowhere
            k = int(np.argmax(np.where(fits, free, -np.inf)))
            taken.append(k)
            out.append(Placement(job, k))
        return out


#: The user placers of the Python-policy rows, by the name the output gives them.
USER_PLACERS: dict[str, type[Placer]] = {
    "first_fit": UserFirstFit,
    "most_free_numpy": UserMostFreeNumpy,
    "most_free_lists": UserMostFreeLists,
    "docs_first_room": DocsFirstRoom,
    "docs_first_fit": DocsFirstFit,
    "docs_most_free": DocsMostFree,
    "docs_most_free_numpy": DocsMostFreeNumpy,
}


def run_python_policy(
    jobs: int, servers: int = 10, placer: type[Placer] = UserFirstFit
) -> tuple[float, float]:
    """Seconds and mean response of M/M/`servers` with a user placer (Python path)."""
    spec = spec_from_dict(mmc_scenario(jobs, servers))
    start = time.perf_counter()
    result = Engine(spec, placer=placer()).run()
    return time.perf_counter() - start, float(result.summary["mean_response_time_s"])


def python_policy_rows(jobs: int, repeat: int) -> dict[str, Any]:
    """Each user placer on M/M/10 and M/M/100 against SimPy on the same queue, interleaved,
    best of `repeat`: jobs per second, the ratio, and the mean responses."""
    out: dict[str, Any] = {}
    run_python_policy(2_000)  # compile the entries used by Python policies
    for servers in (10, 100):
        for key, placer in USER_PLACERS.items():
            py_runs, simpy_runs, same_runs = [], [], []
            for _ in range(repeat):  # interleaved: a busy machine slows both alike
                py_runs.append(run_python_policy(jobs, servers, placer))
                simpy_runs.append(run_simpy(jobs, servers=servers))
                if key in SIMPY_POLICIES:
                    same_runs.append(run_simpy_policy(jobs, servers, key))
            py_s, py_mean = min(py_runs)
            simpy_s, simpy_mean = min(simpy_runs)
            row = out[f"mm{servers}_{key}"] = {
                "jobs_per_s": jobs / py_s,
                "simpy_jobs_per_s": jobs / simpy_s,
                "vs_simpy": simpy_s / py_s,
                "mean_response_s": py_mean,
                "simpy_mean_response_s": simpy_mean,
                "erlang_c_mean_response_s": erlang_c(0.9 * servers, servers),
            }
            if same_runs:
                same_s, same_mean = min(same_runs)
                row["simpy_same_policy_jobs_per_s"] = jobs / same_s
                row["vs_simpy_same_policy"] = same_s / py_s
                row["simpy_same_policy_mean_response_s"] = same_mean
    return out


def print_python_rows(rows: dict[str, Any], jobs: int) -> None:
    print(f"Python placers (user policies), {jobs:,} jobs, load 0.9, vs SimPy on the same queue:")
    for name, row in rows.items():
        print(
            f"  {name:<22} {row['jobs_per_s']:>9,.0f} jobs/s vs SimPy "
            f"{row['simpy_jobs_per_s']:>9,.0f} jobs/s -> {row['vs_simpy']:.2f}x "
            f"(mean T {row['mean_response_s']:.4f} s, SimPy {row['simpy_mean_response_s']:.4f} s, "
            f"Erlang C {row['erlang_c_mean_response_s']:.4f} s)"
        )
        if "vs_simpy_same_policy" in row:
            print(
                f"  {'':<22} SimPy running the same policy "
                f"{row['simpy_same_policy_jobs_per_s']:>9,.0f} jobs/s -> "
                f"{row['vs_simpy_same_policy']:.2f}x "
                f"(mean T {row['simpy_same_policy_mean_response_s']:.4f} s)"
            )


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


# --- the same policy in SimPy ------------------------------------------------------------
#
# What a SimPy user writes for a placement policy: a dispatcher over a FCFS list, free
# capacity kept in numpy arrays or Python lists (updated as jobs start and end), one
# process per job. The decision code is the same as the user placer's above, line for line.


def most_free_numpy(
    free_cpu: np.ndarray, free_mem: np.ndarray, active: np.ndarray, cpu: float, mem: float
) -> int:
    """`UserMostFreeNumpy`'s decision for one job: the node with the most free cores among
    those that fit, or -1."""
    fits = active & (free_cpu >= cpu) & (free_mem >= mem)
    if not fits.any():
        return -1
    return int(np.argmax(np.where(fits, free_cpu, -np.inf)))


def most_free_lists(
    free_cpu: list[float], free_mem: list[float], active: list[bool], cpu: float, mem: float
) -> int:
    """`UserMostFreeLists`'s decision for one job, on Python lists."""
    best = -1
    for k in range(len(free_cpu)):
        fits = active[k] and free_cpu[k] >= cpu and free_mem[k] >= mem
        if fits and (best < 0 or free_cpu[k] > free_cpu[best]):
            best = k
    return best


def first_room_lists(
    free_cpu: list[float], free_mem: list[float], active: list[bool], cpu: float, mem: float
) -> int:
    """`DocsFirstRoom`'s decision for one job (the first up node with room), on lists."""
    return next(
        (
            k
            for k in range(len(free_cpu))
            if free_cpu[k] >= cpu and free_mem[k] >= mem and active[k]
        ),
        -1,
    )


#: The SimPy model of each user placer: (its decision, whether it keeps numpy arrays).
#: The docs' placers ask the view which nodes fit (compiled code); SimPy has no such
#: thing, so their SimPy model finds them as the plain placers of the same policy do.
SIMPY_POLICIES: dict[str, tuple[Any, bool]] = {
    "most_free_numpy": (most_free_numpy, True),
    "most_free_lists": (most_free_lists, False),
    "docs_first_room": (first_room_lists, False),
    "docs_first_fit": (first_room_lists, False),
    "docs_most_free": (most_free_lists, False),
    "docs_most_free_numpy": (most_free_numpy, True),
}


def run_simpy_policy(
    jobs: int, servers: int, policy: str, load: float = 0.9, seed: int = 1
) -> tuple[float, float]:
    """The same policy written the SimPy way (seconds, mean response past the warm-up): a
    dispatcher over a FCFS list called at every arrival and every end of a job, free cores
    and GB per node in numpy arrays or lists, one process per job."""
    import simpy

    decide, numpy_style = SIMPY_POLICIES[policy]
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / (load * servers), jobs)
    sizes = rng.exponential(1.0, jobs)
    response = np.zeros(jobs)
    arrived = np.zeros(jobs)
    env = simpy.Environment()
    if numpy_style:
        free_cpu: Any = np.ones(servers)
        free_mem: Any = np.ones(servers)
        active: Any = np.ones(servers, dtype=bool)
    else:
        free_cpu, free_mem, active = [1.0] * servers, [1.0] * servers, [True] * servers
    waiting: deque[int] = deque()
    cpu, mem = 1.0, 0.0

    def job(i: int, k: int) -> Any:
        yield env.timeout(sizes[i])
        free_cpu[k] += cpu
        free_mem[k] += mem
        response[i] = env.now - arrived[i]
        dispatch()

    def dispatch() -> None:
        while waiting:  # FCFS: nothing starts behind a job that fits nowhere
            k = decide(free_cpu, free_mem, active, cpu, mem)
            if k < 0:
                return
            i = waiting.popleft()
            free_cpu[k] -= cpu
            free_mem[k] -= mem
            env.process(job(i, k))

    def source() -> Any:
        for i in range(jobs):
            yield env.timeout(gaps[i])
            arrived[i] = env.now
            waiting.append(i)
            dispatch()

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
    parser.add_argument(
        "--python-jobs", type=int, default=200_000, help="jobs of the Python-placer rows"
    )
    parser.add_argument("--python-only", action="store_true", help="only the Python-placer rows")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    if args.python_only:
        rows = python_policy_rows(args.python_jobs, args.repeat)
        if args.json:
            print(json.dumps({"python_policy_jobs": args.python_jobs, **rows}, indent=2))
        else:
            print_python_rows(rows, args.python_jobs)
        return
    run_engine(mmc_scenario(20_000))  # compile (cached on disk after the first run)
    # Interleaved (engine, SimPy, engine, SimPy, ...): a change in the machine's load
    # falls on both alike.
    engine_runs, simpy_runs = [], []
    for _ in range(args.repeat):
        engine_runs.append(run_engine(mmc_scenario(args.jobs)))
        simpy_runs.append(run_simpy(args.jobs))
    engine_s, summary = min(engine_runs, key=lambda r: r[0])
    simpy_s, simpy_mean = min(simpy_runs, key=lambda r: r[0])
    equi_s, equi_summary = min(
        (run_engine(equi_scenario(args.jobs)) for _ in range(args.repeat)), key=lambda r: r[0]
    )
    rows = python_policy_rows(args.python_jobs, args.repeat)
    first_fit = rows["mm10_first_fit"]
    out = {
        "python_policy_jobs": args.python_jobs,
        "python_policy_jobs_per_s": first_fit["jobs_per_s"],
        "simpy_mm10_jobs_per_s": first_fit["simpy_jobs_per_s"],
        "python_policy_vs_simpy": first_fit["vs_simpy"],
        "python_policy_mean_response_s": first_fit["mean_response_s"],
        "simpy_mm10_mean_response_s": first_fit["simpy_mean_response_s"],
        "erlang_c_mm10_mean_response_s": erlang_c(9.0, 10),
        **rows,
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
    print_python_rows(rows, args.python_jobs)
    print(
        f"EQUI, 1,000-core pool, Amdahl 0.95: {out['equi_1000_cores_events_per_s']:,.0f} events/s "
        f"({out['equi_1000_cores_jobs_per_s']:,.0f} jobs/s)"
    )


if __name__ == "__main__":
    main()
