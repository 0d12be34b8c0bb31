"""Speed of the FGD protocol on the real Alibaba trace: one seed per policy, timed.

Each policy replays the default pod list (8,152 pods, topped up to 130% of 6,212 GPUs) on
the 1,213 GPU nodes once after a warm-up replay that compiles it; the wall time of the
replay is printed next to the issue's targets (FGD under 10 s, the others under 2 s).
A plain-Python best-fit loop over the same nodes (no engine, no numba) is the reference
that a naive implementation would cost.

    python benchmarks/gpu_frag.py [--trace DIR] [--seed 42] [--json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from clusteremu.cluster.experiments.gpu_frag import replay, workload
from clusteremu.cluster.gpu_trace import load_nodes, load_pods
from clusteremu.cluster.policies.gpu_share import SCORERS

DEFAULT = Path(__file__).resolve().parents[1].parent / "shared" / "traces" / "alibaba-gpu-v2023"


def python_best_fit(nodes, pods, seed: int) -> float:  # type: ignore[no-untyped-def]
    """A plain Python loop (lists, no engine): best-fit by least leftover, for reference."""
    rng = np.random.default_rng(seed)
    chosen = workload(pods, nodes.gpu_capacity_milli, rng)
    free = [[1000.0] * int(g) for g in nodes.gpus.tolist()]
    cpu = [float(c) for c in nodes.cpu_milli.tolist()]
    start = time.perf_counter()
    for i in chosen.tolist():
        c, k, d = int(pods.cpu_milli[i]), int(pods.num_gpu[i]), int(pods.gpu_milli[i])
        best, best_left = -1, 1e300
        for n, f in enumerate(free):
            if cpu[n] < c:
                continue
            ok = k == 0 or (
                any(x >= d for x in f) if k == 1 and d < 1000 else sum(x >= 1000 for x in f) >= k
            )
            if ok:
                left = 0.5 * (cpu[n] - c) / 128000 + 0.5 * (sum(f) - k * d) / 8000
                if left < best_left:
                    best, best_left = n, left
        if best >= 0:
            cpu[best] -= c
            f = free[best]
            if k == 1 and d < 1000:
                g = min((x, g) for g, x in enumerate(f) if x >= d)[1]
                f[g] -= d
            else:
                for g in [g for g, x in enumerate(f) if x >= 1000][:k]:
                    f[g] = 0.0
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace", type=Path, default=DEFAULT)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    nodes = load_nodes(args.trace / "openb_node_list_gpu_node.csv")
    pods = load_pods(args.trace / "openb_pod_list_default.csv", nodes.models)
    out: dict[str, float] = {}
    for policy in SCORERS:
        replay(nodes, pods, policy, args.seed + 1)  # compile / warm up
        start = time.perf_counter()
        replay(nodes, pods, policy, args.seed)
        out[policy] = time.perf_counter() - start
    out["python-best-fit-loop"] = python_best_fit(nodes, pods, args.seed)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for name, wall in out.items():
        target = "10 s" if name == "fgd" else "2 s" if name in SCORERS else "reference"
        print(f"{name:<22} {wall:7.2f} s   (target {target})")


if __name__ == "__main__":
    main()
