"""Decision-by-decision agreement of the scoring framework with the real Skippy scheduler.

Runs PyPI ``edgerun-skippy-core`` 0.1.1 (the dev extra) and the framework on the same random
cluster states and pods, fed the same integers (millicores, bytes, bytes per second), and
counts, per configuration, identical per-node scores (ours = 10 x Skippy's) and identical
choices, in the compatibility mode (``compat="skippy"``) and in the default mode:

    python -m tests.cluster.policies.scoring.skippy_agreement --decisions 1000

Configurations: each of Skippy's six priorities alone; the four Kubernetes resource scorers,
which Skippy 0.1.1 lacks and which the Learning to Score paper added "inspired by their
Kubernetes equivalents",
as Skippy priorities transcribed from Kubernetes 1.13 (``pkg/scheduler/algorithm/priorities``:
least_requested.go, most_requested.go, requested_to_capacity_ratio.go,
balanced_resource_allocation.go -- the version Skippy follows); the paper's Fixed weights; and
random weights on all ten. Each decision draws a fresh cluster (one storage node among 8 to 30
nodes), a pod, image caches, bandwidths and the round-robin start of the feasible search.

In the default mode the differences are the documented ones (docs/scoring.md), checked here:
BalancedResource and LocalityType agree exactly; Capability and ImageLocality differ only by
the 0..10 truncation (0 <= ours / 10 - Skippy's < 1); LeastAllocated and MostAllocated by scale
and per-resource truncation (|ours / 10 - Skippy's| <= 2); RequestedToCapacityRatio is never
lower beyond that (ours / 10 >= Skippy's - 2: today's mean skips resources that score 0, 1.13
averages them in); BalancedAllocation never lower (ours / 10 >= Skippy's: today's penalty is
half of 1.13's |fc - fm|, and a full node is not zeroed); LatencyAwareImageLocality never
reverses an order
Skippy states strictly (whole-second times and Skippy's rescaling only merge nodes); and
DataLocality reverses one only between nodes whose exact transfer times are within 1 s (it
truncates each direction).
"""

from __future__ import annotations

import argparse
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from skippy.core.clustercontext import ClusterContext
from skippy.core.model import Capacity, Container, ImageState, Node, Pod, ResourceRequirements
from skippy.core.model import PodSpec as SkippyPodSpec
from skippy.core.priorities import (
    BalancedResourcePriority,
    CapabilityPriority,
    DataLocalityPriority,
    ImageLocalityPriority,
    LatencyAwareImageLocalityPriority,
    LocalityTypePriority,
    Priority,
)
from skippy.core.scheduler import Scheduler
from skippy.core.storage import DataItem, StorageIndex

from clusteremu.cluster.model import NodeType
from clusteremu.cluster.policies.scoring import filters as F
from clusteremu.cluster.policies.scoring import scorers as S
from clusteremu.cluster.policies.scoring.framework import (
    ClusterState,
    Cycle,
    Framework,
    ImageSpec,
    NodeTable,
    PodSpec,
    compile_pod,
    make_scorer,
)

ARCHS = {"x86": "amd64", "aarch64": "arm64", "arm32": "arm"}
CAPABILITIES = ("gpu", "cuda", "tpu")
MBPS = (10.0, 12.5, 25.0, 50.0, 100.0, 250.0, 1000.0, math.inf)
RTC_SHAPE = ((0, 0), (100, 10))  # the framework's default (packing) shape, scores 0..10
IMAGE = "fn-image"
MAX_PRIORITY = 10


# --- Kubernetes 1.13 resource priorities, as Skippy priorities --------------------------------


def _requested(node: Node, pod: Pod) -> tuple[int, int]:
    """Millicores and bytes requested on `node` after placing `pod` (1.13's NodeInfo view)."""
    cpu = node.capacity.cpu_millis - node.allocatable.cpu_millis
    mem = node.capacity.memory - node.allocatable.memory
    for c in pod.spec.containers:
        cpu += c.resources.requests["cpu"]
        mem += c.resources.requests["memory"]
    return cpu, mem


class K113Priority(Priority):
    """A 1.13 ResourceAllocationPriority: `scorer(requested, capacity)` per node."""

    def map_node_score(self, context: ClusterContext, pod: Pod, node: Node) -> int:
        cpu, mem = _requested(node, pod)
        return self.scorer((cpu, mem), (node.capacity.cpu_millis, node.capacity.memory))

    def scorer(self, requested: tuple[int, int], capacity: tuple[int, int]) -> int:
        raise NotImplementedError


class LeastRequestedPriority(K113Priority):
    """least_requested.go (1.13): ((capacity - requested) * 10) / capacity, 0 if capacity is 0
    or requested > capacity; (cpu + memory) / 2."""

    def scorer(self, requested: tuple[int, int], capacity: tuple[int, int]) -> int:
        def one(r: int, c: int) -> int:
            return 0 if c == 0 or r > c else (c - r) * MAX_PRIORITY // c

        return (one(requested[0], capacity[0]) + one(requested[1], capacity[1])) // 2


class MostRequestedPriority(K113Priority):
    """most_requested.go (1.13): (requested * 10) / capacity, 0 if capacity is 0 or
    requested > capacity; (cpu + memory) / 2."""

    def scorer(self, requested: tuple[int, int], capacity: tuple[int, int]) -> int:
        def one(r: int, c: int) -> int:
            return 0 if c == 0 or r > c else r * MAX_PRIORITY // c

        return (one(requested[0], capacity[0]) + one(requested[1], capacity[1])) // 2


class RequestedToCapacityRatioPriority(K113Priority):
    """requested_to_capacity_ratio.go (1.13): the broken-linear shape at utilisation
    100 - (capacity - requested) * 100 / capacity (100 if capacity is 0 or requested >
    capacity); (cpu + memory) / 2."""

    def __init__(self, shape: Sequence[tuple[int, int]] = RTC_SHAPE) -> None:
        super().__init__()
        self.shape = list(shape)

    def broken_linear(self, p: int) -> int:
        for i, (u, s) in enumerate(self.shape):
            if p <= u:
                if i == 0:
                    return s
                u0, s0 = self.shape[i - 1]
                num = (s - s0) * (p - u0)
                q = abs(num) // (u - u0)  # Go's truncating division
                return s0 + (q if num >= 0 else -q)
        return self.shape[-1][1]

    def scorer(self, requested: tuple[int, int], capacity: tuple[int, int]) -> int:
        def one(r: int, c: int) -> int:
            if c == 0 or r > c:
                return self.broken_linear(100)
            return self.broken_linear(100 - (c - r) * 100 // c)

        return (one(requested[0], capacity[0]) + one(requested[1], capacity[1])) // 2


class BalancedResourceAllocationPriority(K113Priority):
    """balanced_resource_allocation.go (1.13): fractions requested / capacity (1 if capacity is
    0), 0 if either >= 1, else int64((1 - |cpu - memory|) * 10)."""

    def scorer(self, requested: tuple[int, int], capacity: tuple[int, int]) -> int:
        fc = 1.0 if capacity[0] == 0 else float(requested[0]) / float(capacity[0])
        fm = 1.0 if capacity[1] == 0 else float(requested[1]) / float(capacity[1])
        if fc >= 1 or fm >= 1:
            return 0
        return int((1 - math.fabs(fc - fm)) * float(MAX_PRIORITY))


def skippy_priority(name: str) -> Priority:
    """Skippy's priority for one of the framework's scorer names."""
    return {
        "BalancedResource": BalancedResourcePriority,
        "LatencyAwareImageLocality": LatencyAwareImageLocalityPriority,
        "LocalityType": LocalityTypePriority,
        "DataLocality": DataLocalityPriority,
        "Capability": CapabilityPriority,
        "ImageLocality": ImageLocalityPriority,
        "LeastAllocated": LeastRequestedPriority,
        "MostAllocated": MostRequestedPriority,
        "RequestedToCapacityRatio": RequestedToCapacityRatioPriority,
        "BalancedAllocation": BalancedResourceAllocationPriority,
    }[name]()


SKIPPY_PRIORITIES = (
    "BalancedResource",
    "LatencyAwareImageLocality",
    "LocalityType",
    "DataLocality",
    "Capability",
    "ImageLocality",
)
K113_PRIORITIES = (
    "LeastAllocated",
    "MostAllocated",
    "RequestedToCapacityRatio",
    "BalancedAllocation",
)
ALL = SKIPPY_PRIORITIES + K113_PRIORITIES


# --- one random world, built for both ----------------------------------------------------------


@dataclass
class World:
    """One decision's cluster, pod and search start, in both schedulers' terms."""

    table: NodeTable
    state: ClusterState
    pod: Any  # CompiledPod
    ctx: ClusterContext
    skippy_pod: Pod
    start: int
    names: list[str]
    data_s: np.ndarray  # exact data transfer seconds per node (in + out), for the checks


class _Context(ClusterContext):
    def __init__(
        self,
        nodes: list[Node],
        images: dict[str, ImageState],
        graph: dict[str, dict[str, float]],
    ) -> None:
        self._nodes, self._images, self._graph = nodes, images, graph
        super().__init__()

    def get_init_image_states(self) -> dict[str, ImageState]:
        return self._images

    def get_bandwidth_graph(self) -> dict[str, dict[str, float]]:
        return self._graph

    def list_nodes(self) -> list[Node]:
        return self._nodes

    def get_next_storage_node(self, node: Node) -> str:
        return "storage"


def random_world(rng: np.random.Generator) -> World:
    """A random cluster state and pod; every quantity an integer in Skippy's units."""
    n = int(rng.integers(8, 31))
    storage = int(rng.integers(n))
    image_bytes = {a: int(rng.integers(5_000_000, 3_000_000_000)) for a in ARCHS}
    data_in = int(rng.choice([0, int(rng.integers(1, 400_000_000))]))
    data_out = int(rng.choice([0, int(rng.integers(1, 400_000_000))]))
    req_mc = int(rng.choice([50, 100, 250, 500, 1000, 1500, int(rng.integers(1, 3000))]))
    req_b = int(rng.choice([128, 256, 512, 1024, 2048, int(rng.integers(1, 4096))])) * 2**20
    wanted = {c: str(rng.choice(["a", "b"])) for c in CAPABILITIES if rng.random() < 0.6}
    types, names, sk_nodes = [], [], []
    reg_bps, sto_bps = {}, {}
    free = np.zeros((3, n))
    has = rng.random(n) < rng.uniform(0.0, 0.8)
    data_s = np.zeros(n)
    for k in range(n):
        name = "storage" if k == storage else f"n{k}"
        arch = str(rng.choice(list(ARCHS)))
        cap_mc = int(rng.choice([500, 1000, 1500, 2000, 4000, 8000]))
        cap_b = int(rng.integers(512, 32 * 1024)) * 2**20
        if rng.random() < 0.3:  # free exactly in proportion to the request (equal fractions)
            f = int(rng.integers(1, 4))
            free_mc, free_b = min(cap_mc, f * req_mc), min(cap_b, f * req_b)
        else:
            free_mc = int(rng.integers(0, cap_mc + 1))
            free_b = int(rng.integers(0, cap_b + 1))
        reg, sto = float(rng.choice(MBPS)), float(rng.choice(MBPS))
        labels = {"arch": arch, "locality": str(rng.choice(["edge", "cloud"]))}
        sk_labels = {
            "beta.kubernetes.io/arch": ARCHS[arch],
            "locality.skippy.io/type": labels["locality"],
        }
        for c in CAPABILITIES:
            if rng.random() < 0.5:
                v = str(rng.choice(["a", "b"]))
                labels[f"capability.{c}"] = v
                sk_labels[f"capability.skippy.io/{c}"] = v
        if math.isfinite(reg):
            labels["bandwidth.registry_mbps"] = str(reg)
        if math.isfinite(sto):
            labels["bandwidth.storage_mbps"] = str(sto)
        if k == storage:
            labels["role"] = "storage"
            sk_labels["data.skippy.io/storage"] = "true"
            has[k] = False
        types.append(NodeType(name, cpu=cap_mc / 1000, memory_gb=cap_b / 2**30, labels=labels))
        names.append(name)
        free[0, k], free[1, k] = free_mc / 1000, free_b / 2**30
        sk_nodes.append(
            Node(
                name,
                capacity=Capacity(cap_mc, cap_b),
                allocatable=Capacity(free_mc, free_b),
                labels=sk_labels,
            )
        )
        reg_bps[name] = reg * 125_000
        sto_bps[name] = sto * 125_000
        data_s[k] = (data_in + data_out) / (sto * 125_000)
    image = ImageSpec(IMAGE, {a: b / 1e6 for a, b in image_bytes.items()})
    spec = PodSpec(
        "fn",
        (req_mc / 1000, req_b / 2**30, 0.0),
        images=(image,),
        capabilities={f"capability.{c}": v for c, v in wanted.items()},
        data_in_mb=data_in / 1e6,
        data_out_mb=data_out / 1e6,
    )
    table = NodeTable.from_types(types, names)
    state = ClusterState.empty(table, 1)
    state.free[:] = free
    for k in np.flatnonzero(has):
        state.add_image(0, int(k))
    pod = compile_pod(spec, table, {IMAGE: 0})

    tag = f"{IMAGE}:latest"
    image_state = ImageState({ARCHS[a]: b for a, b in image_bytes.items()}, num_nodes=0)
    graph: dict[str, dict[str, float]] = {"registry": dict(reg_bps), "storage": dict(sto_bps)}
    for name in names:
        graph.setdefault(name, {})["storage"] = sto_bps[name]
    ctx = _Context(sk_nodes, {tag: image_state}, graph)
    for k in np.flatnonzero(has):
        ctx.images_on_nodes[names[k]][tag] = image_state
        image_state.num_nodes += 1
    ctx.storage_index = StorageIndex()
    ctx.storage_index.mb("bucket", "storage")
    labels = {f"capability.skippy.io/{c}": v for c, v in wanted.items()}
    if data_in:
        ctx.storage_index.put(DataItem("bucket", "in", data_in))
        labels["data.skippy.io/receives-from-storage/path"] = "bucket/in"
    if data_out:
        ctx.storage_index.put(DataItem("bucket", "out", data_out))
        labels["data.skippy.io/sends-to-storage/path"] = "bucket/out"
    container = Container(tag, ResourceRequirements({"cpu": req_mc, "memory": req_b}))
    skippy_pod = Pod("fn-0", "default", SkippyPodSpec([container], labels))
    return World(table, state, pod, ctx, skippy_pod, int(rng.integers(n)), names, data_s)


# --- running both ---------------------------------------------------------------------------------


@dataclass
class Config:
    """A weighted combination of scorers, with its frameworks in both modes."""

    name: str
    weights: dict[str, float]
    frameworks: dict[str, Framework] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for mode, compat in (("compat", "skippy"), ("default", None)):
            scorers = [make_scorer(s, compat=compat) for s in self.weights]
            self.frameworks[mode] = Framework(
                [F.ResourceFit(), F.NotStorageNode()],
                scorers,
                list(self.weights.values()),
                compat=compat,
            )


@dataclass
class Tally:
    """Agreement counts of one configuration in one mode."""

    decisions: int = 0
    same_choice: int = 0
    among_best: int = 0
    node_scores: int = 0
    same_node_scores: int = 0
    violations: list[str] = field(default_factory=list)


def skippy_decision(
    world: World, weights: dict[str, float]
) -> tuple[list[str], dict[str, list[int]], str | None]:
    """Skippy's feasible order, per-priority node scores (its own map / reduce) and choice
    (``Scheduler.schedule``, then undone so the next configuration sees the same state)."""
    ctx, pod = world.ctx, world.skippy_pod
    priorities = [(float(w), skippy_priority(name)) for name, w in weights.items()]
    sched = Scheduler(ctx, percentage_of_nodes_to_score=100, priorities=priorities)
    sched.last_scored_node_index = world.start
    nodes = ctx.list_nodes()
    feasible = [
        node
        for node in itertools.islice(itertools.cycle(nodes), world.start, world.start + len(nodes))
        if sched.passes_predicates(pod, node)
    ]
    scores = {}
    for (name, _), (_, prio) in zip(weights.items(), priorities, strict=True):
        mapped = [prio.map_node_score(ctx, pod, node) for node in feasible]
        scores[name] = list(prio.reduce_mapped_score(ctx, pod, feasible, mapped))
    result = sched.schedule(pod)
    host = result.suggested_host
    if host is not None:
        had_image = result.needed_images == []
        ctx.remove_pod_from_node(pod, host)
        if not had_image:
            ctx.remove_pod_images_from_node(pod, host)
    return [n.name for n in feasible], scores, None if host is None else host.name


def default_mode_check(
    name: str, ours: np.ndarray, theirs: np.ndarray, world: World, nodes: np.ndarray
) -> str | None:
    """None if the default-mode scores differ from Skippy's only as documented."""
    x = ours / 10.0
    if name in ("BalancedResource", "LocalityType"):
        ok = bool(np.all(x == theirs))
    elif name in ("Capability", "ImageLocality"):
        ok = bool(np.all((x - theirs >= -1e-9) & (x - theirs < 1)))
    elif name == "BalancedAllocation":  # 1.13 takes the whole |fc - fm|, today's half
        ok = bool(np.all(x >= theirs - 1e-9))
    elif name == "RequestedToCapacityRatio":  # today's mean skips resources scoring 0
        ok = bool(np.all(x >= theirs - 2))
    elif name in K113_PRIORITIES:  # scale and per-resource truncation
        ok = bool(np.all(np.abs(x - theirs) <= 2))
    else:
        t = world.data_s[nodes] if name == "DataLocality" else None
        ok = True
        for a, b in itertools.combinations(range(ours.size), 2):
            for p, q in ((a, b), (b, a)):
                if theirs[p] > theirs[q] and not ours[p] > ours[q]:
                    close = t is not None and abs(t[p] - t[q]) < 1.0
                    ok = ok and close
    return None if ok else f"{name}: ours {ours.tolist()} Skippy {theirs.tolist()}"


def run(decisions: int = 1000, seed: int = 0) -> dict[str, dict[str, Tally]]:
    """Agreement of both modes with Skippy on `decisions` random worlds per configuration."""
    rng = np.random.default_rng(seed)
    configs = [Config(name, {name: 1.0}) for name in ALL]
    fixed = {n: S.FIXED_WEIGHTS[n] for n in S.SEED_SCORERS}
    configs.append(Config("Fixed weights", fixed))
    weights_rng = np.random.default_rng(seed + 1)
    configs.append(Config("random weights", {n: float(weights_rng.uniform(0, 1)) for n in ALL}))
    tallies = {c.name: {"compat": Tally(), "default": Tally()} for c in configs}
    for _ in range(decisions):
        world = random_world(rng)
        for config in configs:
            order, theirs, host = skippy_decision(world, config.weights)
            for mode, fw in config.frameworks.items():
                tally = tallies[config.name][mode]
                fw.next_start = world.start
                cycle = Cycle(world.table, world.state, world.pod)
                k = fw.select(cycle, np.random.default_rng(0))
                ours_choice = None if k < 0 else world.names[k]
                tally.decisions += 1
                tally.same_choice += ours_choice == host
                if cycle.nodes.size and config.frameworks[mode].scorers:
                    total = fw.total(cycle)
                    best = {world.names[j] for j in cycle.nodes[total == total.max()]}
                    tally.among_best += host in best
                else:
                    tally.among_best += ours_choice == host
                if mode == "compat":
                    assert [world.names[j] for j in cycle.nodes] == order
                else:  # the default search is not rotated: compare node by node
                    position = {name: i for i, name in enumerate(order)}
                    perm = np.array([position[world.names[j]] for j in cycle.nodes], dtype=int)
                ours_scores = fw.scores(cycle)
                for name in config.weights:
                    if config.weights[name] == 0:
                        continue
                    ours = ours_scores[name]
                    ref = np.asarray(theirs[name], dtype=np.float64)
                    if mode == "default":
                        ref = ref[perm] if ref.size else ref
                    tally.node_scores += ours.size
                    tally.same_node_scores += int(np.sum(ours == 10.0 * ref))
                    if mode == "default":
                        bad = default_mode_check(name, ours, ref, world, cycle.nodes)
                        if bad is not None:
                            tally.violations.append(bad)
    return tallies


def report(tallies: dict[str, dict[str, Tally]]) -> str:
    """A table of agreement counts per configuration and mode."""
    head = (
        f"{'configuration':<27} {'mode':<8} {'decisions':>9} {'same choice':>13} "
        f"{'among our best':>14} {'same node scores':>22} {'undocumented':>12}"
    )
    lines = [head]
    for name, modes in tallies.items():
        for mode, t in modes.items():
            pct_c = 100.0 * t.same_choice / max(t.decisions, 1)
            pct_s = 100.0 * t.same_node_scores / max(t.node_scores, 1)
            pct_b = 100.0 * t.among_best / max(t.decisions, 1)
            lines.append(
                f"{name:<27} {mode:<8} {t.decisions:>9} {t.same_choice:>6} {pct_c:>5.1f}% "
                f"{t.among_best:>7} {pct_b:>5.1f}% "
                f"{t.same_node_scores:>7}/{t.node_scores:<7} {pct_s:>5.1f}% "
                f"{len(t.violations) if mode == 'default' else '':>12}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--decisions", type=int, default=1000, help="random worlds")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(report(run(args.decisions, args.seed)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
