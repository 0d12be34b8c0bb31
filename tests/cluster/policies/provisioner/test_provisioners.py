"""The learning provisioners on the workflow family: grouped's manual sizes, VPA's
recommender, and the predictive provisioner end to end (small profiling, few trials)."""

from __future__ import annotations

import pytest

from cluster.engine import Engine
from scenarios.errors import ScenarioError
from scenarios.loader import spec_from_dict
from scenarios.workflow import TASKS, workflow_scenario

pytest.importorskip("sklearn")


def run(provisioner: str, **params: object) -> dict[str, object]:
    spec = spec_from_dict(
        workflow_scenario(runs=60, seed=5, provisioner=provisioner, provisioner_params=params)
    )
    engine = Engine(spec)
    return {"summary": engine.run().summary, "engine": engine}


def test_grouped_gives_light_5_moderate_20_and_one_core_to_non_parallel_tasks() -> None:
    engine = run("grouped", profiling_runs=200)["engine"]
    sizing = engine.provisioner.sizing
    for task in TASKS:
        t = sizing.tasks[task.name]
        assert t.cluster == (task.cluster if task.cluster in ("light", "moderate") else "heavy")
        assert t.memory_gb == {"light": 5.0, "moderate": 20.0}.get(t.cluster, task.static[1])
        assert t.cpu == (task.static[0] if task.parallel else 1.0)


def test_vpa_recommends_p90_and_lifts_by_its_oom_rule() -> None:
    out = run("vpa", profiling_runs=200)
    sizing = out["engine"].provisioner.sizing
    assert all(t.memory_gb >= 250 / 1024 for t in sizing.tasks.values())
    assert out["engine"].provisioner.lift_rule().multiplier == pytest.approx(1.2)


def test_predictive_saves_most_memory_without_failures() -> None:
    static = run("static")["summary"]
    out = run("predictive", profiling_runs=400, trials=4)
    s = out["summary"]
    assert s["failed_jobs"] == 0
    assert s["reserved_memory_gb_h"] < 0.3 * static["reserved_memory_gb_h"]
    assert s["reserved_cpu_core_h"] < 0.5 * static["reserved_cpu_core_h"]
    heavy = [t for t in out["engine"].provisioner.sizing.tasks.values() if t.heavy]
    assert len(heavy) == 2 and all(t.heavy.accuracy > 0.8 for t in heavy)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"retry_limit": -1}, "retry_limit"),
        ({"lift": "triple"}, "lift must be one of"),
        ({"model": "/nonexistent/sizing.json"}, "cannot be read"),
        ({"sampler": "cmaes"}, "sampler"),
        ({"lift": "double", "lift_factor": 1.0}, "must grow the request"),
    ],
)
def test_bad_provisioner_params_are_scenario_errors(params: dict[str, object], match: str) -> None:
    data = workflow_scenario(runs=5, provisioner="predictive", provisioner_params=params)
    with pytest.raises(ScenarioError, match=match):
        spec_from_dict(data)
