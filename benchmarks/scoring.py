"""Scoring-placer speed: one scheduling decision with all scorers at 500 / 2,500 / 10,000
nodes, side by side with Skippy's own scheduler (PyPI ``edgerun-skippy-core``, pure Python)
on the same 500- and 2,500-node clusters, and a full run of the hybrid_balanced setup.

    python benchmarks/scoring.py           # a table
    python benchmarks/scoring.py --json    # {"skippy_ms_per_decision": {...},
                                           #  "ours_ms_per_decision": {...}, ...}

Skippy comes with the ``dev`` extra (``edgerun-skippy-core==0.1.1``; the scoring tests compare
``compat: skippy`` with it decision by decision); without it the Skippy figures are null.
Both schedulers see the same cluster: the same devices, capacities, labels, images cached on
the same nodes (20% of nodes per image), the same
registry / storage bandwidths and a pod of the same function (resnet50-preprocessing, which
has an image and data to transfer). Skippy scores with its five default priorities; ours with
all ten scorers. A decision is timed as its median over repeated calls; where both run, the
two are timed in alternation (one Skippy decision, then 20 of ours, per round), so that load
from other processes on a shared machine hits both alike.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
from typing import Any

import numpy as np

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.model import StopRule
from clusteremu.cluster.policies.scoring.framework import Cycle
from clusteremu.cluster.policies.scoring.placer import ScoringPlacer
from clusteremu.cluster.policies.scoring.scorers import ALL_SCORERS
from clusteremu.scenarios import faas
from clusteremu.scenarios.loader import spec_from_dict

FUNCTION = "resnet50-preprocessing"
IMAGE_SHARE = 0.2
SKIPPY_ARCH = {"x86": "amd64", "aarch64": "arm64", "arm32": "arm"}


def build_ours(n: int, seed: int = 1) -> tuple[ScoringPlacer, Any]:
    """A scoring placer set up on an n-node hybrid_balanced cluster with warm caches."""
    data = faas.scenario_dict(
        "hybrid_balanced",
        nodes=n,
        time_s=10.0,
        seed=seed,
        scorers=list(ALL_SCORERS),
        weights=dict.fromkeys(ALL_SCORERS, 1.0),
    )
    spec = spec_from_dict(data)
    placer = ScoringPlacer(**spec.scheduler.placer.params)
    placer.setup(spec, np.random.default_rng(seed))
    rng = np.random.default_rng(seed + 1)
    st = placer.state
    st.free_slots = np.full(n, float(faas.WORKER_SLOTS))
    st.free[0] = np.maximum(st.free[0] - rng.integers(0, 3, n), 1.0)
    for i in range(st.has_image.shape[0]):
        for k in np.flatnonzero(rng.random(n) < IMAGE_SHARE):
            st.add_image(i, int(k))
    return placer, spec


def time_ours(placer: ScoringPlacer, reps: int) -> float:
    """Median ms of one decision (filters + all scorers + weighted sum + tie-break)."""
    pod = placer.pods[placer.class_names.index(FUNCTION)]
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        placer.framework.select(Cycle(placer.table, placer.state, pod), placer.rng)
        times.append(time.perf_counter() - t)
    return 1e3 * statistics.median(times)


def build_skippy(placer: ScoringPlacer, spec: Any) -> tuple[Any, Any] | None:
    """Skippy's scheduler and pod on the same cluster state as `placer` (None if absent)."""
    try:
        from skippy.core.clustercontext import ClusterContext
        from skippy.core.model import (
            Capacity,
            Container,
            ImageState,
            Node,
            Pod,
            PodSpec,
            ResourceRequirements,
        )
        from skippy.core.scheduler import Scheduler
        from skippy.core.storage import DataItem, StorageIndex
    except ImportError:
        return None
    table, st = placer.table, placer.state
    fn = faas.FUNCTIONS[FUNCTION]
    image = fn.images[0]
    sizes = {SKIPPY_ARCH[a]: int(mb * 1e6) for a, mb in faas.IMAGE_SIZE_MB[image].items()}
    names = [f"node-{k}" for k in range(table.n)]
    nodes = []
    for k, name in enumerate(names):
        labels = dict(spec.node_type(spec.nodes[k]).labels)
        sk_labels = {
            "beta.kubernetes.io/arch": SKIPPY_ARCH[labels["arch"]],
            "locality.skippy.io/type": labels["locality"],
        }
        if labels.get("capability.cuda"):
            sk_labels["capability.skippy.io/nvidia-cuda"] = "10"
            sk_labels["capability.skippy.io/nvidia-gpu"] = ""
        cap = Capacity(int(table.capacity[0, k] * 1000), int(table.capacity[1, k] * 2**30))
        free = Capacity(int(st.free[0, k] * 1000), int(st.free[1, k] * 2**30))
        nodes.append(Node(name, capacity=cap, allocatable=free, labels=sk_labels))
    storage_node = Node(
        "storage-0", labels={"data.skippy.io/storage": "true", "beta.kubernetes.io/arch": "amd64"}
    )
    image_id = placer.image_ids[image]
    holders = np.flatnonzero(st.has_image[image_id])
    reg_bw = table.registry_mbps * 1e6 / 8  # bytes/s
    sto_bw = table.storage_mbps * 1e6 / 8

    class Context(ClusterContext):
        def get_init_image_states(self) -> dict[str, Any]:
            return {f"{image}:latest": ImageState(sizes, num_nodes=0)}

        def get_bandwidth_graph(self) -> dict[str, dict[str, float]]:
            graph: dict[str, dict[str, float]] = {
                "registry": {n: float(b) for n, b in zip(names, reg_bw, strict=True)},
                "storage-0": {n: float(b) for n, b in zip(names, sto_bw, strict=True)},
            }
            for n, b in zip(names, sto_bw, strict=True):
                graph[n] = {"storage-0": float(b)}
            return graph

        def list_nodes(self) -> list[Any]:
            return nodes + [storage_node]

        def get_next_storage_node(self, node: Any) -> str:
            return "storage-0"

    ctx = Context()
    state = ctx.get_image_state(f"{image}:latest")
    for holder in holders:
        ctx.images_on_nodes[names[holder]][f"{image}:latest"] = state
        state.num_nodes += 1
    ctx.storage_index = StorageIndex()
    ctx.storage_index.mb("bucket", "storage-0")
    ctx.storage_index.put(DataItem("bucket", "in", int(fn.data_in_mb * 1e6)))
    ctx.storage_index.put(DataItem("bucket", "out", int(fn.data_out_mb * 1e6)))
    pod_labels = {
        "data.skippy.io/receives-from-storage/path": "bucket/in",
        "data.skippy.io/sends-to-storage/path": "bucket/out",
    }
    container = Container(
        f"{image}:latest", ResourceRequirements({"cpu": 1000, "memory": 100 * 2**20})
    )
    pod = Pod(f"{FUNCTION}-0", "default", PodSpec([container], pod_labels))
    return Scheduler(ctx), pod


def time_skippy(scheduler: Any, pod: Any, reps: int) -> float:
    """Median ms of Skippy's `Scheduler.schedule` (which also books the placement)."""
    return 1e3 * statistics.median(_skippy_times(scheduler, pod, reps))


def _skippy_times(scheduler: Any, pod: Any, reps: int) -> list[float]:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        result = scheduler.schedule(pod)
        times.append(time.perf_counter() - t)
        if result.suggested_host is not None:  # undo, so every call sees the same state
            scheduler.cluster_context.remove_pod_from_node(pod, result.suggested_host)
    return times


def time_side_by_side(
    placer: ScoringPlacer, scheduler: Any, pod: Any, rounds: int, ours_per_round: int = 20
) -> tuple[float, float]:
    """Median ms per decision of ours and of Skippy's, timed in alternation so that both see
    the same load on a shared machine: each round times one Skippy decision and
    `ours_per_round` of ours."""
    ours: list[float] = []
    theirs: list[float] = []
    for _ in range(rounds):
        theirs += _skippy_times(scheduler, pod, 1)
        ours.append(1e-3 * time_ours(placer, ours_per_round))
    return 1e3 * statistics.median(ours), 1e3 * statistics.median(theirs)


def full_run(nodes: int = 1000, rate_per_s: float = 50.0, time_s: float = 600.0) -> dict[str, Any]:
    """The hybrid_balanced setup at `nodes` nodes, `rate_per_s` per inference function."""
    spec = spec_from_dict(
        faas.scenario_dict("hybrid_balanced", nodes=nodes, rate_per_s=rate_per_s, time_s=time_s)
    )
    Engine(dataclasses.replace(spec, stop=StopRule(time_s=1.0))).run()  # compile the kernels
    t = time.perf_counter()
    engine = Engine(spec)
    result = engine.run()
    wall = time.perf_counter() - t
    requests = int(engine.jobs.arrival_s.size)
    return {
        "nodes": nodes,
        "rate_per_s_per_inference_function": rate_per_s,
        "simulated_s": time_s,
        "requests": requests,
        "wall_s": wall,
        "requests_per_wall_s": requests / wall,
        "score": result.summary["score"],
        "jobs_failed": result.summary["jobs_failed"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--reps", type=int, default=200, help="decisions timed per size (ours)")
    parser.add_argument(
        "--skippy-reps",
        type=int,
        default=25,
        help="rounds of side-by-side timing per size (one Skippy decision each)",
    )
    parser.add_argument("--no-full-run", action="store_true", help="skip the 600 s full run")
    args = parser.parse_args(argv)

    ours: dict[str, float] = {}
    skippy: dict[str, float | None] = {}
    for n in (500, 2500, 10000):
        placer, spec = build_ours(n)
        time_ours(placer, 20)  # warm the compiled kernels
        ours[str(n)] = time_ours(placer, args.reps)
        if n <= 2500:
            built = build_skippy(placer, spec)
            if built is None:
                skippy[str(n)] = None
            else:
                ours[str(n)], skippy[str(n)] = time_side_by_side(placer, *built, args.skippy_reps)
    speedup = {n: (s / ours[n] if s else None) for n, s in skippy.items()}
    out: dict[str, Any] = {
        "skippy_ms_per_decision": skippy,
        "ours_ms_per_decision": ours,
        "speedup_vs_skippy": speedup,
    }
    if not args.no_full_run:
        out["full_run"] = full_run()
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"{'nodes':>6} {'ours ms':>9} {'skippy ms':>10} {'speed-up':>9}")
    for size in ours:
        s, x = skippy.get(size), speedup.get(size)
        print(
            f"{size:>6} {ours[size]:>9.3f} {'-' if s is None else f'{s:.1f}':>10} "
            f"{'-' if x is None else f'{x:.0f}x':>9}"
        )
    if "full_run" in out:
        fr = out["full_run"]
        print(
            f"full run: hybrid_balanced, {fr['nodes']} nodes, "
            f"{fr['rate_per_s_per_inference_function']:g} "
            f"req/s per inference function, {fr['simulated_s']:g} s simulated: {fr['requests']} "
            f"requests in {fr['wall_s']:.1f} s wall = {fr['requests_per_wall_s']:.0f} requests/s "
            f"(score {fr['score']:.4f})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
