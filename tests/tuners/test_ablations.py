"""The RL tuner's ablations (`clusteremu.tuners.ablations`): the constant is the mean first
proposal over training-domain configurations drawn from a stream of their own (never the
judged ones), and a search cut to its first proposal keeps Fixed unless the proposal
scored strictly higher on the search seed."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from clusteremu.tuners.ablations import (
    better_of,
    constant_configs,
    constant_weights,
    first_proposal,
    first_proposal_best,
)
from clusteremu.tuners.domains import FIXED, sample_configs

OTHER = (0.5,) * 8


class StaticAgent:
    """Proposes the first eight static features; records what it was shown."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, Any]] = []

    def propose(self, static: Any, tried: Any, scores: Any) -> tuple[float, ...]:
        self.seen.append((list(tried), list(scores)))
        return tuple(float(x) for x in static[:8])


def test_the_constant_comes_from_its_own_stream_of_training_configurations() -> None:
    configs = constant_configs("train", 20, seed=0)
    assert configs == constant_configs("train", 20, seed=0)
    assert all(c.domain == "train" for c in configs) and len(configs) == 20
    judged = sample_configs("train", 20, 0)  # what `tune --domain train --seed 0` runs
    assert not {c.seed for c in configs} & {c.seed for c in judged}
    assert constant_configs("train", 20, seed=1) != configs
    with pytest.raises(ValueError, match="at least 1"):
        constant_configs("train", 0, seed=0)


def test_the_constant_is_the_mean_first_proposal_after_the_fixed_weights() -> None:
    from clusteremu.tuners.evaluate import experiment_from_config

    agent = StaticAgent()
    configs = constant_configs("tiny", 4, seed=0)
    weights = constant_weights(agent, configs)
    statics = np.array([experiment_from_config(c).static[:8] for c in configs])
    assert weights == pytest.approx(tuple(statics.mean(axis=0)))
    assert all(seen == ([FIXED], [1.0]) for seen in agent.seen)  # the first proposal
    assert first_proposal(agent, statics[0]) == pytest.approx(tuple(statics[0]))
    with pytest.raises(ValueError, match="no configurations"):
        constant_weights(agent, [])


def test_a_proposal_replaces_fixed_only_when_it_scored_strictly_higher() -> None:
    assert better_of(0.8, OTHER, 0.81) == OTHER
    assert better_of(0.8, OTHER, 0.8) == FIXED  # a tie keeps Fixed, as argmax does
    assert better_of(0.8, OTHER, float("nan")) == FIXED  # a failed run
    tried = [FIXED, OTHER, (0.9,) * 8]
    assert first_proposal_best(tried, [0.8, 0.9, 1.0]) == OTHER  # later proposals ignored
    assert first_proposal_best(tried, [0.8, 0.7, 1.0]) == FIXED
    assert first_proposal_best([FIXED], [0.8]) == FIXED
