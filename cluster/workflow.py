"""The ML-workflow family of the thesis (Jialun Song, "Designing and implementing a load
aware scheduler for machine learning jobs", Uppsala University, 2021; reference in
docs/provisioner.md): one pipeline of 27 tasks run over many inputs.

Modelled on the thesis's production workflow (a retailer's sales forecasting): every *run*
executes the same 27 tasks (no dependencies are modelled: all 27 start with the run) on one
*scenario* input — a region, a number of products for sale — and an execution date, which
gives the days left in the sale. The tasks' static allocations are the thesis's Table 4:

| group | tasks | cores | GB |
|---|---|---|---|
| normal | 20 | 4 | 20 |
| parallel | 4 | 5 | 100 |
| memory-intensive | 2 | 6 | 350 |
| compute-intensive | 1 | 20 | 20 |

(1,520 GB and 132 cores per run.) What the tasks really use follows the thesis's analysis
(its section 5.1): every task's median memory is below 4 GB; by their peaks the tasks fall
into 17 *light* ones (never above 5 GB), 8 *moderate* ones (occasionally up to ~19 GB) and
2 *heavy* ones whose memory grows with the prediction workload, products x days left,
with a region effect and noise: heavy task 1 (a memory-intensive task, static 350 GB)
reaches ~170 GB, heavy task 2 (a parallel task, static 100 GB) ~65 GB. Only the 4
parallel tasks keep more than one core busy (2.5 to 4.8 of their 5); every other task
keeps at most one busy (the thesis cuts non-parallel tasks to one core: 132 -> 43 cores).
Heavy inputs also run longer. All of it is drawn by the `ml-workflow` usage model
(`clusteremu.cluster.usage`) from the scenario seed; the constants are ours, chosen to reproduce the
thesis's shapes, not its data (which is private).

Runs arrive every `run_interval_s` seconds (every class has the same deterministic
interarrival, so job i of every task belongs to run i). Each job carries the features
`run`, `region`, `products`, `days_left`; `profiling_table` turns a run's per-job table into
the thesis's Table 3 (one row per task instance).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.usage import Arrivals, Usage, register_usage_model

FloatArray = npt.NDArray[np.float64]

#: Table 4: static (cores, GB) per group.
STATIC: dict[str, tuple[float, float]] = {
    "normal": (4.0, 20.0),
    "parallel": (5.0, 100.0),
    "memory-intensive": (6.0, 350.0),
    "compute-intensive": (20.0, 20.0),
}
#: Days in a sale (execution dates run over it).
SALE_DAYS = 60
#: Regions of the runs (four in the thesis).
REGIONS = 4
#: The region effect on the heavy tasks' memory.
REGION_FACTOR = (0.8, 1.0, 1.15, 1.3)


@dataclass(frozen=True)
class Task:
    """One of the 27 tasks: its Table 4 group, its memory cluster, its usage constants.

    `median_gb`: median memory of an instance (light and moderate tasks); `minutes`:
    median run time; `common`: an ancillary task whose usage ignores the run's inputs.
    """

    name: str
    group: str
    cluster: str  # light | moderate | heavy1 | heavy2
    median_gb: float
    minutes: float
    common: bool = False

    @property
    def static(self) -> tuple[float, float]:
        return STATIC[self.group]

    @property
    def parallel(self) -> bool:
        return self.group == "parallel"


def _tasks() -> tuple[Task, ...]:
    tasks: list[Task] = []
    # 20 normal tasks: 14 light (8 of them the common, ancillary ones), 6 moderate.
    for i in range(20):
        cluster = "light" if i < 14 else "moderate"
        tasks.append(
            Task(
                f"normal-{i + 1:02d}",
                "normal",
                cluster,
                median_gb=0.3 + 0.1 * (i % 7),
                minutes=2.0 + (i * 7) % 11,
                common=i < 8,
            )
        )
    # 4 parallel tasks: heavy task 2, two moderate, one light.
    for i, cluster in enumerate(("heavy2", "moderate", "moderate", "light")):
        tasks.append(Task(f"parallel-{i + 1}", "parallel", cluster, 1.2 + 0.3 * i, 12.0 + 3 * i))
    # 2 memory-intensive tasks: heavy task 1 and a light one.
    tasks.append(Task("memory-1", "memory-intensive", "heavy1", 2.0, 15.0))
    tasks.append(Task("memory-2", "memory-intensive", "light", 1.5, 8.0))
    # 1 compute-intensive task (one busy core in practice).
    tasks.append(Task("compute-1", "compute-intensive", "light", 1.0, 20.0))
    return tuple(tasks)


TASKS: tuple[Task, ...] = _tasks()
TASK_BY_NAME: dict[str, Task] = {t.name: t for t in TASKS}
#: Input features every job carries (`Jobs.features`), in this order.
FEATURES = ("region", "products", "days_left")


def _heavy_memory(
    task: Task, workload: FloatArray, region: FloatArray, noise: FloatArray
) -> FloatArray:
    """GB of a heavy task for a prediction workload (products x (days left + 1))."""
    region_factor = np.asarray(REGION_FACTOR)[region.astype(np.int64)]
    if task.cluster == "heavy1":  # ~2.5 GB at the median workload, ~170 GB at the largest
        gb = 1.0 + 1.92e-7 * workload**1.75 * region_factor * noise
    else:  # heavy task 2: ~2 GB at the median, ~65 GB at the largest
        gb = 0.8 + 1.72e-6 * workload**1.5 * region_factor * noise
    return np.minimum(gb, 0.95 * task.static[1])


#: The usage model's parameters and their defaults.
USAGE_DEFAULTS: dict[str, Any] = {
    "products": (20, 2000),
    "heavy_noise_sigma": 0.15,
    "light_cap_gb": 4.8,
    "moderate_cap_gb": 19.0,
    "moderate_spike_gb": (4.0, 19.0),
}
#: Largest `heavy_noise_sigma` (a lognormal factor of e^(3 sigma) is already 3e6 at 5).
MAX_SIGMA = 5.0


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def usage_params(
    params: Mapping[str, Any],
) -> tuple[float, float, float, dict[str, float], tuple[float, float]]:
    """The checked params: products [min, max], heavy noise sigma, the light and moderate
    caps (GB; inf for none) and the moderate spikes' [min, max] (GB). ValueError naming the
    param and what was expected."""
    unknown = set(params) - set(USAGE_DEFAULTS)
    if unknown:
        raise ValueError(
            f"ml-workflow usage model: unknown params {sorted(unknown)} "
            f"(known: {', '.join(USAGE_DEFAULTS)})"
        )
    got = {**USAGE_DEFAULTS, **params}
    products = got["products"]
    if not isinstance(products, list | tuple) or len(products) != 2:
        raise ValueError("ml-workflow usage model: products must be [min, max], 1 <= min < max")
    lo, hi = products
    if not (_number(lo) and _number(hi)) or not 1 <= lo < hi:
        raise ValueError("ml-workflow usage model: products must be [min, max], 1 <= min < max")
    sigma = got["heavy_noise_sigma"]
    if not _number(sigma) or not 0 <= sigma <= MAX_SIGMA:
        raise ValueError(
            f"ml-workflow usage model: heavy_noise_sigma must be a number in [0, {MAX_SIGMA:g}] "
            f"(sigma of log memory), got {sigma!r}"
        )
    caps: dict[str, float] = {}
    for group in ("light", "moderate"):
        cap = got[f"{group}_cap_gb"]
        if cap is None:
            caps[group] = math.inf
        elif not _number(cap) or cap <= 0:
            raise ValueError(
                f"ml-workflow usage model: {group}_cap_gb must be a number > 0 (GB) or null "
                f"(no cap), got {cap!r}"
            )
        else:
            caps[group] = float(cap)
    spike = got["moderate_spike_gb"]
    if (
        not isinstance(spike, list | tuple)
        or len(spike) != 2
        or not all(_number(v) for v in spike)
        or not 0 < spike[0] <= spike[1]
    ):
        raise ValueError(
            "ml-workflow usage model: moderate_spike_gb must be [min, max] GB, "
            f"0 < min <= max, got {spike!r}"
        )
    return float(lo), float(hi), float(sigma), caps, (float(spike[0]), float(spike[1]))


@register_usage_model("ml-workflow")
def ml_workflow_usage(
    spec: SimulationSpec, jobs: Arrivals, rng: np.random.Generator, params: Mapping[str, Any]
) -> tuple[Usage, dict[str, FloatArray]]:
    """Usages and input features of the workflow's task instances (see the module doc).

    Params: `products` = [min, max] products for sale (log-uniform; default [20, 2000]);
    `heavy_noise_sigma` (default 0.15): sigma of the lognormal factor on the heavy tasks'
    memory, drawn per instance and independent of the run's inputs, so the part of the
    variance no classifier can explain from them; `light_cap_gb` (default 4.8) and
    `moderate_cap_gb` (default 19.0): the largest memory peak of a light and a moderate
    task instance (GB; null: no cap); `moderate_spike_gb` (default [4, 19]): the range of
    a moderate instance's spike (one in ten spikes). Under the defaults light and moderate
    instances stay below the manual groups' 5 and 20 GB; larger caps and spikes let them
    outgrow their group (and, above the static 20 GB, their static request).
    Classes are tasks by name (`TASKS`); job i of a task belongs to run i.
    """
    lo, hi, sigma, caps, spike_range = usage_params(params)
    names = [c.name for c in spec.classes]
    missing = [n for n in names if n not in TASK_BY_NAME]
    if missing:
        raise ValueError(
            f"ml-workflow usage model: classes must be the workflow's tasks, unknown "
            f"{missing[:3]} (expected names like {TASKS[0].name!r})"
        )
    n = jobs.arrival_s.size
    cls = jobs.class_index
    run = np.zeros(n, dtype=np.int64)
    for c in range(len(names)):  # job i of a task belongs to run i
        mine = np.flatnonzero(cls == c)
        run[mine] = np.arange(mine.size)
    runs = int(run.max()) + 1 if n else 0
    # Per run: the scenario input and the execution date (days left in the sale).
    region = rng.integers(0, REGIONS, runs).astype(np.float64)
    products = np.floor(np.exp(rng.uniform(math.log(lo), math.log(hi), runs)))
    days_left = rng.integers(0, SALE_DAYS + 1, runs).astype(np.float64)
    workload = products * (days_left + 1.0)
    memory = np.zeros(n)
    cpu = np.zeros(n)
    minutes = np.zeros(n)
    peak_at = rng.uniform(0.3, 0.9, n)
    base_noise = rng.lognormal(0.0, 0.5, n)
    spike = rng.random(n)
    spike_gb = rng.uniform(spike_range[0], spike_range[1], n)
    heavy_noise = rng.lognormal(0.0, sigma, n)
    busy = rng.uniform(0.2, 0.95, n)
    busy_parallel = rng.uniform(2.5, 4.8, n)
    time_noise = rng.lognormal(0.0, 0.2, n)
    for c, name in enumerate(names):
        task = TASK_BY_NAME[name]
        mine = np.flatnonzero(cls == c)
        r = run[mine]
        if task.cluster in ("heavy1", "heavy2"):
            mem = _heavy_memory(task, workload[r], region[r], heavy_noise[mine])
            # Heavy inputs run longer: up to 4x the median time at the largest workload.
            scale = 1.0 + 3.0 * np.log1p(workload[r]) / math.log1p(2000 * (SALE_DAYS + 1))
        else:
            mem = task.median_gb * base_noise[mine]
            if task.cluster == "moderate":  # one instance in ten spikes
                mem = np.where(spike[mine] < 0.1, spike_gb[mine], mem)
                mem = np.minimum(mem, caps["moderate"])
            else:
                mem = np.minimum(mem, caps["light"])
            scale = np.ones(mine.size)
        memory[mine] = mem
        cpu[mine] = busy_parallel[mine] if task.parallel else busy[mine]
        minutes[mine] = task.minutes * scale * time_noise[mine]
    # Work in core-seconds at speed 1: at its busy cores it runs `minutes`.
    size = minutes * 60.0 * cpu
    features = {
        "run": run.astype(np.float64),
        "region": region[run],
        "products": products[run],
        "days_left": days_left[run],
    }
    return Usage(cpu, memory, peak_at, size), features


def workflow_scenario(
    runs: int = 200,
    seed: int = 2,
    provisioner: str = "static",
    provisioner_params: Mapping[str, Any] | None = None,
    run_interval_s: float = 3600.0,
    nodes: int = 8,
) -> dict[str, Any]:
    """The workflow as a scenario dict: 27 task classes with Table 4 requests, `runs`
    runs every `run_interval_s` seconds, on `nodes` nodes of 96 cores and 2,048 GB."""
    classes = [
        {
            "name": t.name,
            "arrival": {
                "kind": "renewal",
                "interarrival": {"kind": "deterministic", "value_s": run_interval_s},
            },
            "size": {"kind": "deterministic", "value_s": 60.0},
            "request": {"cpu": t.static[0], "memory_gb": t.static[1]},
        }
        for t in TASKS
    ]
    return {
        "name": "ml-workflow",
        "description": "ML workflow of Song's master's thesis: 27 tasks per run, its Table 4 "
        "static requests",
        "seed": seed,
        "stop": {"jobs": runs * len(TASKS)},
        "cluster": {
            "node_types": [{"name": "worker", "cpu": 96, "memory_gb": 2048}],
            "nodes": [{"type": "worker", "count": nodes}],
        },
        "workload": {
            "classes": classes,
            "usage": {"model": "ml-workflow", "params": {"products": [20, 2000]}},
        },
        "scheduler": {
            "placer": {"name": "first-fit"},
            "provisioner": {"name": provisioner, "params": dict(provisioner_params or {})},
        },
    }


#: Table 3's columns (scenario attributes spelled out), in order.
PROFILE_COLUMNS = (
    "task",
    "run_id",
    "region",
    "products",
    "days_left",
    "execution_date",
    "cpu_request",
    "memory_request",
    "duration",
    "cpu_usage_max",
    "memory_usage_max",
)


def profiling_table(jobs: pa.Table, features: Mapping[str, FloatArray]) -> pa.Table:
    """The thesis's Table 3 from a run's per-job table: one row per completed task instance.

    `duration` is the last attempt's run time (s); requests are the last attempt's; the
    execution date is the sale's day (days since its start).
    """
    done = ~np.asarray(jobs.column("failed").to_numpy(zero_copy_only=False))
    end = jobs.column("end_s").to_numpy(zero_copy_only=False)
    start = jobs.column("start_s").to_numpy(zero_copy_only=False)
    done &= ~np.isnan(end)
    setup = jobs.column("setup_s").to_numpy(zero_copy_only=False)
    task = jobs.column("class").to_pylist()
    days_left = features["days_left"]
    return pa.table(
        {
            "task": pa.array([t for t, d in zip(task, done, strict=True) if d], pa.string()),
            "run_id": pa.array(features["run"][done].astype(np.int64)),
            "region": pa.array(features["region"][done].astype(np.int64)),
            "products": pa.array(features["products"][done].astype(np.int64)),
            "days_left": pa.array(days_left[done].astype(np.int64)),
            "execution_date": pa.array((SALE_DAYS - days_left[done]).astype(np.int64)),
            "cpu_request": pa.array(jobs.column("request_cpu").to_numpy()[done]),
            "memory_request": pa.array(jobs.column("request_memory_gb").to_numpy()[done]),
            "duration": pa.array((end - start - setup)[done]),
            "cpu_usage_max": pa.array(jobs.column("usage_cpu").to_numpy()[done]),
            "memory_usage_max": pa.array(jobs.column("usage_memory_gb").to_numpy()[done]),
        }
    )
