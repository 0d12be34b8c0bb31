"""Exported classifiers predict exactly as scikit-learn's, and survive JSON; sizing model
files that are truncated or of another version are refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from clusteremu.cluster.policies.provisioner.models import ExportedClassifier, design_matrix, export
from clusteremu.cluster.policies.provisioner.sizing import Sizing

sklearn = pytest.importorskip("sklearn")


@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("kind", ["gbt", "svm"])
def test_exported_models_predict_like_scikit_learn(kind: str, classes: int) -> None:
    from sklearn.ensemble import GradientBoostingClassifier
    from sklearn.svm import SVC

    rng = np.random.default_rng(1)
    x = rng.normal(size=(300, 4))
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(int)
    if classes == 3:
        y = y + (x[:, 2] > 0.7)
    model = (
        GradientBoostingClassifier(n_estimators=25, random_state=0)
        if kind == "gbt"
        else SVC(C=3.0, gamma=0.4, decision_function_shape="ovo")
    ).fit(x, y)
    exported = export(model, np.zeros(4), np.ones(4), x)
    again = ExportedClassifier.from_json(json.loads(json.dumps(exported.to_json())))
    probe = rng.normal(size=(500, 4))
    assert np.array_equal(again.predict(probe), model.predict(probe))


def test_a_truncated_or_foreign_model_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "sizing.json"
    path.write_text('{"format": "clusteremu-sizing", "version": 1, "tasks": {')
    with pytest.raises(ValueError, match="not valid JSON"):
        Sizing.load(path)
    path.write_text(json.dumps({"format": "clusteremu-sizing", "version": 99, "tasks": {}}))
    with pytest.raises(ValueError, match="version 99"):
        Sizing.load(path)
    path.write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(ValueError, match="not a clusteremu sizing model"):
        Sizing.load(path)
    with pytest.raises(ValueError, match="cannot be read"):
        Sizing.load(tmp_path / "missing.json")


def test_profiling_runs_split_by_run_into_disjoint_splits_from_keyed_streams() -> None:
    from clusteremu.cluster.policies.provisioner.models import split_by_run

    runs = np.repeat(np.arange(400), 3)  # three task instances per run
    split = split_by_run(runs, seed=5)
    for run in range(400):  # a run never spans two splits
        assert np.unique(split[runs == run]).size == 1
    shares = np.bincount(split, minlength=3) / split.size
    assert shares == pytest.approx([0.6, 0.2, 0.2], abs=0.06)
    # run r's split depends on (seed, r) alone, not on which other runs were profiled
    assert np.array_equal(split_by_run(runs[::2], seed=5), split[::2])
    assert not np.array_equal(split_by_run(runs, seed=6), split)


def heavy_rows(rng: np.random.Generator, runs: int = 300) -> tuple[dict, np.ndarray, np.ndarray]:
    """One heavy task: memory a function of the region and products, 15% noise."""
    region = rng.integers(0, 4, runs).astype(float)
    products = rng.uniform(10, 1000, runs)
    days = rng.uniform(0, 30, runs)
    usage = np.clip((5 + 20 * region + 0.05 * products) * rng.lognormal(0, 0.15, runs), 1, 99)
    feats = {"region": region, "products": products, "days_left": days, "run": np.arange(runs)}
    return feats, usage, rng.uniform(100, 300, runs)


def test_the_binning_never_reads_the_test_rows_and_the_test_is_scored_against_ablations() -> None:
    from clusteremu.cluster.policies.provisioner.models import split_by_run, train_bin_classifier
    from clusteremu.commands.provision import _held_out

    feats, usage, dur = heavy_rows(np.random.default_rng(3))
    task = train_bin_classifier(feats, usage, dur, 100.0, trials=3, seed=0)
    # Other usages on the test rows only: the same bins (the search saw train + validation).
    test = split_by_run(feats["run"], 0) == 2
    changed = usage.copy()
    changed[test] = np.random.default_rng(9).uniform(1, 99, int(test.sum()))
    again = train_bin_classifier(feats, changed, dur, 100.0, trials=3, seed=0)
    assert again.edges == task.edges
    report = _held_out(task.held_out)
    assert report["test_rows"] == int(test.sum()) and report["runs"]["test"] == int(test.sum())
    assert report["learned_something"]
    assert report["accuracy_ci95"][0] > report["majority_bin_accuracy"]
    # The same check on a classifier that learned nothing (it always says the majority bin,
    # so it is right exactly on the majority's rows) fails.
    n = report["test_rows"]
    hits = round(report["majority_bin_accuracy"] * n)
    trivial = {**task.held_out, "correct": [1] * hits + [0] * (n - hits)}
    assert not _held_out(trivial)["learned_something"]


def test_held_out_accuracy_is_scored_on_runs_disjoint_from_training_against_the_majority() -> None:
    """The reported accuracy is the exported classifier's on the test runs' rows, which no
    training or validation run shares, beside the majority bin of the training rows on the
    same rows. Scoring it on the training rows (or any other rows) fails this test."""
    from clusteremu.cluster.policies.provisioner.binning import bin_index
    from clusteremu.cluster.policies.provisioner.models import train_bin_classifier
    from clusteremu.tuners.protocol import Report

    feats, usage, dur = heavy_rows(np.random.default_rng(4))
    task = train_bin_classifier(feats, usage, dur, 100.0, trials=3, seed=2)
    by_split = {k: set(v) for k, v in task.held_out["runs_by_split"].items()}
    assert by_split["test"] and not by_split["test"] & (by_split["train"] | by_split["validation"])
    test = np.isin(feats["run"], sorted(by_split["test"]))
    train = np.isin(feats["run"], sorted(by_split["train"]))
    truth = bin_index(usage, task.edges)
    x = design_matrix(feats)
    correct = (task.model.predict(x[test]) == truth[test]).astype(int)
    assert task.held_out["correct"] == correct.tolist()
    assert task.accuracy == pytest.approx(correct.mean())
    majority = np.bincount(truth[train]).argmax()
    assert task.held_out["majority_bin_accuracy"] == pytest.approx((truth[test] == majority).mean())
    report = Report.from_dict(task.held_out["protocol"])
    assert report.test.n == int(test.sum()) and report.test.scored_once
    assert report.learned.ablation == "majority-bin"
    assert report.test.row("majority-bin").mean.estimate == pytest.approx(
        (truth[test] == majority).mean()
    )
    assert report.learned.holds, report.learned.explain()
    assert report.overlaps[0].split == "test" and report.overlaps[0].total == int(test.sum())
    assert {r["model"] for r in task.held_out["models"]} == {
        f"{c}/{i}" for c in ("gbt", "svm") for i in ("none", "weights", "random", "smote")
    }
