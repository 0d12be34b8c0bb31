"""Tuned weights judged out of sample (`clusteremu.tuners.out_of_sample`): fresh seeds from the
protocol's "test" split, never one the search ran on, scored once through the protocol;
the Fixed weights judged as if tuned score exactly 0 and learned nothing (the check a
trivial tuner must fail); in-sample and out-of-sample figures carry their own labels."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from clusteremu.cluster.io import to_json
from clusteremu.tuners.domains import FIXED, sample_configs
from clusteremu.tuners.evaluate import evaluate, experiment_from_config
from clusteremu.tuners.out_of_sample import (
    FIXED_POLICY,
    RANDOM_POLICY,
    TEST_SPLIT,
    fresh_seeds,
    judge,
    search_seed,
)
from clusteremu.tuners.protocol import Report, instance_seed
from clusteremu.tuners.tuning import ExperimentOutcome, TuningResult

OTHER = (0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0)


def test_fresh_seeds_come_from_the_test_split_and_skip_the_search_seeds() -> None:
    assert TEST_SPLIT == "test"
    first = [instance_seed(7, "test", i) for i in range(4)]
    seeds, skipped = fresh_seeds(7, 3, set())
    assert seeds == first[:3] and skipped == 0
    seeds, skipped = fresh_seeds(7, 3, {first[1]})  # the search ran on the second one
    assert seeds == [first[0], first[2], first[3]] and skipped == 1
    assert fresh_seeds(8, 3, set())[0] != first[:3]  # another tuning seed, other seeds


@pytest.fixture(scope="module")
def experiments() -> list:
    return [experiment_from_config(c) for c in sample_configs("tiny", 3, 0)]


def test_the_fixed_weights_judged_as_tuned_gain_exactly_nothing(experiments: list) -> None:
    n = len(experiments)
    judged = judge(experiments, {"fixed": [tuple(FIXED)] * n}, [OTHER] * n, seed=0, count=2)
    summary = judged.summary("fixed")
    assert summary["mean_improvement_over_fixed"] == 0.0
    assert not summary["learned_something"]
    assert not set(summary["search_seeds"]) & set(summary["test_seeds"])
    report = summary["report"]
    assert report["learned_something"]["ablation"] == FIXED_POLICY
    assert [r["policy"] for r in report["test"]["rows"]] == ["fixed", FIXED_POLICY, RANDOM_POLICY]
    assert report["test"]["rows"][1]["values"] == [0.0] * n  # Fixed: 0 by definition


def test_other_weights_are_run_on_the_fresh_seeds_not_the_searched_one(experiments: list) -> None:
    n = len(experiments)
    judged = judge(experiments, {"mine": [OTHER] * n}, [tuple(FIXED)] * n, seed=0, count=2)
    assert judged.scores["mine"].shape == judged.scores[FIXED_POLICY].shape == (n, 2)
    assert np.isfinite(judged.improvements("mine")).all()
    # The Fixed score on the experiment's own seed is not one of the fresh-seed scores.
    own = [evaluate(e, FIXED).score for e in experiments]
    assert not np.isclose(judged.scores[FIXED_POLICY], np.array(own)[:, None]).all(axis=1).any()
    summary = judged.summary("mine")
    assert summary["experiments"] == n and summary["seeds"] == 2
    # random search here returned Fixed: "vs random search" is the same interval as vs Fixed
    versus = summary["vs_random_search"]
    assert versus["mean_difference"] == pytest.approx(summary["mean_improvement_over_fixed"])


def test_a_fresh_seed_equal_to_a_search_seed_is_dropped_and_counted(experiments: list) -> None:
    """Disjoint by check: an experiment searched on the test split's first seed never sees
    that seed again out of sample; the protocol's overlap line counts the drop."""
    clash = instance_seed(0, TEST_SPLIT, 0)
    one = dataclasses.replace(experiments[0], data={**experiments[0].data, "seed": clash})
    judged = judge([one], {"fixed": [tuple(FIXED)]}, [tuple(FIXED)], seed=0, count=1)
    summary = judged.summary("fixed")
    assert summary["search_seeds"] == [clash] and clash not in summary["test_seeds"]
    assert summary["test_seeds"] == [instance_seed(0, TEST_SPLIT, 1)]
    assert summary["seeds_equal_to_a_search_seed_skipped"] == 1
    overlap = summary["report"]["protocol"]["overlaps"][0]
    assert overlap["count"] == 0 and overlap["dropped"] == 1


def test_the_json_labels_in_sample_and_out_of_sample_apart(experiments: list) -> None:
    """In sample: the search's own seeds, used for selection; out of sample: the test split
    scored once, in the protocol's report format (it reads back)."""
    n = len(experiments)
    outcomes = [
        ExperimentOutcome(e, "mine", [tuple(FIXED), OTHER], [0.5, 0.6]) for e in experiments
    ]
    result = TuningResult("mine", 2, outcomes, 1.0, [])
    judged = judge(experiments, {"mine": [OTHER] * n}, [OTHER] * n, seed=3, count=2)
    result.out_of_sample = judged.summary("mine")
    summary = result.summary()
    assert summary["label"].startswith("in sample") and "used for selection" in summary["label"]
    assert summary["mean_improvement_over_fixed"] == pytest.approx(0.2)  # in sample, kept
    fresh = summary["out_of_sample"]
    assert fresh["label"].startswith("out of sample") and fresh["test_split"] == "test"
    assert fresh["test_seeds"] == [instance_seed(3, "test", i) for i in range(2)]
    assert not set(fresh["test_seeds"]) & {search_seed(e) for e in experiments}
    report = Report.from_dict(fresh["report"])
    assert report.test.label == "test (held out, scored once)" and report.test.n == n
    assert report.test.method.mean.estimate == fresh["mean_improvement_over_fixed"]
    assert fresh["mean_improvement_over_fixed"] != pytest.approx(0.2)  # not the in-sample one
    # same weights as random search: a tie with it, never "better"
    assert fresh["vs_random_search"]["verdict"] == "tie"
    assert "NaN" not in to_json(summary)
