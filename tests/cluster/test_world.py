"""The world model (cluster/world.py, scenarios/world.py): scenario fields, the engine's
set-up delays for every placer, caches, migration of the scoring placer's old parameters,
the `score` metric for every placer, and `with_policies` keeping a policy's parameters."""

from __future__ import annotations

import copy
import math
import warnings
from typing import Any

import numpy as np
import pytest

from clusteremu.cluster.compare import compare_policies, table_text
from clusteremu.cluster.engine import Engine
from clusteremu.cluster.layout import JF, JI, JobState
from clusteremu.cluster.runner import with_policies
from clusteremu.cluster.testing import equal_tables
from clusteremu.cluster.world import WF, Stat, World, build_world
from clusteremu.scenarios import faas
from clusteremu.scenarios.errors import ScenarioError
from clusteremu.scenarios.loader import spec_from_dict
from clusteremu.scenarios.world import ScenarioDeprecationWarning


def tiny_world(**changes: Any) -> dict[str, Any]:
    """Two node types (x86 cloud on 800 Mbit/s, arm edge on 80 Mbit/s, the edge one with
    `base` pre-pulled), one class with two containers, a model, a storage data item and
    data in/out; jobs one at a time so every start is visible."""
    data: dict[str, Any] = {
        "name": "tiny-world",
        "seed": 3,
        "stop": {"jobs": 40},
        "cluster": {
            "node_types": [
                {
                    "name": "cloud",
                    "cpu": 1,
                    "memory_gb": 4,
                    "labels": {"arch": "x86"},
                    "registry_mbps": 800,
                    "storage_mbps": 400,
                },
                {
                    "name": "edge",
                    "cpu": 1,
                    "memory_gb": 4,
                    "labels": {"arch": "arm"},
                    "registry_mbps": 80,
                    "storage_mbps": 40,
                    "cached": ["base"],
                },
            ],
            "nodes": [{"type": "cloud", "count": 1}, {"type": "edge", "count": 1}],
        },
        "workload": {
            "classes": [
                {
                    "name": "fn",
                    "arrival": {"kind": "poisson", "rate_per_s": 0.2},
                    "size": {"kind": "exponential", "mean_s": 1.0},
                    "containers": [{"images": ["app"]}, {"images": ["base"]}],
                    "model_mb": 10,
                    "data_items": ["weights"],
                    "data_in_mb": 5,
                    "data_out_mb": 5,
                }
            ]
        },
        "world": {
            "goodput": 0.5,
            "images": [
                {"name": "app", "size_mb": {"x86": 100, "arm": 50}},
                {"name": "base", "size_mb": 200},
            ],
            "data_items": [{"name": "weights", "size_mb": 20}],
        },
    }
    data.update(changes)
    return data


def test_world_tables_resolve_images_per_architecture_and_caches() -> None:
    spec = spec_from_dict(tiny_world())
    world = World.from_spec(spec)
    assert world.items == ("app", "base", "weights", "model:fn")
    assert world.size_mb[world.item("app")].tolist() == [100.0, 50.0]
    assert world.size_mb[world.item("base")].tolist() == [200.0, 200.0]  # "*": every arch
    assert world.needs[0][0] == (0, 1, 3, 2)  # images, model, then data items
    assert world.initial[1].tolist() == [0.0, 1.0, 0.0, 0.0]  # edge holds base
    # Cloud, nothing cached: (100 + 200 + 10) MB from the registry at 800 x 0.5 Mbit/s,
    # 20 MB from storage at 400 x 0.5, plus 10 MB in/out at storage speed.
    first = world.setup_seconds(0, 0, np.zeros(4))
    assert first == pytest.approx(310 * 8 / 400 + 20 * 8 / 200 + 10 * 8 / 200)
    assert world.setup_seconds(0, 0, np.ones(4)) == pytest.approx(10 * 8 / 200)
    f, i, n = build_world(spec)
    assert n == 4 and f[WF.REGISTRY_MBPS, :2].tolist() == [400.0, 40.0]


def test_engine_charges_pulls_once_per_node_for_any_placer() -> None:
    spec = spec_from_dict(tiny_world())
    world = World.from_spec(spec)
    engine = Engine(spec)  # first-fit, compiled
    result = engine.run()
    s = engine.state
    done = s.jobs_i[JI.STATE] == JobState.DONE
    nodes = s.jobs_i[JI.NODE]
    setup = s.jobs_f[JF.SETUP_S]
    for k in (0, 1):
        mine = np.flatnonzero(done & (nodes == k))
        if mine.size == 0:
            continue
        t = int(s.nodes_i[0, k])
        held = world.initial[t]
        assert setup[mine[0]] == world.setup_seconds(0, t, held)  # exact, first start
        warm = world.setup_seconds(0, t, np.ones(world.n_items))
        assert np.all(setup[mine[1:]] == warm)  # later starts move data only
        assert np.all(s.cached[k, : world.n_items] == 1.0)
    assert s.world_f[WF.STATS, Stat.IMAGE_PULLS] == pytest.approx(
        1 + 1 + int(np.any(done & (nodes == 1)))  # app + base on cloud, app on edge
    )
    assert result.summary["mean_setup_s"] > 0 and result.summary["image_pulls"] >= 2
    # The jobs' run times exclude the set-up: end - start - setup = size / speed.
    ran = np.flatnonzero(done)
    np.testing.assert_allclose(
        s.jobs_f[JF.END, ran] - s.jobs_f[JF.START, ran] - setup[ran], s.jobs_f[JF.SIZE, ran]
    )


def test_rented_nodes_join_with_their_type_cache() -> None:
    spec = spec_from_dict(tiny_world())
    engine = Engine(spec)
    k = engine.rent("edge")
    assert engine.state.cached[k].tolist()[:4] == [0.0, 1.0, 0.0, 0.0]


def test_a_scenario_without_a_world_has_no_set_up_delay() -> None:
    data = tiny_world()
    data["workload"]["classes"][0] = {
        key: v
        for key, v in data["workload"]["classes"][0].items()
        if key not in ("containers", "model_mb", "data_items", "data_in_mb", "data_out_mb")
    }
    spec = spec_from_dict(data)
    assert build_world(spec)[0].shape == (0, 0)
    result = Engine(spec).run()
    assert float(np.max(result.jobs["setup_s"].to_numpy())) == 0.0
    assert "mean_setup_s" not in result.summary and "score" not in result.summary


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d["workload"]["classes"][0]["containers"][0].update(images=["nope"]),
         "workload.classes.0.containers.0.images.0"),
        (lambda d: d["workload"]["classes"][0].update(data_items=["nope"]),
         "workload.classes.0.data_items.0"),
        (lambda d: d["cluster"]["node_types"][1].update(cached=["nope"]),
         "cluster.node_types.1.cached.0"),
        (lambda d: d["world"]["images"].append({"name": "weights", "size_mb": 1}),
         "world.data_items.0.name"),
        (lambda d: d.update(metrics={"score": {"bounds": {"nope": {}}}}),
         "metrics.score.bounds.nope"),
        (lambda d: d["world"].update(goodput=0), "world.goodput"),
        (lambda d: d["cluster"]["node_types"][0].update(registry_mbps=-1),
         "cluster.node_types.0.registry_mbps"),
        (lambda d: d["workload"]["classes"][0].update(data_in_mb=-1),
         "workload.classes.0.data_in_mb"),
    ],
)  # fmt: skip
def test_bad_world_fields_name_the_field(change: Any, field: str) -> None:
    data = copy.deepcopy(tiny_world())
    change(data)
    with pytest.raises(ScenarioError, match=field.replace(".", r"\.")):
        spec_from_dict(data)


def small_faas(placer: str = "scoring", **kw: Any) -> dict[str, Any]:
    args: dict[str, Any] = dict(nodes=60, rate_per_s=4.0, time_s=40.0, seed=3, timeout_s=10.0)
    args.update(kw)
    return faas.scenario_dict("hybrid_balanced", placer=placer, **args)


def test_first_fit_pays_set_up_delays_and_reports_the_score() -> None:
    """Acceptance (issue 10): first-fit on the faas family pays set-up delays; compare
    reports `score` for first-fit and scoring."""
    spec = spec_from_dict(small_faas())
    rows = compare_policies(spec, [{"placer": "first-fit"}, {"placer": "scoring"}])
    for row in rows:
        s = row["summary"]
        assert 0.0 <= s["score"] <= 1.0 and s["mean_setup_s"] > 0.0
        assert set(s["per_function"]) == set(faas.FUNCTIONS)
    text = table_text(rows, "mean_response_time_s")
    assert "score" in text.splitlines()[0] and "mean_setup_s" in text.splitlines()[0]
    ff = Engine(with_policies(spec, placer="first-fit")).run()
    assert float(np.mean(ff.jobs["setup_s"].to_numpy())) > 0.0


def test_old_scoring_params_migrate_with_a_warning_naming_the_new_fields() -> None:
    new = small_faas()
    old = copy.deepcopy(new)
    params = old["scheduler"]["placer"]["params"]
    params["pods"] = {name: faas.pod_dict(name) for name in faas.FUNCTIONS}
    params["goodput"] = old.pop("world")["goodput"]
    params["score_bounds"] = old.pop("metrics")["score"]["bounds"]
    for c in old["workload"]["classes"]:
        for key in ("containers", "capabilities", "data_in_mb", "data_out_mb", "model_mb"):
            c.pop(key, None)
    for t in faas.node_type_dicts():  # bandwidths as the old labels, listed explicitly
        t["labels"]["bandwidth.registry_mbps"] = str(t.pop("registry_mbps"))
        t["labels"]["bandwidth.storage_mbps"] = str(t.pop("storage_mbps"))
        old["cluster"].setdefault("node_types", []).append(t)
    groups = faas.expand_cluster_generator("hybrid_balanced", 60, 3)[1]
    old["cluster"]["nodes"] = groups
    del old["cluster"]["generator"]
    with pytest.warns(ScenarioDeprecationWarning) as caught:
        old_spec = spec_from_dict(old)
    text = " ".join(str(w.message) for w in caught)
    for name in ("world.images", "containers", "world.goodput", "metrics.score.bounds"):
        assert name in text
    assert "registry_mbps" in text
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScenarioDeprecationWarning)
        new_spec = spec_from_dict(new)
    assert old_spec.world == new_spec.world and old_spec.metrics == new_spec.metrics
    a, b = Engine(old_spec).run(), Engine(new_spec).run()
    assert equal_tables(a, b) and a.summary["score"] == b.summary["score"]


def test_with_policies_keeps_the_scenario_params_when_the_name_is_repeated() -> None:
    data = small_faas()
    data["scheduler"]["placer"]["params"] = {"weights": {"MostAllocated": 0.0}}
    spec = spec_from_dict(data)
    same = with_policies(spec, placer="scoring")
    assert same.scheduler.placer.params == {"weights": {"MostAllocated": 0.0}}
    tuned = with_policies(spec, placer="scoring:percentage_of_nodes_to_score=50")
    assert tuned.scheduler.placer.params == {
        "weights": {"MostAllocated": 0.0},
        "percentage_of_nodes_to_score": 50,
    }
    assert with_policies(spec, placer="first-fit").scheduler.placer.params == {}
    assert equal_tables(Engine(same).run(), Engine(spec).run())


def test_score_bounds_default_from_the_class() -> None:
    data = small_faas()
    data["metrics"] = {"score": {"bounds": {"resnet50-training": {"wait_s": [0, 5]}}}}
    spec = spec_from_dict(data)
    assert spec.metrics.score is not None
    b = spec.metrics.score.bounds["resnet50-training"]
    assert b.wait_s == (0.0, 5.0) and b.exec_s[0] == 0.0 and math.isfinite(b.exec_s[1])
