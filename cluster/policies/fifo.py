"""Baseline policies: first-fit and random-fit placers, EQUI and FCFS-one-core allocators,
and the static provisioner (every job requests its class's request).

Each has a compiled decision function (cluster.policies.compiled) and a Python one; the
conformance tests check that both paths give identical runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from cluster.layout import GPU_MILLI
from cluster.model import SimulationSpec
from cluster.policies import compiled
from cluster.policies.base import (
    Allocation,
    Allocator,
    FloatArray,
    IntArray,
    Placement,
    PlacementView,
    Placer,
    PoolView,
    Provisioner,
    Scaler,
)
from cluster.policies.codes import ScalerCode
from cluster.policies.registry import register

FIT_EPS = compiled.FIT_EPS


class FcfsPlacer(Placer):
    """Strict FCFS: place queue heads in order until the head fits nowhere.

    Feasibility is the compiled placers' own rule (`compiled.has_room`: cores, GB, GPUs per
    GPU, worker slots) applied to the view's free resources as this call's decisions use
    them up.
    """

    #: Behind a blocked head nothing starts: the engine asks only when the head may move.
    strict_fcfs = True

    def choose(self, fits: npt.NDArray[np.bool_], count: int) -> int:
        raise NotImplementedError

    def place(self, view: PlacementView) -> list[Placement]:
        queue = view.queue.tolist()
        cpu, mem, gpu = view.request_cpu, view.request_memory_gb, view.request_gpu
        free: tuple[FloatArray, ...] = (
            view.free_cpu,
            view.free_memory_gb,
            view.free_slots,
            view.gpu_free_milli,
        )
        if len(queue) > 1:  # later decisions of this call see the earlier ones
            free = tuple(a.copy() for a in free)
        ok = np.zeros(view.free_cpu.size, dtype=np.bool_)
        out: list[Placement] = []
        for i, job in enumerate(queue):
            c, m, g = float(cpu[i]), float(mem[i]), float(gpu[i])
            count = compiled.fit_mask(view.active, free[0], free[1], free[2], free[3], c, m, g, ok)
            if count == 0:
                break
            k = self.choose(ok, count)
            out.append(Placement(job, k))
            if len(queue) > 1:
                free[0][k] -= c
                free[1][k] -= m
                free[2][k] -= 1.0
                if g > 0:
                    mask = compiled.choose_gpus(free[3], k, g)
                    milli = np.floor(g * GPU_MILLI + 0.5) if g < 1 else GPU_MILLI
                    for b in range(free[3].shape[1]):
                        if mask >> b & 1:
                            free[3][k, b] -= milli
        return out


@register("placer", "first-fit")
class FirstFit(FcfsPlacer):
    """FCFS queue; each job goes to the first node (in node order) that fits it."""

    kernel_code = compiled.PLACE_FIRST_FIT

    def choose(self, fits: npt.NDArray[np.bool_], count: int) -> int:
        return int(np.argmax(fits))


@register("placer", "random-fit")
class RandomFit(FcfsPlacer):
    """FCFS queue; each job goes to a uniformly random node that fits it (seeded).

    The Python path draws from the same SplitMix64 stream as the compiled one: the engine
    seeds its compiled stream with the first draw of the placer's generator.
    """

    kernel_code = compiled.PLACE_RANDOM_FIT

    def setup(self, spec: SimulationSpec, rng: np.random.Generator) -> None:
        self.stream = np.array([rng.integers(0, 2**63)], dtype=np.uint64)

    def choose(self, fits: npt.NDArray[np.bool_], count: int) -> int:
        pick = compiled.uniform_index(self.stream, count)
        return int(np.flatnonzero(fits)[pick])


@register("allocator", "equi")
class Equi(Allocator):
    """EQUI: all jobs in the pool share its cores equally (processor sharing if linear)."""

    kernel_code = compiled.ALLOC_EQUI

    def allocate(self, view: PoolView) -> Allocation:
        n = view.job_ids.size
        return Allocation(np.full(n, view.cores / n if n else 0.0))


@register("allocator", "fcfs-one-core")
class FcfsOneCore(Allocator):
    """One core per job in arrival order; jobs beyond the pool's cores wait."""

    kernel_code = compiled.ALLOC_FCFS_ONE_CORE

    def allocate(self, view: PoolView) -> Allocation:
        n = view.job_ids.size
        cumulative = np.minimum(np.arange(1, n + 1, dtype=np.float64), view.cores)
        cores = np.diff(cumulative, prepend=0.0)
        return Allocation(np.where(cores < FIT_EPS, 0.0, cores))


@register("provisioner", "static")
class Static(Provisioner):
    """Every job requests exactly what the workload says: its own request when the jobs
    carry one (a trace's pods, `Jobs.request`), else its class's `request`."""

    def requests(
        self, spec: SimulationSpec, class_index: IntArray
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        cpu = np.array([c.request.cpu for c in spec.classes], dtype=np.float64)
        mem = np.array([c.request.memory_gb for c in spec.classes], dtype=np.float64)
        gpu = np.array([c.request.gpu for c in spec.classes], dtype=np.float64)
        return cpu[class_index], mem[class_index], gpu[class_index]

    def requests_for(
        self, spec: SimulationSpec, jobs: Any
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        if jobs.request is not None:
            cpu, mem, gpu = jobs.request
            return cpu, mem, gpu
        return self.requests(spec, jobs.class_index)


@register("scaler", "static")
class StaticScaler(Scaler):
    """The scenario's nodes for the whole run: nothing is rented or released."""

    kernel_code = ScalerCode.STATIC
