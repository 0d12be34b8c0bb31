"""The shipped Pennyworth scenarios run their shipped RAD-trees (`scenarios/policies/`,
written by `clusteremu synthesize`): each tree loads (its digest checks), knows exactly
the scenario's tasks and VM types, plans batches it never saw within 10% of the A*
optimum on average (issue 12's bar), and runs on the emulator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cluster.engine import Engine
from cluster.policies.pennyworth.astar import solve
from cluster.policies.pennyworth.plan import plan_cost
from cluster.policies.pennyworth.problem import problem_from_spec
from cluster.policies.pennyworth.tree import RadTree
from scenarios.loader import SHIPPED_DIR, load_scenario, read_yaml
from tuners.pennyworth import with_counts

KINDS = ("max", "rtpt", "avg", "percentile")
#: Held-out batches per SLO and their size (jobs): small enough for A* in a test.
BATCHES, JOBS = 12, 6


def shipped_tree(kind: str) -> Path:
    placer = read_yaml(SHIPPED_DIR / f"pennyworth-{kind}.yaml")["scheduler"]["placer"]
    assert placer["name"] == "pennyworth"
    return SHIPPED_DIR / placer["tree"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_shipped_tree_matches_its_scenario(kind: str) -> None:
    spec = load_scenario(f"pennyworth-{kind}")
    tree = RadTree.load(shipped_tree(kind))
    assert tree.task_names == tuple(c.name for c in spec.classes)
    assert tree.type_names == tuple(t.name for t in spec.node_types if t.rentable)
    assert tree.info["slo"] == kind


@pytest.mark.parametrize("kind", KINDS)
def test_the_shipped_tree_plans_unseen_batches_near_the_optimum(kind: str) -> None:
    """Mean cost / A* optimum <= 1.10 on batches drawn with seeds synthesize never uses
    (it draws from seed 0's stream); every job is planned exactly once."""
    spec = load_scenario(f"pennyworth-{kind}")
    base = problem_from_spec(spec, spec.slo)
    tree = RadTree.load(shipped_tree(kind))
    rng = np.random.default_rng(12_345)
    ratios = []
    for _ in range(BATCHES):
        counts = np.bincount(rng.integers(0, len(base.task_names), JOBS), minlength=8)
        p = with_counts(base, counts.tolist())
        plan = tree.plan(p)
        planned = np.bincount([t for _, ts in plan.vms for t in ts], minlength=8)
        assert planned.tolist() == counts.tolist()
        ratios.append(plan_cost(p, plan)[0] / solve(p).cost)
    assert float(np.mean(ratios)) <= 1.10, ratios


@pytest.mark.parametrize("kind", KINDS)
def test_the_shipped_scenario_runs_its_tree(kind: str) -> None:
    spec = load_scenario(f"pennyworth-{kind}")
    engine = Engine(spec)
    summary = engine.run().summary
    assert summary["jobs_completed"] == sum(c.arrival.count for c in spec.classes)
    assert engine.placer.describe()["tree"] is not None
    assert summary["total_usd"] > 0
