"""`kube-default`: the kube-scheduler's default profile on imported Kubernetes objects
(docs/traces.md).

Each waiting pod, in arrival order, is placed on its best feasible node; a pod with no
feasible node stays pending and the next one is tried (the kube-scheduler does not block on
an unschedulable pod; pending pods are retried whenever something frees up).

Filters (a node must pass every one):

- NodeResourcesFit: the pod's cores, GB and GPUs fit the node's free resources, and a pod
  slot is free (`max_jobs`, the node's `pods` allocatable) -- the engine's own fit rule;
- NodeUnschedulable: a cordoned node type (`unschedulable: true`) takes no pod, unless the
  pod tolerates the taint `node.kubernetes.io/unschedulable:NoSchedule`;
- NodeAffinity: the class's `node_selector` (every label present with an allowed value) and
  its required node affinity (terms ORed; each term's expressions ANDed: `In`, `NotIn`,
  `Exists`, `DoesNotExist` on the node type's labels);
- TaintToleration: every `NoSchedule` or `NoExecute` taint of the node is tolerated by
  one of the class's tolerations (`Exists` with an empty key tolerates every taint; an
  empty effect matches every effect).

Scores (the default profile's weights; the plugins this model has no input for -- image
locality, inter-pod affinity, topology spread, preferred node affinity -- give every node the
same score and are left out), in Kubernetes' integer arithmetic (cores in milli-cores,
memory in bytes, scores 0..100):

- NodeResourcesFit, `LeastAllocated` over CPU and memory (weights 1, 1), weight 1;
- NodeResourcesBalancedAllocation, weight 1: 100 x (1 - the standard deviation of the CPU
  and memory fractions requested);
- TaintToleration, weight 3: fewer untolerated `PreferNoSchedule` taints score higher.

Requests of 0 score as the scheduler's non-zero defaults (0.1 cores, 200 MB). The highest
total wins; ties go to a node drawn uniformly from the tied ones with the placer's seeded
stream, as the kube-scheduler draws among them.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.layout import JobState
from clusteremu.cluster.model import JobClass, NodeType, SimulationSpec
from clusteremu.cluster.policies.base import Placement, PlacementView, Placer
from clusteremu.cluster.policies.fifo import FreeTally
from clusteremu.cluster.policies.registry import register

BoolArray = npt.NDArray[np.bool_]
#: The kube-scheduler's non-zero request defaults for scoring: milli-cores and bytes.
DEFAULT_MILLI_CPU = 100
DEFAULT_MEMORY_BYTES = 200 * 1024 * 1024
#: The default profile's plugin weights.
WEIGHT_FIT, WEIGHT_BALANCED, WEIGHT_TAINT = 1, 1, 3
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
GIB = 1024**3


def tolerates(
    tolerations: tuple[tuple[str, str, str, str], ...], taint: tuple[str, str, str]
) -> bool:
    """Whether one of the (key, operator, value, effect) tolerations tolerates the
    (key, value, effect) taint (Kubernetes' `ToleratesTaint`)."""
    key, value, effect = taint
    for t_key, op, t_value, t_effect in tolerations:
        if t_effect and t_effect != effect:
            continue
        if op == "Exists" and (not t_key or t_key == key):
            return True
        if op == "Equal" and t_key == key and t_value == value:
            return True
    return False


def affinity_matches(labels: dict[str, str], cls: JobClass) -> bool:
    """The class's node selector and required node affinity on a node type's labels."""
    for key, allowed in cls.node_selector.items():
        if labels.get(key) not in allowed:
            return False
    if not cls.node_affinity:
        return True
    for term in cls.node_affinity:
        ok = True
        for key, op, values in term:
            have = key in labels
            if op == "In":
                ok = have and labels[key] in values
            elif op == "NotIn":
                ok = not have or labels[key] not in values
            elif op == "Exists":
                ok = have
            else:  # DoesNotExist
                ok = not have
            if not ok:
                break
        if ok:
            return True
    return False


def feasible_types(cls: JobClass, node_type: NodeType) -> bool:
    """The static filters (NodeUnschedulable, NodeAffinity, TaintToleration)."""
    if node_type.unschedulable and not tolerates(
        cls.tolerations, (UNSCHEDULABLE_TAINT, "", "NoSchedule")
    ):
        return False
    if not affinity_matches(dict(node_type.labels), cls):
        return False
    return all(
        tolerates(cls.tolerations, taint)
        for taint in node_type.taints
        if taint[2] in ("NoSchedule", "NoExecute")
    )


def filter_table(spec: SimulationSpec) -> BoolArray:
    """(classes, node types): whether a class's pods may go to a node type at all."""
    return np.array(
        [[feasible_types(c, t) for t in spec.node_types] for c in spec.classes],
        dtype=np.bool_,
    ).reshape(len(spec.classes), len(spec.node_types))


def prefer_no_schedule(spec: SimulationSpec) -> npt.NDArray[np.int64]:
    """(classes, node types): untolerated `PreferNoSchedule` taints."""
    return np.array(
        [
            [
                sum(
                    1
                    for taint in t.taints
                    if taint[2] == "PreferNoSchedule" and not tolerates(c.tolerations, taint)
                )
                for t in spec.node_types
            ]
            for c in spec.classes
        ],
        dtype=np.int64,
    ).reshape(len(spec.classes), len(spec.node_types))


@register("placer", "kube-default")
class KubeDefault(Placer):
    """The kube-scheduler's default profile: filters, then weighted scores (module
    docstring); never blocks on a pod that fits nowhere."""

    def setup(self, spec: SimulationSpec, rng: np.random.Generator) -> None:
        self.allowed = filter_table(spec)
        self.prefer = prefer_no_schedule(spec)
        self.rng = rng
        #: pod -> (node, milli-cores, bytes) the scheduler counts for it when scoring
        #: LeastAllocated (its requests, the non-zero defaults where 0)
        self.placed: dict[int, tuple[int, int, int]] = {}
        self.nonzero: npt.NDArray[np.int64] = np.zeros((2, 0), dtype=np.int64)

    def _forget_ended(self, view: PlacementView, nodes: int) -> None:
        if self.nonzero.shape[1] < nodes:  # node rows grew (rented)
            grown = np.zeros((2, nodes), dtype=np.int64)
            grown[:, : self.nonzero.shape[1]] = self.nonzero
            self.nonzero = grown
        if not self.placed:
            return
        state = view.job_column("state")
        for job in [j for j in self.placed if state[j] != _RUNNING]:
            k, cpu, mem = self.placed.pop(job)
            self.nonzero[0, k] -= cpu
            self.nonzero[1, k] -= mem

    def place(self, view: PlacementView) -> list[Placement]:
        tally = FreeTally(view)
        self._forget_ended(view, tally.cpu.size)
        out: list[Placement] = []
        types = view.node_type
        cap_cpu = np.round(view.capacity_cpu * 1000.0).astype(np.int64)
        cap_mem = np.round(view.capacity_memory_gb * GIB).astype(np.int64)
        blocked: set[tuple[int, float, float, float]] = set()
        for i, job in enumerate(view.queue.tolist()):
            c = int(view.class_index[i])
            req = (
                float(view.request_cpu[i]),
                float(view.request_memory_gb[i]),
                float(view.request_gpu[i]),
            )
            if (c, *req) in blocked:  # the same pod shape found no node in this call
                continue
            nodes = tally.fitting(*req)
            if nodes.size:
                nodes = nodes[self.allowed[c, types[nodes]]]
            if nodes.size == 0:
                blocked.add((c, *req))
                continue
            k = int(nodes[self._best(nodes, c, req, tally, cap_cpu, cap_mem, types)])
            tally.take(k, *req)
            milli, byte = _nonzero(req)
            self.nonzero[0, k] += milli
            self.nonzero[1, k] += byte
            self.placed[job] = (k, milli, byte)
            out.append(Placement(job, k))
        return out

    def _best(
        self,
        nodes: npt.NDArray[np.intp],
        c: int,
        req: tuple[float, float, float],
        tally: FreeTally,
        cap_cpu: npt.NDArray[np.int64],
        cap_mem: npt.NDArray[np.int64],
        types: npt.NDArray[np.int64],
    ) -> int:
        """Index into `nodes` of the highest total score (ties drawn uniformly)."""
        pod_cpu, pod_mem = _nonzero(req)
        cc, cm = cap_cpu[nodes], cap_mem[nodes]
        # LeastAllocated counts every pod's non-zero requests (NonZeroRequested) ...
        least = _weighted_least(
            (self.nonzero[0, nodes] + pod_cpu, cc), (self.nonzero[1, nodes] + pod_mem, cm)
        )
        # ... BalancedAllocation their requests as they are.
        real_cpu = cc - np.round(tally.cpu[nodes] * 1000.0).astype(np.int64)
        real_mem = cm - np.round(tally.mem[nodes] * GIB).astype(np.int64)
        balanced = _balanced(
            (real_cpu + int(round(req[0] * 1000.0)), cc),
            (real_mem + int(round(req[1] * GIB)), cm),
        )
        counts = self.prefer[c, types[nodes]]
        worst = int(counts.max())
        taint = 100 - (counts * 100) // worst if worst > 0 else np.full(nodes.size, 100)
        total = WEIGHT_FIT * least + WEIGHT_BALANCED * balanced + WEIGHT_TAINT * taint
        ties = np.flatnonzero(total == total.max())
        if ties.size == 1:
            return int(ties[0])
        return int(ties[self.rng.integers(ties.size)])


_RUNNING = int(JobState.RUNNING)
IntArray = npt.NDArray[np.int64]


def _nonzero(req: tuple[float, float, float]) -> tuple[int, int]:
    """A pod's (milli-cores, bytes) for LeastAllocated: its requests, the scheduler's
    non-zero defaults where 0."""
    return (
        int(round(req[0] * 1000.0)) or DEFAULT_MILLI_CPU,
        int(round(req[1] * GIB)) or DEFAULT_MEMORY_BYTES,
    )


def _weighted_least(*resources: tuple[IntArray, IntArray]) -> IntArray:
    """LeastAllocated: per resource (requested, capacity) with capacity > 0,
    (capacity - requested) x 100 / capacity (0 when over), averaged with weight 1 each;
    a resource of capacity 0 is left out (Kubernetes' `leastResourceScorer`)."""
    total = np.zeros(resources[0][0].size, dtype=np.int64)
    weights = np.zeros(resources[0][0].size, dtype=np.int64)
    for used, cap in resources:
        has = cap > 0
        score = np.where(used > cap, 0, (cap - used) * 100 // np.maximum(cap, 1))
        total += np.where(has, score, 0)
        weights += has
    return np.where(weights > 0, total // np.maximum(weights, 1), 0)


def _balanced(*resources: tuple[IntArray, IntArray]) -> IntArray:
    """BalancedAllocation: (1 - the standard deviation of the requested fractions of the
    resources with capacity > 0, each at most 1) x 100, truncated; one resource: 100."""
    fractions = []
    for used, cap in resources:
        f = np.minimum(used / np.maximum(cap, 1), 1.0)
        fractions.append(np.where(cap > 0, f, np.nan))
    stacked = np.vstack(fractions)
    count = np.sum(~np.isnan(stacked), axis=0)
    mean = np.nanmean(np.where(count > 0, stacked, 0.0), axis=0)
    var = np.nansum((stacked - mean) ** 2, axis=0) / np.maximum(count, 1)
    std = np.where(count >= 2, np.sqrt(var), 0.0)
    return ((1.0 - std) * 100.0).astype(np.int64)
