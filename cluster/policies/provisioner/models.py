"""Classifiers that predict a heavy task's memory bin from its inputs (the thesis, 5.2).

Training (`train_bin_classifier`): the task's profiling rows split into train / validation
/ test by workflow run (the evaluation protocol, `clusteremu.tuners.protocol`: each run goes to one
split by its own keyed draw, so no run spans two splits) -> the best binning for 2 and 3
bins on the train and validation rows (`binning.search_binning`, time-based) -> an Optuna
search (TPE by default, GP on request) over the classifier (gradient
boosting or an RBF SVM, scikit-learn), its hyper-parameters and the imbalance treatment
(none, class weights, random over-sampling, SMOTE: imbalanced-learn), minimising the
u-score (penalty 10) on the validation set -> the binning with the best validation
estimate kept (only it is tested) -> its classifier, and every classifier x imbalance
treatment with its best validation trial's parameters (`_combos`), refitted on train +
validation and scored once on the test rows (`clusteremu.tuners.protocol.TestSet`) beside the
ablations on the same rows: the majority bin of the training rows (a classifier that
learned nothing) and the smallest bin (no classifier at all). The held-out figures
(accuracy with its 95% interval, u-rate, u-score, estimated improvement), the protocol
report (`clusteremu.tuners.protocol.Report`: splits, overlap of test inputs with training inputs,
paired intervals, learned-something) and the per-model table go into `TrainedTask.held_out`.

Export: `ExportedClassifier` holds what prediction needs as plain numbers (the trees'
arrays, or the SVM's support vectors and coefficients, and the feature scaling) and
predicts with numpy alone; it round-trips through JSON. No pickle.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.policies.provisioner.binning import (
    Binning,
    bin_index,
    estimated_improvement,
    search_binning,
    u_rate,
    u_score,
)
from clusteremu.cluster.policies.provisioner.cost import (
    DEFAULT_KILL_FRACTION,
    CostRule,
    held_out_figures,
    train_cost_rule,
)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: The protocol split names of the profiling runs, and the share of runs in each.
SPLITS = (("train", 0.6), ("validation", 0.2), ("test", 0.2))
#: The protocol stream the runs' split draws come from.
SPLIT_STREAM = "provisioner-runs"
#: Regions one-hot encoded in the design matrix.
REGIONS = 4
#: u-score penalty of under-estimations (the thesis's figures use 10).
PENALTY = 10.0


def design_matrix(features: Mapping[str, FloatArray]) -> FloatArray:
    """Model inputs from the job features: log products, days left, log workload
    (products x (days left + 1)) and the region one-hot."""
    products = np.asarray(features["products"], dtype=np.float64)
    days = np.asarray(features["days_left"], dtype=np.float64)
    region = np.asarray(features["region"], dtype=np.int64)
    cols = [np.log(products), days, np.log(products * (days + 1.0))]
    cols += [(region == r).astype(np.float64) for r in range(REGIONS)]
    return np.column_stack(cols)


# --- exported models -------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportedClassifier:
    """A fitted classifier as plain numbers; `predict` needs numpy only.

    kind `gbt`: gradient-boosted regression trees (`trees`: one list of trees per stage
    and class column, each with children/feature/threshold/value arrays; `init`: the
    constant raw score; `learning_rate`). kind `svm`: an RBF SVC (one-vs-one) with
    `support_vectors`, `dual_coef`, `intercept`, `n_support`, `gamma`. Both standardise
    inputs with `mean` / `scale` first (trees are unaffected by it).
    """

    kind: str
    classes: list[int]
    mean: list[float]
    scale: list[float]
    params: dict[str, Any] = field(default_factory=dict)

    def _x(self, x: FloatArray) -> FloatArray:
        return (np.asarray(x, dtype=np.float64) - np.asarray(self.mean)) / np.asarray(self.scale)

    def predict(self, x: FloatArray) -> IntArray:
        """Predicted bin index per row of the design matrix `x`."""
        z = self._x(x)
        classes = np.asarray(self.classes, dtype=np.int64)
        if self.kind == "gbt":
            raw = self._gbt_raw(z)
            if raw.shape[1] == 1:
                return classes[(raw[:, 0] > 0).astype(np.int64)]
            return classes[np.argmax(raw, axis=1)]
        if self.kind == "svm":
            return classes[self._svm_votes(z)]
        raise ValueError(f"unknown model kind {self.kind!r}")

    def _gbt_raw(self, z: FloatArray) -> FloatArray:
        p = self.params
        init = np.asarray(p["init"], dtype=np.float64)
        raw = np.tile(init, (z.shape[0], 1))
        lr = float(p["learning_rate"])
        for stage in p["trees"]:
            for k, tree in enumerate(stage):
                raw[:, k] += lr * _tree_predict(tree, z)
        return raw

    def _svm_votes(self, z: FloatArray) -> IntArray:
        p = self.params
        sv = np.asarray(p["support_vectors"], dtype=np.float64)
        coef = np.asarray(p["dual_coef"], dtype=np.float64)
        intercept = np.asarray(p["intercept"], dtype=np.float64)
        n_support = np.asarray(p["n_support"], dtype=np.int64)
        gamma = float(p["gamma"])
        d2 = (z**2).sum(1)[:, None] + (sv**2).sum(1)[None, :] - 2.0 * z @ sv.T
        kernel = np.exp(-gamma * np.maximum(d2, 0.0))
        n_classes = n_support.size
        start = np.concatenate([[0], np.cumsum(n_support)])
        votes = np.zeros((z.shape[0], n_classes), dtype=np.int64)
        pair = 0
        for i in range(n_classes):
            for j in range(i + 1, n_classes):
                si = slice(start[i], start[i + 1])
                sj = slice(start[j], start[j + 1])
                dec = (
                    kernel[:, si] @ coef[j - 1, si] + kernel[:, sj] @ coef[i, sj] + intercept[pair]
                )
                votes[:, i] += dec > 0
                votes[:, j] += dec <= 0
                pair += 1
        return np.argmax(votes, axis=1)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "classes": self.classes,
            "mean": self.mean,
            "scale": self.scale,
            "params": self.params,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ExportedClassifier:
        return cls(
            str(data["kind"]),
            [int(c) for c in data["classes"]],
            [float(v) for v in data["mean"]],
            [float(v) for v in data["scale"]],
            dict(data["params"]),
        )


def _tree_predict(tree: Mapping[str, list[Any]], z: FloatArray) -> FloatArray:
    left = np.asarray(tree["left"], dtype=np.int64)
    right = np.asarray(tree["right"], dtype=np.int64)
    feature = np.asarray(tree["feature"], dtype=np.int64)
    threshold = np.asarray(tree["threshold"], dtype=np.float64)
    value = np.asarray(tree["value"], dtype=np.float64)
    node = np.zeros(z.shape[0], dtype=np.int64)
    rows = np.arange(z.shape[0])
    while True:
        inner = left[node] >= 0
        if not inner.any():
            break
        go_left = z[rows, np.maximum(feature[node], 0)] <= threshold[node]
        node = np.where(inner, np.where(go_left, left[node], right[node]), node)
    return value[node]


def export(
    model: Any, mean: FloatArray, scale: FloatArray, sample: FloatArray
) -> ExportedClassifier:
    """Turn a fitted scikit-learn GradientBoostingClassifier or SVC (trained on
    standardised inputs) into an `ExportedClassifier`."""
    from sklearn.ensemble import GradientBoostingClassifier
    from sklearn.svm import SVC

    classes = [int(c) for c in model.classes_]
    if isinstance(model, GradientBoostingClassifier):
        trees = [
            [
                {
                    "left": est.tree_.children_left.tolist(),
                    "right": est.tree_.children_right.tolist(),
                    "feature": est.tree_.feature.tolist(),
                    "threshold": est.tree_.threshold.tolist(),
                    "value": est.tree_.value[:, 0, 0].tolist(),
                }
                for est in stage
            ]
            for stage in model.estimators_
        ]
        lr = float(model.learning_rate)
        z = sample[:1]
        partial = np.zeros((1, model.estimators_.shape[1]))
        for stage in trees:
            for k, tree in enumerate(stage):
                partial[:, k] += lr * _tree_predict(tree, z)
        raw = model.decision_function(z).reshape(1, -1)
        init = (raw - partial)[0].tolist()
        params = {"trees": trees, "learning_rate": lr, "init": init}
        return ExportedClassifier("gbt", classes, mean.tolist(), scale.tolist(), params)
    if isinstance(model, SVC):
        coef = np.asarray(model._dual_coef_ if hasattr(model, "_dual_coef_") else model.dual_coef_)
        intercept = np.asarray(
            model._intercept_ if hasattr(model, "_intercept_") else model.intercept_
        )
        params = {
            "support_vectors": model.support_vectors_.tolist(),
            "dual_coef": coef.tolist(),
            "intercept": intercept.tolist(),
            "n_support": [int(n) for n in model.n_support_],
            "gamma": float(model._gamma),
        }
        return ExportedClassifier("svm", classes, mean.tolist(), scale.tolist(), params)
    raise TypeError(f"cannot export a {type(model).__name__}")


# --- training --------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainedTask:
    """A heavy task's binning, its exported classifier and its test-set figures."""

    edges: tuple[float, ...]
    model: ExportedClassifier
    optimal_improvement: float
    time_improvement: float
    accuracy: float
    u_rate: float
    u_score: float
    estimated_improvement: float
    description: str
    #: The held-out report: runs per split, test rows, accuracy's 95% interval, and the
    #: ablations' figures on the same test rows (`held_out_report`).
    held_out: Mapping[str, Any] = field(default_factory=dict, compare=False)
    #: The expected-cost choice of the first bin (`cost.CostRule`); None in models trained
    #: before it existed (the provisioner then starts at the classifier's bin).
    cost_rule: CostRule | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "edges": list(self.edges),
            "model": self.model.to_json(),
            "optimal_improvement": self.optimal_improvement,
            "time_improvement": self.time_improvement,
            "accuracy": self.accuracy,
            "u_rate": self.u_rate,
            "u_score": self.u_score,
            "estimated_improvement": self.estimated_improvement,
            "description": self.description,
            "held_out": dict(self.held_out),
            "cost_rule": None if self.cost_rule is None else self.cost_rule.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TrainedTask:
        return cls(
            tuple(float(e) for e in data["edges"]),
            ExportedClassifier.from_json(data["model"]),
            float(data["optimal_improvement"]),
            float(data["time_improvement"]),
            float(data["accuracy"]),
            float(data["u_rate"]),
            float(data["u_score"]),
            float(data["estimated_improvement"]),
            str(data["description"]),
            dict(data.get("held_out") or {}),
            None if data.get("cost_rule") is None else CostRule.from_json(data["cost_rule"]),
        )


def _fit(trial_params: Mapping[str, Any], x: FloatArray, y: IntArray, seed: int) -> Any:
    from sklearn.ensemble import GradientBoostingClassifier
    from sklearn.svm import SVC

    imbalance = trial_params["imbalance"]
    if imbalance in ("random", "smote") and np.unique(y).size > 1:
        from imblearn.over_sampling import SMOTE, RandomOverSampler

        smallest = int(np.bincount(y).min(initial=0) if y.size else 0)
        if imbalance == "smote" and smallest > 1:
            sampler: Any = SMOTE(random_state=seed, k_neighbors=min(5, smallest - 1))
        else:
            sampler = RandomOverSampler(random_state=seed)
        x, y = sampler.fit_resample(x, y)
    weights = "balanced" if imbalance == "weights" else None
    if trial_params["classifier"] == "gbt":
        model: Any = GradientBoostingClassifier(
            n_estimators=int(trial_params["n_estimators"]),
            max_depth=int(trial_params["max_depth"]),
            learning_rate=float(trial_params["learning_rate"]),
            random_state=seed,
        )
        if weights is not None:
            from sklearn.utils.class_weight import compute_sample_weight

            return model.fit(x, y, sample_weight=compute_sample_weight("balanced", y))
        return model.fit(x, y)
    model = SVC(
        C=float(trial_params["C"]),
        gamma=float(trial_params["gamma"]),
        class_weight=weights,
        decision_function_shape="ovo",
        random_state=seed,
    )
    return model.fit(x, y)


def split_by_run(runs: npt.ArrayLike, seed: int) -> IntArray:
    """Each row's split (0 train, 1 validation, 2 test, `SPLITS`) by its workflow run: run
    r goes where `instance_rng(seed, SPLIT_STREAM, r)` sends it, so every row of a run is in
    one split, whatever else was profiled."""
    from clusteremu.cluster.splits import instance_rng

    r = np.asarray(runs).astype(np.int64)
    cuts = np.cumsum([share for _, share in SPLITS])
    where = {
        int(run): int(np.searchsorted(cuts, instance_rng(seed, SPLIT_STREAM, int(run)).random()))
        for run in np.unique(r)
    }
    return np.array([min(where[int(run)], len(SPLITS) - 1) for run in r], dtype=np.int64)


def held_out_report(
    pred: IntArray, truth: IntArray, train_truth: IntArray, runs: dict[str, int]
) -> dict[str, Any]:
    """The test rows' figures (scored once) against the ablations on the same rows: the
    classifier's accuracy and which rows it got right (`correct`, for the protocol's
    interval, `clusteremu.tuners.protocol.mean_interval`), the majority bin of the training rows
    (what a classifier that learned nothing predicts) and the smallest bin (no
    classifier: every instance starts there)."""
    correct = (pred == truth).astype(np.int64)
    majority = int(np.bincount(train_truth).argmax())
    majority_acc = float((truth == majority).mean())
    smallest = np.zeros_like(truth)
    return {
        "label": "test (held out, scored once)",
        "runs": runs,
        "test_rows": int(truth.size),
        "accuracy": float(correct.mean()),
        "correct": correct.tolist(),
        "majority_bin": majority,
        "majority_bin_accuracy": majority_acc,
        "smallest_bin_accuracy": float((truth == 0).mean()),
        "smallest_bin_u_rate": u_rate(smallest, truth),
    }


#: The classifiers and imbalance treatments the search chooses from (the thesis's table:
#: every classifier with every treatment).
CLASSIFIERS = ("gbt", "svm")
IMBALANCE = ("none", "weights", "random", "smote")
#: Hyper-parameters of a classifier x treatment the search never tried (scikit-learn's
#: defaults for gradient boosting; a middle C and gamma of the search's range for the SVM).
DEFAULT_PARAMS: dict[str, dict[str, Any]] = {
    "gbt": {"n_estimators": 100, "max_depth": 3, "learning_rate": 0.1},
    "svm": {"C": 10.0, "gamma": 0.1},
}
#: The held-out comparison's metric and its direction.
METRIC = "right bin (share of held-out task instances)"


@dataclass(frozen=True)
class _Candidate:
    """One bin count's search: its binning, labels, scaling, the winner's parameters, its
    validation estimate and, per classifier x treatment, the parameters to refit."""

    binning: Binning
    y: IntArray
    mean: FloatArray
    scale: FloatArray
    params: dict[str, Any]
    val_estimate: float
    combos: dict[str, tuple[dict[str, Any], str, float | None]]


def _combo_name(params: Mapping[str, Any]) -> str:
    return f"{params['classifier']}/{params['imbalance']}"


def _search(
    z: FloatArray,
    y: IntArray,
    train: IntArray,
    val: IntArray,
    trials: int,
    seed: int,
    sampler: str,
) -> Any:
    """The Optuna study minimising the validation u-score (train fits only)."""
    import optuna

    def objective(trial: optuna.Trial) -> float:
        params: dict[str, Any] = {
            "classifier": trial.suggest_categorical("classifier", list(CLASSIFIERS)),
            "imbalance": trial.suggest_categorical("imbalance", list(IMBALANCE)),
        }
        if params["classifier"] == "gbt":
            params["n_estimators"] = trial.suggest_int("n_estimators", 30, 200)
            params["max_depth"] = trial.suggest_int("max_depth", 2, 4)
            params["learning_rate"] = trial.suggest_float("learning_rate", 0.03, 0.3, log=True)
        else:
            params["C"] = trial.suggest_float("C", 0.1, 300.0, log=True)
            params["gamma"] = trial.suggest_float("gamma", 0.01, 3.0, log=True)
        model = _fit(params, z[train], y[train], seed)
        return u_score(model.predict(z[val]), y[val], PENALTY)

    study_sampler: Any = (
        optuna.samplers.GPSampler(seed=seed, warn_independent_sampling=False)
        if sampler == "gp"
        else optuna.samplers.TPESampler(seed=seed)
    )
    study = optuna.create_study(direction="minimize", sampler=study_sampler)
    study.optimize(objective, n_trials=trials)
    return study


def _combos(study: Any) -> dict[str, tuple[dict[str, Any], str, float | None]]:
    """Per classifier x treatment: its best trial's parameters, where they come from, and
    its validation u-score (None for the defaults of a combination never tried)."""
    out: dict[str, tuple[dict[str, Any], str, float | None]] = {}
    for clf in CLASSIFIERS:
        for imb in IMBALANCE:
            tried = [
                t
                for t in study.trials
                if t.value is not None
                and t.params.get("classifier") == clf
                and t.params.get("imbalance") == imb
            ]
            name = f"{clf}/{imb}"
            if tried:
                best = min(tried, key=lambda t: t.value)
                source = f"best of {len(tried)} validation trials"
                out[name] = (dict(best.params), source, float(best.value))
            else:
                params = {"classifier": clf, "imbalance": imb, **DEFAULT_PARAMS[clf]}
                out[name] = (params, "defaults (the search never tried it)", None)
    return out


def _run_keys(features: Mapping[str, FloatArray], rows: IntArray) -> list[Any]:
    """A canonical key per row: its run's input (region, products, days left)."""
    from clusteremu.cluster.protocol_splits import canonical_key

    cols = [np.asarray(features[k], dtype=np.float64) for k in ("region", "products", "days_left")]
    return [canonical_key(tuple(c[i] for c in cols), decimals=3) for i in rows.tolist()]


def train_bin_classifier(
    features: Mapping[str, FloatArray],
    usage_gb: FloatArray,
    durations: FloatArray,
    static_gb: float,
    trials: int = 20,
    seed: int = 0,
    sampler: str = "tpe",
    bin_counts: tuple[int, ...] = (2, 3),
    stride_gb: float | None = None,
    kill_fraction: float = DEFAULT_KILL_FRACTION,
) -> TrainedTask:
    """Train a heavy task's bin classifier (see the module doc); `trials` Optuna trials
    per binning. Only the train and validation rows choose the binning, the classifier
    and its parameters, and the expected-cost rule on the chosen bins (`cost`;
    `kill_fraction`: the share of its run a killed attempt holds its request); the test
    rows are scored once, at the end."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    x_all = design_matrix(features)
    u = np.asarray(usage_gb, dtype=np.float64)
    d = np.asarray(durations, dtype=np.float64)
    stride = stride_gb or max(1.0, round(static_gb / 70.0))
    runs = np.asarray(features["run"]) if "run" in features else np.arange(u.size)
    split = split_by_run(runs, seed)
    train, val, test = (np.flatnonzero(split == i) for i in range(len(SPLITS)))
    if min(train.size, val.size, test.size) < 2:
        raise ValueError(
            f"training: {np.unique(runs).size} profiled runs leave a split with fewer than two rows"
        )
    fit_on = np.concatenate([train, val])
    min_samples = max(10, int(0.01 * fit_on.size))
    candidates: list[_Candidate] = []
    for bins in bin_counts:
        # the binning is chosen on the train and validation rows: the test rows stay unseen
        binning: Binning = search_binning(
            u[fit_on], static_gb, bins, stride, d[fit_on], min_samples
        )
        y = bin_index(u, binning.edges).astype(np.int64)
        if np.unique(y[train]).size < 2:
            continue
        mean = x_all[train].mean(0)
        scale = np.where(x_all[train].std(0) > 0, x_all[train].std(0), 1.0)
        z = (x_all - mean) / scale
        study = _search(z, y, train, val, trials, seed, sampler)
        params = dict(study.best_params)
        val_pred = _fit(params, z[train], y[train], seed).predict(z[val])
        val_estimate = estimated_improvement(
            binning.time_improvement, float((val_pred == y[val]).mean()), u_rate(val_pred, y[val])
        )
        candidates.append(_Candidate(binning, y, mean, scale, params, val_estimate, _combos(study)))
    if not candidates:
        raise ValueError("training: the usages fill only one bin; nothing to predict")
    # The binning with the best validation estimate (the first on a tie); only it is tested.
    chosen = max(candidates, key=lambda c: c.val_estimate)
    rule = train_cost_rule(x_all, chosen.y, d, chosen.binning.edges, train, val, kill_fraction)
    return _test_once(chosen, x_all, features, runs, split, seed, rule, d)


def _test_once(
    chosen: _Candidate,
    x_all: FloatArray,
    features: Mapping[str, FloatArray],
    runs: FloatArray,
    split: IntArray,
    seed: int,
    rule: CostRule,
    durations: FloatArray,
) -> TrainedTask:
    """Refit the chosen classifier and every classifier x treatment on train + validation,
    score them all with the ablations on the test rows in one `TestSet.score` (the
    expected-cost `rule`'s bins too: its GB-h and kills under the cost model beside the
    classifier's, the smallest bin's and the oracle's, `cost.held_out_figures`), and build
    the protocol report and the per-model table."""
    from clusteremu.cluster.protocol_report import Report, TestSet
    from clusteremu.cluster.protocol_splits import Splits, equivalence_report

    train, val, test = (np.flatnonzero(split == i) for i in range(len(SPLITS)))
    fit_on = np.concatenate([train, val])
    y, binning, params = chosen.y, chosen.binning, chosen.params
    z = (x_all - chosen.mean) / chosen.scale
    exported = export(_fit(params, z[fit_on], y[fit_on], seed), chosen.mean, chosen.scale, z[:1])
    models = {
        name: _fit(p, z[fit_on], y[fit_on], seed) for name, (p, _, _) in chosen.combos.items()
    }
    majority = int(np.bincount(y[train]).argmax())
    winner = _combo_name(params)
    preds: dict[str, IntArray] = {}
    cost_figures: dict[str, Any] = {}

    def scorer(rows: tuple[int, ...]) -> dict[str, FloatArray]:
        idx = np.asarray(rows, dtype=np.int64)
        preds["classifier"] = exported.predict(x_all[idx])
        cost_figures.update(
            held_out_figures(rule, x_all[idx], y[idx], durations[idx], preds["classifier"])
        )
        for name, model in models.items():
            preds[name] = np.asarray(model.predict(z[idx]), dtype=np.int64)
        preds["majority-bin"] = np.full(idx.size, majority, dtype=np.int64)
        preds["smallest-bin"] = np.zeros(idx.size, dtype=np.int64)
        truth = y[idx]
        return {n: (p == truth).astype(np.float64) for n, p in preds.items() if n != winner}

    scores = TestSet(test.tolist()).score(scorer)
    comparison = scores.compare(
        "classifier",
        better="higher",
        metric=METRIC,
        baselines=[n for n in models if n != winner],
        ablations=["majority-bin", "smallest-bin"],
        interval="bootstrap",
    )
    overlap = equivalence_report(
        _run_keys(features, fit_on), _run_keys(features, test), split="test"
    )
    run_sets = {
        name: np.unique(runs[split == i]).astype(np.int64) for i, (name, _) in enumerate(SPLITS)
    }
    report = Report(
        "held-out bin classifier",
        Splits(
            seed, {"train": int(train.size), "validation": int(val.size), "test": int(test.size)}
        ),
        (overlap,),
        comparison,
        comparison.learned_something("majority-bin"),
        notes=(
            f"instances are task instances of {np.unique(runs).size} profiled runs; each run "
            f"went to one split by its own keyed draw ({run_sets['train'].size} train, "
            f"{run_sets['validation'].size} validation, {run_sets['test'].size} test runs)",
            f"bins {', '.join(f'{e:g}' for e in binning.edges)} GB searched on the train + "
            "validation rows; classifier, parameters and bin count chosen on validation",
            f"method: {winner} ({_describe(params)}), refitted on train + validation; "
            "baselines: the other classifier x treatment pairs, refitted alike",
            "ablations: majority-bin (the training rows' most common bin: a classifier that "
            "learned nothing), smallest-bin (no classifier: every instance starts there)",
        ),
    )
    truth = y[test]
    pred = preds["classifier"]
    table = _model_table(chosen.combos, preds, truth, winner)
    accuracy, under = float((pred == truth).mean()), u_rate(pred, truth)
    held_out = held_out_report(pred, truth, y[train], {n: int(r.size) for n, r in run_sets.items()})
    held_out.update(
        {
            "runs_by_split": {n: r.tolist() for n, r in run_sets.items()},
            "protocol": report.to_dict(),
            "protocol_table": report.to_table(),
            "models": table,
            "expected_cost": {**rule.report, "test": cost_figures},
        }
    )
    rule = dataclasses.replace(rule, report=held_out["expected_cost"])
    return TrainedTask(
        binning.edges,
        exported,
        binning.improvement,
        binning.time_improvement,
        accuracy,
        under,
        u_score(pred, truth, PENALTY),
        estimated_improvement(binning.time_improvement, accuracy, under),
        _describe(params),
        held_out,
        rule,
    )


def _describe(params: Mapping[str, Any]) -> str:
    return ", ".join(
        f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in sorted(params.items())
    )


def _model_table(
    combos: Mapping[str, tuple[dict[str, Any], str, float | None]],
    preds: Mapping[str, IntArray],
    truth: IntArray,
    winner: str,
) -> list[dict[str, Any]]:
    """The thesis's per-model table on the held-out rows: every classifier x treatment
    (its parameters' source and validation u-score) with accuracy, u-rate and u-score."""
    rows = []
    for name, (params, source, val_u) in combos.items():
        p = preds[name]
        rows.append(
            {
                "model": name,
                "selected": name == winner,
                "params": _describe(params),
                "source": source,
                "validation_u_score": val_u,
                "accuracy": float((p == truth).mean()),
                "u_rate": u_rate(p, truth),
                "u_score": u_score(p, truth, PENALTY),
            }
        )
    return rows
