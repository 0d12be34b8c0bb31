"""The GPU-sharing placers of docs/gpu-frag.md for scenarios (`scheduler.placer.name`).

Registered as `fgd`, `best-fit`, `dot-product`, `gpu-packing`, `gpu-clustering` and
`gpu-random-fit`: the scores of `clusteremu.cluster.policies.gpu_share` (the same compiled `choose`
the trace replay uses) on a scenario's nodes. `gpu-random-fit` is the replay's
`random-fit` (a random feasible node, a random GPU with room); the name `random-fit` is
taken by the generic placer, which picks a random node too but takes the first GPU with
room.

`gpu-clustering` scores a node by the kinds of GPU pods it hosts (`affinity`: column 0 the
pods sharing one GPU, column k those of k whole GPUs). The replay counts its own
placements (pods never leave there); here jobs end, so the counts come from the view's
`running_by_class` (the jobs of each class that run or set up on each node now): a class
is of its request's kind (0 < gpu < 1: share-gpu; gpu >= 1: round(gpu) whole GPUs; none:
CPU-only, or a malleable pool's class), and a node's count of a kind sums its classes of
that kind; the call's own placements are added as it goes, as in the replay. A view
without the counts (a hand-made one: `running_by_class` empty) counts no job anywhere.

A job's request maps to the trace's pod: c = round(1000 x cpu) milli-CPU, memory in GB,
and a `gpu` request g < 1 shares one GPU (k = 1, d = round(1000 g) milli-GPU), g >= 1 takes
round(g) whole GPUs (d = 1000), as the engine holds them. The node's GPU model is its
type's `labels.gpu_model` (types without one share an unnamed model); a class's
`node_selector` is a filter on the node's labels (its `gpu_model` entry is the pod's
`gpu_spec`: FGD's typical pods carry it). Only active nodes with a free worker slot are
scored; ties go to the first node of a per-run random node order (drawn from the placer's
seeded generator, as the replay's per-seed order). Strict FCFS: the queue's heads are
placed in arrival order, each seeing the previous ones, until one fits nowhere.

Normalisers (best-fit, dot-product, gpu-clustering): the scenario's largest node type's
milli-CPU and milli-GPU (on the trace: 128 cores and 8 GPUs, the simulator's `MaxSpecCpu` and
`MaxSpecGpu`).

FGD's typical pods (the workload it expects) come from the scenario's placed job classes,
there being no pod list: one request type per class (the class's `request` and
`node_selector.gpu_model`), weighted by the class's expected number of jobs in the run: a
batch's `count`, a trace's arrivals, an open stream's rate x `stop.time_s`, or with
`stop.jobs` and no `time_s` its share rate / (sum of the open streams' rates) of
`stop.jobs`. Parameters (`scheduler.placer.params`, `fgd` only): `weights`
({class name: weight >= 0}, some above 0: the classes' relative frequencies instead of the
derived ones; a placed class not named weighs 0, i.e. is not typical) and `coverage`
(0 < coverage <= 1, default 0.95: the most frequent types covering that share of the
weight are kept, as in the paper).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.layout import GPU_MILLI
from clusteremu.cluster.model import JobClass, SimulationSpec
from clusteremu.cluster.policies.base import Placement, PlacementView, Placer
from clusteremu.cluster.policies.gpu_share import (
    TypicalPods,
    choose,
    choose_random,
    score_gpu_clustering,
    scorer,
    typical_pods,
)
from clusteremu.cluster.policies.registry import register
from clusteremu.cluster.workload import BatchArrivals, TraceArrivals

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: The node label that names a node type's GPU model (as `gpu-frag`'s node types carry it).
MODEL_LABEL = "gpu_model"
#: The most GPU models the compiled scores tell apart (bits of a mask).
MAX_MODELS = 62


def pod_of(cpu: float, gpu: float) -> tuple[int, int, int]:
    """(c milli-CPU, k GPUs, d milli-GPU per GPU) of a request in cores and GPUs."""
    c = int(math.floor(cpu * 1000.0 + 0.5))
    if gpu <= 0.0:
        return c, 0, 0
    if gpu < 1.0:
        return c, 1, int(math.floor(gpu * GPU_MILLI + 0.5))
    return c, int(math.floor(gpu + 0.5)), int(GPU_MILLI)


def kind_of(k: int, d: int, kinds: int) -> int:
    """A GPU pod's kind for gpu-clustering, as the replay's affinity column: 0 for a share
    of one GPU (k = 1, d < 1000), k for k whole GPUs (at most `kinds` - 1), -1 CPU-only."""
    if k <= 0:
        return -1
    return 0 if (k == 1 and d < GPU_MILLI) else min(k, kinds - 1)


def gpu_models(spec: SimulationSpec) -> list[str]:
    """The GPU models of the node types with GPUs, in type order ("" : unnamed)."""
    models: list[str] = []
    for t in spec.node_types:
        if t.gpu > 0:
            m = t.labels.get(MODEL_LABEL, "")
            if m not in models:
                models.append(m)
    return models


def class_mask(jc: JobClass, models: list[str]) -> int:
    """The GPU models a class may use, as bits over `models` (all: no `gpu_model`)."""
    allowed = jc.node_selector.get(MODEL_LABEL)
    if allowed is None:
        return (1 << len(models)) - 1
    return sum(1 << i for i, m in enumerate(models) if m in allowed)


def expected_jobs(spec: SimulationSpec) -> list[float]:
    """Each class's expected number of jobs in the run (0 for pool classes)."""
    stop = spec.stop
    open_rate = sum(
        float(jc.arrival.rate_per_s or 0.0)
        for jc in spec.classes
        if jc.pool is None and not jc.arrival.is_finite()
    )
    out = []
    for jc in spec.classes:
        a = jc.arrival
        if jc.pool is not None:
            out.append(0.0)
        elif isinstance(a, BatchArrivals):
            out.append(float(a.count))
        elif isinstance(a, TraceArrivals):
            out.append(float(len(a.times_s)))
        elif a.is_finite():
            out.append(1.0)  # a finite process of unknown length: one job's weight
        elif stop.time_s is not None:
            out.append(float(a.rate_per_s or 0.0) * float(stop.time_s))
        elif stop.jobs is not None and open_rate > 0:
            out.append(float(a.rate_per_s or 0.0) / open_rate * float(stop.jobs))
        else:
            out.append(float(a.rate_per_s or 0.0))
    return out


def _check_weights(weights: Any) -> dict[str, float]:
    if weights is None:
        return {}
    if not isinstance(weights, Mapping):
        raise ValueError(f"weights: expected a mapping {{class name: weight}}, got {weights!r}")
    out: dict[str, float] = {}
    for name, w in weights.items():
        try:
            value = float(w)
        except (TypeError, ValueError):
            raise ValueError(f"weights.{name}: expected a number, got {w!r}") from None
        if isinstance(w, bool) or not math.isfinite(value) or value < 0:
            raise ValueError(f"weights.{name}: expected a finite weight >= 0, got {w!r}")
        out[str(name)] = value
    return out


class GpuSharingPlacer(Placer):
    """One of `gpu_share.SCORERS` on a scenario's nodes (see the module doc)."""

    strict_fcfs = True
    #: Random placement draws for each job it looks at before it knows a node fits.
    ask_when_nothing_fits = True
    #: The `gpu_share.SCORERS` name whose score decides.
    policy: ClassVar[str] = ""
    #: Share of the classes' weight FGD's typical pods cover (`Fgd` takes it as a param).
    coverage: float = 0.95

    def __init__(self) -> None:
        scorer(self.policy)  # an unknown name: UnknownPolicyError (a ValueError)
        self.typical: TypicalPods | None = None

    @property
    def counts_kinds(self) -> bool:
        """The score reads the kinds of GPU pods on each node (gpu-clustering's)."""
        return scorer(self.policy) is score_gpu_clustering

    # -- set-up ---------------------------------------------------------------------------

    def check_spec(self, spec: SimulationSpec) -> list[tuple[str, str]]:
        models = gpu_models(spec)
        if len(models) > MAX_MODELS:
            return [
                (
                    "cluster.node_types",
                    f"at most {MAX_MODELS} GPU models (labels.{MODEL_LABEL}) for placer "
                    f"{self.name!r}; got {len(models)}",
                )
            ]
        return []

    def setup(self, spec: SimulationSpec, rng: np.random.Generator) -> None:
        problems = self.check_spec(spec)
        if problems:
            raise ValueError("; ".join(f"{f}: {e}" for f, e in problems))
        self.rng = rng
        self.models = gpu_models(spec)
        model_of = {m: i for i, m in enumerate(self.models)}
        self.type_model = np.array(
            [model_of[t.labels.get(MODEL_LABEL, "")] if t.gpu > 0 else -1 for t in spec.node_types],
            dtype=np.int64,
        )
        self.class_mask = np.array(
            [class_mask(jc, self.models) for jc in spec.classes], dtype=np.int64
        )
        #: (classes, node types): the type's labels satisfy the class's node_selector.
        self.type_ok = np.array(
            [
                [
                    all(t.labels.get(k) in v for k, v in jc.node_selector.items())
                    for t in spec.node_types
                ]
                for jc in spec.classes
            ],
            dtype=np.bool_,
        ).reshape(len(spec.classes), len(spec.node_types))
        self.cpu_norm = max(max((t.cpu for t in spec.node_types), default=0.0) * 1000.0, 1.0)
        self.gpu_norm = max(max((t.gpu for t in spec.node_types), default=0.0), 1.0) * GPU_MILLI
        self.typical = self.typical_pods(spec)
        #: Each class's kind of GPU pod, gpu-clustering's affinity column (the replay's): 0
        #: sharing one GPU, k for k whole GPUs (capped at the widest node), -1 CPU-only or
        #: a malleable pool's class; and as a (classes, kinds) 0/1 matrix.
        self.affinity_width = int(max((t.gpu for t in spec.node_types), default=0)) + 2
        self.class_kind = np.array(
            [
                -1
                if jc.pool is not None
                else kind_of(*pod_of(jc.request.cpu, jc.request.gpu)[1:], self.affinity_width)
                for jc in spec.classes
            ],
            dtype=np.int64,
        )
        self.kind_matrix = np.zeros((len(spec.classes), self.affinity_width), dtype=np.int64)
        has = self.class_kind >= 0
        self.kind_matrix[np.flatnonzero(has), self.class_kind[has]] = 1
        self.keys = np.zeros(0)  # a random key per node row: the tie-break order
        self.f_cache = np.zeros(0)
        self.seen_gpu = np.zeros((0, 0))
        self.seen_cpu = np.zeros(0)

    def typical_pods(self, spec: SimulationSpec) -> TypicalPods:
        """One request type per placed class (FGD's workload model; see the module doc)."""
        placed = [i for i, jc in enumerate(spec.classes) if jc.pool is None]
        if not placed:  # no job to place: a CPU-only type keeps the arrays non-empty
            z = np.zeros(1, dtype=np.int64)
            return TypicalPods(z, z, z, np.full(1, -1, dtype=np.int64), np.ones(1))
        weight = self.class_weights(spec)
        reqs = [pod_of(spec.classes[i].request.cpu, spec.classes[i].request.gpu) for i in placed]
        w = np.array([weight[i] for i in placed], dtype=np.float64)
        if not np.any(w > 0):
            w = np.ones_like(w)  # no class expects a job: every one counts the same
        keep = w > 0
        a = np.array(reqs, dtype=np.int64).reshape(-1, 3)[keep]
        return typical_pods(
            a[:, 0],
            a[:, 1],
            a[:, 2],
            self.class_mask[placed][keep],
            coverage=self.coverage,
            weight=w[keep],
        )

    def class_weights(self, spec: SimulationSpec) -> list[float]:
        return expected_jobs(spec)

    # -- deciding -------------------------------------------------------------------------

    def _refresh(self, view: PlacementView, cpu_milli: FloatArray) -> None:
        """Grow the per-node tables to the view's rows; mark F_n stale where a node's free
        GPU or CPU changed since the last call (jobs ended, nodes joined)."""
        n, g = view.gpu_free_milli.shape
        if self.keys.size < n:
            self.keys = np.concatenate([self.keys, self.rng.random(n - self.keys.size)])
        if self.f_cache.size != n or self.seen_gpu.shape != (n, g):
            self.f_cache = np.full(n, -1.0)
        else:
            changed = np.any(self.seen_gpu != view.gpu_free_milli, axis=1) | (
                self.seen_cpu != cpu_milli
            )
            self.f_cache[changed] = -1.0
        self.order = np.argsort(self.keys[:n], kind="stable").astype(np.int64)

    def place(self, view: PlacementView) -> list[Placement]:
        queue = view.queue
        if queue.size == 0:
            return []
        n = view.free_cpu.size
        gpu_free = np.array(view.gpu_free_milli, dtype=np.float64, copy=True)
        cpu_free = np.asarray(view.free_cpu, dtype=np.float64) * 1000.0
        self._refresh(view, cpu_free)
        mem_free = np.array(view.free_memory_gb, dtype=np.float64, copy=True)
        slots = np.array(view.free_slots, dtype=np.float64, copy=True)
        n_gpus = np.rint(np.asarray(view.capacity_gpu)).astype(np.int64)
        node_model = self.type_model[view.node_type] if n else np.zeros(0, dtype=np.int64)
        node_model = np.where(n_gpus > 0, node_model, -1).astype(np.int64)
        t = self.typical
        assert t is not None, "setup() first"
        affinity = self.affinity(view, n)
        score, counts_kinds = scorer(self.policy), self.counts_kinds
        nodes = (gpu_free, n_gpus, node_model, cpu_free, mem_free)
        typical = (t.cpu_milli, t.gpu_milli, t.num_gpu, t.model_mask, t.p)
        rest = (self.f_cache, affinity, self.cpu_norm, self.gpu_norm)
        out: list[Placement] = []
        for i in range(queue.size):
            cls = int(view.class_index[i])
            ok = view.active & (slots >= 1.0) & self.type_ok[cls][view.node_type]
            order = self.order[ok[self.order]]
            c, k, d = pod_of(float(view.request_cpu[i]), float(view.request_gpu[i]))
            mem = float(view.request_memory_gb[i])
            pod = (c, mem, k, d, int(self.class_mask[cls]))
            if score is None:  # random-fit
                u1 = self.rng.random()
                u2 = self.rng.random()
                node, mask = choose_random(*nodes, order, *pod, u1, u2)
            else:
                node, mask = choose(score, *nodes, order, *pod, *typical, *rest)
            if node < 0:
                break  # strict FCFS: nothing starts behind a blocked head
            gpus = tuple(b for b in range(int(n_gpus[node])) if (mask >> b) & 1) if k else None
            out.append(Placement(int(queue[i]), int(node), gpus))
            cpu_free[node] -= c
            mem_free[node] -= mem
            slots[node] -= 1.0
            for b in gpus or ():
                gpu_free[node, b] -= d
            self.f_cache[node] = -1.0
            if k and counts_kinds:  # the node hosts one more pod of the kind
                affinity[node, kind_of(k, d, affinity.shape[1])] += 1
        self.seen_gpu = gpu_free
        self.seen_cpu = cpu_free
        return out

    def affinity(self, view: PlacementView, n: int) -> IntArray:
        """(nodes, kinds): the GPU pods of each kind on each node (gpu-clustering's input,
        the replay's `affinity`): the view's `running_by_class` summed over the classes of
        each kind; a single unused column for the other policies."""
        if not self.counts_kinds:
            return np.zeros((n, 1), dtype=np.int64)
        running = np.asarray(view.running_by_class)
        if running.size == 0:  # not given (a hand-made view), or no node or class
            return np.zeros((n, self.affinity_width), dtype=np.int64)
        if running.shape != (n, self.class_kind.size):
            raise ValueError(
                f"running_by_class: expected shape ({n}, {self.class_kind.size}) "
                f"(nodes, classes), got {running.shape}"
            )
        return running.astype(np.int64, copy=False) @ self.kind_matrix

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "policy": self.policy}


@register("placer", "best-fit")
class GpuBestFit(GpuSharingPlacer):
    """The least leftover CPU and GPU (docs/gpu-frag.md), the tightest GPU."""

    policy = "best-fit"


@register("placer", "dot-product")
class GpuDotProduct(GpuSharingPlacer):
    """The simulator's integer dot-product score (docs/gpu-frag.md), the tightest GPU."""

    policy = "dot-product"


@register("placer", "gpu-packing")
class GpuPacking(GpuSharingPlacer):
    """Partly used GPUs, then used nodes, then small idle nodes (docs/gpu-frag.md)."""

    policy = "gpu-packing"


@register("placer", "gpu-clustering")
class GpuClustering(GpuSharingPlacer):
    """Nodes hosting only jobs of the job's GPU kind first (docs/gpu-frag.md), counted
    from the view's `running_by_class`; the tightest GPU."""

    policy = "gpu-clustering"


@register("placer", "gpu-random-fit")
class GpuRandomFit(GpuSharingPlacer):
    """A uniformly random feasible node and a random GPU with room on it."""

    policy = "random-fit"


@register("placer", "fgd")
class Fgd(GpuSharingPlacer):
    """Fragmentation gradient descent against the scenario's typical pods (module doc)."""

    policy = "fgd"

    def __init__(self, weights: Mapping[str, Any] | None = None, coverage: float = 0.95) -> None:
        super().__init__()
        self.weights = _check_weights(weights)
        try:
            value = float(coverage)
        except (TypeError, ValueError):
            raise ValueError(f"coverage: expected a number in (0, 1], got {coverage!r}") from None
        if isinstance(coverage, bool) or not (0.0 < value <= 1.0):
            raise ValueError(f"coverage: expected a number in (0, 1], got {coverage!r}")
        self.coverage = value

    def check_spec(self, spec: SimulationSpec) -> list[tuple[str, str]]:
        problems = super().check_spec(spec)
        placed = [jc.name for jc in spec.classes if jc.pool is None]
        for name in self.weights:
            if name not in placed:
                problems.append(
                    (
                        f"scheduler.placer.params.weights.{name}",
                        f"expected a placed job class of workload.classes "
                        f"({', '.join(placed)[:200] or 'none'})",
                    )
                )
        if self.weights and not any(w > 0 for w in self.weights.values()):
            problems.append(
                ("scheduler.placer.params.weights", "expected a weight above 0 for some class")
            )
        return problems

    def class_weights(self, spec: SimulationSpec) -> list[float]:
        if not self.weights:
            return expected_jobs(spec)
        return [self.weights.get(jc.name, 0.0) for jc in spec.classes]

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        out["coverage"] = self.coverage
        if self.weights:
            out["weights"] = dict(self.weights)
        return out
