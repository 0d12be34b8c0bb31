"""Pennyworth's policies on the engine: a plan executed on rented VMs costs exactly what
eq. 1 says when run times equal their estimates; VMs are rented, run their ordered jobs
one at a time and are released; online batches are planned one after another."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.policies import registry
from clusteremu.cluster.policies.pennyworth.astar import solve
from clusteremu.cluster.policies.pennyworth.placers import PlanPlacer
from clusteremu.cluster.policies.pennyworth.plan import plan_cost
from clusteremu.cluster.policies.pennyworth.problem import problem_from_spec
from clusteremu.scenarios.errors import ScenarioError
from clusteremu.scenarios.loader import read_yaml, spec_from_dict

SHIPPED = Path(__file__).resolve().parents[4] / "scenarios"

SLOS: dict[str, dict[str, Any]] = {
    "max": {"kind": "max", "deadline_s": 600, "penalty_per_s": 0.001},
    "rtpt": {"kind": "rtpt", "factor": 2.5, "penalty_per_s": 0.001},
    "avg": {"kind": "avg", "target_s": 400, "penalty_per_s": 0.002},
    "percentile": {"kind": "percentile", "percentile": 75, "target_s": 500, "penalty_per_s": 0.002},
}


def deterministic_batch(
    slo: dict[str, Any], counts: list[int], placer: str = "pennyworth", **params: Any
) -> dict[str, Any]:
    """The shipped pennyworth-max scenario with run times fixed at their means (so that the
    emulated run is the plan), a batch of `counts` jobs per task, and `slo`."""
    data = read_yaml(SHIPPED / "pennyworth-max.yaml")
    classes = data["workload"]["classes"][: len(counts)]
    for c, n in zip(classes, counts, strict=True):
        c["arrival"] = {"kind": "batch", "count": n, "at_s": 0.0}
        for name, dist in c["runtime_by_node_type"].items():
            mean = math.exp(dist["mu"] + dist["sigma"] ** 2 / 2)
            c["runtime_by_node_type"][name] = {"kind": "deterministic", "value_s": mean}
    data["workload"]["classes"] = classes
    data["stop"] = {"jobs": sum(counts)}
    data["slo"] = slo
    data["scheduler"] = {"placer": {"name": placer, "params": params}}
    return data


@pytest.mark.parametrize("kind", list(SLOS))
@pytest.mark.parametrize("startup", [False, True])
def test_an_executed_plan_costs_what_eq_1_says(kind: str, startup: bool) -> None:
    """Run times at their means: the run's money plus SLO loss (`total_usd`) equals the
    plan's eq. 1 cost, and its `slo_loss_usd` the plan's loss, for every placer."""
    slo = {**SLOS[kind], "count_startup_delay": startup}
    for placer in ("pennyworth", "ffd-cheapest", "vm-per-job", "fixed-pool"):
        spec = spec_from_dict(deterministic_batch(slo, [2, 1, 2, 1]), "test")
        engine = Engine(spec)
        policy = engine.placer
        assert isinstance(policy, PlanPlacer) and engine.scaler is policy
        summary = engine.run().summary
        problem = problem_from_spec(spec, spec.slo)
        cost, loss = plan_cost(problem, policy.make_plan(problem))
        assert summary["jobs_completed"] == 6
        assert summary["total_usd"] == pytest.approx(cost, rel=1e-9, abs=1e-12), placer
        assert summary["slo_loss_usd"] == pytest.approx(loss, rel=1e-9, abs=1e-12), placer
        assert summary["total_usd"] == pytest.approx(
            summary["cost_usd"] + summary["slo_loss_usd"], rel=1e-12
        )


@pytest.mark.parametrize("kind", list(SLOS))
def test_the_optimal_placer_costs_no_more_than_any_baseline(kind: str) -> None:
    totals = {}
    for placer in ("pennyworth", "ffd-cheapest", "vm-per-job", "fixed-pool"):
        spec = spec_from_dict(deterministic_batch(SLOS[kind], [2, 2, 1, 2], placer), "test")
        totals[placer] = Engine(spec).run().summary["total_usd"]
    spec = spec_from_dict(deterministic_batch(SLOS[kind], [2, 2, 1, 2]), "test")
    optimum = solve(problem_from_spec(spec, spec.slo)).cost
    assert totals["pennyworth"] == pytest.approx(optimum, rel=1e-9)
    assert all(totals["pennyworth"] <= v + 1e-12 for v in totals.values()), totals


def test_vms_run_one_job_at_a_time_in_plan_order_and_are_released() -> None:
    spec = spec_from_dict(deterministic_batch(SLOS["max"], [3, 2, 2]), "test")
    engine = Engine(spec)
    run = engine.run()
    table = run.jobs.to_pandas()
    for _, jobs in table.groupby("node", observed=True):
        jobs = jobs.sort_values("start_s")
        # One at a time, back to back from the moment the VM is up.
        assert (jobs["start_s"].to_numpy()[1:] >= jobs["end_s"].to_numpy()[:-1] - 1e-9).all()
        assert jobs["start_s"].iloc[0] == pytest.approx(120.0)
        gaps = jobs["start_s"].to_numpy()[1:] - jobs["end_s"].to_numpy()[:-1]
        assert np.allclose(gaps, 0.0)
    state = engine.snapshot().state
    released = state.nodes_f[13, : run.summary["nodes_rented"]]  # NF.RELEASED_AT
    assert np.isfinite(released).all()
    assert run.summary["startup_usd"] == pytest.approx(table["startup_usd"].sum())
    assert run.summary["operating_usd"] == pytest.approx(table["operating_usd"].sum())


def test_online_batches_are_planned_one_after_another() -> None:
    data = deterministic_batch(SLOS["max"], [2, 2])
    data["workload"]["classes"][1]["arrival"] = {"kind": "batch", "count": 2, "at_s": 1000.0}
    spec = spec_from_dict(data, "test")
    engine = Engine(spec)
    summary = engine.run().summary
    assert summary["jobs_completed"] == 4
    assert engine.placer.describe()["plans"] == 2


@pytest.mark.parametrize("kind", ["avg", "percentile"])
def test_several_batches_are_each_charged_their_own_plan(kind: str) -> None:
    """Three batches (at 0, 1,000 and 2,000 s), each planned on its own (one VM each, so
    that they run late): the run's SLO loss and total are the sums of the three plans' eq. 1
    losses and costs (a batch-wide SLO judged over all jobs at once charges less)."""
    slo = {**SLOS[kind], "target_s": 300}
    counts = [3, 2, 3]
    data = deterministic_batch(slo, counts, "fixed-pool", vms=1)
    for b, c in enumerate(data["workload"]["classes"]):
        c["arrival"]["at_s"] = 1000.0 * b
    run = Engine(spec_from_dict(data, "test")).run()
    costs, losses = [], []
    for b in range(len(counts)):
        alone = [n if i == b else 0 for i, n in enumerate(counts)]
        one = deterministic_batch(slo, alone, "fixed-pool", vms=1)
        one["workload"]["classes"] = [one["workload"]["classes"][b]]
        spec = spec_from_dict(one, "test")
        problem = problem_from_spec(spec, spec.slo)
        cost, loss = plan_cost(problem, Engine(spec).placer.make_plan(problem))
        costs.append(cost)
        losses.append(loss)
    assert sum(losses) > 0
    assert run.summary["slo_loss_usd"] == pytest.approx(sum(losses), rel=1e-9)
    assert run.summary["total_usd"] == pytest.approx(sum(costs), rel=1e-9)


def test_placer_errors_name_the_field() -> None:
    data = deterministic_batch(SLOS["max"], [1, 1], "fixed-pool", vms=0)
    with pytest.raises(ScenarioError, match=r"scheduler\.placer"):
        spec_from_dict(data, "test")
    with pytest.raises(ValueError, match="vms must be an integer"):
        registry.create("placer", "fixed-pool", vms=0)
    with pytest.raises(ValueError, match=r"params\.guard: expected bool, got 'yes'"):
        registry.create("placer", "pennyworth", guard="yes")


def test_a_tree_file_is_read_relative_to_the_scenario(tmp_path: Path) -> None:
    data = deterministic_batch(SLOS["max"], [1, 1], tree="trees/missing.json")
    with pytest.raises(ScenarioError, match="missing.json"):
        spec_from_dict(data, "test", base_dir=tmp_path)
    tree_file = tmp_path / "trees" / "bad.json"
    tree_file.parent.mkdir()
    tree_file.write_text('{"format": "clusteremu.rad-tree", "version": 1, "tree": {')
    data = deterministic_batch(SLOS["max"], [1, 1])
    # The contract's form: the tree beside the placer's name.
    data["scheduler"] = {"placer": {"name": "pennyworth", "tree": "trees/bad.json"}}
    with pytest.raises(ScenarioError, match="truncated"):
        spec_from_dict(data, "test", base_dir=tmp_path)
    data["scheduler"]["placer"]["params"] = {"tree": "other.json"}
    with pytest.raises(ScenarioError, match="both beside the name and in params"):
        spec_from_dict(data, "test", base_dir=tmp_path)


def test_the_rules_take_a_trees_margins_not_its_decisions(tmp_path: Path) -> None:
    """`margins_from`: the tree's safety_z and slack (the benchmarks' ablation), a given
    margin overriding the tree's; the path is relative to the scenario's folder."""
    from clusteremu.cluster.policies.pennyworth.tree import RadTree

    tree_file = SHIPPED / "policies" / "pennyworth-max.json"
    tree = RadTree.load(tree_file)
    rules = registry.create("placer", "pennyworth-rules", margins_from=str(tree_file))
    assert (rules.safety_z, rules.slack) == (tree.safety_z, tree.slack)
    assert registry.create("placer", "pennyworth-rules").describe()["slack"] == 0.0
    given = registry.create("placer", "pennyworth-rules", margins_from=str(tree_file), slack=0.05)
    assert (given.safety_z, given.slack) == (tree.safety_z, 0.05)
    data = deterministic_batch(SLOS["max"], [1, 1], "pennyworth-rules")
    data["scheduler"]["placer"]["params"] = {"margins_from": "trees/missing.json"}
    with pytest.raises(ScenarioError, match=r"trees/missing\.json"):
        spec_from_dict(data, "test", base_dir=tmp_path)
