"""Tuned weights judged out of sample (`tuners.out_of_sample`): fresh seeds from the
protocol's own split, never one the search ran on; the Fixed weights judged as if tuned
score exactly 0 and learned nothing (the check a trivial tuner must fail)."""

from __future__ import annotations

import numpy as np
import pytest

from tuners.domains import FIXED, sample_configs
from tuners.evaluate import evaluate, experiment_from_config
from tuners.out_of_sample import TEST_SPLIT, fresh_seeds, judge, search_seed
from tuners.protocol import instance_seed


def test_fresh_seeds_come_from_the_test_split_and_skip_the_search_seeds() -> None:
    first = [instance_seed(7, TEST_SPLIT, i) for i in range(4)]
    seeds, skipped = fresh_seeds(7, 3, set())
    assert seeds == first[:3] and skipped == 0
    seeds, skipped = fresh_seeds(7, 3, {first[1]})  # the search ran on the second one
    assert seeds == [first[0], first[2], first[3]] and skipped == 1
    assert fresh_seeds(8, 3, set())[0] != first[:3]  # another tuning seed, other seeds


@pytest.fixture(scope="module")
def experiments() -> list:
    return [experiment_from_config(c) for c in sample_configs("tiny", 3, 0)]


def test_the_fixed_weights_judged_as_tuned_gain_exactly_nothing(experiments: list) -> None:
    judged = judge(experiments, {"fixed": [tuple(FIXED)] * len(experiments)}, seed=0, count=2)
    summary = judged["fixed"].summary()
    assert summary["mean_improvement_over_fixed"] == 0.0
    assert not summary["learned_something"]
    assert not {search_seed(e) for e in experiments} & set(summary["test_seeds"])


def test_other_weights_are_run_on_the_fresh_seeds_not_the_searched_one(experiments: list) -> None:
    weights = (0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0)
    judged = judge(experiments, {"mine": [weights] * len(experiments)}, seed=0, count=2)["mine"]
    assert judged.best.shape == judged.fixed.shape == (len(experiments), 2)
    assert np.isfinite(judged.improvements()).all()
    # The Fixed score on the experiment's own seed is not one of the fresh-seed scores.
    own = [evaluate(e, FIXED).score for e in experiments]
    assert not np.isclose(judged.fixed, np.array(own)[:, None]).all(axis=1).any()
    assert judged.summary()["experiments"] == len(experiments)
