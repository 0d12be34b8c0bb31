"""Profiling runs and the sizing model the provisioners learn from them (after the thesis;
docs/provisioner.md).

`profile(spec, runs, seed)` runs a scenario in the emulator with static requests (the
thesis's production set-up) on a seed of its own and returns the profiling data: one row
per task instance (`clusteremu.cluster.workflow.profiling_table`, the thesis's Table 3) plus the
jobs' input features. `train_sizing` turns profiling data into a `Sizing`: per task its
memory cluster by peak (light <= 5 GB, moderate <= 20 GB, heavy above), its cores (1 for
tasks that never keep more than one busy, else the static cores) and, for heavy tasks, a
bin classifier (`models.train_bin_classifier`). A `Sizing` is saved as versioned JSON.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from clusteremu.cluster import readback
from clusteremu.cluster.model import SimulationSpec, StopRule
from clusteremu.cluster.policies.provisioner.cost import DEFAULT_KILL_FRACTION
from clusteremu.cluster.policies.provisioner.models import TrainedTask, train_bin_classifier

FloatArray = npt.NDArray[np.float64]

FORMAT = "clusteremu-sizing"
VERSION = 1
#: The thesis's manual groups: light and moderate tasks get these (GB).
LIGHT_GB = 5.0
MODERATE_GB = 20.0
#: The clusters a task is sized into (`vpa`: the VPA-like provisioner's).
CLUSTERS = ("light", "moderate", "heavy", "vpa")
#: Largest file read as a sizing model (bytes).
MAX_MODEL_BYTES = 64 * 2**20
#: Largest cores or GB a model's request may hold.
MAX_REQUEST = 1e6


@dataclass(frozen=True)
class Profile:
    """Profiling data: the Table 3 rows and the per-row features (same order); `peak_at`:
    when each instance's memory peak came, as a fraction of its run (None: not recorded)."""

    table: pa.Table
    features: dict[str, FloatArray]
    arrival_s: FloatArray
    peak_at: FloatArray | None = None

    def task_rows(self, task: str) -> npt.NDArray[np.bool_]:
        return np.asarray(self.table.column("task").to_pylist(), dtype=object) == task


def profile(
    spec: SimulationSpec, runs: int, seed: int, progress: Callable[[float], None] | None = None
) -> Profile:
    """Run `spec` with static requests for `runs` runs (every class once per run) on
    `seed`, and return its profiling data; `progress` gets the fraction done."""
    from clusteremu.cluster.engine import Engine
    from clusteremu.cluster.policies.fifo import Static
    from clusteremu.cluster.workflow import profiling_table

    if spec.usage is None:
        raise ValueError("profiling needs a scenario with a usage model (workload.usage)")
    prof = dataclasses.replace(
        spec, seed=int(seed), stop=StopRule(jobs=runs * len(spec.classes)), replications=1
    )
    engine = Engine(prof, provisioner=Static(retry_limit=0))
    result = engine.run(progress)
    features = engine.jobs.features
    if not {"region", "products", "days_left", "run"} <= set(features):
        raise ValueError(
            "profiling needs jobs with the features run, region, products and days_left "
            "(the ml-workflow usage model)"
        )
    table = profiling_table(result.jobs, features)
    done = ~np.asarray(result.jobs.column("failed").to_numpy(zero_copy_only=False))
    done &= ~np.isnan(result.jobs.column("end_s").to_numpy(zero_copy_only=False))
    usage = engine.jobs.usage
    return Profile(
        table,
        {k: v[done] for k, v in features.items()},
        result.jobs.column("arrival_s").to_numpy()[done],
        None if usage is None else np.asarray(usage.peak_at, dtype=np.float64)[done],
    )


@dataclass(frozen=True)
class TaskSizing:
    """How one task is sized: cluster (light / moderate / heavy), cores, memory (GB; for
    heavy tasks the classifier picks one of `heavy.edges`), the static (cores, GB)."""

    cluster: str
    cpu: float
    memory_gb: float
    static: tuple[float, float]
    heavy: TrainedTask | None = None

    @property
    def edges(self) -> tuple[float, ...]:
        """Bin edges for lift-and-retry (GB): the model's, or the manual groups'."""
        if self.heavy is not None:
            return self.heavy.edges
        return tuple(e for e in (LIGHT_GB, MODERATE_GB) if e < self.static[1]) + (self.static[1],)


@dataclass(frozen=True)
class Sizing:
    """Per-task sizing learnt from profiling data."""

    tasks: dict[str, TaskSizing]
    info: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "info": self.info,
            "tasks": {
                name: {
                    "cluster": t.cluster,
                    "cpu": t.cpu,
                    "memory_gb": t.memory_gb,
                    "static": list(t.static),
                    "heavy": None if t.heavy is None else t.heavy.to_json(),
                }
                for name, t in self.tasks.items()
            },
        }

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=1))

    @classmethod
    def load(cls, path: str | Path) -> Sizing:
        """Read a sizing model (ValueError naming the file and field): a regular JSON file
        of at most MAX_MODEL_BYTES, this format and version, every task's cluster, cores,
        memory and static request finite and in range (`check_task`)."""
        p = Path(path)
        try:
            data = readback.load_json(
                p, "a sizing model (clusteremu provision train)", MAX_MODEL_BYTES
            )
        except readback.ReadBackError as exc:
            raise ValueError(f"model file {exc}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"model file {p}: not a clusteremu sizing model")
        if data.get("version") != VERSION:
            raise ValueError(
                f"model file {p}: version {data.get('version')!r}, this clusteremu reads "
                f"version {VERSION}; train the model again"
            )
        raw_tasks = data.get("tasks")
        if not isinstance(raw_tasks, dict) or not raw_tasks:
            raise ValueError(f"model file {p}: tasks: expected a mapping of task -> sizing")
        tasks: dict[str, TaskSizing] = {}
        for name, t in raw_tasks.items():
            problem = check_task(t)
            if problem is not None:
                raise ValueError(f"model file {p}: tasks.{name[:60]}.{problem}")
            try:
                tasks[name] = TaskSizing(
                    t["cluster"],
                    float(t["cpu"]),
                    float(t["memory_gb"]),
                    (float(t["static"][0]), float(t["static"][1])),
                    None if t["heavy"] is None else TrainedTask.from_json(t["heavy"]),
                )
            except (KeyError, TypeError, ValueError, IndexError) as exc:
                raise ValueError(
                    f"model file {p}: tasks.{name[:60]}.heavy: malformed ({type(exc).__name__})"
                ) from None
        info = data.get("info", {})
        return cls(tasks, dict(info) if isinstance(info, dict) else {})

    def mismatch(self, spec: SimulationSpec) -> str | None:
        """Why this model cannot size `spec`'s tasks (a task it lacks, another static
        request), or None."""
        missing = [c.name for c in spec.classes if c.name not in self.tasks]
        if missing:
            return (
                f"the sizing model has no task {missing[0]!r} "
                f"(it knows {', '.join(sorted(self.tasks)[:5])}, ...)"
            )
        for c in spec.classes:
            static = (c.request.cpu, c.request.memory_gb)
            if self.tasks[c.name].static != static:
                return (
                    f"task {c.name!r} has static request {static} in the scenario but "
                    f"{self.tasks[c.name].static} in the model"
                )
        return None


def check_task(t: Any) -> str | None:
    """Why a model's task entry is malformed (`field: expected ...`), or None.

    Cores and memory are positive and finite, at most the static request (cores: at least
    1, as `group_tasks` gives), the cluster one `train_sizing` writes; heavy tasks' bin
    edges positive, increasing, at most the static memory.
    """
    if not isinstance(t, dict):
        return "expected a mapping with cluster, cpu, memory_gb, static, heavy"
    if t.get("cluster") not in CLUSTERS:
        return f"cluster: expected one of {', '.join(CLUSTERS)}, got {str(t.get('cluster'))[:40]!r}"
    static = t.get("static")
    if not isinstance(static, list) or len(static) != 2:
        return "static: expected [cores, GB]"
    for i, what in enumerate(("cores", "GB")):
        problem = readback.number_problem(static[i], 1e-9, MAX_REQUEST)
        if problem is not None:
            return f"static.{i}: {what}: {problem}"
    cores, gb = float(static[0]), float(static[1])
    for field, hi in (("cpu", max(cores, 1.0)), ("memory_gb", gb)):
        problem = readback.number_problem(t.get(field), 1e-9, hi)
        if problem is not None:
            return f"{field}: {problem} (the static request is {cores:g} cores, {gb:g} GB)"
    heavy = t.get("heavy")
    if heavy is None:
        return None
    edges = heavy.get("edges") if isinstance(heavy, dict) else None
    if not isinstance(edges, list) or not edges:
        return "heavy.edges: expected a list of bin edges (GB)"
    for i, e in enumerate(edges):
        problem = readback.number_problem(e, 1e-9, gb)
        if problem is not None:
            return f"heavy.edges.{i}: {problem} (GB, at most the static {gb:g})"
    if any(b <= a for a, b in zip(edges, edges[1:], strict=False)):
        return "heavy.edges: expected increasing bin edges"
    return None


def static_of(spec: SimulationSpec) -> dict[str, tuple[float, float]]:
    return {c.name: (c.request.cpu, c.request.memory_gb) for c in spec.classes}


def group_tasks(prof: Profile, static: Mapping[str, tuple[float, float]]) -> dict[str, TaskSizing]:
    """The manual part: clusters by peak memory and one core for non-parallel tasks."""
    tasks: dict[str, TaskSizing] = {}
    mem = prof.table.column("memory_usage_max").to_numpy()
    cpu = prof.table.column("cpu_usage_max").to_numpy()
    for name, (cores, gb) in static.items():
        rows = prof.task_rows(name)
        if not rows.any():
            raise ValueError(f"profiling data has no instance of task {name!r}")
        peak, busy = float(mem[rows].max()), float(cpu[rows].max())
        cluster = "light" if peak <= LIGHT_GB else "moderate" if peak <= MODERATE_GB else "heavy"
        memory = {"light": LIGHT_GB, "moderate": MODERATE_GB}.get(cluster, gb)
        tasks[name] = TaskSizing(
            cluster, 1.0 if busy <= 1.0 else cores, min(memory, gb), (cores, gb)
        )
    return tasks


def train_sizing(
    prof: Profile,
    static: Mapping[str, tuple[float, float]],
    trials: int = 20,
    seed: int = 0,
    sampler: str = "tpe",
    progress: Any = None,
    bin_counts: tuple[int, ...] = (2, 3),
) -> Sizing:
    """Groups for every task, and a bin classifier for each heavy one (`bin_counts`: the
    bin counts searched; the best on validation is kept)."""
    tasks = group_tasks(prof, static)
    mem = prof.table.column("memory_usage_max").to_numpy()
    dur = prof.table.column("duration").to_numpy()
    for name, t in tasks.items():
        if t.cluster != "heavy":
            continue
        rows = prof.task_rows(name)
        # A killed attempt holds its request until the peak: the profiled mean share of the run.
        kill_fraction = (
            DEFAULT_KILL_FRACTION if prof.peak_at is None else float(prof.peak_at[rows].mean())
        )
        heavy = train_bin_classifier(
            {k: v[rows] for k, v in prof.features.items()},
            mem[rows],
            dur[rows],
            t.static[1],
            trials=trials,
            seed=seed,
            sampler=sampler,
            bin_counts=bin_counts,
            kill_fraction=kill_fraction,
        )
        tasks[name] = dataclasses.replace(t, heavy=heavy, memory_gb=heavy.edges[-1])
        if progress is not None:
            progress(name, heavy)
    info = {
        "rows": prof.table.num_rows,
        "runs": int(np.unique(prof.features["run"]).size) if "run" in prof.features else 0,
        "trials": trials,
        "sampler": sampler,
        "seed": seed,
        "bin_counts": list(bin_counts),
    }
    return Sizing(tasks, info)


def vpa_recommendation(
    values: FloatArray,
    times_s: FloatArray,
    first_bucket: float,
    minimum: float,
    percentile: float = 0.9,
    margin: float = 0.15,
    half_life_s: float = 24 * 3600.0,
    ratio: float = 1.05,
) -> float:
    """Kubernetes VPA's target: the `percentile` of a decaying exponential histogram
    (buckets growing `ratio`, samples weighted 2^((t - t_last) / half_life)), times
    1 + `margin`, at least `minimum`. The percentile is the end of its bucket, as VPA's."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return minimum
    t = np.asarray(times_s, dtype=np.float64)
    w = np.exp2((t - t.max()) / half_life_s)
    # Bucket i covers [start_i, start_{i+1}), start_i = first * (ratio^i - 1) / (ratio - 1).
    idx = np.floor(np.log1p(v * (ratio - 1.0) / first_bucket) / math.log(ratio)).astype(np.int64)
    idx = np.maximum(idx, 0)
    weights = np.bincount(idx, weights=w)
    cum = np.cumsum(weights)
    bucket = int(np.searchsorted(cum, percentile * cum[-1], side="left"))
    end = first_bucket * (ratio ** (bucket + 1) - 1.0) / (ratio - 1.0)
    return max(end * (1.0 + margin), minimum)
