"""Table II's domains: seeded experiments within their ranges, the held-out domains
disjoint from training by construction (setups and workloads, for many seeds), weights,
the placer block."""

from __future__ import annotations

import collections
import dataclasses

import numpy as np
import pytest
import yaml

from clusteremu.scenarios.loader import spec_from_dict
from clusteremu.tuners import domains
from clusteremu.tuners.domains import (
    DOMAINS,
    FIXED,
    NEW_FUNCTIONS,
    WEIGHT_NAMES,
    check_disjoint,
    check_weights,
    parse_weights,
    placer_block,
    sample_config,
    sample_configs,
    static_features,
)


def test_fixed_weights_are_the_seeds() -> None:
    fixed = dict(zip(WEIGHT_NAMES, FIXED, strict=True))
    assert fixed["LeastAllocated"] == 0.0 and fixed["RequestedToCapacityRatio"] == 0.0
    assert sum(FIXED) == len(WEIGHT_NAMES) - 2


@pytest.mark.parametrize("name", ["train", "validation", "test", "paper-test"])
def test_experiments_stay_within_table_ii(name: str) -> None:
    d = DOMAINS[name]
    configs = sample_configs(name, 60, seed=3)
    for c in configs:
        assert c.setup in d.setups and set(c.functions) <= set(d.functions)
        assert d.nodes[0] <= c.nodes <= d.nodes[1]
        assert d.rate_per_s[0] <= c.rate_per_s <= d.rate_per_s[1]
        assert d.percentage[0] <= c.percentage <= d.percentage[1]
        assert d.scale_factor[0] <= c.scale_factor <= d.scale_factor[1]
        assert c.min_nodes <= c.max_nodes <= d.max_nodes[1]
    assert {c.setup for c in configs} == set(d.setups)
    if name == "train":
        assert all(len(c.functions) == 5 and c.rate_per_s == 10 for c in configs)
    else:
        assert any(len(c.functions) == 8 for c in configs)
        assert any(len(c.functions) == 3 for c in configs)


def test_paper_test_overlaps_training_as_published_and_test_never_does() -> None:
    """The paper's test domain keeps its stream (9 of its 20 experiments at seed 0 are on a
    training setup, the issue's count); the test domain has none, by construction."""
    train = set(DOMAINS["train"].setups)
    paper = sample_configs("paper-test", 20, seed=0)
    assert sum(c.setup in train for c in paper) == 9
    assert not any(c.setup in train for c in sample_configs("test", 200, seed=0))


@pytest.mark.parametrize("seed", range(25))
def test_held_out_domains_share_no_setup_and_no_workload_with_training(seed: int) -> None:
    """For many seeds: no validation or test experiment runs a training setup or a training
    workload (each has a function training never runs), and validation and test share no
    setup. Training draws its workloads from the paper's five functions only."""
    train = sample_configs("train", 40, seed)
    validation = sample_configs("validation", 40, seed)
    test = sample_configs("test", 40, seed)
    train_setups = {c.setup for c in train}
    train_functions = {f for c in train for f in c.functions}
    assert train_functions.isdisjoint(NEW_FUNCTIONS)
    for held in (validation, test):
        assert train_setups.isdisjoint({c.setup for c in held})
        assert all(set(c.functions) & set(NEW_FUNCTIONS) for c in held)
        assert not {c.functions for c in train} & {c.functions for c in held}
    assert {c.setup for c in validation}.isdisjoint({c.setup for c in test})


def test_the_disjointness_check_refuses_a_shared_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    check_disjoint()
    shared = dataclasses.replace(DOMAINS["test"], setups=("edge_sbc", "cloud_cpu"))
    monkeypatch.setitem(DOMAINS, "test", shared)
    with pytest.raises(ValueError, match="setup 'cloud_cpu' is in both 'train' and 'test'"):
        check_disjoint()
    anything = dataclasses.replace(DOMAINS["test"], setups=("edge_sbc",), new_functions=())
    monkeypatch.setitem(DOMAINS, "test", anything)
    with pytest.raises(ValueError, match="workloads may be 'train' workloads"):
        check_disjoint()


def test_domain_clusters_are_sampled_so_a_new_seed_is_a_new_cluster() -> None:
    """A domain's cluster is a seeded multinomial over its setup's device proportions: the
    same configuration on another seed has other device counts (``tiny`` keeps the exact
    apportionment, only the node order seeded)."""
    c = sample_config("test", 0, 0)
    assert c.cluster_method == "sample"
    counts = []
    for seed in (c.seed, c.seed + 1):
        spec = spec_from_dict(dataclasses.replace(c, seed=seed).scenario())
        counts.append(sorted(collections.Counter(spec.nodes).items()))
    assert counts[0] != counts[1]
    assert sample_config("tiny", 0, 0).cluster_method == "exact"


def test_experiment_i_does_not_depend_on_how_many_are_drawn() -> None:
    assert sample_configs("test", 3, 9)[2] == sample_configs("test", 10, 9)[2]
    assert sample_config("test", 9, 2) != sample_config("test", 10, 2)


def test_a_configuration_builds_a_valid_scenario_with_its_options() -> None:
    c = sample_config("test", 1, 0)
    spec = spec_from_dict(c.scenario([0.5] * 8))
    params = spec.scheduler.placer.params
    assert params["replicas"] == {
        "min": c.min_nodes,
        "max": c.max_nodes,
        "scale_factor": c.scale_factor,
    }
    assert params["percentage_of_nodes_to_score"] == c.percentage
    assert len(spec.nodes) == c.nodes and [k.name for k in spec.classes] == list(c.functions)
    f = static_features(spec)
    assert f.shape == (len(domains.STATIC_SPACE),) and f.min() >= 0.0 and f.max() <= 1.0


def test_bad_weights_are_refused_with_their_length_or_value() -> None:
    with pytest.raises(ValueError, match="expected 8 weights"):
        check_weights([1.0] * 7)
    with pytest.raises(ValueError, match="weight of LocalityType must be in"):
        check_weights([1, 1, 2, 1, 1, 0, 1, 0])
    with pytest.raises(ValueError, match="expected 8 numbers"):
        parse_weights("1,a,1,1,1,1,1,1")
    assert parse_weights("1,1,1,1,1,0,1,0") == FIXED


def test_the_placer_block_pastes_into_a_scenario() -> None:
    block = yaml.safe_load(placer_block([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]))
    data = sample_config("tiny", 0, 0).scenario()
    data["scheduler"] = block["scheduler"]
    spec = spec_from_dict(data)
    assert spec.scheduler.placer.params["weights"]["MostAllocated"] == pytest.approx(0.7)
    # all-zero weights have no ranking: they run as equal weights
    assert set(domains.weight_mapping(np.zeros(8)).values()) == {1.0}
