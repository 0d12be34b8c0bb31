"""Baseline policies: first-fit and random-fit placers, EQUI and FCFS-one-core allocators,
and the static provisioner (every job requests its class's request).

Each has a compiled decision function (cluster.policies.compiled) and a Python one; the
conformance tests check that both paths give identical runs.
"""

from __future__ import annotations

import numpy as np

from cluster.layout import GPU_MILLI, NF, NI, NodeStatus
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

    Feasibility is `compiled.node_fits` (cores, GB, GPUs per GPU, worker slots), the
    compiled placers' own predicate, applied to the view's free resources as this call's
    decisions use them up.
    """

    def choose(self, candidates: IntArray) -> int:
        raise NotImplementedError

    def place(self, view: PlacementView) -> list[Placement]:
        free = np.vstack([view.free_cpu, view.free_memory_gb, view.free_gpu, view.free_slots])
        gpu_free = view.gpu_free_milli.copy()
        status = np.where(view.active, NodeStatus.UP, NodeStatus.BOOTING).astype(np.int64)
        nodes_f = np.zeros((len(NF), free.shape[1]))
        rows = [NF.FREE_CPU, NF.FREE_MEM, NF.FREE_GPU, NF.FREE_SLOTS]
        nodes_f[rows] = free
        nodes_i = np.zeros((len(NI), free.shape[1]), dtype=np.int64)
        nodes_i[NI.STATUS] = status
        ok = np.zeros(free.shape[1], dtype=np.bool_)
        out: list[Placement] = []
        for i, job in enumerate(view.queue.tolist()):
            cpu = float(view.request_cpu[i])
            mem = float(view.request_memory_gb[i])
            gpu = float(view.request_gpu[i])
            if compiled.fit_mask(nodes_f, nodes_i, gpu_free, cpu, mem, gpu, ok) == 0:
                break
            k = self.choose(np.flatnonzero(ok))
            nodes_f[rows, k] -= (cpu, mem, gpu, 1.0)
            if gpu > 0:
                mask = compiled.choose_gpus(gpu_free, k, gpu)
                gpu_free[k, [g for g in range(gpu_free.shape[1]) if mask >> g & 1]] -= (
                    np.floor(gpu * GPU_MILLI + 0.5) if gpu < 1 else GPU_MILLI
                )
            out.append(Placement(job, k))
        return out


@register("placer", "first-fit")
class FirstFit(FcfsPlacer):
    """FCFS queue; each job goes to the first node (in node order) that fits it."""

    kernel_code = compiled.PLACE_FIRST_FIT

    def choose(self, candidates: IntArray) -> int:
        return int(candidates[0])


@register("placer", "random-fit")
class RandomFit(FcfsPlacer):
    """FCFS queue; each job goes to a uniformly random node that fits it (seeded).

    The Python path draws from the same SplitMix64 stream as the compiled one: the engine
    seeds its compiled stream with the first draw of the placer's generator.
    """

    kernel_code = compiled.PLACE_RANDOM_FIT

    def setup(self, spec: SimulationSpec, rng: np.random.Generator) -> None:
        self.stream = np.array([rng.integers(0, 2**63)], dtype=np.uint64)

    def choose(self, candidates: IntArray) -> int:
        return int(candidates[compiled.uniform_index(self.stream, candidates.size)])


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
    """Every job requests exactly its class's `request`."""

    def requests(
        self, spec: SimulationSpec, class_index: IntArray
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        cpu = np.array([c.request.cpu for c in spec.classes], dtype=np.float64)
        mem = np.array([c.request.memory_gb for c in spec.classes], dtype=np.float64)
        gpu = np.array([c.request.gpu for c in spec.classes], dtype=np.float64)
        return cpu[class_index], mem[class_index], gpu[class_index]


@register("scaler", "static")
class StaticScaler(Scaler):
    """The scenario's nodes for the whole run: nothing is rented or released."""

    kernel_code = ScalerCode.STATIC
