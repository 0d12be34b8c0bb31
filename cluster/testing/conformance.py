"""Conformance suites every policy's tests inherit (after Optuna's `optuna.testing`).

Subclass one in a test module and define how to build the policy; pytest collects the
inherited tests:

- `PlacerConformance`: define `make_placer()`; optionally `placement_scenario()` and
  `gpu_scenario()` (a scenario dict as in a YAML file, or a `SimulationSpec`).
- `AllocatorConformance`: define `make_allocator()`; optionally `pool_scenario()` and
  `check_allocation(view, cores)` for the policy's own invariants.
- `ScalerConformance`: define `make_scaler()`; optionally `scale_scenario()`.

Every suite checks, on whole runs and on hand-made views: decisions name real jobs and
nodes; capacity (cores, GB, worker slots, milli-GPU per GPU, a pool's cores) is never
exceeded; the view is not mutated; an empty queue, pool or cluster is handled; runs are
deterministic for a seed; the policy pickles (it travels to Ray workers). Placers are also
run with worker slots, inactive (booting and released) nodes, a failed and a draining node
(docs/faults.md), patience timeouts and shared GPUs (two 0.5-GPU jobs share one GPU, a
1.0-GPU job needs a wholly free one); scalers with failing nodes and views holding down
and draining ones. Policies with a compiled path (`compiled`, a function registered in
`clusteremu.cluster.policies.compiled_table`) must give the same per-job table on both paths. A
placer's whole runs are made on each path it has (the Python path, every decision checked
as it is made, and the compiled one, checked by the engine and over the whole run); a
compiled placer without its Python twin is checked on the compiled path, and the tests
that need the twin are skipped saying so (docs/adding_a_policy.md, "The Python twin").

The `check_*` functions are the rules themselves, usable on their own: each returns the
list of problems with one decision list (empty when legal).
"""

from __future__ import annotations

import dataclasses
import math
import pickle
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import pytest
from clusteremu.cluster.engine import Engine
from clusteremu.cluster.layout import GPU_MILLI, JF, JI, NF, NI, JobState, NodeStatus
from clusteremu.cluster.metrics import RunResult
from clusteremu.cluster.model import NodeFailures, SimulationSpec, TimelineEvent
from clusteremu.cluster.policies import compiled_table
from clusteremu.cluster.policies.base import (
    Allocation,
    Allocator,
    Placement,
    PlacementView,
    Placer,
    PolicyError,
    PoolView,
    Release,
    Rent,
    Scaler,
    ScaleView,
)
from clusteremu.cluster.policies.fifo import FcfsPlacer

#: Tolerance on capacity checks (cores, GB, GPUs).
EPS = 1e-9

Scenario = dict[str, Any] | SimulationSpec
FloatArray = npt.NDArray[np.float64]

__all__ = [
    "AllocatorConformance",
    "PlacerConformance",
    "ScalerConformance",
    "check_allocation",
    "check_placements",
    "check_scaling",
    "equal_tables",
    "gpu_scenario",
    "run_capacity_violations",
    "small_placement_scenario",
    "small_pool_scenario",
    "small_scale_scenario",
]


# --- scenarios ---------------------------------------------------------------------------


def small_pool_scenario(jobs: int = 3000, seed: int = 5) -> dict[str, Any]:
    """Three classes with different speed-ups, costs and sizes sharing an 8-core pool."""
    return {
        "name": "conformance-pool",
        "seed": seed,
        "stop": {"jobs": jobs, "warmup_jobs": jobs // 10},
        "cluster": {"pools": [{"name": "cores", "cores": 8}]},
        "workload": {
            "classes": [
                {
                    "name": "a",
                    "arrival": {"kind": "poisson", "rate_per_s": 2.0},
                    "size": {"kind": "exponential", "mean_s": 1.0},
                    "speedup": {"kind": "power", "exponent": 0.5},
                    "holding_cost": 2.0,
                    "pool": "cores",
                },
                {
                    "name": "b",
                    "arrival": {"kind": "poisson", "rate_per_s": 1.0},
                    "size": {
                        "kind": "hyperexponential",
                        "probabilities": [0.5, 0.5],
                        "means_s": [1.0, 3.0],
                    },
                    "speedup": {"kind": "amdahl", "parallel_fraction": 0.8},
                    "pool": "cores",
                },
                {
                    "name": "c",
                    "arrival": {"kind": "poisson", "rate_per_s": 1.0},
                    "size": {"kind": "exponential", "mean_s": 0.5},
                    "speedup": {"kind": "linear"},
                    "pool": "cores",
                },
            ]
        },
    }


def small_placement_scenario(jobs: int = 3000, seed: int = 5) -> dict[str, Any]:
    """Two node types and two classes with different multi-resource requests."""
    return {
        "name": "conformance-placement",
        "seed": seed,
        "stop": {"jobs": jobs, "warmup_jobs": jobs // 10},
        "cluster": {
            "node_types": [
                {"name": "small", "cpu": 2, "memory_gb": 4},
                {"name": "big", "cpu": 8, "memory_gb": 32, "gpu": 1, "speed": 2.0},
            ],
            "nodes": [{"type": "small", "count": 4}, {"type": "big", "count": 2}],
        },
        "workload": {
            "classes": [
                {
                    "name": "one",
                    "arrival": {"kind": "poisson", "rate_per_s": 3.0},
                    "size": {"kind": "exponential", "mean_s": 1.0},
                    "request": {"cpu": 1, "memory_gb": 1},
                },
                {
                    "name": "four",
                    "arrival": {"kind": "poisson", "rate_per_s": 0.5},
                    "size": {"kind": "exponential", "mean_s": 2.0},
                    "request": {"cpu": 4, "memory_gb": 8, "gpu": 1},
                },
            ]
        },
    }


def gpu_scenario(jobs: int = 600, seed: int = 5) -> dict[str, Any]:
    """Two-GPU nodes shared by half-GPU, whole-GPU and two-GPU jobs (and CPU-only ones)."""

    def cls(name: str, rate: float, gpu: float) -> dict[str, Any]:
        return {
            "name": name,
            "arrival": {"kind": "poisson", "rate_per_s": rate},
            "size": {"kind": "exponential", "mean_s": 2.0},
            "request": {"cpu": 1, "memory_gb": 2, "gpu": gpu},
        }

    return {
        "name": "conformance-gpu",
        "seed": seed,
        "stop": {"jobs": jobs, "warmup_jobs": jobs // 10},
        "cluster": {
            "node_types": [
                {"name": "gpu2", "cpu": 16, "memory_gb": 64, "gpu": 2},
                {"name": "cpu", "cpu": 4, "memory_gb": 16},
            ],
            "nodes": [{"type": "gpu2", "count": 3}, {"type": "cpu", "count": 1}],
        },
        "workload": {
            "classes": [
                cls("half", 1.2, 0.5),
                cls("quarter", 0.6, 0.25),
                cls("whole", 0.4, 1.0),
                cls("pair", 0.15, 2.0),
                cls("none", 0.8, 0.0),
            ]
        },
    }


def small_scale_scenario(jobs: int = 400, seed: int = 5) -> dict[str, Any]:
    """One static node and a rentable VM type with a start-up delay and a price."""
    return {
        "name": "conformance-scale",
        "seed": seed,
        "stop": {"jobs": jobs, "warmup_jobs": jobs // 10},
        "cluster": {
            "node_types": [
                {"name": "base", "cpu": 2, "memory_gb": 8},
                {
                    "name": "vm",
                    "cpu": 2,
                    "memory_gb": 8,
                    "price_per_hour": 0.36,
                    "startup_cost": 0.01,
                    "startup_delay_s": 5.0,
                },
            ],
            "nodes": [{"type": "base", "count": 1}],
        },
        "workload": {
            "classes": [
                {
                    "name": "a",
                    "arrival": {"kind": "poisson", "rate_per_s": 1.5},
                    "size": {"kind": "exponential", "mean_s": 1.0},
                    "request": {"cpu": 1, "memory_gb": 1},
                }
            ]
        },
    }


def as_spec(scenario: Scenario) -> SimulationSpec:
    """A scenario dict (validated by the scenario loader) or a SimulationSpec as is."""
    if isinstance(scenario, SimulationSpec):
        return scenario
    from clusteremu.scenarios.loader import spec_from_dict  # the scenario layer, only for dicts

    return spec_from_dict(scenario)


def with_worker_slots(spec: SimulationSpec, slots: int) -> SimulationSpec:
    """The spec with at most `slots` jobs at once on any node."""
    types = tuple(
        dataclasses.replace(t, max_jobs=min(t.max_jobs, float(slots))) for t in spec.node_types
    )
    return dataclasses.replace(spec, node_types=types)


def with_timeouts(spec: SimulationSpec, timeout_s: float) -> SimulationSpec:
    """The spec with every placed class's patience at most `timeout_s` seconds."""
    classes = tuple(
        c if c.pool is not None else dataclasses.replace(c, timeout_s=min(c.timeout_s, timeout_s))
        for c in spec.classes
    )
    return dataclasses.replace(spec, classes=classes)


def with_startup_delay(spec: SimulationSpec, delay_s: float) -> SimulationSpec:
    """The spec with every node type taking `delay_s` seconds to start when rented (the
    scenario's own nodes are up from the start regardless)."""
    types = tuple(dataclasses.replace(t, startup_delay_s=delay_s) for t in spec.node_types)
    return dataclasses.replace(spec, node_types=types)


def with_timeline(spec: SimulationSpec, *events: TimelineEvent) -> SimulationSpec:
    """The spec with these timeline events (docs/faults.md)."""
    return dataclasses.replace(spec, events=tuple(sorted(events, key=lambda e: e.at_s)))


def with_failures(spec: SimulationSpec, mtbf_s: float, mttr_s: float) -> SimulationSpec:
    """The spec with every node type failing at random (exponential up and down times)."""
    from clusteremu.cluster.distributions import Exponential

    failures = NodeFailures(Exponential(mtbf_s), Exponential(mttr_s))
    types = tuple(dataclasses.replace(t, failures=failures) for t in spec.node_types)
    return dataclasses.replace(spec, node_types=types)


# --- the rules ---------------------------------------------------------------------------


def equal_tables(a: RunResult, b: RunResult) -> bool:
    """Column-by-column equality of two per-job tables (NaN equals NaN)."""
    if a.jobs.column_names != b.jobs.column_names or a.jobs.num_rows != b.jobs.num_rows:
        return False
    for name in a.jobs.column_names:
        x = a.jobs[name].to_numpy(zero_copy_only=False)
        y = b.jobs[name].to_numpy(zero_copy_only=False)
        if x.dtype.kind == "f":
            if not np.array_equal(x, y, equal_nan=True):
                return False
        elif not a.jobs[name].equals(b.jobs[name]):
            return False
    return True


def gpu_share(gpu: float) -> tuple[int, float]:
    """(GPUs a request occupies, milli-GPU it takes on each): a share below 1 takes that
    much of one GPU, n >= 1 GPUs take n wholly free GPUs."""
    if gpu <= 0:
        return 0, 0.0
    if gpu < 1:
        return 1, math.floor(gpu * GPU_MILLI + 0.5)
    return int(math.floor(gpu + 0.5)), float(GPU_MILLI)


def default_gpus(gpu_free: FloatArray, gpus: int, want: int, milli: float) -> list[int] | None:
    """The engine's choice when a placement names no GPUs: the first with room."""
    room = [g for g in range(gpus) if gpu_free[g] >= milli - EPS]
    return room[:want] if len(room) >= want else None


def view_arrays(view: PlacementView) -> dict[str, npt.NDArray[Any]]:
    """Copies of every array of a placement view (to detect mutation)."""
    return {
        f.name: np.array(getattr(view, f.name), copy=True)
        for f in dataclasses.fields(PlacementView)
        if f.name != "time_s"
    }


def mutated(before: dict[str, npt.NDArray[Any]], view: Any) -> list[str]:
    """Names of the view's arrays that differ from `before`."""
    return [
        f"the policy mutated view.{name}"
        for name, old in before.items()
        if not np.array_equal(np.asarray(getattr(view, name)), old, equal_nan=True)
    ]


def check_placements(view: PlacementView, decisions: object) -> list[str]:
    """Problems with a placer's decisions on `view` (empty: legal).

    Each decision names a waiting job (once) and an existing, active node that still has,
    after the call's earlier decisions, a worker slot, the cores and GB, and the GPUs of
    the request (a share of one GPU, or wholly free GPUs); named GPUs must exist and have
    the room. `setup_s` is finite and non-negative.
    """
    if not isinstance(decisions, list | tuple):
        return [f"place() must return a list of Placement, got {type(decisions).__name__}"]
    problems: list[str] = []
    waiting = {int(j): i for i, j in enumerate(np.asarray(view.queue).tolist())}
    n = int(np.asarray(view.free_cpu).size)
    free_cpu = np.array(view.free_cpu, dtype=np.float64)
    free_mem = np.array(view.free_memory_gb, dtype=np.float64)
    free_slots = np.array(view.free_slots, dtype=np.float64)
    gpu_free = np.array(view.gpu_free_milli, dtype=np.float64)
    active = np.asarray(view.active)
    for d in decisions:
        if not isinstance(d, Placement):
            problems.append(f"{d!r} is not a Placement")
            continue
        j, k = int(d.job), int(d.node)
        if j not in waiting:
            problems.append(f"{d}: job {j} is not waiting (or was placed twice)")
            continue
        if not 0 <= k < n:
            problems.append(f"{d}: node {k} does not exist ({n} node rows)")
            continue
        if not active[k]:
            problems.append(f"{d}: node {k} is not active (booting, released or unused)")
            continue
        i = waiting.pop(j)
        cpu, mem = float(view.request_cpu[i]), float(view.request_memory_gb[i])
        if free_slots[k] < 1 - EPS:
            problems.append(f"{d}: node {k} has no free worker slot")
        if free_cpu[k] < cpu - EPS or free_mem[k] < mem - EPS:
            problems.append(
                f"{d}: node {k} has {free_cpu[k]:g} cores and {free_mem[k]:g} GB free, "
                f"the job needs {cpu:g} and {mem:g}"
            )
        if not (math.isfinite(d.setup_s) and d.setup_s >= 0):
            problems.append(f"{d}: setup_s must be finite and non-negative")
        want, milli = gpu_share(float(view.request_gpu[i]))
        if want:
            gpus = int(round(float(view.capacity_gpu[k])))
            chosen = (
                [int(g) for g in d.gpus]
                if d.gpus is not None
                else default_gpus(gpu_free[k], gpus, want, milli)
            )
            if chosen is None or len(chosen) != want or len(set(chosen)) != want:
                problems.append(f"{d}: node {k} has no {want} GPU(s) with {milli:g} milli free")
            elif any(not 0 <= g < gpus or gpu_free[k, g] < milli - EPS for g in chosen):
                problems.append(f"{d}: GPUs {chosen} of node {k} lack {milli:g} milli-GPU")
            else:
                gpu_free[k, chosen] -= milli
        free_cpu[k] -= cpu
        free_mem[k] -= mem
        free_slots[k] -= 1
    return problems


def check_allocation(view: PoolView, decision: object) -> list[str]:
    """Problems with an allocator's decision on `view` (empty: legal): one finite,
    non-negative core count per job, summing to at most the pool's cores."""
    if not isinstance(decision, Allocation):
        return [f"allocate() must return an Allocation, got {type(decision).__name__}"]
    cores = np.asarray(decision.cores, dtype=np.float64)
    if cores.shape != view.job_ids.shape:
        return [f"{cores.size} core counts for {view.job_ids.size} jobs"]
    problems = []
    if not (np.all(np.isfinite(cores)) and np.all(cores >= 0)):
        problems.append("core counts must be finite and non-negative")
    if cores.sum() > view.cores * (1 + EPS) + EPS:
        problems.append(f"allocated {cores.sum():.6g} cores of {view.cores:g}")
    return problems


def check_scaling(view: ScaleView, decisions: object) -> list[str]:
    """Problems with a scaler's decisions on `view` (empty: legal): rents name a node type
    (by name or index) with a positive count; releases name a handed-out node that is not
    released, runs no job, and is released once."""
    if not isinstance(decisions, list | tuple):
        return [f"scale() must return a list of Rent / Release, got {type(decisions).__name__}"]
    problems: list[str] = []
    released: set[int] = set()
    n = int(np.asarray(view.node_status).size)
    for d in decisions:
        if isinstance(d, Rent):
            t = d.node_type
            known = (
                t in view.node_type_names
                if isinstance(t, str)
                else 0 <= int(t) < len(view.node_type_names)
            )
            if not known:
                problems.append(f"{d}: unknown node type")
            if int(d.count) < 1 or int(d.count) != d.count:
                problems.append(f"{d}: count must be a positive whole number")
        elif isinstance(d, Release):
            k = int(d.node)
            if not 0 <= k < n:
                problems.append(f"{d}: node {k} does not exist")
            elif view.node_status[k] == NodeStatus.RELEASED or k in released:
                problems.append(f"{d}: node {k} is already released")
            elif view.running_jobs[k] > 0:
                problems.append(f"{d}: node {k} still runs {view.running_jobs[k]} job(s)")
            released.add(k)
        else:
            problems.append(f"{d!r} is not a Rent or Release")
    return problems


def placed_jobs(engine: Engine) -> npt.NDArray[np.bool_]:
    """Which jobs are of classes placed on nodes (not in a malleable pool)."""
    on_nodes = np.array([c.pool is None for c in engine.spec.classes], dtype=np.bool_)
    return on_nodes[engine.state.jobs_i[JI.CLS]]


def run_capacity_violations(engine: Engine) -> list[str]:
    """Problems with what ran on every node over a finished run (empty: none): at every
    instant a node's jobs fit its cores, GB, worker slots and each GPU's 1,000 milli-GPU,
    and no job ran on a node before it was ready or after it was released."""
    s = engine.state
    now = engine.now
    placed = np.flatnonzero(
        placed_jobs(engine) & np.isin(s.jobs_i[JI.STATE], [JobState.RUNNING, JobState.DONE])
    )
    problems: list[str] = []
    for k in np.unique(s.jobs_i[JI.NODE, placed]):
        mine = placed[s.jobs_i[JI.NODE, placed] == k]
        start = s.jobs_f[JF.START, mine]
        end = np.where(s.jobs_i[JI.STATE, mine] == JobState.RUNNING, now, s.jobs_f[JF.END, mine])
        ready, released = s.nodes_f[NF.READY_AT, k], s.nodes_f[NF.RELEASED_AT, k]
        if np.any(start < ready - EPS) or np.any(end > released + EPS):
            problems.append(f"node {k}: a job ran outside [{ready:g}, {released:g}]")
        gpus = int(round(float(s.nodes_f[NF.CAP_GPU, k])))
        use = np.zeros((mine.size, 3 + max(gpus, 1)))
        use[:, 0] = s.jobs_f[JF.REQ_CPU, mine]
        use[:, 1] = s.jobs_f[JF.REQ_MEM, mine]
        use[:, 2] = 1.0  # a worker slot
        for r, j in enumerate(mine):
            _, milli = gpu_share(float(s.jobs_f[JF.REQ_GPU, j]))
            mask = int(s.jobs_i[JI.GPU_MASK, j])
            for g in range(gpus):
                if mask >> g & 1:
                    use[r, 3 + g] = milli
        cap = np.array(
            [s.nodes_f[NF.CAP_CPU, k], s.nodes_f[NF.CAP_MEM, k], s.nodes_f[NF.CAP_SLOTS, k]]
            + [GPU_MILLI] * max(gpus, 1)
        )
        # Sweep starts and ends in time order, ends first at equal times.
        times = np.concatenate([start, end])
        sign = np.concatenate([np.ones(mine.size), -np.ones(mine.size)])
        order = np.lexsort((sign, times))
        load = np.cumsum(np.concatenate([use, -use])[order], axis=0)
        worst = load.max(axis=0)
        names = ["cores", "GB", "worker slots"] + [f"GPU {g} milli" for g in range(gpus)]
        for name, w, c in zip(names, worst, cap, strict=False):
            if w > c * (1 + EPS) + EPS:
                problems.append(f"node {k}: {name} in use {w:g} > capacity {c:g}")
    return problems


# --- placers -------------------------------------------------------------------------------


#: The section of the policy authors' guide on a compiled placer's Python twin.
TWIN_DOC = "docs/adding_a_policy.md, section 'The Python twin'"


class PlacerConformance:
    """Inherit and define `make_placer()`; optionally override `placement_scenario()` and
    `gpu_scenario()` (return None to skip the shared-GPU run).

    Every whole run is made on each decision path the placer has: the Python path
    (`force_python_policies=True`, every decision checked as it is made) and, for a placer
    with a compiled function (`compiled`), the compiled path (checked by the engine as it
    runs, and over the whole run after it); the two must give the same per-job table. A
    compiled placer without a Python twin (its `place` raises NotImplementedError) is
    checked on the compiled path only, and the tests that need the twin (hand-made views,
    compiled == Python) are skipped, saying so (`TWIN_DOC`)."""

    #: Patience given to every class in the timeout test, seconds.
    timeout_s: ClassVar[float] = 0.3

    def make_placer(self) -> Placer:
        raise NotImplementedError

    def placement_scenario(self) -> Scenario:
        return small_placement_scenario()

    def gpu_scenario(self) -> Scenario | None:
        return gpu_scenario()

    def _spec(self) -> SimulationSpec:
        return as_spec(self.placement_scenario())

    # -- helpers --

    def missing_twin(self) -> str | None:
        """Why the placer has no Python decision path, or None when it has one: a
        `Placer` that keeps the base class's `place`, or an `FcfsPlacer` that defines
        neither `choose_node` nor `choose` (both raise NotImplementedError)."""
        placer = self.make_placer()
        cls = type(placer)
        if cls.place is Placer.place:
            missing = "it does not define place(view)"
        elif isinstance(placer, FcfsPlacer) and all(
            getattr(cls, name) is getattr(FcfsPlacer, name)
            for name in ("place", "choose_node", "choose")
        ):
            missing = "an FcfsPlacer that defines neither choose_node nor choose"
        else:
            return None
        kind = "a compiled placer" if placer.compiled is not None else "a placer"
        return (
            f"{cls.__name__} is {kind} without a Python decision path ({missing}); "
            f"a compiled placer needs its Python twin for the suite's checks of single "
            f"decisions and of compiled == Python: see {TWIN_DOC}"
        )

    def require_twin(self) -> None:
        """Skip the test, saying why, for a compiled placer without a Python twin; fail it
        for a placer with neither path."""
        why = self.missing_twin()
        if why is None:
            return
        if self.make_placer().compiled is None:
            pytest.fail(why)
        pytest.skip(why)

    def checked_placer(self) -> tuple[Placer, dict[str, int]]:
        """A fresh placer whose every decision is checked (legal, view not mutated)."""
        placer = self.make_placer()
        original = placer.place
        calls = {"calls": 0, "placed": 0}

        def place(view: PlacementView) -> list[Placement]:
            before = view_arrays(view)
            decisions = original(view)
            problems = check_placements(view, decisions) + mutated(before, view)
            assert not problems, f"at t={view.time_s:g} s: " + "; ".join(problems)
            calls["calls"] += 1
            calls["placed"] += len(decisions)
            return decisions

        placer.place = place  # type: ignore[method-assign]
        return placer, calls

    def checked_run(
        self, spec: SimulationSpec, prepare: Callable[[Engine], object] | None = None
    ) -> tuple[Engine, RunResult, dict[str, int]]:
        """Run `spec` on the Python path with every decision checked, then check capacity
        over the whole run. `prepare(engine)` runs before the run (rent, release)."""
        placer, calls = self.checked_placer()
        engine = Engine(spec, placer=placer, force_python_policies=True)
        if prepare is not None:
            prepare(engine)
        result = engine.run()
        problems = run_capacity_violations(engine)
        assert not problems, "on the Python path: " + "; ".join(problems)
        assert calls["calls"] > 0 and calls["placed"] > 0
        return engine, result, calls

    def compiled_run(
        self, spec: SimulationSpec, prepare: Callable[[Engine], object] | None = None
    ) -> tuple[Engine, RunResult]:
        """Run `spec` on the compiled path (the engine checks every placement as it applies
        it: a refused one fails the test), then check capacity over the whole run."""
        placer = self.make_placer()
        name = getattr(compiled_table.compiled_of(placer), "__name__", "compiled")
        engine = Engine(spec, placer=placer)
        if prepare is not None:
            prepare(engine)
        try:
            result = engine.run()
        except PolicyError as exc:
            raise AssertionError(f"on the compiled path ({name}): {exc}") from exc
        problems = run_capacity_violations(engine)
        assert not problems, f"on the compiled path ({name}): " + "; ".join(problems)
        assert result.summary["jobs_completed"] > 0, f"on the compiled path ({name})"
        return engine, result

    def checked_runs(
        self, spec: SimulationSpec, prepare: Callable[[Engine], object] | None = None
    ) -> list[tuple[str, Engine, RunResult]]:
        """Run `spec` on every path the placer has, checked (`checked_run`,
        `compiled_run`): [(path, engine, result)], the Python path first; with both, their
        per-job tables must be equal."""
        runs: list[tuple[str, Engine, RunResult]] = []
        if self.missing_twin() is None:
            engine, result, _ = self.checked_run(spec, prepare)
            runs.append(("Python", engine, result))
        if self.make_placer().compiled is not None:
            runs.append(("compiled", *self.compiled_run(spec, prepare)))
        if not runs:
            pytest.fail(str(self.missing_twin()))
        if len(runs) == 2:
            assert equal_tables(runs[0][2], runs[1][2]), (
                f"the compiled and the Python path ran {spec.name!r} differently "
                f"(the twin must decide as the compiled function does: {TWIN_DOC})"
            )
        return runs

    def base_view(self, jobs: Sequence[int] = ()) -> PlacementView:
        """A plain view of the scenario's nodes, all up and empty, and a queue of one job
        per class in `jobs` (class indices) with the class's request."""
        spec = self._spec()
        engine = Engine(spec, placer=self.make_placer())
        live = engine.placement_view()
        fields: dict[str, Any] = {
            f.name: np.array(getattr(live, f.name), copy=True)
            for f in dataclasses.fields(PlacementView)
        }
        classes = np.asarray(jobs, dtype=np.int64)
        fields["time_s"] = 0.0
        fields["queue"] = np.arange(classes.size, dtype=np.int64)
        fields["class_index"] = classes
        for name, attr in (
            ("request_cpu", "cpu"),
            ("request_memory_gb", "memory_gb"),
            ("request_gpu", "gpu"),
        ):
            fields[name] = np.array(
                [getattr(spec.classes[c].request, attr) for c in classes], dtype=np.float64
            )
        return PlacementView(**fields)

    def set_up(self) -> Placer:
        placer = self.make_placer()
        placer.setup(self._spec(), np.random.default_rng(0))
        return placer

    def placed_classes(self) -> list[int]:
        return [c for c, jc in enumerate(self._spec().classes) if jc.pool is None]

    # -- whole runs --

    def test_decisions_are_legal(self) -> None:
        for path, _, result in self.checked_runs(self._spec()):
            assert result.summary["jobs_completed"] > 0, path

    def test_deterministic_for_a_seed(self) -> None:
        spec = self._spec()
        a = Engine(spec, placer=self.make_placer()).run()
        b = Engine(spec, placer=self.make_placer()).run()
        assert equal_tables(a, b)

    def test_compiled_and_python_paths_agree(self) -> None:
        if self.make_placer().compiled is None:
            pytest.skip("no compiled path")
        self.require_twin()
        spec = self._spec()
        fast = Engine(spec, placer=self.make_placer()).run()
        slow = Engine(spec, placer=self.make_placer(), force_python_policies=True).run()
        assert equal_tables(fast, slow), f"the twin decides otherwise: {TWIN_DOC}"

    def test_worker_slots(self) -> None:
        """With one or two worker slots per node, no node ever runs more jobs."""
        for slots in (1, 2):
            self.checked_runs(with_worker_slots(self._spec(), slots))

    def test_timeouts(self) -> None:
        """Jobs that leave unserved are never placed, and the queue moves on."""
        spec = with_timeouts(with_worker_slots(self._spec(), 1), self.timeout_s)
        for path, engine, result in self.checked_runs(spec):
            failed = engine.state.jobs_i[JI.STATE] == JobState.FAILED
            assert np.any(failed), f"no job timed out on the {path} path"
            assert result.summary["jobs_completed"] > 0, path

    def test_inactive_nodes_are_never_used(self) -> None:
        """Node 0 released and a node rented (booting 30 s) at t=0: no job runs on node 0,
        none on the rented node before it is ready."""
        spec = with_startup_delay(self._spec(), 30.0)
        rented: list[int] = []

        def release_and_rent(engine: Engine) -> None:
            engine.release(0)
            rented.append(engine.rent(engine.spec.nodes[-1]))
            assert engine.nodes_i[NI.STATUS, rented[-1]] == NodeStatus.BOOTING

        for path, engine, _ in self.checked_runs(spec, release_and_rent):
            s = engine.state
            ran = placed_jobs(engine) & (s.jobs_i[JI.STATE] == JobState.DONE)
            assert not np.any(s.jobs_i[JI.NODE, ran] == 0), (
                f"{path} path: a job ran on a released node"
            )
            on_rented = ran & (s.jobs_i[JI.NODE] == rented[-1])
            assert np.all(s.jobs_f[JF.START, on_rented] >= 30.0), (
                f"{path} path: a job ran on a booting node"
            )

    def test_down_and_draining_nodes_are_never_used(self) -> None:
        """Node 0 fails at t1 and recovers at t2, node 1 drains at t3 (a fifth, two and three
        fifths into the arrivals): no job starts on node 0 while it is down, no attempt on
        it spans the failure, none starts on node 1 after t3, and node 1 is released. The
        checked views show no down or draining node as active."""
        spec = self._spec()
        if len(spec.nodes) < 2:
            pytest.skip("the scenario has fewer than two nodes")
        arrival = Engine(spec, placer=self.make_placer()).jobs.arrival_s
        t1, t2, t3 = (float(arrival[arrival.size * i // 5]) for i in (1, 2, 3))
        spec = with_timeline(
            spec,
            TimelineEvent(t1, "fail", node=0),
            TimelineEvent(t2, "recover", node=0),
            TimelineEvent(t3, "drain", node=1),
        )
        for path, engine, result in self.checked_runs(spec):
            s = engine.state
            ran = placed_jobs(engine) & (s.jobs_i[JI.STATE] == JobState.DONE)
            start, end = s.jobs_f[JF.START], s.jobs_f[JF.END]
            on0 = ran & (s.jobs_i[JI.NODE] == 0)
            assert not np.any(on0 & (start >= t1) & (start < t2)), (
                f"{path} path: a job started on a down node"
            )
            assert not np.any(on0 & (start < t1) & (end > t1)), (
                f"{path} path: a job outlived its node's failure"
            )
            on1 = ran & (s.jobs_i[JI.NODE] == 1)
            assert not np.any(on1 & (start > t3)), f"{path} path: a job started on a draining node"
            assert engine.nodes_i[NI.STATUS, 1] == NodeStatus.RELEASED, path
            assert result.summary["node_failures"] == 1, path

    def test_shared_gpus(self) -> None:
        """Shared GPUs: legal per-GPU decisions over a whole run, on every path."""
        scenario = self.gpu_scenario()
        if scenario is None:
            pytest.skip("no GPU scenario for this placer")
        for path, engine, result in self.checked_runs(as_spec(scenario)):
            unfinished = result.summary["jobs_unfinished"]
            assert unfinished == 0 or engine.spec.stop.time_s is not None, path

    # -- hand-made views --

    def test_empty_queue(self) -> None:
        self.require_twin()
        placer = self.set_up()
        view = self.base_view([])
        assert list(placer.place(view)) == []
        engine = Engine(self._spec(), placer=self.make_placer())
        live = engine.placement_view()
        assert live.queue.size == 0
        assert list(placer.place(live)) == []

    def test_empty_cluster(self) -> None:
        """No node active, or every node full: nothing is placed."""
        self.require_twin()
        queue = self.placed_classes()
        view = self.base_view(queue)
        for changes in (
            {"active": np.zeros_like(view.active)},
            {"free_slots": np.zeros_like(view.free_slots)},
            {
                "free_cpu": np.zeros_like(view.free_cpu),
                "free_memory_gb": np.zeros_like(view.free_memory_gb),
                "free_gpu": np.zeros_like(view.free_gpu),
                "gpu_free_milli": np.zeros_like(view.gpu_free_milli),
            },
        ):
            full = dataclasses.replace(view, **changes)
            before = view_arrays(full)
            decisions = self.set_up().place(full)
            assert list(decisions) == [], f"placed on an empty cluster ({sorted(changes)})"
            assert not mutated(before, full)

    def test_only_active_nodes_with_a_slot_are_named(self) -> None:
        """Every node inactive but the last, then every node without a slot but the last:
        whatever is placed goes to the last node, at most one job in the second case."""
        self.require_twin()
        queue = self.placed_classes() * 3
        view = self.base_view(queue)
        n = view.active.size
        only_last = np.zeros(n, dtype=np.bool_)
        only_last[-1] = True
        for changes in (
            {"active": only_last},
            {"free_slots": np.where(only_last, 1.0, 0.0)},
        ):
            one = dataclasses.replace(view, **changes)
            decisions = self.set_up().place(one)
            problems = check_placements(one, decisions)
            assert not problems, "; ".join(problems)
            assert all(d.node == n - 1 for d in decisions)

    def test_gpu_shares_in_a_view(self) -> None:
        """Every GPU half used: a 1.0-GPU job may not be placed; a 0.5-GPU job may share."""
        self.require_twin()
        view = self.base_view(self.placed_classes()[:1])
        gpus = np.asarray(view.capacity_gpu)
        if not np.any(gpus >= 1):
            pytest.skip("the scenario has no GPUs")
        half = np.where(view.gpu_free_milli > 0, GPU_MILLI / 2, 0.0)
        base = dataclasses.replace(
            view,
            gpu_free_milli=half,
            free_gpu=half.sum(axis=1) / GPU_MILLI,
            active=np.asarray(gpus >= 1),
        )
        for gpu, may_place in ((1.0, False), (0.5, True)):
            one = dataclasses.replace(base, request_gpu=np.array([gpu]))
            decisions = self.set_up().place(one)
            problems = check_placements(one, decisions)
            assert not problems, f"{gpu} GPU: " + "; ".join(problems)
            if not may_place:
                assert list(decisions) == []

    def test_picklable(self) -> None:
        """A set-up placer pickles, and the copy decides as the original does."""
        placer = self.set_up()
        clone = pickle.loads(pickle.dumps(placer))
        assert type(clone) is type(placer)
        self.require_twin()
        view = self.base_view(self.placed_classes() * 2)
        assert list(clone.place(view)) == list(placer.place(view))


# --- allocators ----------------------------------------------------------------------------


class AllocatorConformance:
    """Inherit and define `make_allocator()`; optionally override `pool_scenario()` and
    `check_allocation(view, cores)` (policy-specific invariants on every decision)."""

    def make_allocator(self) -> Allocator:
        raise NotImplementedError

    def pool_scenario(self) -> Scenario:
        return small_pool_scenario()

    def _spec(self) -> SimulationSpec:
        return as_spec(self.pool_scenario())

    def check_allocation(self, view: PoolView, cores: np.ndarray) -> None:
        """Policy-specific invariants on every decision; override to add your own."""

    def _checked_run(self) -> tuple[RunResult, dict[str, int]]:
        allocator = self.make_allocator()
        original = allocator.allocate
        record = {"calls": 0, "nonempty_calls": 0}

        def checked(view: PoolView) -> Allocation:
            before = {
                f.name: np.array(getattr(view, f.name), copy=True)
                for f in dataclasses.fields(PoolView)
            }
            decision = original(view)
            record["calls"] += 1
            record["nonempty_calls"] += int(view.job_ids.size > 0)
            problems = check_allocation(view, decision)
            problems += [
                f"the policy mutated view.{name}"
                for name, old in before.items()
                if not np.array_equal(np.asarray(getattr(view, name)), old)
            ]
            assert not problems, f"at t={view.time_s:g} s: " + "; ".join(problems)
            self.check_allocation(view, np.asarray(decision.cores, dtype=np.float64))
            return decision

        allocator.allocate = checked  # type: ignore[method-assign]
        result = Engine(self._spec(), allocator=allocator, force_python_policies=True).run()
        return result, record

    def test_capacity_and_views(self) -> None:
        result, record = self._checked_run()
        assert record["nonempty_calls"] > 0
        assert result.summary["jobs_completed"] > 0
        assert result.summary["jobs_unfinished"] == 0

    def test_deterministic_for_a_seed(self) -> None:
        spec = self._spec()
        a = Engine(spec, allocator=self.make_allocator()).run()
        b = Engine(spec, allocator=self.make_allocator()).run()
        assert equal_tables(a, b)

    def test_compiled_and_python_paths_agree(self) -> None:
        allocator = self.make_allocator()
        if allocator.compiled is None:
            pytest.skip("no compiled path")
        spec = self._spec()
        fast = Engine(spec, allocator=self.make_allocator()).run()
        slow = Engine(spec, allocator=self.make_allocator(), force_python_policies=True).run()
        np.testing.assert_allclose(
            fast.jobs["end_s"].to_numpy(), slow.jobs["end_s"].to_numpy(), rtol=1e-9, atol=1e-9
        )

    def test_empty_pool(self) -> None:
        allocator = self.make_allocator()
        spec = self._spec()
        allocator.setup(spec, np.random.default_rng(0))
        empty = np.zeros(0)
        ids = np.zeros(0, dtype=np.int64)
        pool = spec.pools[0]
        view = PoolView(0.0, pool.name, pool.cores, ids, ids, empty, empty, empty, empty, empty)
        decision = allocator.allocate(view)
        assert not check_allocation(view, decision)
        assert np.asarray(decision.cores).size == 0

    def test_picklable(self) -> None:
        allocator = self.make_allocator()
        allocator.setup(self._spec(), np.random.default_rng(0))
        clone = pickle.loads(pickle.dumps(allocator))
        assert type(clone) is type(allocator)


# --- scalers -------------------------------------------------------------------------------


class ScalerConformance:
    """Inherit and define `make_scaler()`; optionally override `scale_scenario()`."""

    def make_scaler(self) -> Scaler:
        raise NotImplementedError

    def scale_scenario(self) -> Scenario:
        return small_scale_scenario()

    def _spec(self) -> SimulationSpec:
        return as_spec(self.scale_scenario())

    def _python(self) -> bool:
        return type(self.make_scaler()).scale is not Scaler.scale

    def checked_scaler(self) -> tuple[Scaler, dict[str, int]]:
        scaler = self.make_scaler()
        original = scaler.scale
        calls = {"calls": 0, "rents": 0, "releases": 0}

        def scale(view: ScaleView) -> list[Rent | Release]:
            before = {
                f.name: np.array(getattr(view, f.name), copy=True)
                for f in dataclasses.fields(ScaleView)
                if f.name not in ("time_s", "node_type_names")
            }
            decisions = original(view)
            problems = check_scaling(view, decisions)
            problems += [
                f"the policy mutated view.{name}"
                for name, old in before.items()
                if not np.array_equal(np.asarray(getattr(view, name)), old)
            ]
            assert not problems, f"at t={view.time_s:g} s: " + "; ".join(problems)
            calls["calls"] += 1
            calls["rents"] += sum(int(d.count) for d in decisions if isinstance(d, Rent))
            calls["releases"] += sum(isinstance(d, Release) for d in decisions)
            return decisions

        scaler.scale = scale  # type: ignore[method-assign]
        return scaler, calls

    def test_decisions_are_legal_and_capacity_holds(self) -> None:
        if not self._python():
            pytest.skip("no Python decision function")
        scaler, calls = self.checked_scaler()
        engine = Engine(self._spec(), scaler=scaler, force_python_policies=True)
        result = engine.run()
        assert calls["calls"] > 0
        assert not run_capacity_violations(engine)
        s = result.summary
        assert s["jobs_unfinished"] == 0
        assert s["nodes_rented"] == engine.nodes_used - len(engine.spec.nodes)
        assert s["cost_usd"] >= 0 and s["startup_usd"] >= 0 and s["operating_usd"] >= 0
        released = engine.nodes_i[NI.STATUS, : engine.nodes_used] == NodeStatus.RELEASED
        assert int(released.sum()) == calls["releases"]

    def test_deterministic_for_a_seed(self) -> None:
        spec = self._spec()
        a = Engine(spec, scaler=self.make_scaler()).run()
        b = Engine(spec, scaler=self.make_scaler()).run()
        assert equal_tables(a, b)
        assert a.summary["cost_usd"] == b.summary["cost_usd"]

    def test_compiled_and_python_paths_agree(self) -> None:
        """A scaler with a compiled function (`compiled`) and a Python `scale` rents and
        releases the same nodes at the same times on both paths, failures included."""
        if self.make_scaler().compiled is None or not self._python():
            pytest.skip("not both a compiled and a Python decision function")
        for spec in (self._spec(), with_failures(self._spec(), 60.0, 10.0)):
            fast = Engine(spec, scaler=self.make_scaler()).run()
            slow = Engine(spec, scaler=self.make_scaler(), force_python_policies=True).run()
            assert equal_tables(fast, slow)
            for key in ("nodes_rented", "cost_usd"):
                assert fast.summary[key] == slow.summary[key], key

    def _view(self, queue: int, nodes: Sequence[int]) -> ScaleView:
        """A hand-made view: `queue` one-core jobs of class 0 waiting, and a node row of
        every status in `nodes` (type 0, idle)."""
        spec = self._spec()
        n = len(nodes)
        return ScaleView(
            time_s=0.0,
            queue=np.arange(queue, dtype=np.int64),
            class_index=np.zeros(queue, dtype=np.int64),
            request_cpu=np.ones(queue),
            node_type=np.zeros(n, dtype=np.int64),
            node_status=np.asarray(nodes, dtype=np.int64),
            running_jobs=np.zeros(n, dtype=np.int64),
            free_cpu=np.full(n, spec.node_types[0].cpu, dtype=np.float64),
            node_type_names=tuple(t.name for t in spec.node_types),
        )

    def _set_up(self) -> Scaler:
        scaler = self.make_scaler()
        scaler.setup(self._spec(), np.random.default_rng(0))
        return scaler

    def test_empty_queue_and_empty_cluster(self) -> None:
        if not self._python():
            pytest.skip("no Python decision function")
        cases = [
            self._view(0, []),
            self._view(5, []),
            self._view(0, [NodeStatus.UP, NodeStatus.BOOTING, NodeStatus.RELEASED]),
        ]
        for view in cases:
            decisions = self._set_up().scale(view)
            problems = check_scaling(view, decisions)
            assert not problems, "; ".join(problems)

    def test_down_and_draining_nodes_in_a_view(self) -> None:
        """Views with down and draining nodes (after failures and drains): legal decisions."""
        if not self._python():
            pytest.skip("no Python decision function")
        for view in (
            self._view(4, [NodeStatus.DOWN]),
            self._view(2, [NodeStatus.DOWN, NodeStatus.DRAINING, NodeStatus.UP]),
            self._view(0, [NodeStatus.DRAINING, NodeStatus.DOWN, NodeStatus.BOOTING]),
        ):
            decisions = self._set_up().scale(view)
            problems = check_scaling(view, decisions)
            assert not problems, "; ".join(problems)

    def test_failing_nodes(self) -> None:
        """Every node type fails at random (up 60 s, down 10 s on average): the scaler is
        asked after failures and recoveries, its decisions stay legal, capacity holds and
        every job is served."""
        if not self._python():
            pytest.skip("no Python decision function")
        scaler, calls = self.checked_scaler()
        engine = Engine(
            with_failures(self._spec(), 60.0, 10.0), scaler=scaler, force_python_policies=True
        )
        result = engine.run()
        assert result.summary["node_failures"] > 0
        assert calls["calls"] > 0
        assert not run_capacity_violations(engine)
        assert result.summary["jobs_unfinished"] == 0

    def test_picklable(self) -> None:
        scaler = self._set_up()
        clone = pickle.loads(pickle.dumps(scaler))
        assert type(clone) is type(scaler)
        if self._python():
            view = self._view(3, [NodeStatus.UP])
            assert clone.scale(view) == scaler.scale(view)
