"""The ATC'23 FGD evaluation protocol on the engine (`clusteremu gpu-frag`).

Per seed: shuffle the pod list, then append pods drawn uniformly with replacement until the
next one would push the requested GPU (sum of k x d) past 130% of the cluster's GPU
capacity; pods arrive one a second and never leave (their run time is far beyond the
replay); a pod the policy cannot place is dropped (`Engine.drop`) and still counts as
arrived. Ties between equal scores go to the first node of a per-seed random node order.
After every pod the replay records the arrived GPU (failed pods included) and the allocated
GPU; `curve` bins them by round(100 x arrived / capacity) from 0 to 130 (an empty bin takes
the mean of its nearest neighbours) and reports unallocated GPU % = 100 - 100 x allocated /
capacity. The engine holds the nodes, the GPUs' free milli-GPU and the placements; the
policy (`GpuSharePlacer`) reads them through its view and decides in compiled code
(`clusteremu.cluster.policies.gpu_share`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.distributions import Deterministic
from clusteremu.cluster.engine import Engine
from clusteremu.cluster.gpu_trace import Nodes, Pods
from clusteremu.cluster.jobs import Jobs
from clusteremu.cluster.layout import JI, JobState
from clusteremu.cluster.model import JobClass, NodeType, SimulationSpec, StopRule
from clusteremu.cluster.policies.base import Placement, PlacementView, Placer
from clusteremu.cluster.policies.gpu_share import (
    CPU_NORM,
    GPU_NORM,
    TypicalPods,
    choose,
    choose_random,
    fragment,
    scorer,
    typical_pods,
)
from clusteremu.cluster.speedup import LinearSpeedup
from clusteremu.cluster.workload import BatchArrivals

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Arrived GPU % at which results are reported.
REPORT_AT = (80, 90, 95, 100, 105, 110, 120, 130)
#: Requested GPU the replay fills up to, as a fraction of capacity.
FILL = 1.3
#: A pod's work: it never completes within the replay.
FOREVER_S = 1e12


def cluster_spec(nodes: Nodes, pods: int) -> SimulationSpec:
    """The trace's nodes as a scenario: one node type per distinct (CPU, memory, GPUs,
    model), the nodes in trace order; one class of pods (requests come per pod)."""
    types: dict[tuple[int, int, int, int], int] = {}
    node_types: list[NodeType] = []
    names: list[str] = []
    for cpu, mem, gpus, model in zip(
        nodes.cpu_milli.tolist(),
        nodes.memory_mib.tolist(),
        nodes.gpus.tolist(),
        nodes.model.tolist(),
        strict=True,
    ):
        key = (cpu, mem, gpus, model)
        if key not in types:
            types[key] = len(node_types)
            label = nodes.models[model] if model >= 0 else "none"
            node_types.append(
                NodeType(
                    f"{label}-{cpu // 1000}c-{mem // 1024}g-{gpus}gpu",
                    cpu / 1000.0,
                    mem / 1024.0,
                    float(gpus),
                    labels={"gpu_model": label},
                )
            )
        names.append(node_types[types[key]].name)
    pod = JobClass(
        "pod", BatchArrivals(max(pods, 1), 0.0), Deterministic(FOREVER_S), LinearSpeedup()
    )
    return SimulationSpec(
        name="gpu-frag",
        seed=0,
        stop=StopRule(jobs=max(pods, 1)),
        node_types=tuple(node_types),
        nodes=tuple(names),
        pools=(),
        classes=(pod,),
    )


def pod_jobs(pods: Pods) -> Jobs:
    """One job per pod, arriving a second apart, each with its own request."""
    n = len(pods)
    k, d = pods.num_gpu, pods.gpu_milli
    gpu = np.where((k == 1) & (d < 1000), d / 1000.0, k.astype(np.float64))
    return Jobs(
        np.arange(n, dtype=np.float64),
        np.zeros(n, dtype=np.int64),
        np.full(n, FOREVER_S),
        request=(pods.cpu_milli / 1000.0, pods.memory_mib / 1024.0, gpu),
    )


class GpuSharePlacer(Placer):
    """One of `gpu_share.SCORERS`, deciding for the pod at the head of the queue."""

    strict_fcfs = True
    #: RandomFit draws for the head before it knows a node fits.
    ask_when_nothing_fits = True

    def __init__(
        self,
        policy: str,
        nodes: Nodes,
        pods: Pods,
        typical: TypicalPods,
        order: IntArray,
        rng: np.random.Generator,
    ) -> None:
        scorer(policy)  # an unknown name: UnknownPolicyError (a ValueError)
        self.name = policy  # type: ignore[misc]
        self.pods, self.typical, self.order, self.rng = pods, typical, order, rng
        self.n_gpus = nodes.gpus
        self.node_model = nodes.model
        self.f_cache = np.full(len(nodes.name), -1.0)
        self.affinity = np.zeros(
            (len(nodes.name), int(nodes.gpus.max(initial=0)) + 2), dtype=np.int64
        )
        self.mem_gb = pods.memory_mib / 1024.0

    def place(self, view: PlacementView) -> list[Placement]:
        j = int(view.queue[0])
        p, t = self.pods, self.typical
        k, d = int(p.num_gpu[j]), int(p.gpu_milli[j])
        nodes = (
            view.gpu_free_milli,
            self.n_gpus,
            self.node_model,
            view.free_cpu * 1000.0,
            view.free_memory_gb,
            self.order,
        )
        pod = (int(p.cpu_milli[j]), float(self.mem_gb[j]), k, d, int(p.model_mask[j]))
        score = scorer(self.name)
        if score is None:  # random-fit
            u1 = self.rng.random()
            u2 = self.rng.random()
            node, mask = choose_random(*nodes, *pod, u1, u2)
        else:
            typical = (t.cpu_milli, t.gpu_milli, t.num_gpu, t.model_mask, t.p)
            node, mask = choose(
                score, *nodes, *pod, *typical, self.f_cache, self.affinity, CPU_NORM, GPU_NORM
            )
        if node < 0:
            return []
        self.f_cache[node] = -1.0  # its F changes
        if k > 0:  # the kinds of GPU pods the node hosts (gpu-clustering)
            self.affinity[
                node, 0 if (k == 1 and d < 1000) else min(k, self.affinity.shape[1] - 1)
            ] += 1
        gpus = tuple(g for g in range(int(self.n_gpus[node])) if (mask >> g) & 1) if k else None
        return [Placement(j, int(node), gpus)]


def workload(pods: Pods, capacity_milli: int, rng: np.random.Generator) -> IntArray:
    """Pod indices of one seed: the shuffled list, then uniform draws with replacement,
    until the next pod would push the requested GPU past FILL x capacity."""
    limit = FILL * capacity_milli
    req = pods.gpu_request_milli
    chosen: list[int] = []
    total = 0.0
    for i in rng.permutation(len(pods)).tolist():
        if total + req[i] > limit:
            return np.asarray(chosen, dtype=np.int64)
        chosen.append(i)
        total += req[i]
    while True:
        i = int(rng.integers(len(pods)))
        if total + req[i] > limit:
            return np.asarray(chosen, dtype=np.int64)
        chosen.append(i)
        total += req[i]


@dataclass(frozen=True)
class Replay:
    """One seed: arrived and allocated milli-GPU after every pod, and which pods failed."""

    policy: str
    seed: int
    capacity_milli: int
    arrived_milli: FloatArray
    allocated_milli: FloatArray
    failed: npt.NDArray[np.bool_]
    fragmentation_pct: FloatArray  #: sum F_n / capacity x 100 at each arrived % (0..130)

    def curve(self) -> FloatArray:
        """Unallocated GPU % per arrived % 0..130 (see the module doc)."""
        cap = float(self.capacity_milli)
        bins = np.rint(100.0 * self.arrived_milli / cap).astype(np.int64)
        alloc = 100.0 * self.allocated_milli / cap
        sums = np.bincount(bins, weights=alloc, minlength=131)[:131]
        counts = np.bincount(bins, minlength=131)[:131]
        values = np.full(131, np.nan)
        have = counts > 0
        values[have] = sums[have] / counts[have]
        values = _fill_gaps(values)
        return 100.0 - values

    @property
    def first_failure_pct(self) -> float:
        """Arrived GPU % when the first pod failed (NaN if none did)."""
        idx = np.flatnonzero(self.failed)
        if idx.size == 0:
            return math.nan
        return float(100.0 * self.arrived_milli[idx[0]] / self.capacity_milli)


def _fill_gaps(values: FloatArray) -> FloatArray:
    out = values.copy()
    known = np.flatnonzero(~np.isnan(values))
    if known.size == 0:
        return np.zeros_like(values)
    for i in np.flatnonzero(np.isnan(values)):
        left = known[known < i]
        right = known[known > i]
        near = [values[left[-1]]] if left.size else []
        near += [values[right[0]]] if right.size else []
        out[i] = float(np.mean(near))
    return out


def replay(
    nodes: Nodes, pods: Pods, policy: str, seed: int, typical: TypicalPods | None = None
) -> Replay:
    """Run the protocol for one policy and seed on the engine."""
    rng = np.random.default_rng(seed)
    cap = nodes.gpu_capacity_milli
    chosen = pods.take(workload(pods, cap, rng))
    order = rng.permutation(len(nodes.name)).astype(np.int64)
    typical = (
        typical
        if typical is not None
        else typical_pods(pods.cpu_milli, pods.num_gpu, pods.gpu_milli, pods.model_mask)
    )
    placer = GpuSharePlacer(policy, nodes, chosen, typical, order, rng)
    spec = cluster_spec(nodes, len(chosen))
    engine = Engine(spec, placer=placer, jobs=pod_jobs(chosen))
    n = len(chosen)
    req = chosen.gpu_request_milli.astype(np.float64)
    arrived = np.cumsum(req)
    allocated = np.zeros(n)
    failed = np.zeros(n, dtype=np.bool_)
    frag = np.full(131, np.nan)
    state = engine.jobs_i[JI.STATE]
    total = 0.0
    next_pct = 0
    for i in range(n):
        engine.step(until_s=float(i))
        state = engine.jobs_i[JI.STATE]
        if state[i] == JobState.QUEUED:
            engine.drop(i)
            failed[i] = True
        else:
            total += req[i]
        allocated[i] = total
        while next_pct <= 130 and arrived[i] >= next_pct * cap / 100.0:
            frag[next_pct] = cluster_fragmentation(engine, nodes, typical) / cap * 100.0
            next_pct += 1
    return Replay(policy, seed, cap, arrived, allocated, failed, _fill_gaps(frag))


def cluster_fragmentation(engine: Engine, nodes: Nodes, t: TypicalPods) -> float:
    """Sum of F_n over the nodes (milli-GPU), from the engine's current free resources."""
    view = engine.placement_view()
    free_cpu = view.free_cpu * 1000.0
    total = 0.0
    for n in range(len(nodes.name)):
        bit = 0 if nodes.model[n] < 0 else 1 << int(nodes.model[n])
        total += fragment(
            view.gpu_free_milli[n],
            int(nodes.gpus[n]),
            float(free_cpu[n]),
            bit,
            t.cpu_milli,
            t.gpu_milli,
            t.num_gpu,
            t.model_mask,
            t.p,
        )
    return total


def medians(replays: Sequence[Replay]) -> dict[str, object]:
    """The JSON of `clusteremu gpu-frag --json` for one policy's seeds."""
    curves = np.vstack([r.curve() for r in replays])
    med = np.median(curves, axis=0)
    first = [r.first_failure_pct for r in replays]
    finite = [f for f in first if not math.isnan(f)]
    return {
        "unallocated_gpu_pct": {str(p): float(med[p]) for p in REPORT_AT},
        "first_failure_arrived_pct": float(np.median(finite)) if finite else None,
    }
