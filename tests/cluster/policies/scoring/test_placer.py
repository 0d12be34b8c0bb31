"""The `scoring` placer: conformance, fused vs numpy paths, image caches, set-up delays,
bad input, and the Learning to Score paper's score (eq. 2)."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.policies.base import Placer
from clusteremu.cluster.policies.scoring.framework import Cycle
from clusteremu.cluster.policies.scoring.placer import ScoringPlacer
from clusteremu.cluster.policies.scoring.score import Bounds, norm, per_function, seed_score
from clusteremu.cluster.policies.scoring.scorers import ALL_SCORERS, SEED_SCORERS
from clusteremu.cluster.testing import PlacerConformance, equal_tables, small_placement_scenario
from clusteremu.scenarios import faas
from clusteremu.scenarios.errors import ScenarioError
from clusteremu.scenarios.loader import spec_from_dict


class TestScoringDefault(PlacerConformance):
    """The paper's eight scorers with Fixed weights on the plain conformance cluster (rented
    rows that grow the view, per-GPU milli sharing included)."""

    def make_placer(self) -> Placer:
        return ScoringPlacer()


def small_faas(nodes: int = 40, time_s: float = 60.0, rate: float = 3.0) -> dict[str, Any]:
    return faas.scenario_dict(
        "hybrid_balanced", nodes=nodes, rate_per_s=rate, time_s=time_s, seed=3, timeout_s=10.0
    )


class TestScoringFaas(PlacerConformance):
    """All ten scorers on a small faas cluster: images, data, capabilities, worker slots."""

    def placement_scenario(self) -> dict[str, Any]:
        return small_faas()

    def make_placer(self) -> Placer:
        params = copy.deepcopy(spec_from_dict(small_faas()).scheduler.placer.params)
        params.update(scorers=list(ALL_SCORERS), weights=dict.fromkeys(ALL_SCORERS, 1.0))
        return ScoringPlacer(**params)

    def gpu_scenario(self) -> None:
        return None  # the conformance GPU scenario has no faas classes


def test_fused_kernel_and_numpy_plugins_agree_on_random_states() -> None:
    spec = spec_from_dict(small_faas(nodes=300))
    params = dict(spec.scheduler.placer.params)
    rng = np.random.default_rng(11)
    for integer, compat in ((True, None), (False, None), (True, "skippy")):
        weights = {
            s: float(w)
            for s, w in zip(ALL_SCORERS, rng.uniform(0, 1, len(ALL_SCORERS)), strict=True)
        }
        placer = ScoringPlacer(
            **params, scorers=list(ALL_SCORERS), weights=weights, integer=integer, compat=compat
        )
        placer.setup(spec, np.random.default_rng(0))
        assert placer.framework.fused
        st = placer.state
        st.free[0] = np.floor(st.free[0] * rng.uniform(0, 1, st.free.shape[1]))
        st.free[1] *= rng.uniform(0, 1, st.free.shape[1])
        for i in range(st.has_image.shape[0]):
            for k in np.flatnonzero(rng.random(st.free.shape[1]) < 0.3):
                st.add_image(i, int(k))
        for pod in placer.pods:
            c = Cycle(placer.table, st, pod)
            placer.framework.feasible(c)
            np.testing.assert_array_equal(
                placer.framework.total(c), placer.framework.total_numpy(c)
            )


def test_compiled_and_numpy_paths_give_identical_runs() -> None:
    spec = spec_from_dict(small_faas(nodes=80, time_s=60.0, rate=5.0))
    params = dict(spec.scheduler.placer.params, scorers=list(ALL_SCORERS))
    fast = Engine(spec, placer=ScoringPlacer(**params)).run()
    slow = Engine(spec, placer=ScoringPlacer(**params, compiled=False)).run()
    assert ScoringPlacer(**params).framework.fused
    assert not ScoringPlacer(**params, compiled=False).framework.fused
    assert equal_tables(fast, slow)
    assert fast.summary["score"] == slow.summary["score"]


def test_compat_skippy_runs_compiled_and_numpy_alike() -> None:
    spec = spec_from_dict(small_faas(nodes=80, time_s=60.0, rate=5.0))
    params = dict(spec.scheduler.placer.params)
    compat = ScoringPlacer(**params, compat="skippy")
    assert compat.framework.compat and compat.framework.fused
    assert all(getattr(s, "compat", False) for s in compat.scorer_plugins)
    fast = Engine(spec, placer=ScoringPlacer(**params, compat="skippy")).run()
    slow = Engine(spec, placer=ScoringPlacer(**params, compat="skippy", compiled=False)).run()
    assert equal_tables(fast, slow)
    default = Engine(spec).run()
    assert 0.0 <= fast.summary["score"] <= 1.0
    assert not equal_tables(fast, default)  # Skippy's scores and tie-break place differently
    with pytest.raises(ValueError, match="compat: skippy uses integer arithmetic"):
        ScoringPlacer(compat="skippy", integer=False)
    with pytest.raises(ValueError, match="compat: expected 'skippy'"):
        ScoringPlacer(compat="k8s")


def test_commit_books_the_items_a_start_fetches_for_the_rest_of_the_call() -> None:
    spec = spec_from_dict(small_faas())
    placer = ScoringPlacer(**spec.scheduler.placer.params)
    placer.setup(spec, np.random.default_rng(0))
    c = placer.class_names.index("resnet50-training")
    pod = placer.pods[c]
    k = int(np.flatnonzero(pod.runnable)[0])
    placer.commit(pod, k, pod.request)
    assert placer.state.has_image[pod.image[k], k] and placer.state.image_nodes[pod.image[k]] == 1
    assert placer.state.has_image[placer.world.item("model:resnet50-training"), k]
    assert placer.state.free_slots[k] == np.inf and placer.state.free[0, k] == pytest.approx(
        placer.table.capacity[0, k] - 1.0
    )


def test_runs_are_deterministic_and_report_the_seed_score() -> None:
    spec = spec_from_dict(small_faas(nodes=60, time_s=120.0, rate=5.0))
    a = Engine(spec).run()
    b = Engine(spec).run()
    assert equal_tables(a, b)
    s = a.summary
    assert 0.0 <= s["score"] <= 1.0
    assert set(s["per_function"]) == set(faas.FUNCTIONS)
    for stats in s["per_function"].values():
        assert {"mean_exec_s", "mean_wait_s", "success_ratio"} <= set(stats)
    # The per-job table agrees with the summary: recompute eq. 2 by hand.
    table = a.jobs
    inf = table["arrival_s"].to_numpy() <= 120.0
    recomputed = seed_score(
        per_function(table, [c.name for c in spec.classes], inf),
        {
            n: Bounds(tuple(v["exec_bounds_s"]), tuple(v["wait_bounds_s"]))
            for n, v in s["per_function"].items()
        },
    )
    assert recomputed == pytest.approx(s["score"])


def test_a_function_with_no_feasible_node_fails_after_its_timeout() -> None:
    data = faas.scenario_dict(
        "cloud_cpu",
        nodes=5,
        rate_per_s=2.0,
        time_s=60.0,
        timeout_s=5.0,
        functions=["resnet50-inference", "mobilenet-inference"],
    )
    # Only a Coral device may run this function, and the five cloud_cpu nodes have none.
    data["world"]["images"].append(
        {"name": "tpu-only", "size_mb": {"aarch64": 100}, "requires": {"device": ["coral"]}}
    )
    data["workload"]["classes"][0]["containers"] = [{"images": ["tpu-only"]}]
    run = Engine(spec_from_dict(data)).run()
    stats = run.summary["per_function"]["resnet50-inference"]
    assert stats["requests"] > 0 and stats["success_ratio"] == 0.0
    # Every request failed after waiting 5 s, or was still waiting at the end.
    assert run.summary["jobs_failed"] + run.summary["jobs_unfinished"] >= stats["requests"]
    assert run.summary["jobs_failed"] >= stats["requests"] - 2.0 * 5.0 * 3
    assert run.summary["per_function"]["mobilenet-inference"]["success_ratio"] > 0.9
    assert np.isnan(stats["mean_exec_s"])


def test_eq2_score_by_hand() -> None:
    table = pa.table(
        {
            "class": pa.DictionaryArray.from_arrays(
                pa.array([0, 0, 0, 1], pa.int32()), pa.array(["f", "g"])
            ),
            "arrival_s": [0.0, 1.0, 2.0, 0.0],
            "start_s": [1.0, 1.0, float("nan"), 0.5],
            "end_s": [3.0, 5.0, float("nan"), 2.5],
            "setup_s": [0.5, 0.0, 0.0, 0.0],
            "failed": [False, False, True, False],
        }
    )
    stats = per_function(table, ["f", "g"], np.ones(4, dtype=bool))
    # f: two of three succeed; exec (3-1-0.5, 5-1-0) -> mean 2.75; wait (1+0.5, 0) -> 0.75.
    assert stats["f"] == {
        "requests": 3,
        "successful": 2,
        "success_ratio": 2 / 3,
        "mean_exec_s": 2.75,
        "mean_wait_s": 0.75,
    }
    bounds = {"f": Bounds((0.0, 5.5), (0.0, 3.0)), "g": Bounds((1.0, 3.0), (0.0, 1.0))}
    # f: (1 - 0.5) + (1 - 0.25) + 2/3; g: exec 2 -> 0.5, wait 0.5 -> 0.5, success 1.
    expected = ((0.5 + 0.75 + 2 / 3) / 3 + (0.5 + 0.5 + 1.0) / 3) / 2
    assert seed_score(stats, bounds) == pytest.approx(expected)
    assert norm(float("nan"), 0.0, 1.0) == 1.0 and norm(-1.0, 0.0, 1.0) == 0.0


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"weights": {"MostAllocated": -1.0}},
            "weights.MostAllocated: expected a finite, non-negative",
        ),
        (
            {"weights": dict.fromkeys(SEED_SCORERS, 0.0)},
            "all weights are zero",
        ),
        ({"scorers": ["LeastAllocated", "Bogus"]}, "unknown score plugin 'Bogus'"),
        ({"weights": {"Bogus": 1.0}}, "weights.Bogus: not one of the configured scorers"),
        (
            {"scorer_params": {"RequestedToCapacityRatio": {"shape": [[0, 0], [80, 5], [60, 10]]}}},
            "strictly increasing",
        ),
        ({"filters": ["NoSuchFilter"]}, "unknown filter plugin 'NoSuchFilter'"),
        ({"goodput": 0.0}, "goodput"),
        ({"pods": {"one": {"images": [{"name": "x"}]}}}, "pods.one.images.0"),
    ],
)
def test_bad_parameters_are_clear_errors(params: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ScoringPlacer(**params)
    data = small_placement_scenario(jobs=10)
    data["scheduler"] = {"placer": {"name": "scoring", "params": params}}
    with pytest.raises(ScenarioError, match="scheduler.placer.params"):
        spec_from_dict(data)


def test_pods_naming_an_unknown_class_are_refused_at_setup() -> None:
    placer = ScoringPlacer(pods={"nope": {}})
    with pytest.raises(ValueError, match="pods.nope"):
        placer.setup(spec_from_dict(small_placement_scenario(jobs=10)), np.random.default_rng(0))
