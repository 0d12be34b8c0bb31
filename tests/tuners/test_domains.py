"""Table II's domains: seeded experiments within their ranges, weights, the placer block."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from clusteremu.scenarios.loader import spec_from_dict
from clusteremu.tuners import domains
from clusteremu.tuners.domains import (
    DOMAINS,
    FIXED,
    WEIGHT_NAMES,
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


@pytest.mark.parametrize("name", ["train", "test"])
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
    if name == "train":
        assert {c.setup for c in configs} == {"cloud_cpu", "cloud_gpu", "edge_cloudlet"}
        assert all(len(c.functions) == 5 and c.rate_per_s == 10 for c in configs)
    else:
        assert len({c.setup for c in configs}) >= 6
        assert any(len(c.functions) == 8 for c in configs)


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
