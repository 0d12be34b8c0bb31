"""The Kubernetes scorers against kube-scheduler's own unit tests, transcribed case by case.

Sources (kubernetes/kubernetes, ``pkg/scheduler/framework/plugins/``):
``noderesources/least_allocated_test.go`` (TestLeastAllocatedScoringStrategy),
``noderesources/most_allocated_test.go`` (TestMostAllocatedScoringStrategy),
``noderesources/balanced_allocation_test.go`` (TestNodeResourcesBalancedAllocation),
``noderesources/requested_to_capacity_ratio_test.go`` (TestRequestedToCapacityRatioScoring
Strategy, TestBrokenLinearFunction, TestResourceBinPackingSingleExtended) and
``imagelocality/image_locality_test.go`` (TestImageLocalityPriority).

Units: a Kubernetes test's ``"cpu": "4000"`` is 4000 cores (``makeNode``'s cpu argument and
``"1000m"`` are millicores), memory is in bytes (our GB are GiB, so bytes / 2^30), and the
extended resource (``extendedRes``, ``nvidia.com/gpu``, ``intel.com/foo``) is our gpu row.
An existing pod's requests are capacity minus free here. Left out: cases that need Kubernetes'
default requests for pods without requests (100m / 200 MB), the best-effort PreScore skip, DRA,
and a second extended resource; ImageLocality's multi-container pods go through the
``image_locality_score`` / ``scaled_image_bytes`` functions the plugin uses, since a pod here
runs one container.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pytest

from clusteremu.cluster.policies.scoring import scorers as S
from clusteremu.cluster.policies.scoring.framework import PodSpec
from tests.cluster.policies.scoring.helpers import cluster, cycle, node

GIB = 2**30
MIB = 2**20
Res = tuple[float, float] | tuple[float, float, float]  # (cores, bytes[, gpus])


def scores(
    plugin: S.ScorePlugin,
    nodes: Sequence[Res],
    pod: Res = (0.0, 0.0),
    existing: Sequence[Res] | None = None,
) -> list[float]:
    """`plugin`'s scores on nodes with capacities `nodes` (cores, bytes, gpus) already holding
    `existing` requests, for a pod requesting `pod`."""
    types = [node(f"n{i}", c[0], c[1] / GIB, gpu=c[2] if len(c) > 2 else 0.0) for i, c in
             enumerate(nodes)]  # fmt: skip
    table, state, _ = cluster(types)
    for k, used in enumerate(existing or []):
        for r, x in enumerate(used):
            state.free[r, k] -= x / GIB if r == 1 else x
    request = (pod[0], pod[1] / GIB, pod[2] if len(pod) > 2 else 0.0)
    return plugin.score(cycle(table, state, PodSpec("p", request))).tolist()


DEFAULT = {"cpu": 1, "memory": 1}
EXTENDED = {"cpu": 1, "memory": 1, "gpu": 1}  # extendedResourceSet


# --- least_allocated_test.go ------------------------------------------------------------------

LEAST_CASES: list[tuple[str, Mapping[str, int], list[Res], Res, list[Res] | None, list[int]]] = [
    ("nothing scheduled, nothing requested",
     DEFAULT, [(4000, 10000), (4000, 10000)], (0, 0), None, [100, 100]),
    ("nothing scheduled, resources requested, differently sized nodes",
     DEFAULT, [(4000, 10000), (6000, 10000)], (3000, 5000), None, [37, 50]),
    ("no resources requested, pods scheduled with resources",
     DEFAULT, [(10000, 20000), (10000, 20000)], (0, 0), [(6000, 0), (6000, 5000)], [70, 57]),
    ("resources requested, pods scheduled with resources",
     DEFAULT, [(10000, 20000), (10000, 20000)], (3000, 5000), [(3000, 0), (3000, 5000)],
     [57, 45]),
    ("resources requested, pods scheduled with resources, differently sized nodes",
     DEFAULT, [(10000, 20000), (10000, 50000)], (3000, 5000), [(3000, 0), (3000, 5000)],
     [57, 60]),
    ("requested resources exceed node capacity",
     DEFAULT, [(4000, 10000), (4000, 10000)], (3000, 0), [(3000, 0), (3000, 5000)], [50, 25]),
    ("zero node resources, pods scheduled with resources",
     DEFAULT, [(0, 0), (0, 0)], (0, 0), [(3000, 0), (3000, 5000)], [0, 0]),
    ("nothing scheduled, resources requested with different weight on CPU and memory",
     {"memory": 2, "cpu": 1}, [(4000, 10000), (6000, 10000)], (3000, 5000), None, [41, 50]),
    ("bypass extended resource if the pod does not request",
     EXTENDED, [(6000, 10000), (6000, 10000, 4)], (3000, 5000), None, [50, 50]),
    ("honor extended resource if the pod requests",
     EXTENDED, [(6000, 10000, 4), (6000, 10000, 10)], (3000, 5000, 2), None, [50, 60]),
    ("if the node doesn't have a resource",
     {"gpu": 2, "cpu": 1, "memory": 1}, [(6000, 10000), (6000, 10000, 4)], (3000, 4000), None,
     [55, 55]),
]  # fmt: skip


@pytest.mark.parametrize(("name", "resources", "nodes", "pod", "existing", "want"), LEAST_CASES)
def test_least_allocated_upstream(
    name: str,
    resources: Mapping[str, int],
    nodes: list[Res],
    pod: Res,
    existing: list[Res] | None,
    want: list[int],
) -> None:
    assert scores(S.LeastAllocated(resources), nodes, pod, existing) == want


# --- most_allocated_test.go -------------------------------------------------------------------

MOST_CASES: list[tuple[str, Mapping[str, int], list[Res], Res, list[Res] | None, list[int]]] = [
    ("nothing scheduled, nothing requested",
     DEFAULT, [(4000, 10000), (4000, 10000)], (0, 0), None, [0, 0]),
    ("nothing scheduled, resources requested, differently sized nodes",
     DEFAULT, [(4000, 10000), (6000, 10000)], (3000, 5000), None, [62, 50]),
    ("no resources requested, pods scheduled with resources",
     DEFAULT, [(10000, 20000), (10000, 20000)], (0, 0), [(6000, 0), (6000, 5000)], [30, 42]),
    ("resources requested, pods scheduled with resources",
     DEFAULT, [(10000, 20000), (10000, 20000)], (3000, 5000), [(3000, 0), (3000, 5000)],
     [42, 55]),
    ("resources requested equal node capacity",
     DEFAULT, [(5000, 10000), (10000, 9000)], (5000, 9000), None, [95, 75]),
    ("nothing scheduled, resources requested, memory weight 2",
     {"memory": 2, "cpu": 1}, [(4000, 10000), (6000, 10000)], (3000, 5000), None, [58, 50]),
    ("bypass extended resource if the pod does not request",
     EXTENDED, [(6000, 10000), (6000, 10000, 4)], (3000, 5000), None, [50, 50]),
    ("honor extended resource if the pod request",
     EXTENDED, [(6000, 10000, 4), (6000, 10000, 10)], (3000, 5000, 2), None, [50, 40]),
    ("if the node doesn't have a resource",
     {"gpu": 2, "cpu": 1, "memory": 1}, [(6000, 10000), (6000, 10000, 4)], (3000, 4000), None,
     [45, 45]),
]  # fmt: skip


@pytest.mark.parametrize(("name", "resources", "nodes", "pod", "existing", "want"), MOST_CASES)
def test_most_allocated_upstream(
    name: str,
    resources: Mapping[str, int],
    nodes: list[Res],
    pod: Res,
    existing: list[Res] | None,
    want: list[int],
) -> None:
    assert scores(S.MostAllocated(resources), nodes, pod, existing) == want


@pytest.mark.parametrize("scorer", [S.LeastAllocated, S.MostAllocated, S.RequestedToCapacityRatio])
@pytest.mark.parametrize("weight", [-1, 0, 101, 1.5, True, "2", float("nan")])
def test_resource_weights_are_integers_1_to_100(scorer: type, weight: object) -> None:
    # "resource with negative weight", "resource with zero weight", "resource weight larger
    # than MaxNodeScore" (validateResources: (0, 100]); our weights must also be integers.
    with pytest.raises(ValueError, match=r"resources\.cpu: expected an integer weight in 1\.\.100"):
        scorer(resources={"cpu": weight, "memory": 1})


def test_integral_float_weights_are_accepted() -> None:
    assert S.LeastAllocated({"cpu": 2.0, "memory": 100}).weights.tolist() == [2.0, 100.0]
    with pytest.raises(ValueError, match="BalancedAllocation weights must be 1"):
        S.BalancedAllocation({"cpu": 2, "memory": 1})


# --- balanced_allocation_test.go --------------------------------------------------------------

CPU_AND_MEMORY = (3.0, 5000)  # 1000m + 2000m, 2000 + 3000 bytes
CPU_ONLY = (3.0, 0)
BALANCED_CASES: list[tuple[str, Mapping[str, int], list[Res], Res, list[Res] | None, list[int]]] = [
    ("nothing scheduled, resources requested, differently sized nodes",
     DEFAULT, [(4.0, 10000), (6.0, 10000)], CPU_AND_MEMORY, None, [87, 100]),
    ("resources requested, pods scheduled with resources",
     DEFAULT, [(10.0, 20000), (10.0, 20000)], CPU_AND_MEMORY, [CPU_ONLY, CPU_AND_MEMORY],
     [82, 95]),
    ("resources requested, pods scheduled with resources, differently sized nodes",
     DEFAULT, [(10.0, 20000), (10.0, 50000)], CPU_AND_MEMORY, [CPU_ONLY, CPU_AND_MEMORY],
     [82, 80]),
    ("requested resources at node capacity",
     DEFAULT, [(6.0, 10000), (6.0, 10000)], CPU_ONLY, [CPU_ONLY, CPU_AND_MEMORY], [50, 75]),
    ("include scalar resource on a node for balanced resource allocation",
     EXTENDED, [(3.5, 40000, 8), (3.5, 40000, 8)], (0.0, 0, 1), [(3.0, 5000, 3), CPU_AND_MEMORY],
     [70, 65]),
    ("node without the scalar resource should skip the scalar resource",
     EXTENDED, [(3.5, 40000, 8), (3.5, 40000)], CPU_AND_MEMORY, None, [63, 63]),
]  # fmt: skip


@pytest.mark.parametrize(("name", "resources", "nodes", "pod", "existing", "want"), BALANCED_CASES)
def test_balanced_allocation_upstream(
    name: str,
    resources: Mapping[str, int],
    nodes: list[Res],
    pod: Res,
    existing: list[Res] | None,
    want: list[int],
) -> None:
    assert scores(S.BalancedAllocation(resources), nodes, pod, existing) == want


# --- requested_to_capacity_ratio_test.go ------------------------------------------------------

SPREAD_SHAPE = [[0, 10], [100, 0]]


@pytest.mark.parametrize(
    ("name", "nodes", "pod", "existing", "want"),
    [
        ("nothing scheduled, nothing requested",
         [(4000, 10000), (4000, 10000)], (0, 0), None, [100, 100]),
        ("nothing scheduled, resources requested, differently sized nodes",
         [(4000, 10000), (6000, 10000)], (3000, 5000), None, [38, 50]),
        ("no resources requested, pods scheduled with resources",
         [(4000, 10000), (6000, 10000)], (0, 0), [(3000, 5000), (3000, 5000)], [38, 50]),
    ],
)  # fmt: skip
def test_requested_to_capacity_ratio_upstream(
    name: str, nodes: list[Res], pod: Res, existing: list[Res] | None, want: list[int]
) -> None:
    plugin = S.RequestedToCapacityRatio(shape=SPREAD_SHAPE, resources=DEFAULT)
    assert scores(plugin, nodes, pod, existing) == want


@pytest.mark.parametrize(
    ("points", "assertions"),
    [
        ([(10, 1), (90, 9)],
         [(-10, 1), (0, 1), (9, 1), (10, 1), (15, 1), (19, 1), (20, 2), (89, 8), (90, 9),
          (99, 9), (100, 9), (110, 9)]),
        ([(0, 2), (40, 10), (100, 0)],
         [(-10, 2), (0, 2), (20, 6), (30, 8), (40, 10), (70, 5), (100, 0), (110, 0)]),
        ([(0, 2), (40, 2), (100, 2)],
         [(-10, 2), (0, 2), (20, 2), (30, 2), (40, 2), (70, 2), (100, 2), (110, 2)]),
    ],
)  # fmt: skip
def test_broken_linear_function_upstream(
    points: list[tuple[int, int]], assertions: list[tuple[int, int]]
) -> None:
    util = np.array([u for u, _ in points], dtype=np.int64)
    score = np.array([s for _, s in points], dtype=np.int64)
    p = np.array([a for a, _ in assertions], dtype=np.int64)
    assert S.broken_linear(p, util, score).tolist() == [b for _, b in assertions]


@pytest.mark.parametrize(
    ("name", "pod_gpu", "existing", "want"),
    [
        ("nothing scheduled, nothing requested", 0, None, [0, 0]),
        ("resources requested, pods scheduled with less resources", 2, None, [2, 5]),
        ("resources requested, pods scheduled with resources, on node with existing pod running",
         2, [(0, 0, 0), (0, 0, 2)], [2, 10]),
        ("resources requested, pods scheduled with more resources", 4, None, [5, 10]),
    ],
)  # fmt: skip
def test_resource_bin_packing_single_extended_upstream(
    name: str, pod_gpu: float, existing: list[Res] | None, want: list[int]
) -> None:
    # Resources {intel.com/foo: 1}, shape (0, 0), (100, 1); nodes 4000m / 10000 MiB with 8 and
    # 4 of the extended resource.
    plugin = S.RequestedToCapacityRatio(shape=[[0, 0], [100, 1]], resources={"gpu": 1})
    nodes: list[Res] = [(4.0, 10000 * MIB, 8), (4.0, 10000 * MIB, 4)]
    assert scores(plugin, nodes, (0.0, 0, pod_gpu), existing) == want


# --- image_locality_test.go -------------------------------------------------------------------

IMAGES_MIB = {  # node image lists of the upstream test, sizes in MiB
    "node403002000": {"40": 40, "300": 300, "2000": 2000},
    "node25010": {"250": 250, "10": 10},
    "node60040900": {"600": 600, "40": 40, "900": 900},
    "node300600900": {"300": 300, "600": 600, "900": 900},
    "node400030": {"4000": 4000, "30": 30},
    "node203040": {"20": 20, "30": 30, "40": 40},
    "nodeWithNoImages": {},
}


@pytest.mark.parametrize(
    ("name", "containers", "nodes", "want"),
    [
        ("two images spread on two nodes, prefer the larger image one",
         ["40", "250"], ["node403002000", "node25010"], [0, 5]),
        ("two images on one node, prefer this node",
         ["40", "300"], ["node403002000", "node25010"], [7, 0]),
        ("if exceed limit, use limit", ["10", "4000"], ["node400030", "node25010"], [100, 0]),
        ("if exceed limit, use limit (with node which has no images present)",
         ["10", "4000"], ["node400030", "node25010", "nodeWithNoImages"], [66, 0, 0]),
        ("pod with multiple large images, node2 is preferred",
         ["300", "600", "900"], ["node60040900", "node300600900", "nodeWithNoImages"],
         [32, 36, 0]),
        ("pod with multiple small images", ["30", "40"], ["node203040", "node400030"], [1, 0]),
        ("include InitContainers: two images spread on two nodes, prefer the larger image one",
         ["30", "300"], ["node403002000", "node203040"], [6, 0]),
    ],
)  # fmt: skip
def test_image_locality_upstream(
    name: str, containers: list[str], nodes: list[str], want: list[int]
) -> None:
    holders = {img: sum(img in IMAGES_MIB[n] for n in nodes) for img in containers}
    got = []
    for n in nodes:
        present = [img for img in dict.fromkeys(containers) if img in IMAGES_MIB[n]]
        sizes = np.array([IMAGES_MIB[n][img] * MIB for img in present], dtype=np.int64)
        counts = np.array([holders[img] for img in present], dtype=np.int64)
        total = int(S.scaled_image_bytes(sizes, counts, len(nodes)).sum())
        got.append(int(S.image_locality_score(np.array([total]), len(containers))[0]))
    assert got == want


def test_image_locality_plugin_is_the_one_container_case() -> None:
    # "if exceed limit, use limit" with the pod's image alone: 4000 MiB on 1 of 2 nodes is
    # 2000 MiB > the one-container cap of 1000 MiB -> 100; the same function gives 100 for two
    # containers only because 2000 MiB reaches their cap too.
    from tests.cluster.policies.scoring.helpers import image

    pod = PodSpec("p", images=(image("img", 4000 * MIB / 1e6),))
    table, state, ids = cluster(
        [node("a", 4, 8, arch="x86"), node("b", 4, 8, arch="x86")], pods=[pod]
    )
    state.add_image(ids["img"], 0)
    assert S.ImageLocality().score(cycle(table, state, pod, ids)).tolist() == [100.0, 0.0]
    half = np.array([2000 * MIB - 1])
    assert S.image_locality_score(half, 1).tolist() == [100.0]
    assert S.image_locality_score(half, 2).tolist() == [99.0]
    assert S.image_locality_score(half, 3).tolist() == [66.0]
