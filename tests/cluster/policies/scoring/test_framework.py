"""Filters, the weighted sum, the [0, 100] check, the seeded tie-break and the registries."""

from __future__ import annotations

import numpy as np
import pytest

from clusteremu.cluster.policies.compiled_table import compiled_scorer
from clusteremu.cluster.policies.scoring import filters as F
from clusteremu.cluster.policies.scoring import scorers as S
from clusteremu.cluster.policies.scoring.framework import (
    Cycle,
    Framework,
    PodSpec,
    ScorePlugin,
    ScoreRangeError,
    compile_pod,
    make_scorer,
    nodes_to_find,
    register_scorer,
)
from tests.cluster.policies.scoring.helpers import cluster, image, node

ALL_FILTERS = [F.ResourceFit(), F.NodeLabels(), F.Capability(), F.NotStorageNode()]


def mask(table, state, pod, plugin, ids=None):  # type: ignore[no-untyped-def]
    return plugin.filter(Cycle(table, state, compile_pod(pod, table, ids or {}))).tolist()


def test_resource_fit_cpu_memory_gpu_slots_and_active() -> None:
    table, state, _ = cluster(
        [node("a", 2, 4), node("b", 2, 1), node("c", 2, 4, gpu=1), node("d", 2, 4), node("e", 2, 4)]
    )
    state.free_slots[3] = 0.0
    state.active[4] = False
    assert mask(table, state, PodSpec("p", (2.0, 2.0, 0.0)), F.ResourceFit()) == [
        True,
        False,
        True,
        False,
        False,
    ]
    assert mask(table, state, PodSpec("p", (1.0, 1.0, 1.0)), F.ResourceFit()) == [
        False,
        False,
        True,
        False,
        False,
    ]
    assert mask(table, state, PodSpec("p", (3.0, 0.0, 0.0)), F.ResourceFit()) == [False] * 5


def test_node_labels_capability_and_storage_filters() -> None:
    gpu_img = image("gpu-img", 100.0, accelerator=["gpu"])
    types = [
        node("gpu", 4, 8, arch="x86", accelerator="gpu"),
        node("cpu", 4, 8, arch="x86"),
        node("arm32", 4, 8, arch="arm32", accelerator="gpu"),
        node("store", 4, 8, arch="x86", accelerator="gpu", role="storage"),
    ]
    pod = PodSpec("p", images=(gpu_img,), node_selector={"accelerator": ("gpu",)})
    table, state, ids = cluster(types, pods=[pod])
    assert mask(table, state, pod, F.NodeLabels(), ids) == [True, False, True, True]
    # The image has no arm32 build, and needs a GPU.
    assert mask(table, state, pod, F.Capability(), ids) == [True, False, False, True]
    assert mask(table, state, pod, F.NotStorageNode(), ids) == [True, True, True, False]
    fw = Framework(ALL_FILTERS, [S.LocalityType()], [1.0])
    c = Cycle(table, state, compile_pod(pod, table, ids))
    assert fw.feasible(c).tolist() == [0]


def test_ranked_images_fall_back_per_node() -> None:
    pod = PodSpec(
        "p", images=(image("gpu-img", 1000.0, accelerator=["gpu"]), image("cpu-img", 200.0))
    )
    table, state, ids = cluster(
        [node("g", 4, 8, arch="x86", accelerator="gpu"), node("c", 4, 8, arch="x86")], pods=[pod]
    )
    compiled = compile_pod(pod, table, ids)
    assert compiled.image.tolist() == [ids["gpu-img"], ids["cpu-img"]]
    assert compiled.image_size_mb.tolist() == [1000.0, 200.0]


def test_empty_and_all_infeasible_node_sets() -> None:
    fw = Framework(ALL_FILTERS, [S.LeastAllocated(), S.LocalityType()], [1.0, 1.0])
    table, state, _ = cluster([])
    assert (
        fw.select(
            Cycle(table, state, compile_pod(PodSpec("p"), table, {})), np.random.default_rng(0)
        )
        == -1
    )
    table, state, _ = cluster([node("a", 1, 1), node("b", 1, 1)])
    big = PodSpec("p", (2.0, 0.0, 0.0))
    assert (
        fw.select(Cycle(table, state, compile_pod(big, table, {})), np.random.default_rng(0)) == -1
    )


def test_weighted_sum_picks_the_best_node() -> None:
    # edge node with little free cpu vs cloud node with a lot: LocalityType prefers edge,
    # LeastAllocated prefers the emptier cloud node; the weights decide.
    table, state, _ = cluster(
        [node("edge", 4, 8, locality="edge"), node("cloud", 4, 8, locality="cloud")]
    )
    state.free[0, 0] = 1.0
    pod = compile_pod(PodSpec("p", (1.0, 0.0, 0.0)), table, {})
    rng = np.random.default_rng(0)
    spread = Framework(ALL_FILTERS, [S.LeastAllocated(), S.LocalityType()], [1.0, 0.1])
    edge = Framework(ALL_FILTERS, [S.LeastAllocated(), S.LocalityType()], [0.1, 1.0])
    assert spread.select(Cycle(table, state, pod), rng) == 1
    assert edge.select(Cycle(table, state, pod), rng) == 0
    c = Cycle(table, state, pod)
    spread.feasible(c)
    # cloud: LeastAllocated (cpu 75 + memory 100) / 2 = 87; edge: (0 + 100)/2 = 50.
    assert spread.total(c).tolist() == pytest.approx([50 + 10.0, 87 + 0.0])


def test_ties_are_broken_by_the_seeded_generator() -> None:
    table, state, _ = cluster([node(f"n{i}", 4, 8) for i in range(8)])
    pod = compile_pod(PodSpec("p"), table, {})
    fw = Framework(ALL_FILTERS, [S.LeastAllocated()], [1.0])
    picks = [fw.select(Cycle(table, state, pod), np.random.default_rng(s)) for s in range(200)]
    again = [fw.select(Cycle(table, state, pod), np.random.default_rng(s)) for s in range(200)]
    assert picks == again
    counts = np.bincount(picks, minlength=8)
    assert counts.min() > 10  # every tied node gets chosen (expected 25 each)


class _Broken(ScorePlugin):
    name = "Broken"

    def score(self, cycle: Cycle) -> np.ndarray:
        return np.full(cycle.nodes.size, 101.0)


def test_scores_outside_0_100_are_refused() -> None:
    table, state, _ = cluster([node("a", 4, 8), node("b", 4, 8)])
    fw = Framework(ALL_FILTERS, [_Broken()], [1.0])
    with pytest.raises(ScoreRangeError, match="Broken"):
        fw.select(
            Cycle(table, state, compile_pod(PodSpec("p"), table, {})), np.random.default_rng(0)
        )


def test_registry_refuses_duplicates_and_unknown_names() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_scorer("LeastAllocated")(_Broken)
    with pytest.raises(ValueError, match="unknown score plugin 'Nope'"):
        make_scorer("Nope")


def test_bad_shape_and_resource_weights() -> None:
    with pytest.raises(ValueError, match="strictly increasing"):
        S.RequestedToCapacityRatio(shape=[[0, 0], [50, 5], [40, 10]])
    with pytest.raises(ValueError, match=r"scores must lie in \[0, 10\]"):
        S.RequestedToCapacityRatio(shape=[[0, 0], [100, 11]])
    with pytest.raises(ValueError, match="utilisation must lie"):
        S.RequestedToCapacityRatio(shape=[[0, 0], [120, 10]])
    with pytest.raises(ValueError, match="resources.cpu"):
        S.LeastAllocated({"cpu": -1})
    with pytest.raises(ValueError, match="resources.disk"):
        S.MostAllocated({"disk": 1})


def test_nodes_to_find_follows_kube_scheduler() -> None:
    assert nodes_to_find(50, 10) == 50  # small clusters: all
    assert nodes_to_find(1000, 100) == 1000
    assert nodes_to_find(1000, 30) == 300
    assert nodes_to_find(500, 10) == 100  # never fewer than 100
    assert nodes_to_find(5000, 0) == 500  # adaptive: 50 - 5000/125 = 10%
    assert nodes_to_find(10000, 0) == 500  # adaptive floor 5%


def test_percentage_of_nodes_to_score_searches_round_robin() -> None:
    table, state, _ = cluster([node("a", 4, 8)], nodes=["a"] * 400)
    state.free[0, :] = 0.0
    state.free[0, ::2] = 4.0  # every second node fits
    fw = Framework(ALL_FILTERS, [S.LeastAllocated()], [1.0], percentage_of_nodes_to_score=25)
    pod = compile_pod(PodSpec("p"), table, {})
    first = fw.feasible(Cycle(table, state, pod))
    assert first.tolist() == list(range(0, 200, 2))  # 25% of 400 = 100 feasible nodes
    second = fw.feasible(Cycle(table, state, pod))
    assert second.tolist() == list(range(200, 400, 2))
    third = fw.feasible(Cycle(table, state, pod))
    assert third.tolist() == list(range(0, 200, 2))  # wrapped around
    with pytest.raises(ValueError, match="percentage_of_nodes_to_score"):
        Framework(ALL_FILTERS, [S.LeastAllocated()], [1.0], percentage_of_nodes_to_score=150)


# --- compiled score plugins (clusteremu.cluster.policies.compiled_table) --------------------------


@compiled_scorer
def score_free_cpu_share(nodes, view, out):  # type: ignore[no-untyped-def]
    """100 x the share of cores left free after the placement."""
    for i in range(nodes.shape[0]):
        k = nodes[i]
        cap = view.capacity[0, k]
        left = view.free[0, k] - view.request[0]
        out[i] = 100.0 * left / cap if cap > 0 else 0.0


class CompiledFreeShare(ScorePlugin):
    name = "CompiledFreeShare"
    compiled = score_free_cpu_share


class NumpyFreeShare(ScorePlugin):
    name = "NumpyFreeShare"

    def score(self, cycle: Cycle) -> np.ndarray:
        cap, free = cycle.capacity()[0], cycle.free()[0]
        return np.where(cap > 0, 100.0 * (free - cycle.request[0]) / np.where(cap > 0, cap, 1), 0)


def test_a_compiled_score_plugin_scores_as_its_numpy_twin() -> None:
    table, state, _ = cluster([node(f"n{i}", 4 + i, 8) for i in range(6)])
    state.free[0, :] = [1.0, 4.0, 2.5, 7.0, 3.0, 9.0]
    pod = compile_pod(PodSpec("p", (1.0, 0.0, 0.0)), table, {})
    totals = []
    for plugin in (CompiledFreeShare(), NumpyFreeShare()):
        fw = Framework(ALL_FILTERS, [plugin, S.LeastAllocated()], [1.0, 0.5])
        c = Cycle(table, state, pod)
        fw.feasible(c)
        totals.append(fw.total(c))
        assert fw.select(Cycle(table, state, pod), np.random.default_rng(0)) == 5
    np.testing.assert_allclose(totals[0], totals[1], rtol=0, atol=1e-12)


@compiled_scorer
def score_too_high(nodes, view, out):  # type: ignore[no-untyped-def]
    for i in range(nodes.shape[0]):
        out[i] = 150.0


def test_a_compiled_score_out_of_range_is_refused() -> None:
    class TooHigh(ScorePlugin):
        name = "TooHigh"
        compiled = score_too_high

    table, state, _ = cluster([node("a", 4, 8), node("b", 4, 8)])
    fw = Framework(ALL_FILTERS, [TooHigh()], [1.0])
    with pytest.raises(ScoreRangeError, match="TooHigh"):
        fw.select(
            Cycle(table, state, compile_pod(PodSpec("p"), table, {})), np.random.default_rng(0)
        )


def test_an_unregistered_compiled_scorer_or_unknown_code_is_refused() -> None:
    def loose(nodes, view, out):  # type: ignore[no-untyped-def]
        pass

    class Loose(ScorePlugin):
        name = "Loose"
        compiled = loose

    class Coded(ScorePlugin):
        name = "Coded"
        kernel_code = 42

    with pytest.raises(ValueError, match="'Loose'.*not a registered compiled scorer"):
        Framework(ALL_FILTERS, [Loose()], [1.0])
    with pytest.raises(ValueError, match="'Coded': kernel_code 42"):
        Framework(ALL_FILTERS, [Coded()], [1.0])
