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

from cluster.model import JobClass, NodeType, SimulationSpec
from cluster.policies.base import Placement, PlacementView, Placer
from cluster.policies.hpc import FreeTally
from cluster.policies.registry import register

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

    def place(self, view: PlacementView) -> list[Placement]:
        tally = FreeTally(view)
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
        pod_cpu = int(round(req[0] * 1000.0)) or DEFAULT_MILLI_CPU
        pod_mem = int(round(req[1] * GIB)) or DEFAULT_MEMORY_BYTES
        cc, cm = cap_cpu[nodes], cap_mem[nodes]
        used_cpu = cc - np.round(tally.cpu[nodes] * 1000.0).astype(np.int64) + pod_cpu
        used_mem = cm - np.round(tally.mem[nodes] * GIB).astype(np.int64) + pod_mem
        least = (_least(used_cpu, cc) + _least(used_mem, cm)) // 2
        f_cpu = np.minimum(used_cpu / np.maximum(cc, 1), 1.0)
        f_mem = np.minimum(used_mem / np.maximum(cm, 1), 1.0)
        std = np.abs(f_cpu - f_mem) / 2.0  # the standard deviation of two fractions
        balanced = ((1.0 - std) * 100.0).astype(np.int64)
        counts = self.prefer[c, types[nodes]]
        worst = int(counts.max())
        taint = 100 - (counts * 100) // worst if worst > 0 else np.full(nodes.size, 100)
        total = WEIGHT_FIT * least + WEIGHT_BALANCED * balanced + WEIGHT_TAINT * taint
        ties = np.flatnonzero(total == total.max())
        if ties.size == 1:
            return int(ties[0])
        return int(ties[self.rng.integers(ties.size)])


def _least(used: npt.NDArray[np.int64], cap: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """LeastAllocated's score of one resource: (capacity - requested) x 100 / capacity."""
    safe = np.maximum(cap, 1)
    return np.where((cap == 0) | (used > cap), 0, (cap - used) * 100 // safe)
