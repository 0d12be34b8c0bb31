"""The rules the conformance suites check, usable on their own.

`check_placements`, `check_allocation` and `check_scaling` each return the list of
problems with one decision list of a placer, an allocator or a scaler (empty when legal);
`run_capacity_violations` checks what ran on every node over a finished run, and
`equal_tables` compares two runs' per-job tables. The other functions are their helpers
(a request's GPU share, the engine's default GPUs, copies of a view to detect mutation).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.layout import GPU_MILLI, JF, JI, NF, JobState, NodeStatus
from clusteremu.cluster.metrics import RunResult
from clusteremu.cluster.policies.base import (
    Allocation,
    Placement,
    PlacementView,
    PoolView,
    Release,
    Rent,
    ScaleView,
)

#: Tolerance on capacity checks (cores, GB, GPUs).
EPS = 1e-9

FloatArray = npt.NDArray[np.float64]


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
