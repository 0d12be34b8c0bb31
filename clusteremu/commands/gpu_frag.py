"""`clusteremu gpu-frag`: the ATC'23 FGD evaluation on the Alibaba GPU trace (2023).

    clusteremu gpu-frag --nodes NODES.csv --pods PODS.csv --policy NAME[,NAME...|all]
                        --seeds 42-51 [--workers W] [--out DIR] [--json]

`--nodes` and `--pods` default to the trace in `../shared/traces/alibaba-gpu-v2023/` beside
the checkout (the GPU nodes and the default pod list).

Replays the pod list on the node list once per policy and seed (the paper's protocol,
`clusteremu.cluster.experiments.gpu_frag`): pods arrive only, in a shuffled order topped up with
random draws to 130% of the GPU capacity; a pod that fits nowhere is dropped. Prints the
median unallocated GPU % over the seeds at 80..130% arrived GPU and where the first pod
failed. `--json` prints `{"unallocated_gpu_pct": {"80": x, ...},
"first_failure_arrived_pct": y}` for one policy, `{"policies": {name: ...}}` for several.
`--out` writes the per-seed curves (`gpu-frag.parquet`), the medians (`gpu-frag.json`) and
`gpu-frag.png` (unallocated GPU % against arrived GPU %, as the paper's Figure 9(a)).
With `--workers` > 1 the seeds run as Ray tasks on a local Ray (loopback only).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from clusteremu.cluster.io import output_folder, to_json, write_json, write_parquet
from clusteremu.progress import progress

#: Where the trace lies beside a checkout of clusteremu (`../shared`, never copied in).
TRACE_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "traces" / "alibaba-gpu-v2023"
#: Memory one replay keeps until the medians are taken (bytes: its per-pod arrays for the
#: default trace's 8,152 pods topped up to 130% of the GPUs, and its curves; rounded up).
BYTES_PER_REPLAY = 512e3
POLICY_HELP = "random-fit, best-fit, dot-product, gpu-packing, gpu-clustering, fgd, or all"


def add_parser(sub: Any) -> None:
    p = sub.add_parser("gpu-frag", help="GPU-sharing placement on the Alibaba trace (FGD, ATC'23)")
    p.add_argument(
        "--nodes",
        default=str(TRACE_DIR / "openb_node_list_gpu_node.csv"),
        help="node list CSV (default: the GPU nodes of ../shared/traces/alibaba-gpu-v2023)",
    )
    p.add_argument(
        "--pods",
        default=str(TRACE_DIR / "openb_pod_list_default.csv"),
        help="pod list CSV (default: openb_pod_list_default.csv there)",
    )
    p.add_argument("--policy", required=True, help=f"comma-separated: {POLICY_HELP}")
    p.add_argument("--seeds", default="42-51", help="seeds, e.g. 42-51 or 1,2,3 (default 42-51)")
    p.add_argument("--workers", type=int, default=1, help="Ray workers for the seeds (default 1)")
    p.add_argument("--out", help="folder for gpu-frag.{parquet,json,png}")
    p.add_argument("--json", action="store_true", help="print the medians as JSON")
    p.set_defaults(func=cmd_gpu_frag)


def _replay_task(nodes: Any, pods: Any, policy: str, seed: int, typical: Any) -> Any:
    from clusteremu.cluster.experiments.gpu_frag import replay

    return replay(nodes, pods, policy, seed, typical)


def cmd_gpu_frag(args: argparse.Namespace) -> int:
    from clusteremu.cli import UsageError, check_out
    from clusteremu.cluster.experiments.gpu_frag import medians
    from clusteremu.cluster.gpu_trace import TraceError, load_nodes, load_pods
    from clusteremu.cluster.policies.gpu_share import SCORERS, typical_pods
    from clusteremu.scenarios import option_checks

    policies = option_checks.name_list(args.policy, "--policy", list(SCORERS), everything="all")
    seeds = option_checks.seeds(args.seeds, "--seeds", BYTES_PER_REPLAY * len(policies), "seeds")
    option_checks.workers(args.workers)
    check_out(args, "gpu-frag")
    try:
        nodes = load_nodes(args.nodes)
        pods = load_pods(args.pods, nodes.models)
    except TraceError as exc:
        text = str(exc)
        missing = not Path(args.nodes).exists() or not Path(args.pods).exists()
        if missing:
            text += (
                f"; the trace is Alibaba's cluster-trace-gpu-v2023 (the alibaba/clusterdata "
                f"repository on GitHub, folder cluster-trace-gpu-v2023/csv): put its CSV files "
                f"in {TRACE_DIR} or give --nodes and --pods (docs/gpu-frag.md)"
            )
        raise UsageError(text) from None
    if nodes.gpu_capacity_milli == 0:
        raise UsageError(f"{args.nodes}: no node has a GPU")
    typical = typical_pods(pods.cpu_milli, pods.num_gpu, pods.gpu_milli, pods.model_mask)
    jobs = [(p, s) for p in policies for s in seeds]
    start = time.perf_counter()
    print(
        f"{len(nodes.name)} nodes ({nodes.gpu_capacity_milli // 1000} GPUs), {len(pods)} pods, "
        f"{len(typical.p)} typical pod types; {len(jobs)} replays ...",
        file=sys.stderr,
    )
    with progress("gpu-frag", total=len(jobs), unit="replays") as shown:
        if args.workers > 1 and len(jobs) > 1:
            replays = _on_ray(jobs, nodes, pods, typical, args.workers, shown)
        else:
            replays = []
            for p, s in jobs:
                replays.append(_replay_task(nodes, pods, p, s, typical))
                shown.update(done=len(replays))
    by_policy = {p: [r for r in replays if r.policy == p] for p in policies}
    result = {p: medians(rs) for p, rs in by_policy.items()}
    elapsed = time.perf_counter() - start
    if args.out:
        _write(args.out, by_policy, result, seeds)
    if args.json:
        print(to_json(result[policies[0]] if len(policies) == 1 else {"policies": result}))
        return 0
    print(f"median over seeds {args.seeds} ({elapsed:.1f} s): unallocated GPU % at arrived GPU %")
    head = "".join(f"{p:>7}" for p in ("80", "90", "95", "100", "105", "110", "120", "130"))
    print(f"{'policy':<15}{head}  first failure")
    for p, r in result.items():
        row = "".join(f"{v:7.2f}" for v in r["unallocated_gpu_pct"].values())  # type: ignore[attr-defined]
        first = r["first_failure_arrived_pct"]
        print(f"{p:<15}{row}  {'none' if first is None else f'{first:.1f}%'}")
    if args.out:
        parquet, json_, png = (Path(args.out) / f"gpu-frag.{x}" for x in ("parquet", "json", "png"))
        print(f"wrote {parquet}, {json_} and {png}")
    return 0


def _on_ray(
    jobs: list[tuple[str, int]], nodes: Any, pods: Any, typical: Any, workers: int, shown: Any
) -> list[Any]:
    import ray

    from clusteremu.actors.launch import ensure_ray, stop_ray

    started = ensure_ray(None, num_cpus=workers)
    try:
        task = ray.remote(num_cpus=1)(_replay_task)
        refs = [ray.put(x) for x in (nodes, pods, typical)]
        tasks = [task.remote(refs[0], refs[1], p, s, refs[2]) for p, s in jobs]
        pending = list(tasks)
        while pending:  # progress as the replays finish, in any order
            _, pending = ray.wait(pending, num_returns=1)
            shown.update(done=len(tasks) - len(pending))
        return list(ray.get(tasks))
    finally:
        stop_ray(started)


def _write(
    out: str, by_policy: dict[str, list[Any]], result: dict[str, Any], seeds: list[int]
) -> None:
    import pyarrow as pa

    rows: dict[str, list[Any]] = {
        "policy": [],
        "seed": [],
        "arrived_gpu_pct": [],
        "unallocated_gpu_pct": [],
        "fragmentation_pct": [],
    }
    for policy, replays in by_policy.items():
        for r in replays:
            curve = r.curve()
            for pct in range(131):
                rows["policy"].append(policy)
                rows["seed"].append(r.seed)
                rows["arrived_gpu_pct"].append(pct)
                rows["unallocated_gpu_pct"].append(float(curve[pct]))
                rows["fragmentation_pct"].append(float(r.fragmentation_pct[pct]))
    with output_folder(out, "gpu-frag", label="gpu-frag") as stage:
        write_parquet(pa.table(rows), stage / "gpu-frag.parquet")
        write_json({"seeds": seeds, "policies": result}, stage / "gpu-frag.json")
        _plot(by_policy, stage / "gpu-frag.png")


def _plot(by_policy: dict[str, list[Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from clusteremu.cluster.plotting import scale_axis

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    x = np.arange(131)
    plotted: list[float] = []
    for policy, replays in by_policy.items():
        med = np.median(np.vstack([r.curve() for r in replays]), axis=0)
        plotted += med.tolist()
        ax.plot(x, med, label=policy, lw=1.6 if policy == "fgd" else 1.1)
    ax.set_xlim(0, 130)
    if scale_axis(ax, plotted) == "linear":  # log (symlog) when the curves span over 10x
        ax.set_ylim(0, None)
    ax.set_xlabel("arrived workloads, % of GPU capacity")
    ax.set_ylabel("unallocated GPU, %")
    ax.set_title("GPU sharing on the Alibaba trace (median over seeds)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
