"""The ML-workflow family (the thesis; docs/provisioner.md): Table 4's groups, the usage
clusters, features, seeded draws, and the profiling table (Table 3's columns)."""

from __future__ import annotations

import numpy as np
import pytest

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.workflow import PROFILE_COLUMNS, TASKS, profiling_table, workflow_scenario
from clusteremu.scenarios.errors import ScenarioError
from clusteremu.scenarios.loader import load_scenario, spec_from_dict


def test_table_4_groups_and_totals() -> None:
    groups = [t.group for t in TASKS]
    assert len(TASKS) == 27
    assert {g: groups.count(g) for g in set(groups)} == {
        "normal": 20,
        "parallel": 4,
        "memory-intensive": 2,
        "compute-intensive": 1,
    }
    assert sum(t.static[1] for t in TASKS) == 1520.0  # GB per run (Table 13)
    assert sum(t.static[0] for t in TASKS) == 132.0  # cores per run
    clusters = [t.cluster for t in TASKS]
    assert clusters.count("light") == 17 and clusters.count("moderate") == 8


def test_usages_follow_the_thesis_shapes_and_are_seeded() -> None:
    spec = spec_from_dict(workflow_scenario(runs=400))
    a = Engine(spec).jobs
    b = Engine(spec).jobs
    assert a.usage is not None and b.usage is not None
    assert np.array_equal(a.usage.memory_gb, b.usage.memory_gb)
    names = [c.name for c in spec.classes]
    for c, task in enumerate(TASKS):
        mem = a.usage.memory_gb[a.class_index == c]
        assert np.median(mem) < 4.0, task.name  # every task's median is below 4 GB
        if task.cluster == "light":
            assert mem.max() <= 5.0
        elif task.cluster == "moderate":
            assert 5.0 < mem.max() <= 20.0
        else:
            assert mem.max() > 20.0 and mem.max() <= task.static[1]
        busy = a.usage.cpu[a.class_index == c]
        assert busy.max() <= (task.static[0] if task.parallel else 1.0), names[c]
    # Job i of every task belongs to run i and shares its inputs.
    run = a.features["run"]
    for key in ("region", "products", "days_left"):
        per_run = {}
        for r, v in zip(run.tolist(), a.features[key].tolist(), strict=True):
            assert per_run.setdefault(r, v) == v
    # The heavy tasks grow with products x days left.
    heavy = [c for c, t in enumerate(TASKS) if t.cluster == "heavy1"][0]
    mine = a.class_index == heavy
    workload = a.features["products"][mine] * (a.features["days_left"][mine] + 1)
    assert np.corrcoef(np.log(workload), np.log(a.usage.memory_gb[mine]))[0, 1] > 0.8


def test_profiling_table_has_table_3_columns() -> None:
    spec = spec_from_dict(workflow_scenario(runs=20))
    engine = Engine(spec)
    result = engine.run()
    table = profiling_table(result.jobs, engine.jobs.features)
    assert tuple(table.column_names) == PROFILE_COLUMNS
    assert table.num_rows == 27 * 20
    assert table.column("memory_request").to_pylist()[:1] == [20.0]
    assert min(table.column("duration").to_pylist()) > 0


def test_the_shipped_scenario_loads() -> None:
    spec = load_scenario("ml-workflow")
    assert spec.usage is not None and spec.usage.model == "ml-workflow"
    assert spec.scheduler.provisioner.name == "predictive"


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"products": [0, 10]}, "products"),
        ({"colour": 1}, "unknown params"),
        ({"heavy_noise_sigma": -0.1}, "heavy_noise_sigma must be a number in"),
        ({"heavy_noise_sigma": "wide"}, "heavy_noise_sigma must be a number in"),
        ({"light_cap_gb": 0}, "light_cap_gb must be a number > 0"),
        ({"moderate_cap_gb": True}, "moderate_cap_gb must be a number > 0"),
        ({"moderate_spike_gb": [19, 4]}, "moderate_spike_gb must be [min, max]"),
    ],
)
def test_bad_usage_params_name_the_field(params: dict[str, object], match: str) -> None:
    data = workflow_scenario(runs=5)
    data["workload"]["usage"]["params"] = params
    with pytest.raises(ScenarioError, match=r"workload\.usage\.params") as caught:
        spec_from_dict(data)
    assert match in str(caught.value)


def usages(**params: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Memory peaks, class index and log workload of 300 workflow runs (seed 2)."""
    data = workflow_scenario(runs=300)
    data["workload"]["usage"]["params"] = {"products": [20, 2000], **params}
    jobs = Engine(spec_from_dict(data)).jobs
    assert jobs.usage is not None
    workload = np.log(jobs.features["products"] * (jobs.features["days_left"] + 1))
    return jobs.usage.memory_gb, jobs.class_index, workload


def residual_sd(mem: np.ndarray, workload: np.ndarray, region: np.ndarray) -> float:
    """SD of log(memory - 1 GB) left after a least-squares fit on the inputs."""
    x = np.column_stack([workload] + [(region == r).astype(float) for r in range(4)])
    y = np.log(mem - 1.0)
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    return float(np.std(y - x @ coef))


def test_heavy_noise_sigma_is_variance_the_inputs_cannot_explain() -> None:
    heavy = [c for c, t in enumerate(TASKS) if t.cluster == "heavy1"][0]
    for sigma in (0.15, 0.5):
        data = workflow_scenario(runs=300)
        data["workload"]["usage"]["params"] = {"heavy_noise_sigma": sigma}
        jobs = Engine(spec_from_dict(data)).jobs
        assert jobs.usage is not None
        mine = jobs.class_index == heavy
        workload = np.log(jobs.features["products"] * (jobs.features["days_left"] + 1))
        sd = residual_sd(jobs.usage.memory_gb[mine], workload[mine], jobs.features["region"][mine])
        assert sd == pytest.approx(sigma, rel=0.15)
    # the default is sigma 0.15: the same draws
    assert np.array_equal(usages()[0], usages(heavy_noise_sigma=0.15)[0])


def test_group_caps_are_parameters_and_may_exceed_the_manual_groups() -> None:
    mem, cls, _ = usages()
    light = np.isin(cls, [c for c, t in enumerate(TASKS) if t.cluster == "light"])
    moderate = np.isin(cls, [c for c, t in enumerate(TASKS) if t.cluster == "moderate"])
    assert mem[light].max() <= 4.8 and mem[moderate].max() <= 19.0
    mem, _, _ = usages(light_cap_gb=None, moderate_cap_gb=None, moderate_spike_gb=[4, 40])
    assert mem[light].max() > 5.0 and mem[moderate].max() > 20.0
