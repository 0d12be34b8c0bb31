"""Formula tests of every score plugin on small hand-computed clusters (docs/scoring.md).

Cluster A (request: 1 core, 2 GB):
  n0: 4 cores / 8 GB, free 3 / 6  -> requested after placement 2 / 4
  n1: 2 cores / 4 GB, free 2 / 4  -> 1 / 2
  n2: 8 cores / 16 GB, free 1 / 16 -> 8 / 2
"""

from __future__ import annotations

import numpy as np
import pytest

from clusteremu.cluster.policies.scoring import scorers as S
from clusteremu.cluster.policies.scoring.framework import SCORERS, PodSpec
from tests.cluster.policies.scoring.helpers import cluster, cycle, image, node

POD = PodSpec("p", request=(1.0, 2.0, 0.0))


def cluster_a():  # type: ignore[no-untyped-def]
    table, state, ids = cluster([node("n0", 4, 8), node("n1", 2, 4), node("n2", 8, 16)])
    state.free[:] = np.array([[3.0, 2.0, 1.0], [6.0, 4.0, 16.0], [0.0, 0.0, 0.0]])
    return table, state, ids


def scores(plugin: S.ScorePlugin, pod: PodSpec = POD, nodes=None):  # type: ignore[no-untyped-def]
    table, state, ids = cluster_a()
    return plugin.score(cycle(table, state, pod, ids, nodes)).tolist()


# --- Kubernetes resource scorers ---------------------------------------------------------------


def test_least_allocated_integer_and_float() -> None:
    # n2: cpu (8000-8000)*100/8000 = 0, memory (16-2)*100/16 = 87 (87.5 truncated); (0+87)/2 = 43.
    assert scores(S.LeastAllocated()) == [50.0, 50.0, 43.0]
    assert scores(S.LeastAllocated(integer=False)) == [50.0, 50.0, 43.75]


def test_least_allocated_resource_weights() -> None:
    # n2 with cpu weight 3: (3*0 + 1*87) // 4 = 21; float (87.5) / 4 = 21.875.
    assert scores(S.LeastAllocated({"cpu": 3, "memory": 1}))[2] == 21.0
    assert scores(S.LeastAllocated({"cpu": 3, "memory": 1}, integer=False))[2] == 21.875


def test_least_allocated_truncates_like_go() -> None:
    table, state, ids = cluster([node("a", 3, 3)])
    # requested 1 of 3 cores and 1 of 3 GB: (2000*100)//3000 = 66 on both -> 66.
    assert S.LeastAllocated().score(
        cycle(table, state, PodSpec("p", (1.0, 1.0, 0.0)))
    ).tolist() == [66.0]


def test_most_allocated() -> None:
    # n2: cpu min(8000, 8000)*100/8000 = 100, memory 2*100/16 = 12 (12.5); (100+12)//2 = 56.
    assert scores(S.MostAllocated()) == [50.0, 50.0, 56.0]
    assert scores(S.MostAllocated(integer=False)) == [50.0, 50.0, 56.25]


def test_most_allocated_caps_overcommitted_request() -> None:
    table, state, ids = cluster([node("a", 2, 4)])
    state.free[:, 0] = [0.0, 4.0, 0.0]  # already full; the request overflows the cpu
    # cpu: min(3000, 2000)*100/2000 = 100; memory 2*100/4 = 50 -> 75.
    assert S.MostAllocated().score(cycle(table, state, POD)).tolist() == [75.0]


def test_requested_to_capacity_ratio_default_packing_shape() -> None:
    # n2: cpu utilisation 100 -> 100; memory 2*100/16 = 12 -> 12; round((100+12)/2) = 56.
    assert scores(S.RequestedToCapacityRatio()) == [50.0, 50.0, 56.0]
    assert scores(S.RequestedToCapacityRatio(integer=False)) == [50.0, 50.0, 56.25]


def test_requested_to_capacity_ratio_broken_linear_truncates_toward_zero() -> None:
    # Shape (0, 10), (40, 3), (100, 0) -> scores (100, 30, 0). At utilisation 13:
    # 100 + trunc(-70 * 13 / 40) = 100 + trunc(-22.75) = 78 (flooring would give 77).
    table, state, _ = cluster([node("big", 100, 0)])
    rtc = S.RequestedToCapacityRatio(shape=[[0, 10], [40, 3], [100, 0]], resources={"cpu": 1})
    pod = PodSpec("p", (13.0, 0.0, 0.0))
    assert rtc.score(cycle(table, state, pod)).tolist() == [78.0]
    rtc_f = S.RequestedToCapacityRatio(
        shape=[[0, 10], [40, 3], [100, 0]], resources={"cpu": 1}, integer=False
    )
    assert rtc_f.score(cycle(table, state, pod)).tolist() == pytest.approx([77.25])
    # Below the first point and above the last: the end scores.
    rtc2 = S.RequestedToCapacityRatio(shape=[[20, 2], [80, 8]], resources={"cpu": 1})
    assert rtc2.broken_linear(np.array([0, 20, 50, 80, 100])).tolist() == [20, 20, 50, 80, 80]


def test_requested_to_capacity_ratio_skips_zero_scores_in_the_weights() -> None:
    # Kubernetes counts a resource's weight only when its score is positive: memory
    # utilisation 0 scores 0 on the packing shape, so the node scores cpu alone: 50.
    table, state, _ = cluster([node("a", 2, 4)])
    assert S.RequestedToCapacityRatio().score(
        cycle(table, state, PodSpec("p", (1.0, 0.0, 0.0)))
    ).tolist() == [50.0]


def test_balanced_allocation() -> None:
    # n0: fractions 0.5 / 0.5 -> 100; n2: 1.0 / 0.125 -> std 0.4375 -> 56 (56.25).
    assert scores(S.BalancedAllocation()) == [100.0, 100.0, 56.0]
    assert scores(S.BalancedAllocation(integer=False)) == [100.0, 100.0, 56.25]


def test_balanced_allocation_three_resources_and_missing_gpu() -> None:
    table, state, _ = cluster([node("g", 2, 4, gpu=1), node("c", 2, 4)])
    ba = S.BalancedAllocation({"cpu": 1, "memory": 1, "gpu": 1}, integer=False)
    # g: fractions 0.5, 0.5, 1.0: population std sqrt(1/18) = 0.2357 -> 76.43.
    # c: no GPU capacity -> two resources, |0.5 - 0.5| / 2 = 0 -> 100.
    got = ba.score(cycle(table, state, PodSpec("p", (1.0, 2.0, 1.0)))).tolist()
    assert got == pytest.approx([100 * (1 - np.sqrt(1 / 18)), 100.0])
    assert S.BalancedAllocation({"cpu": 1, "memory": 1, "gpu": 1}).score(
        cycle(table, state, PodSpec("p", (1.0, 2.0, 1.0)))
    ).tolist() == [76.0, 100.0]


def test_zero_capacity_nodes() -> None:
    table, state, _ = cluster([node("zero", 0, 0)])
    pod = PodSpec("p", (0.0, 0.0, 0.0))
    c = cycle(table, state, pod)
    assert S.LeastAllocated().score(c).tolist() == [0.0]
    assert S.MostAllocated().score(c).tolist() == [0.0]
    assert S.RequestedToCapacityRatio().score(c).tolist() == [0.0]
    assert S.BalancedAllocation().score(c).tolist() == [100.0]
    assert S.BalancedResource().score(c).tolist() == [100.0]  # capacity 0 counts as 1


# --- Skippy scorers -----------------------------------------------------------------------


def test_balanced_resource_uses_remaining_capacity() -> None:
    # n0: 1/3 vs 2/6 -> 100; n1: 1/2 vs 2/4 -> 100; n2: 1/1 >= 1 -> 0.
    assert scores(S.BalancedResource()) == [100.0, 100.0, 0.0]
    table, state, _ = cluster([node("a", 4, 4)])
    # fc = 1/4, fm = 2/4: (1 - 0.25) * 10 = 7.5 -> 7 -> 70 (Skippy's int()); float 75.
    assert S.BalancedResource().score(cycle(table, state, POD)).tolist() == [70.0]
    assert S.BalancedResource(integer=False).score(cycle(table, state, POD)).tolist() == [75.0]


def test_image_locality_kubernetes() -> None:
    pod = PodSpec("p", images=(image("img", 500.0),))
    types = [node(f"n{i}", 4, 8, arch="x86") for i in range(10)]
    table, state, ids = cluster(types, pods=[pod])
    for k in range(4):
        state.add_image(ids["img"], k)
    got = S.ImageLocality().score(cycle(table, state, pod, ids)).tolist()
    # Present: 500e6 bytes * 4/10 = 2e8 -> 100 * (2e8 - 23 MiB) / (1000 MiB - 23 MiB) = 17.17 -> 17.
    assert got == [17.0] * 4 + [0.0] * 6
    lo, hi = 23 * 2**20, 1000 * 2**20
    got_f = S.ImageLocality(integer=False).score(cycle(table, state, pod, ids)).tolist()
    assert got_f[0] == pytest.approx(100 * (2e8 - lo) / (hi - lo))


def test_image_locality_clamps_large_images() -> None:
    pod = PodSpec("p", images=(image("img", 3000.0),))
    table, state, ids = cluster([node("a", 4, 8, arch="x86")], pods=[pod])
    state.add_image(ids["img"], 0)
    assert S.ImageLocality().score(cycle(table, state, pod, ids)).tolist() == [100.0]


def test_latency_aware_image_locality() -> None:
    pod = PodSpec("p", images=(image("img", 1000.0),))
    types = [
        node("slow", 4, 8, arch="x86", bandwidth__registry_mbps="250"),
        node("fast", 4, 8, arch="x86", bandwidth__registry_mbps="1000"),
        node("cached", 4, 8, arch="x86", bandwidth__registry_mbps="250"),
    ]
    table, state, ids = cluster(types, pods=[pod])
    state.add_image(ids["img"], 2)
    # Pull times 32 s, 8 s, 0 s -> inverse min-max: 0, 75, 100.
    assert S.LatencyAwareImageLocality().score(cycle(table, state, pod, ids)).tolist() == [
        0.0,
        75.0,
        100.0,
    ]


def test_data_locality() -> None:
    pod = PodSpec("p", data_in_mb=14.0, data_out_mb=14.0)
    types = [
        node("edge", 4, 8, bandwidth__storage_mbps="250"),
        node("cloud", 4, 8, bandwidth__storage_mbps="1000"),
    ]
    table, state, ids = cluster(types)
    assert S.DataLocality().score(cycle(table, state, pod)).tolist() == [0.0, 100.0]
    assert S.DataLocality().score(cycle(table, state, PodSpec("q"))).tolist() == [0.0, 0.0]


def test_locality_type_and_capability() -> None:
    pod = PodSpec("p", capabilities={"capability.cuda": "true", "capability.gpu": "true"})
    types = [
        node("gpu", 4, 8, locality="edge", capability__cuda="true", capability__gpu="true"),
        node("half", 4, 8, locality="edge", capability__gpu="true"),
        node("cloud", 4, 8, locality="cloud"),
    ]
    table, state, _ = cluster(types)
    assert S.LocalityType().score(cycle(table, state, pod)).tolist() == [100.0, 100.0, 0.0]
    assert S.CapabilityScore().score(cycle(table, state, pod)).tolist() == [100.0, 50.0, 0.0]
    assert S.CapabilityScore().score(cycle(table, state, PodSpec("q"))).tolist() == [0.0] * 3


@pytest.mark.parametrize("name", sorted(SCORERS))
def test_every_scorer_handles_an_empty_node_set(name: str) -> None:
    assert scores(SCORERS[name](), nodes=[]) == []


@pytest.mark.parametrize("name", sorted(SCORERS))
def test_every_scorer_stays_in_range_on_random_clusters(name: str) -> None:
    rng = np.random.default_rng(3)
    pod = PodSpec(
        "p",
        request=(1.0, 0.5, 0.0),
        images=(image("img", 700.0),),
        capabilities={"capability.gpu": "true"},
        data_in_mb=5.0,
    )
    types = [
        node(
            f"t{i}",
            float(rng.integers(1, 9)),
            float(rng.uniform(0.5, 16)),
            arch="x86",
            locality=str(rng.choice(["edge", "cloud"])),
            bandwidth__registry_mbps=str(rng.uniform(10, 1000)),
            bandwidth__storage_mbps=str(rng.uniform(10, 1000)),
            **({"capability__gpu": "true"} if rng.random() < 0.5 else {}),
        )
        for i in range(50)
    ]
    table, state, ids = cluster(types, pods=[pod])
    state.free[:2] *= rng.uniform(0, 1, size=(2, table.n))
    for k in np.flatnonzero(rng.random(table.n) < 0.3):
        state.add_image(ids["img"], int(k))
    got = np.array(SCORERS[name]().score(cycle(table, state, pod, ids)))
    assert got.shape == (table.n,)
    assert np.all((got >= 0) & (got <= 100))
