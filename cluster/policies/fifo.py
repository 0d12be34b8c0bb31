"""Baseline policies: first-fit and random-fit placers, EQUI and FCFS-one-core allocators,
and the static provisioner (every job requests its class's request).

Each has a compiled decision function (registered in the one table of compiled policies,
`clusteremu.cluster.policies.compiled_table`) and a Python one; the conformance tests check that
both
paths give identical runs.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.layout import GPU_MILLI
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies import compiled as rules
from clusteremu.cluster.policies.base import (
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
from clusteremu.cluster.policies.compiled_table import (
    AllocatorView,
    PlacerView,
    compiled_allocator,
    compiled_placer,
    first_fit,
    fits,
    uniform_index,
)
from clusteremu.cluster.policies.registry import register

FIT_EPS = rules.FIT_EPS


@compiled_placer
def place_first_fit(job: int, now_s: float, view: PlacerView) -> int:
    """The first node in node order with room for the job, or -1 (through the engine's
    index of free capacity on large clusters: `first_fit`)."""
    return first_fit(view, job)


@compiled_placer
def place_random_fit(job: int, now_s: float, view: PlacerView) -> int:
    """A uniformly random node with room for the job (the policy's seeded stream), or -1."""
    count = 0
    for k in range(view.free_cpu.shape[0]):
        if fits(view, job, k):
            count += 1
    if count == 0:
        return -1
    pick = uniform_index(view.rng, count)
    for k in range(view.free_cpu.shape[0]):
        if fits(view, job, k):
            if pick == 0:
                return k
            pick -= 1
    return -1


@compiled_allocator
def allocate_equi(
    members: IntArray,
    n: int,
    pool_cores: float,
    now_s: float,
    view: AllocatorView,
    cores: FloatArray,
) -> None:
    """EQUI: every job in the pool gets pool_cores / n cores (fractions below 1 allowed)."""
    share = pool_cores / n
    for i in range(n):
        cores[members[i]] = share


@compiled_allocator
def allocate_fcfs_one_core(
    members: IntArray,
    n: int,
    pool_cores: float,
    now_s: float,
    view: AllocatorView,
    cores: FloatArray,
) -> None:
    """One core per job in arrival order until the pool is used up; the rest wait."""
    left = pool_cores
    for i in range(n):
        give = min(1.0, left)
        if give < FIT_EPS:
            give = 0.0
        cores[members[i]] = give
        left -= give


def book_placement(
    free_cpu: FloatArray,
    free_mem: FloatArray,
    free_slots: FloatArray,
    gpu_free: FloatArray,
    k: int,
    cpu: float,
    mem: float,
    gpu: float,
) -> None:
    """Take a placement on node row k of (cpu cores, mem GB, gpu GPUs) off a Python
    placer's own tally of free resources, as the engine will (its GPUs: `choose_gpus`),
    so that later placements of the same call see it."""
    free_cpu[k] -= cpu
    free_mem[k] -= mem
    free_slots[k] -= 1.0
    if gpu > 0:
        mask = rules.choose_gpus(gpu_free, k, gpu)
        milli = np.floor(gpu * GPU_MILLI + 0.5) if gpu < 1 else GPU_MILLI
        for b in range(gpu_free.shape[1]):
            if mask >> b & 1:
                gpu_free[k, b] -= milli


class FreeTally:
    """A copy of the view's free resources less what this call's placements took (for
    placers that try each waiting job on the nodes left: `sjf`, `easy-backfill`,
    `kube-default`)."""

    def __init__(self, view: PlacementView) -> None:
        self.view = view
        self.cpu = view.free_cpu.copy()
        self.mem = view.free_memory_gb.copy()
        self.slots = view.free_slots.copy()
        self.gpu = view.gpu_free_milli.copy()
        self.ok = np.zeros(self.cpu.size, dtype=np.bool_)

    def fitting(self, cpu: float, mem: float, gpu: float) -> npt.NDArray[np.intp]:
        """Node rows where (cpu cores, mem GB, gpu GPUs) fits now, ascending."""
        count = rules.fit_mask(
            self.view.active, self.cpu, self.mem, self.slots, self.gpu, cpu, mem, gpu, self.ok
        )
        return np.flatnonzero(self.ok) if count else np.zeros(0, dtype=np.intp)

    def take(self, k: int, cpu: float, mem: float, gpu: float) -> None:
        """Book a placement of (cpu, mem, gpu) on node row k."""
        book_placement(self.cpu, self.mem, self.slots, self.gpu, k, cpu, mem, gpu)


#: The fields of a `PlacementView` that a placer's own placements of a call use up.
_FREE_FIELDS = ("free_cpu", "free_memory_gb", "free_gpu", "free_slots", "gpu_free_milli")


def tallied_view(view: PlacementView) -> PlacementView:
    """The view with writable copies of its free resources (`free_cpu`, `free_memory_gb`,
    `free_gpu`, `free_slots`, `gpu_free_milli`), for a placer that takes off what each
    of its placements of the call holds (`book_placement`); every other field is the
    view's own. A shallow copy of the view object: a few microseconds."""
    new = object.__new__(type(view))
    if hasattr(view, "__dict__"):
        new.__dict__.update(view.__dict__)
    else:  # a view class with slots: copy it the slow way
        import copy

        new = copy.copy(view)
    for name in _FREE_FIELDS:
        object.__setattr__(new, name, np.array(getattr(view, name), copy=True))
    return new


class FcfsPlacer(Placer):
    """Strict FCFS: place queue heads in order until the head fits nowhere; the Python
    twin of a compiled placer (docs/adding_a_policy.md, "The Python twin").

    Feasibility is the compiled placers' own rule (`rules.has_room`: cores, GB, GPUs per
    GPU, worker slots) applied to the view's free resources as this call's decisions use
    them up. A subclass says which node the head goes to: `choose_node(view, i, fits,
    count)` with the whole view, or the older, shorter `choose(fits, count, free_cpu)`.
    """

    #: Behind a blocked head nothing starts: the engine asks only when the head may move.
    strict_fcfs = True

    def choose_node(
        self, view: PlacementView, i: int, fits: npt.NDArray[np.bool_], count: int
    ) -> int:
        """The node for waiting job `i` (its position in `view.queue`; its id is
        `view.queue[i]`, its request `view.request_cpu[i]`, ...): what the compiled
        `place(job, now_s, view)` answers for that job, as a node of `fits`.

        `fits` marks the `count` nodes where the job fits (the engine's rule, `fits` in
        compiled code); `view` is the call's whole view, its free resources (`free_cpu`,
        `free_memory_gb` alias `free_mem`, `free_slots`, `free_gpu`, `gpu_free_milli`
        alias `gpu_free`) as this call's earlier placements left them, its capacities,
        speeds, node types and statuses as they are. The default asks `choose(fits,
        count, view.free_cpu)`."""
        return self.choose(fits, count, view.free_cpu)

    def choose(self, fits: npt.NDArray[np.bool_], count: int, free_cpu: FloatArray) -> int:
        """The node for the job at the head: `fits` marks the `count` nodes with room, and
        `free_cpu` is every node's free cores as this call's earlier placements left them."""
        raise NotImplementedError(
            f"placer {self.name!r} ({type(self).__name__}) has no Python twin: an FcfsPlacer "
            "defines choose_node(view, i, fits, count) or choose(fits, count, free_cpu) "
            "(docs/adding_a_policy.md, 'The Python twin')"
        )

    def place(self, view: PlacementView) -> list[Placement]:
        queue = view.queue.tolist()
        many = len(queue) > 1
        if many:  # later decisions of this call see the earlier ones
            view = tallied_view(view)
        cpu, mem, gpu = view.request_cpu, view.request_memory_gb, view.request_gpu
        active, free_cpu, free_mem = view.active, view.free_cpu, view.free_memory_gb
        free_slots, gpu_free = view.free_slots, view.gpu_free_milli
        ok = np.zeros(free_cpu.size, dtype=np.bool_)
        out: list[Placement] = []
        for i, job in enumerate(queue):
            c, m, g = float(cpu[i]), float(mem[i]), float(gpu[i])
            count = rules.fit_mask(active, free_cpu, free_mem, free_slots, gpu_free, c, m, g, ok)
            if count == 0:
                break
            k = self.choose_node(view, i, ok, count)
            out.append(Placement(job, k))
            if many:
                book_placement(free_cpu, free_mem, free_slots, gpu_free, k, c, m, g)
                view.free_gpu[k] -= g
        return out


@register("placer", "first-fit")
class FirstFit(FcfsPlacer):
    """FCFS queue; each job goes to the first node (in node order) that fits it."""

    compiled = place_first_fit
    #: The engine keeps its index of free capacity for this placer on large clusters.
    uses_fit_index = True

    def choose(self, fits: npt.NDArray[np.bool_], count: int, free_cpu: FloatArray) -> int:
        return int(np.argmax(fits))


@register("placer", "random-fit")
class RandomFit(FcfsPlacer):
    """FCFS queue; each job goes to a uniformly random node that fits it (seeded).

    The Python path draws from the same SplitMix64 stream as the compiled one: the engine
    seeds its compiled stream with the first draw of the placer's generator.
    """

    compiled = place_random_fit

    def setup(self, spec: SimulationSpec, rng: np.random.Generator) -> None:
        self.stream = np.array([rng.integers(0, 2**63)], dtype=np.uint64)

    def choose(self, fits: npt.NDArray[np.bool_], count: int, free_cpu: FloatArray) -> int:
        pick = rules.uniform_index(self.stream, count)
        return int(np.flatnonzero(fits)[pick])


@register("allocator", "equi")
class Equi(Allocator):
    """EQUI: all jobs in the pool share its cores equally (processor sharing if linear)."""

    compiled = allocate_equi

    def allocate(self, view: PoolView) -> Allocation:
        n = view.job_ids.size
        return Allocation(np.full(n, view.cores / n if n else 0.0))


@register("allocator", "fcfs-one-core")
class FcfsOneCore(Allocator):
    """One core per job in arrival order; jobs beyond the pool's cores wait."""

    compiled = allocate_fcfs_one_core

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
        cpu, mem, gpu = _by_class(spec)
        return cpu[class_index], mem[class_index], gpu[class_index]

    def requests_for(
        self, spec: SimulationSpec, jobs: Any
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        if jobs.request is not None:
            cpu, mem, gpu = jobs.request
            return cpu, mem, gpu
        return self.requests(spec, jobs.class_index)

    def class_requests(
        self, spec: SimulationSpec, jobs: Any
    ) -> tuple[FloatArray, FloatArray, FloatArray] | None:
        """Each class's `request` when the jobs carry none of their own (and a subclass
        has not changed how requests are made)."""
        cls = type(self)
        own = cls.requests is Static.requests and cls.requests_for is Static.requests_for
        if jobs.request is not None or not own:
            return None
        return _by_class(spec)


def _by_class(spec: SimulationSpec) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Each class's (cores, GB, GPUs) `request`, one value per class."""
    return (
        np.array([c.request.cpu for c in spec.classes], dtype=np.float64),
        np.array([c.request.memory_gb for c in spec.classes], dtype=np.float64),
        np.array([c.request.gpu for c in spec.classes], dtype=np.float64),
    )


@register("scaler", "static")
class StaticScaler(Scaler):
    """The scenario's nodes for the whole run: nothing is rented or released."""

    static: ClassVar[bool] = True
