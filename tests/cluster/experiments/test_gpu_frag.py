"""The FGD protocol on the engine: the workload fill, dropped pods, the curve, seeded
determinism, the CLI, and the paper's ordering on the real trace (when ../shared has it)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from clusteremu.cli import main
from clusteremu.cluster.experiments.gpu_frag import medians, replay, workload
from clusteremu.cluster.gpu_trace import load_nodes, load_pods
from clusteremu.cluster.policies.gpu_share import typical_pods

FIX = Path(__file__).parent.parent.parent / "fixtures" / "gpu"
TRACE = Path(__file__).resolve().parents[3].parent / "shared" / "traces" / "alibaba-gpu-v2023"


def fixture() -> tuple[object, object]:
    nodes = load_nodes(FIX / "nodes.csv")
    return nodes, load_pods(FIX / "pods.csv", nodes.models)


def test_workload_fills_to_130_percent_of_capacity() -> None:
    nodes, pods = fixture()
    idx = workload(pods, nodes.gpu_capacity_milli, np.random.default_rng(1))
    total = pods.gpu_request_milli[idx].sum()
    assert total <= 1.3 * nodes.gpu_capacity_milli
    assert sorted(set(idx[: len(pods)].tolist())) == list(
        range(len(pods))
    )  # the shuffled list first


@pytest.mark.parametrize(
    "policy", ["random-fit", "best-fit", "dot-product", "gpu-packing", "gpu-clustering", "fgd"]
)
def test_replay_allocates_what_the_engine_placed_and_drops_the_rest(policy: str) -> None:
    nodes, pods = fixture()
    r = replay(nodes, pods, policy, seed=3)
    placed = ~r.failed
    assert r.failed.any()  # 130% cannot all fit
    # Allocated GPU is what the placed pods asked for; arrived counts the failed ones too.
    req = np.diff(np.concatenate([[0.0], r.arrived_milli]))
    assert r.allocated_milli[-1] == pytest.approx(req[placed].sum())
    assert r.allocated_milli[-1] <= nodes.gpu_capacity_milli
    curve = r.curve()
    assert curve.shape == (131,) and np.all((curve >= 0) & (curve <= 100))
    again = replay(nodes, pods, policy, seed=3)
    assert np.array_equal(again.failed, r.failed)


def test_cli_json_and_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "gf"
    code = main(
        [
            "gpu-frag",
            "--nodes",
            str(FIX / "nodes.csv"),
            "--pods",
            str(FIX / "pods.csv"),
            "--policy",
            "fgd",
            "--seeds",
            "1-3",
            "--out",
            str(out),
            "--json",
        ]
    )
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    assert list(printed["unallocated_gpu_pct"]) == [
        "80",
        "90",
        "95",
        "100",
        "105",
        "110",
        "120",
        "130",
    ]
    assert "first_failure_arrived_pct" in printed
    for name in ("gpu-frag.parquet", "gpu-frag.json", "gpu-frag.png"):
        assert (out / name).stat().st_size > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policy", "worst-fit"], "unknown worst-fit"),
        (["--seeds", "9-1"], "runs backwards"),
        (["--pods", "{tmp}/empty.csv"], "the pod list is empty"),
        (["--pods", "{tmp}/missing.csv"], "cannot be read"),
        (["--pods", "{tmp}/missing.csv"], "alibaba/clusterdata repository on GitHub"),
    ],
)
def test_bad_input_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    (tmp_path / "empty.csv").write_text((FIX / "pods.csv").read_text().splitlines()[0] + "\n")
    base = {
        "--nodes": str(FIX / "nodes.csv"),
        "--pods": str(FIX / "pods.csv"),
        "--policy": "fgd",
        "--seeds": "1",
    }
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value.replace("{tmp}", str(tmp_path))
    argv = ["gpu-frag"] + [x for kv in base.items() for x in kv]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.skipif(not TRACE.is_dir(), reason="the Alibaba trace (../shared/traces) is absent")
def test_on_the_real_trace_fgd_leaves_fewer_gpus_unallocated_than_packing_and_random_the_most() -> (
    None
):
    nodes = load_nodes(TRACE / "openb_node_list_gpu_node.csv")
    pods = load_pods(TRACE / "openb_pod_list_default.csv", nodes.models)
    assert (len(nodes.name), int(nodes.gpus.sum()), len(pods)) == (1213, 6212, 8152)
    at_100 = {
        p: medians([replay(nodes, pods, p, seed=42)])["unallocated_gpu_pct"]["100"]
        for p in ("random-fit", "best-fit", "gpu-packing", "fgd")
    }
    assert at_100["fgd"] < at_100["best-fit"] - 1.0 and at_100["fgd"] < at_100["gpu-packing"] - 1.0
    assert at_100["random-fit"] > max(at_100["best-fit"], at_100["gpu-packing"])


#: The published simulator's expected medians at 100 % arrived (unallocated GPU %): 100 -
#: the median over seeds 42-51 of the allocated GPU % at arrived 100 in the rows
#: `openb_pod_list_default` of hkust-adsl/kubernetes-scheduler-simulator's
#: experiments/analysis/expected_results/analysis_allo_discrete.csv.
SIMULATOR_AT_100 = {
    "random-fit": 13.75,
    "dot-product": 9.445,
    "gpu-clustering": 8.42,
    "gpu-packing": 8.195,
    "best-fit": 7.09,
    "fgd": 4.77,
}
#: Opt in to the check of all six policies (60 replays, about 70 s on one core).
ALL_SIX = "CLUSTEREMU_GPU_FRAG_ALL"


def median_at_100(policy: str, seeds: range) -> float:
    nodes = load_nodes(TRACE / "openb_node_list_gpu_node.csv")
    pods = load_pods(TRACE / "openb_pod_list_default.csv", nodes.models)
    typical = typical_pods(pods.cpu_milli, pods.num_gpu, pods.gpu_milli, pods.model_mask)
    runs = [replay(nodes, pods, policy, seed, typical) for seed in seeds]
    return float(medians(runs)["unallocated_gpu_pct"]["100"])  # type: ignore[index]


@pytest.mark.skipif(not TRACE.is_dir(), reason="the Alibaba trace (../shared/traces) is absent")
@pytest.mark.parametrize(
    "policy",
    [
        pytest.param(
            p,
            marks=pytest.mark.skipif(
                p != "dot-product" and not os.environ.get(ALL_SIX),
                reason=f"set {ALL_SIX}=1 to check all six policies (about 70 s)",
            ),
        )
        for p in SIMULATOR_AT_100
    ],
)
def test_median_at_100_arrived_is_the_simulators(policy: str) -> None:
    """The paper's protocol over its ten seeds (42-51) lands within 0.5 points of the
    simulator's expected median at 100 % arrived (docs/gpu-frag.md, Results).

    0.5 points: the seeds' own spread. One seed's value at 100 % arrived ranges over about
    1.3 points for dot-product, packing and clustering (e.g. dot-product 8.9 to 10.2), so
    the median of ten seeds moves by a few tenths with the seeds and the tie-break (ours:
    a per-seed node order; the simulator's: its own random tie-break), but not by 0.5.
    By default only dot-product runs (10 replays, about 6 s): its float score (the smallest
    product wins, no ties) gave 10.19, 0.74 off; the simulator's truncated integer score
    gives 9.39, 0.06 off. The other five run with CLUSTEREMU_GPU_FRAG_ALL=1 (FGD alone is 33 s), as
    fewer seeds would not do: three seeds put gpu-clustering 0.59 off.
    """
    got = median_at_100(policy, range(42, 52))
    assert abs(got - SIMULATOR_AT_100[policy]) <= 0.5, (policy, got)


@pytest.mark.skipif(not TRACE.is_dir(), reason="the Alibaba trace (../shared/traces) is absent")
def test_the_multigpu50_pod_list_replays() -> None:
    """`openb_pod_list_multigpu50.csv` has only the five required columns (no gpu_spec)."""
    nodes = load_nodes(TRACE / "openb_node_list_gpu_node.csv")
    pods = load_pods(TRACE / "openb_pod_list_multigpu50.csv", nodes.models)
    assert len(pods) == 9061 and (pods.num_gpu > 1).any()
    r = replay(nodes, pods, "best-fit", seed=42)
    assert r.allocated_milli[-1] <= nodes.gpu_capacity_milli
    assert r.failed.any() and not r.failed.all()
    assert 0.0 < r.curve()[100] < 100.0
