"""GPU-sharing scores on hand-built nodes, and FGD's typical pods and F_n by hand."""

from __future__ import annotations

import numpy as np
import pytest

from clusteremu.cluster.experiments.gpu_frag import GpuSharePlacer
from clusteremu.cluster.policies.gpu_share import (
    CPU_NORM,
    GPU_NORM,
    SCORERS,
    UnknownPolicyError,
    choose,
    choose_random,
    fragment,
    scorer,
    typical_pods,
)
from clusteremu.cluster.policies.gpu_share_placers import GpuSharingPlacer

I = np.int64


def run(
    policy: str,
    free: list[list[float]],
    pod: tuple[int, float, int, int],
    cpu=None,
    models=None,
    mask=-1,
    affinity=None,
    typical=None,
    order=None,
    u=(0.0, 0.0),
):
    """The policy's choice (`choose` with its scorer, or `choose_random` with the draws
    `u`) on nodes with the given free milli-GPU per GPU (1000 = a free GPU)."""
    n = len(free)
    g = max(len(f) for f in free)
    gpu_free = np.zeros((n, g))
    for i, f in enumerate(free):
        gpu_free[i, : len(f)] = f
    n_gpus = np.array([len(f) for f in free], dtype=I)
    node_model = np.array(models or [0] * n, dtype=I)
    cpu_free = np.array(cpu or [64000.0] * n)
    mem = np.full(n, 1e6)
    c, m, k, d = pod
    t = typical or typical_pods(
        np.array([c], dtype=I),
        np.array([k], dtype=I),
        np.array([d], dtype=I),
        np.array([-1], dtype=I),
    )
    aff = affinity if affinity is not None else np.zeros((n, 10), dtype=I)
    nodes = (
        gpu_free,
        n_gpus,
        node_model,
        cpu_free,
        mem,
        np.array(order or list(range(n)), dtype=I),
    )
    score = scorer(policy)
    if score is None:
        return choose_random(*nodes, c, m, k, d, mask, *u)
    typical_arrays = (t.cpu_milli, t.gpu_milli, t.num_gpu, t.model_mask, t.p)
    return choose(
        score, *nodes, c, m, k, d, mask, *typical_arrays, np.full(n, -1.0), aff, CPU_NORM, GPU_NORM
    )


def test_sharing_pods_need_a_gpu_with_room_and_whole_pods_free_gpus() -> None:
    # Node 0: GPUs with 300 and 600 free; a 500 pod shares GPU 1; a whole pod fits nowhere.
    assert run("best-fit", [[300, 600]], (1000, 1.0, 1, 500)) == (0, 0b10)
    assert run("best-fit", [[300, 600]], (1000, 1.0, 1, 1000)) == (-1, 0)
    assert run("best-fit", [[1000, 600, 1000]], (1000, 1.0, 2, 1000)) == (0, 0b101)


def test_model_constraints_and_cpu_only_pods() -> None:
    # Node 0 is model 0, node 1 model 1: a pod allowed only model 1 goes to node 1.
    assert run("best-fit", [[1000], [1000]], (1000, 1.0, 1, 500), models=[0, 1], mask=0b10)[0] == 1
    # A CPU-only pod gets no GPU, and goes where CPU is tightest under best-fit.
    node, gpus = run("best-fit", [[1000], [1000]], (4000, 1.0, 0, 0), cpu=[64000.0, 8000.0])
    assert (node, gpus) == (1, 0)
    # No CPU room: nowhere.
    assert run("best-fit", [[1000]], (4000, 1.0, 0, 0), cpu=[2000.0])[0] == -1


def test_best_fit_prefers_least_leftover_and_the_tightest_gpu() -> None:
    # Same CPU; node 1 has less free GPU: best fit; on it the tightest GPU with room.
    assert run("best-fit", [[1000, 1000], [700, 550]], (1000, 1.0, 1, 500)) == (1, 0b10)


def test_dot_product_takes_the_smallest_product() -> None:
    # Free (C, R): node 0 (64000, 2000), node 1 (8000, 2000); pod (4000, 500): node 1.
    assert (
        run(
            "dot-product", [[1000, 1000], [1000, 1000]], (4000, 1.0, 1, 500), cpu=[64000.0, 8000.0]
        )[0]
        == 1
    )


def test_dot_product_scores_are_the_simulators_truncated_integers() -> None:
    # Pod (4000, 1 x 500). Node 0 (64000, 2000): dot/2 = 0.015625, score trunc(98.44) = 98;
    # node 1 (60000, 2000): dot/2 = 0.01514, score trunc(98.49) = 98. A float score would
    # always take node 1 (the smaller product); the integer scores tie, and the node order
    # decides.
    pod, free, cpu = (4000, 1.0, 1, 500), [[1000, 1000], [1000, 1000]], [64000.0, 60000.0]
    assert run("dot-product", free, pod, cpu=cpu, order=[0, 1])[0] == 0
    assert run("dot-product", free, pod, cpu=cpu, order=[1, 0])[0] == 1
    # One point apart: node 1 (8000 free CPU, score 99) beats node 0 in either order.
    assert run("dot-product", free, pod, cpu=[64000.0, 8000.0], order=[0, 1])[0] == 1


def test_gpu_packing_prefers_a_partly_used_gpu_then_a_used_node_then_small_idle_nodes() -> None:
    free = [[1000] * 8, [1000, 1000], [1000, 700], [1000, 300]]
    # A 500 pod: node 2's partly used GPU 1 (700 free) scores 100 - 70/10 = 93.
    assert run("gpu-packing", free, (1000, 1.0, 1, 500)) == (2, 0b10)
    # A whole GPU: node 2 and 3 are used nodes (50 - 1 = 49); the first in order wins.
    assert run("gpu-packing", free, (1000, 1.0, 1, 1000)) == (2, 0b1)
    assert run("gpu-packing", free, (1000, 1.0, 1, 1000), order=[3, 2, 1, 0]) == (3, 0b1)
    # Idle nodes only: fewer GPUs first (33 - 2 = 31 against 33 - 8 = 25).
    assert run("gpu-packing", free[:2], (1000, 1.0, 1, 500))[0] == 1


def test_gpu_clustering_prefers_nodes_hosting_the_same_kind() -> None:
    aff = np.zeros((3, 10), dtype=I)
    aff[1, 0] = 2  # node 1 hosts sharing pods only
    aff[2, 1] = 1  # node 2 hosts a 1-GPU pod
    free = [[1000, 1000], [500, 1000], [0, 1000]]
    assert run("gpu-clustering", free, (1000, 1.0, 1, 250), affinity=aff)[0] == 1
    assert run("gpu-clustering", free, (1000, 1.0, 1, 1000), affinity=aff)[0] == 2


def test_typical_pods_cover_95_percent_and_renormalise() -> None:
    # 10 pods of type A, 7 of B, 2 of C, 1 of D: A + B + C = 19 of 20 >= 95%.
    cpu = np.array([1] * 10 + [2] * 7 + [3] * 2 + [4], dtype=I)
    t = typical_pods(cpu, np.ones(20, dtype=I), np.full(20, 500, dtype=I), np.full(20, -1, dtype=I))
    assert t.cpu_milli.tolist() == [1, 2, 3]
    assert t.p.tolist() == pytest.approx([10 / 19, 7 / 19, 2 / 19])


def test_fragment_by_hand() -> None:
    # Typical pods: m1 = 1 GPU of 500 (p 0.5), m2 = 2 whole GPUs (p 0.3), m3 CPU-only (p 0.2).
    t_cpu = np.array([1000, 1000, 1000], dtype=I)
    t_d = np.array([500, 1000, 0], dtype=I)
    t_k = np.array([1, 2, 0], dtype=I)
    t_mask = np.array([-1, -1, -1], dtype=I)
    t_p = np.array([0.5, 0.3, 0.2])
    free = np.array([1000.0, 300.0, 600.0, 0.0])
    # m1: GPUs with < 500 free hold 300 + 0 = 300 fragmented; m2: only one free GPU, so
    # all 1900 free milli are fragments; m3 (CPU-only): all 1900. F = 150 + 570 + 380.
    f = fragment(free, 4, 8000.0, 1, t_cpu, t_d, t_k, t_mask, t_p)
    assert f == pytest.approx(0.5 * 300 + 0.3 * 1900 + 0.2 * 1900)
    # Without CPU for the typical pods everything is a fragment.
    assert fragment(free, 4, 500.0, 1, t_cpu, t_d, t_k, t_mask, t_p) == pytest.approx(1900.0)


def test_fgd_takes_the_gpu_that_grows_fragmentation_least() -> None:
    # One typical pod type: 1 GPU of 500. Node GPUs free 1000 and 600. A 400 pod on the
    # 600 GPU leaves 200 (a fragment, F 0 -> 200); on the 1000 GPU, 600 stays usable
    # (F 0 -> 0): FGD takes GPU 0. Best-fit takes the tightest, GPU 1.
    typical = typical_pods(
        np.array([1000], dtype=I),
        np.array([1], dtype=I),
        np.array([500], dtype=I),
        np.array([-1], dtype=I),
    )
    assert run("fgd", [[1000, 600]], (1000, 1.0, 1, 400), typical=typical) == (0, 0b1)
    assert run("best-fit", [[1000, 600]], (1000, 1.0, 1, 400)) == (0, 0b10)


# --- the table of policies -----------------------------------------------------------------


def test_the_table_lists_the_six_policies_of_the_paper() -> None:
    assert list(SCORERS) == [
        "random-fit",
        "best-fit",
        "dot-product",
        "gpu-packing",
        "gpu-clustering",
        "fgd",
    ]
    assert SCORERS["random-fit"] is None  # it draws (choose_random) instead of scoring
    assert len({id(f) for f in SCORERS.values()}) == 6


@pytest.mark.parametrize("name", ["first-fit", "gpu-random-fit", "FGD", ""])
def test_an_unknown_policy_is_refused_naming_it_and_the_known_ones(name: str) -> None:
    with pytest.raises(UnknownPolicyError, match=f"unknown GPU policy {name!r}") as err:
        scorer(name)
    assert isinstance(err.value, ValueError) and err.value.policy == name
    assert ", ".join(SCORERS) in str(err.value)
    with pytest.raises(ValueError, match=f"unknown GPU policy {name!r}"):
        GpuSharePlacer(name, None, None, None, None, None)  # type: ignore[arg-type]

    class Unknown(GpuSharingPlacer):
        policy = name

    with pytest.raises(ValueError, match=f"unknown GPU policy {name!r}"):
        Unknown()


#: Six nodes (models 0, 1, 0, 1, 0 and one without GPUs), their pods of each kind
#: (gpu-clustering), four typical pods (FGD), and four pods: (c, mem GB, k, d).
MIXED_FREE = [
    [1000, 1000, 1000, 1000],
    [1000, 600, 300, 1000],
    [250, 0],
    [1000] * 8,
    [700],
    [],
]
MIXED_PODS = {
    "share": (4000, 8.0, 1, 500),
    "quarter": (2000, 4.0, 1, 250),
    "whole": (8000, 16.0, 2, 1000),
    "cpu": (4000, 4.0, 0, 0),
}
#: Each policy's (node, GPU mask) per pod, as the single compiled chooser of every policy
#: (selected by a number) gave them before the scores became one function each.
MIXED_CHOICES = {
    "random-fit": {"share": (1, 1), "quarter": (1, 2), "whole": (1, 9), "cpu": (1, 0)},
    "best-fit": {"share": (4, 1), "quarter": (2, 1), "whole": (1, 9), "cpu": (2, 0)},
    "dot-product": {"share": (4, 1), "quarter": (2, 1), "whole": (1, 9), "cpu": (2, 0)},
    "gpu-packing": {"share": (1, 2), "quarter": (2, 1), "whole": (1, 9), "cpu": (2, 0)},
    "gpu-clustering": {"share": (1, 2), "quarter": (2, 1), "whole": (0, 3), "cpu": (2, 0)},
    "fgd": {"share": (1, 2), "quarter": (2, 1), "whole": (0, 3), "cpu": (2, 0)},
}


@pytest.mark.parametrize("policy", list(SCORERS))
def test_every_policy_of_the_table_chooses_as_before(policy: str) -> None:
    aff = np.zeros((6, 10), dtype=I)
    aff[1, 0], aff[1, 1], aff[2, 0], aff[4, 1] = 2, 1, 3, 1
    typical = typical_pods(
        np.array([2000, 4000, 8000, 1000], dtype=I),
        np.array([1, 1, 2, 0], dtype=I),
        np.array([250, 500, 1000, 0], dtype=I),
        np.array([-1, -1, -1, -1], dtype=I),
        weight=np.array([4.0, 3.0, 2.0, 1.0]),
    )
    got = {
        name: run(
            policy,
            MIXED_FREE,
            pod,
            cpu=[64000.0, 30000.0, 8000.0, 96000.0, 16000.0, 32000.0],
            models=[0, 1, 0, 1, 0, -1],
            affinity=aff,
            typical=typical,
            order=[2, 0, 4, 1, 5, 3],
            u=(0.6, 0.3),
        )
        for name, pod in MIXED_PODS.items()
    }
    assert got == MIXED_CHOICES[policy]
