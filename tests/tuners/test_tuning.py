"""Tuning on Ray Tune: one trial per evaluation, experiments in parallel, and the same
weights and scores for the same seed whatever the number of workers."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from clusteremu.tuners.domains import FIXED, sample_configs
from clusteremu.tuners.evaluate import evaluate, experiment_from_config
from clusteremu.tuners.strategies import make_strategy
from clusteremu.tuners.tuning import experiment_seed, run_tuning


@pytest.fixture(scope="module")
def experiments() -> list:
    return [experiment_from_config(c) for c in sample_configs("tiny", 3, seed=11)]


def sequential(experiments: list, tuner: str, budget: int, seed: int) -> list:
    """The same search without Ray: ask, run the engine, tell (the reference)."""
    out = []
    for i, exp in enumerate(experiments):
        s = make_strategy(tuner, budget, experiment_seed(seed, i), exp.static)
        for _ in range(s.evaluations()):
            w = s.ask()
            s.tell(w, evaluate(exp, w).score)
        out.append((s.tried, s.scores))
    return out


@pytest.mark.parametrize("tuner", ["tpe", "bo"])
def test_tune_trials_reproduce_the_sequential_search(
    ray_local: None, experiments: list, tuner: str
) -> None:
    result = run_tuning(experiments, tuner, 3, seed=4, workers=2)
    got = [(o.tried, o.scores) for o in result.outcomes]
    assert got == sequential(experiments, tuner, 3, seed=4)


def test_same_seed_same_weights_and_scores_whatever_the_workers(
    ray_local: None, experiments: list, tmp_path: Path
) -> None:
    tuner = "random"
    one = run_tuning(experiments, tuner, 3, seed=4, workers=1)
    two = run_tuning(experiments, tuner, 3, seed=4, workers=2, storage=tmp_path)
    assert not one.failures and not two.failures
    for a, b in zip(one.outcomes, two.outcomes, strict=True):
        assert a.tried == b.tried and a.scores == b.scores
        assert a.tried[0] == FIXED and len(a.tried) == 3
    # the Fixed evaluation is the plain engine run of the experiment
    assert one.outcomes[0].fixed_score == evaluate(experiments[0], FIXED).score
    summary = two.summary()
    assert summary["experiments"] == 3 and summary["evaluations"] == 9
    best = [o.best_score for o in two.outcomes]
    assert summary["mean_best_score"] == pytest.approx(sum(best) / 3)
    assert all(o.improvement >= 0.0 for o in two.outcomes)  # Fixed is one of the tries
    details = list(tmp_path.glob("trials/experiment-*/detail.parquet"))
    assert len(details) == 9
    assert set(pq.read_table(details[0]).column_names) >= {"function", "mean_exec_s"}
