"""Tuned weights judged out of sample (`clusteremu.tuners.out_of_sample`): fresh seeds from the
protocol's "test" split, never one the search ran on, each a new cluster too, scored once
through the protocol; the Fixed weights judged as if tuned score exactly 0 and learned
nothing (the check a trivial tuner must fail); an RL tuner learned something only past its
untrained agent and its constant, not past Fixed alone; in-sample and out-of-sample figures
carry their own labels."""

from __future__ import annotations

import collections
import copy
import dataclasses
from typing import Any

import numpy as np
import pytest

from clusteremu.cluster.io import to_json
from clusteremu.scenarios.loader import spec_from_dict
from clusteremu.tuners import out_of_sample
from clusteremu.tuners.ablations import CONSTANT, FIRST_PROPOSAL, UNTRAINED
from clusteremu.tuners.domains import FIXED, sample_config, sample_configs
from clusteremu.tuners.evaluate import Experiment, evaluate, experiment_from_config
from clusteremu.tuners.out_of_sample import (
    FIXED_POLICY,
    RANDOM_POLICY,
    TEST_SPLIT,
    cluster_seed,
    fresh_seeds,
    judge,
    on_seed,
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
    assert summary["learned_against"] == [FIXED_POLICY, RANDOM_POLICY]
    assert summary["clusters_redrawn"] == n and summary["domain"] is None
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


def test_fresh_seeds_of_a_selection_domain_are_not_called_held_out(experiments: list) -> None:
    """The validation domain selects: its fresh-seed figures carry the domain's scope, never
    "held out"; the test domain's (and a scenario file's) keep the held-out label."""
    n = len(experiments)
    for domain, held in (("validation", False), ("train", False), ("test", True), (None, True)):
        judged = judge(
            experiments, {"mine": [OTHER] * n}, [OTHER] * n, seed=3, count=1, domain=domain
        )
        report = judged.reports["mine"]
        table = report.to_table()
        assert ("held out, scored once" in table) is held, (domain, table)
        summary = judged.summary("mine")
        assert summary["held_out"] is held and summary["reported_as"] == report.label
    assert out_of_sample.scope_of("validation").startswith("validation domain")


def test_a_fresh_seed_redraws_the_cluster_as_well_as_the_arrivals() -> None:
    """Out of sample is a new cluster of the same configuration, not the searched one with
    other arrivals: the generator's seed follows the fresh seed, and the node mix changes."""
    experiment = experiment_from_config(sample_config("test", 0, 0))
    assert cluster_seed(experiment) == search_seed(experiment)
    fresh = on_seed(experiment, 12345)
    assert fresh.data["seed"] == 12345 and cluster_seed(fresh) == 12345
    assert cluster_seed(experiment) == search_seed(experiment)  # the original is untouched
    before = collections.Counter(spec_from_dict(experiment.data).nodes)
    after = collections.Counter(spec_from_dict(fresh.data).nodes)
    assert sum(before.values()) == sum(after.values()) and before != after
    listed = dataclasses.replace(
        experiment, data={k: v for k, v in experiment.data.items() if k != "cluster"}
    )
    assert cluster_seed(listed) is None and "cluster" not in on_seed(listed, 7).data


def test_a_fresh_seed_equal_to_a_search_cluster_seed_is_dropped(experiments: list) -> None:
    clash = instance_seed(0, TEST_SPLIT, 0)
    data = copy.deepcopy(experiments[0].data)
    data["cluster"]["generator"]["seed"] = clash
    judged = judge(
        [dataclasses.replace(experiments[0], data=data)],
        {"fixed": [tuple(FIXED)]},
        [tuple(FIXED)],
        seed=0,
        count=1,
    )
    assert judged.seeds == (instance_seed(0, TEST_SPLIT, 1),) and judged.skipped == 1


# --- the RL tuner's ablations, on a synthetic objective (no emulator runs) -------------------

#: Index of LeastAllocated, which the Fixed weights set to 0.
LEAST = 5


def _kind(experiment: Experiment) -> float:
    """Each experiment's best LeastAllocated weight: 0.1 or 0.9, alternating."""
    return 0.1 if int(experiment.row["index"]) % 2 == 0 else 0.9


def _synthetic(experiment: Experiment, weights: Any, repeats: int) -> float:
    """1 - (LeastAllocated weight - the experiment's best)^2 + seed noise (1e-3)."""
    noise = np.random.default_rng(int(experiment.data["seed"])).normal(0.0, 1e-3)
    return 1.0 - (float(weights[LEAST]) - _kind(experiment)) ** 2 + float(noise)


def _vector(least: float) -> tuple[float, ...]:
    w = list(FIXED)
    w[LEAST] = least
    return tuple(w)


@pytest.fixture()
def synthetic(monkeypatch: pytest.MonkeyPatch) -> list[Experiment]:
    monkeypatch.setattr(out_of_sample, "_score", _synthetic)
    return [experiment_from_config(c) for c in sample_configs("tiny", 12, 0)]


def test_an_untrained_agent_that_beats_fixed_is_reported_learned_nothing(
    synthetic: list[Experiment],
) -> None:
    """The issue's case: an untrained network proposes weights other than Fixed, which here
    beat Fixed on every experiment; judged as the RL tuner it must be "learned nothing",
    because it is its own untrained ablation. A verdict against Fixed alone says "yes"
    here, so this test fails for it."""
    n = len(synthetic)
    untrained = [_vector(0.5)] * n  # no conditioning: one vector everywhere
    judged = judge(
        synthetic,
        {"rl": untrained},
        [_vector(0.3)] * n,
        seed=0,
        count=2,
        ablations={"rl": {UNTRAINED: untrained, CONSTANT: untrained, FIRST_PROPOSAL: untrained}},
    )
    summary = judged.summary("rl")
    report = judged.reports["rl"]
    assert report.test.learned_something(FIXED_POLICY).holds  # beats Fixed, by luck
    assert summary["mean_improvement_over_fixed"] > 0.1
    assert not summary["learned_something"] and not report.learned_all
    assert summary["learned_against"] == ["rl: untrained agent", "rl: constant"]
    assert summary["ablations"]["rl: untrained agent"]["verdict"] == "tie"
    assert summary["ablations"]["rl: untrained agent"]["wilcoxon_p"] == 1.0
    assert summary["ablations"][FIXED_POLICY]["verdict"] == "better"
    assert "learned something: NO" in report.to_table()


def test_a_conditioned_agent_learns_past_its_untrained_agent_and_its_constant(
    synthetic: list[Experiment],
) -> None:
    """Weights that follow each experiment's best beat the untrained agent's and the
    constant (the average decision, 0.5 everywhere) by intervals above 0; the first
    proposal's share of the gain is reported, with what the later proposals add."""
    n = len(synthetic)
    trained = [_vector(_kind(e)) for e in synthetic]
    first = [_vector(_kind(e) + (0.1 if _kind(e) < 0.5 else -0.1)) for e in synthetic]
    judged = judge(
        synthetic,
        {"rl": trained, "bo": [_vector(0.5)] * n},
        [_vector(0.3)] * n,
        seed=1,
        count=2,
        ablations={
            "rl": {
                UNTRAINED: [_vector(0.02)] * n,
                CONSTANT: [_vector(0.5)] * n,
                FIRST_PROPOSAL: first,
            }
        },
        domain="tiny",
    )
    summary = judged.summary("rl")
    assert summary["learned_something"] and judged.reports["rl"].learned_all
    for name in ("rl: untrained agent", "rl: constant", RANDOM_POLICY):
        assert summary["ablations"][name]["verdict"] == "better", name
        assert summary["ablations"][name]["interval"][0] > 0
    share = summary["first_proposal"]
    assert 0.5 < share["share_of_gain"] < 1.0
    assert share["later_proposals_add"]["verdict"] == "better"
    assert share["mean_improvement_over_fixed"] == pytest.approx(
        summary["mean_improvement_over_fixed"] * share["share_of_gain"]
    )
    assert summary["median_improvement_over_fixed"] > 0
    assert summary["domain"] == "tiny" and summary["domain_role"] == "a smoke-test domain"
    # BO (not an RL tuner) is judged against Fixed and random search; the RL tuner's
    # ablations are baselines of its report, every scored policy reported.
    bo = judged.summary("bo")
    assert bo["learned_against"] == [FIXED_POLICY, RANDOM_POLICY]
    rows = {r["policy"]: r["role"] for r in bo["report"]["test"]["rows"]}
    assert rows["rl: constant"] == "baseline" and rows[RANDOM_POLICY] == "ablation"
    assert "NaN" not in to_json(summary)


def test_ablations_of_an_unknown_tuner_or_of_the_wrong_length_are_refused(
    synthetic: list[Experiment],
) -> None:
    n = len(synthetic)
    with pytest.raises(ValueError, match="ablations of \\['sac'\\]"):
        judge(synthetic, {"rl": [FIXED] * n}, [FIXED] * n, 0, 1, ablations={"sac": {}})
    with pytest.raises(ValueError, match="policy 'rl: constant': 1 weight vectors"):
        judge(
            synthetic, {"rl": [FIXED] * n}, [FIXED] * n, 0, 1, ablations={"rl": {CONSTANT: [FIXED]}}
        )
