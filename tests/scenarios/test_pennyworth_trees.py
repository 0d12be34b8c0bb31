"""The shipped Pennyworth scenarios run their shipped RAD-trees (`scenarios/policies/`,
written by `clusteremu synthesize` with its defaults): each tree loads (its digest
checks), knows exactly the scenario's tasks and VM types, runs on the emulator, and -
judged by the evaluation protocol on batches of 32 jobs with actual run times, drawn
from a split synthesize never uses - learned something: its plans cost less than those
of its ablation (`pennyworth-rules`: the same feasibility rules and margin, no
tree), with a paired 95% interval that excludes a tie, and no more than ffd-cheapest's.
The same check fails for an empty tree and for a tree with shuffled labels. It holds for
all four SLOs."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pytest

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.policies.pennyworth.problem import checked_problem
from clusteremu.cluster.policies.pennyworth.tree import RadTree
from clusteremu.scenarios.loader import SHIPPED_DIR, load_scenario, read_yaml
from clusteremu.tuners.pennyworth import TRAIN, batch_counts
from clusteremu.tuners.pennyworth_eval import (
    ActualBatch,
    baseline_policies,
    batch_key,
    costs_of,
    draw_batches,
    empty_tree,
    rules_policy,
    shuffled_tree,
    tree_policy,
)
from clusteremu.tuners.protocol import learned_something

KINDS = ("max", "rtpt", "avg", "percentile")
#: Batches of the check: a split of seed 0 that synthesize (train / validation / test)
#: never draws from, disjoint from the training sets by construction and by check.
SPLIT, BATCHES = "shipped-tree-check", 120


def shipped_tree(kind: str) -> Path:
    placer = read_yaml(SHIPPED_DIR / f"pennyworth-{kind}.yaml")["scheduler"]["placer"]
    assert placer["name"] == "pennyworth"
    return SHIPPED_DIR / placer["tree"]


@cache
def check_batches(kind: str) -> tuple[ActualBatch, ...]:
    spec = load_scenario(f"pennyworth-{kind}")
    base = checked_problem(spec, "test", counts={})
    tree = RadTree.load(shipped_tree(kind))
    sets = int(tree.info["batches_used"])
    jobs = int(tree.info["jobs_per_set"])
    train = {batch_key(batch_counts(10, jobs, 0, TRAIN, i), None) for i in range(sets)}
    batches, overlap = draw_batches(spec, base, 0, SPLIT, BATCHES, 32, train)
    assert overlap.count == 0 and len(batches) == BATCHES
    return tuple(batches)


@pytest.mark.parametrize("kind", KINDS)
def test_the_shipped_tree_matches_its_scenario(kind: str) -> None:
    spec = load_scenario(f"pennyworth-{kind}")
    tree = RadTree.load(shipped_tree(kind))
    assert tree.task_names == tuple(c.name for c in spec.classes)
    assert tree.type_names == tuple(t.name for t in spec.node_types if t.rentable)
    assert tree.info["slo"] == kind
    assert tree.slack > 0 or tree.safety_z > 0  # a margin for the run times' spread


@pytest.mark.parametrize("kind", KINDS)
def test_the_shipped_tree_learned_something_and_an_empty_or_shuffled_one_did_not(
    kind: str,
) -> None:
    tree = RadTree.load(shipped_tree(kind))
    z, slack = tree.safety_z, tree.slack
    batches = check_batches(kind)
    policies = {
        "tree": tree_policy(tree, z, slack),
        "empty": tree_policy(empty_tree(tree), z, slack),
        "shuffled": tree_policy(shuffled_tree(tree), z, slack),
        "rules": rules_policy(z, slack),
        "ffd-cheapest": baseline_policies()["ffd-cheapest"],
    }
    costs = costs_of(policies, batches)
    np.testing.assert_allclose(costs["empty"], costs["rules"], rtol=1e-12)
    verdict = learned_something(costs["tree"], costs["rules"], names=("tree", "rules"))
    assert verdict.holds, verdict.explain()
    assert float(costs["tree"].mean()) <= float(costs["ffd-cheapest"].mean())
    for name in ("empty", "shuffled"):
        other = learned_something(costs[name], costs["rules"], names=(name, "rules"))
        assert not other.holds, other.explain()


@pytest.mark.parametrize("kind", KINDS)
def test_the_shipped_scenario_runs_its_tree(kind: str) -> None:
    spec = load_scenario(f"pennyworth-{kind}")
    engine = Engine(spec)
    summary = engine.run().summary
    assert summary["jobs_completed"] == sum(c.arrival.count for c in spec.classes)
    assert engine.placer.describe()["tree"] is not None
    assert summary["total_usd"] > 0
