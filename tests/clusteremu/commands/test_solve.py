"""`clusteremu solve`: the JSON contract, cost as eq. 1 with the SLO loss, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from clusteremu.cli import main


def scenario(tmp_path: Path, **changes: object) -> Path:
    """Two tasks, three jobs, two VM types (small and large), a max SLO."""
    data: dict = {
        "name": "tiny",
        "stop": {"jobs": 3},
        "cluster": {
            "node_types": [
                {
                    "name": "small",
                    "cpu": 1,
                    "price_per_hour": 3.6,
                    "startup_cost": 0.5,
                    "startup_delay_s": 60,
                    "rentable": True,
                },
                {
                    "name": "large",
                    "cpu": 2,
                    "price_per_hour": 7.2,
                    "startup_cost": 1.0,
                    "startup_delay_s": 60,
                    "rentable": True,
                },
            ],
            "nodes": [],
        },
        "workload": {
            "classes": [
                {
                    "name": "a",
                    "arrival": {"kind": "batch", "count": 2},
                    "size": {"kind": "deterministic", "value_s": 1},
                    "runtime_by_node_type": {
                        "small": {"kind": "deterministic", "value_s": 100},
                        "large": {"kind": "deterministic", "value_s": 50},
                    },
                },
                {
                    "name": "b",
                    "arrival": {"kind": "batch", "count": 1},
                    "size": {"kind": "deterministic", "value_s": 1},
                    "runtime_by_node_type": {"small": {"kind": "deterministic", "value_s": 10}},
                },
            ]
        },
        "slo": {"kind": "max", "deadline_s": 1000, "penalty_per_s": 0.01},
    }
    for path, value in changes.items():
        node = data
        keys = path.split(".")
        for key in keys[:-1]:
            node = node[int(key)] if key.isdigit() else node[key]
        node[int(keys[-1]) if keys[-1].isdigit() else keys[-1]] = value
    out = tmp_path / "s.yaml"
    out.write_text(yaml.safe_dump(data))
    return out


def test_solve_json_contract_and_cost(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["solve", str(scenario(tmp_path)), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {
        "cost",
        "slo_loss_usd",
        "optimal",
        "lower_bound_usd",
        "knowledge",
        "seed",
        "vms",
    }
    assert out["optimal"] is True and out["knowledge"] == "mean"
    assert out["lower_bound_usd"] == pytest.approx(out["cost"])
    # Price 0.001 $/s small, 0.002 large. One small VM: 0.5 + 0.001 x 210 = 0.71; the
    # large runs a in 50 s for the same money but costs 1.0 to start: one small VM wins.
    assert out["cost"] == pytest.approx(0.71)
    assert out["slo_loss_usd"] == 0.0
    assert [vm["type"] for vm in out["vms"]] == ["small"]
    jobs = out["vms"][0]["jobs"]
    assert sorted(j["id"] for j in jobs) == [0, 1, 2]
    assert {j["id"]: j["class"] for j in jobs} == {0: "a", 1: "a", 2: "b"}
    assert all(j["run_s"] > 0 for j in jobs)


def test_a_tight_deadline_makes_the_loss_part_of_the_cost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = scenario(tmp_path, **{"slo": {"kind": "max", "deadline_s": 20, "penalty_per_s": 0.0001}})
    assert main(["solve", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["slo_loss_usd"] > 0
    assert out["cost"] > 0.71 - 1e-9


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"slo": {"kind": "max", "deadline_s": 10, "penalty_per_s": -1}}, "penalty_per_s"),
        ({"cluster.node_types.0.price_per_hour": 0}, "needs a price > 0"),
        (
            {
                "workload.classes.1.runtime_by_node_type": {
                    "medium": {"kind": "deterministic", "value_s": 5}
                }
            },
            "medium",
        ),
        ({"slo": {"kind": "percentile", "target_s": 10, "penalty_per_s": 1}}, "needs percentile"),
    ],
)
def test_bad_input_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], changes: dict, message: str
) -> None:
    assert main(["solve", str(scenario(tmp_path, **changes)), "--json"]) == 2
    assert message in capsys.readouterr().err


def test_a_task_with_no_run_time_on_any_type_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = scenario(tmp_path, **{"workload.classes.1.runtime_by_node_type": {}})
    assert main(["solve", str(path)]) == 2
    assert "run time per node type" in capsys.readouterr().err


def test_shipped_scenarios_solve(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["solve", "pennyworth-max", "--json", "--time-limit", "120"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert sum(len(vm["jobs"]) for vm in out["vms"]) == 32
    assert out["lower_bound_usd"] <= out["cost"] + 1e-12


def test_actual_knowledge_plans_the_run_times_of_the_same_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--knowledge actual --seed S` plans with the run times `clusteremu run --seed S`
    draws (common random numbers): every job's `run_s` is the engine's, the plan is no
    dearer than the means' plan priced on those run times, and another seed draws other
    run times."""
    from cluster.jobs import generate_jobs, replication_seed, runtime_table
    from scenarios.loader import load_scenario

    args = ["solve", "pennyworth-max", "--json", "--knowledge", "actual", "--time-limit", "120"]
    assert main([*args, "--seed", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["knowledge"] == "actual" and out["seed"] == 3
    spec = load_scenario("pennyworth-max", ["seed=3"])
    table = runtime_table(spec, generate_jobs(spec, replication_seed(spec, 0)))
    types = [t.name for t in spec.node_types]
    for vm in out["vms"]:
        for job in vm["jobs"]:
            assert job["run_s"] == pytest.approx(table[types.index(vm["type"]), job["id"]])
    assert sorted(j["id"] for vm in out["vms"] for j in vm["jobs"]) == list(range(32))
    assert main([*args, "--seed", "4"]) == 0
    other = json.loads(capsys.readouterr().out)
    assert other["cost"] != out["cost"]
