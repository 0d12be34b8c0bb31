"""The first bin by expected cost (docs/provisioner.md, "Choosing the bin by expected cost").

The thesis's classifier picks the most likely bin, tuned on the u-score, which charges an
under-estimation ten times an over-estimation. In reserved memory the price is the other
way round: an instance started one bin too high holds the larger bin for its whole run,
while one started too low holds the smaller bin only until its peak kills it (a fraction
`kill_fraction` of its run) and then runs at the next bin. So this rule asks a
probability model for P(bin j | inputs) and starts each instance at the bin k of least

    E[cost | k] = sum_j P(j) (sum_{i=k}^{j-1} (e_i f + penalty) + e_max(k,j))

(GB held per second of the instance's run; e the bin edges, f the kill fraction, penalty
the GB a kill is charged beside its memory), lifted bin by bin (`next-bin`) on kills.

Training (`train_cost_rule`): a multinomial logistic regression per regularisation C is
fitted on the train rows; every C x penalty on a grid is scored on the validation rows by
the GB-h its choices reserve (the cost above with the rows' durations) and its kills; the
choice with the least validation GB-h among those with at most `KILL_SHARE` of the
smallest bin's validation kills is kept (the fewest kills when none has), refitted on
train + validation, and exported as plain numbers (`ProbabilityModel`; no pickle).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Regularisation strengths of the logistic regression the validation chooses from.
C_GRID = (0.01, 0.1, 1.0, 10.0, 100.0)
#: GB a kill is charged beside the memory its attempt held (per second of the run).
PENALTY_GRID_GB = (0.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)
#: The most kills the chosen rule may have on validation, as a share of the smallest bin's.
KILL_SHARE = 0.5
#: Kill fraction assumed when the profiling did not record when peaks occur.
DEFAULT_KILL_FRACTION = 0.5


def attempt_cost(
    first: IntArray, truth: IntArray, edges: FloatArray, kill_fraction: float
) -> FloatArray:
    """GB held per second of each instance's run when it starts at bin `first` and needs
    bin `truth`: e_i x `kill_fraction` for every bin i it is killed in, then e_max(first,
    truth) for the whole run (lifted bin by bin)."""
    e = np.asarray(edges, dtype=np.float64)
    k, j = np.asarray(first, dtype=np.int64), np.asarray(truth, dtype=np.int64)
    cost = e[np.maximum(k, j)].copy()
    for i in range(e.size):
        cost += np.where((i >= k) & (i < j), e[i] * kill_fraction, 0.0)
    return cost


def kills(first: IntArray, truth: IntArray) -> IntArray:
    """Out-of-memory kills of each instance (one per bin below its own it starts in)."""
    return np.maximum(np.asarray(truth) - np.asarray(first), 0).astype(np.int64)


def expected_bins(
    proba: FloatArray, edges: FloatArray, kill_fraction: float, penalty_gb: float
) -> IntArray:
    """Per row of `proba` (P(bin j), one column per bin) the bin of least expected cost
    (GB per second of the run, each kill charged `penalty_gb` more); the smaller on a tie."""
    p = np.asarray(proba, dtype=np.float64)
    n, bins = p.shape
    costs = np.zeros((n, bins))
    for k in range(bins):
        first = np.full(n, k)
        for j in range(bins):
            truth = np.full(n, j)
            c = attempt_cost(first, truth, edges, kill_fraction) + penalty_gb * kills(first, truth)
            costs[:, k] += p[:, j] * c
    return np.argmin(costs, axis=1).astype(np.int64)


@dataclass(frozen=True)
class ProbabilityModel:
    """A multinomial logistic regression as plain numbers: P(bin) = softmax(z W^T + b) of
    the standardised inputs z = (x - mean) / scale, one row of W per bin in `classes`
    (the bins of the task, 0..B-1; a bin never seen gets probability 0)."""

    classes: list[int]
    bins: int
    mean: list[float]
    scale: list[float]
    coef: list[list[float]]
    intercept: list[float]

    def predict_proba(self, x: FloatArray) -> FloatArray:
        """P(bin j) per row of the design matrix `x` (one column per bin)."""
        z = (np.asarray(x, dtype=np.float64) - np.asarray(self.mean)) / np.asarray(self.scale)
        w, b = np.asarray(self.coef), np.asarray(self.intercept)
        if len(self.classes) == 2 and w.shape[0] == 1:  # binary: one logit
            p1 = 1.0 / (1.0 + np.exp(-(z @ w[0] + b[0])))
            p = np.column_stack([1.0 - p1, p1])
        else:
            raw = z @ w.T + b
            raw -= raw.max(axis=1, keepdims=True)
            p = np.exp(raw)
            p /= p.sum(axis=1, keepdims=True)
        out = np.zeros((z.shape[0], self.bins))
        out[:, np.asarray(self.classes, dtype=np.int64)] = p
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "classes": self.classes,
            "bins": self.bins,
            "mean": self.mean,
            "scale": self.scale,
            "coef": self.coef,
            "intercept": self.intercept,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProbabilityModel:
        return cls(
            [int(c) for c in data["classes"]],
            int(data["bins"]),
            [float(v) for v in data["mean"]],
            [float(v) for v in data["scale"]],
            [[float(v) for v in row] for row in data["coef"]],
            [float(v) for v in data["intercept"]],
        )


@dataclass(frozen=True)
class CostRule:
    """The expected-cost choice of a heavy task's first bin: its probability model, the
    kill fraction (share of the run a killed attempt holds its request) and the kill
    penalty (GB) chosen on validation."""

    model: ProbabilityModel
    edges: tuple[float, ...]
    kill_fraction: float
    penalty_gb: float
    #: How it was chosen and what it scored (validation and the held-out test rows).
    report: Mapping[str, Any]

    def bins(self, x: FloatArray) -> IntArray:
        """The first bin (index into `edges`) of each row of the design matrix `x`."""
        proba = self.model.predict_proba(x)
        return expected_bins(proba, np.asarray(self.edges), self.kill_fraction, self.penalty_gb)

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model.to_json(),
            "edges": list(self.edges),
            "kill_fraction": self.kill_fraction,
            "penalty_gb": self.penalty_gb,
            "report": dict(self.report),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CostRule:
        return cls(
            ProbabilityModel.from_json(data["model"]),
            tuple(float(e) for e in data["edges"]),
            float(data["kill_fraction"]),
            float(data["penalty_gb"]),
            dict(data.get("report") or {}),
        )


def _fit(x: FloatArray, y: IntArray, bins: int, c: float) -> ProbabilityModel:
    """A logistic regression on `x` (standardised with its own mean and scale)."""
    from sklearn.linear_model import LogisticRegression

    mean = x.mean(0)
    scale = np.where(x.std(0) > 0, x.std(0), 1.0)
    model = LogisticRegression(C=c, max_iter=5000).fit((x - mean) / scale, y)
    return ProbabilityModel(
        [int(k) for k in model.classes_],
        bins,
        mean.tolist(),
        scale.tolist(),
        np.asarray(model.coef_).tolist(),
        np.asarray(model.intercept_).tolist(),
    )


def gb_h(first: IntArray, truth: IntArray, edges: FloatArray, f: float, dur_s: FloatArray) -> float:
    """GB-h reserved by starting the rows at `first` (the cost model; durations in s)."""
    return float((attempt_cost(first, truth, edges, f) * dur_s).sum() / 3600.0)


def train_cost_rule(
    x: FloatArray,
    y: IntArray,
    dur_s: FloatArray,
    edges: tuple[float, ...],
    train: IntArray,
    val: IntArray,
    kill_fraction: float,
) -> CostRule:
    """Choose C and the kill penalty on the validation rows (fits on train only), refit
    on train + validation (see the module doc). `y`: each row's true bin."""
    e = np.asarray(edges, dtype=np.float64)
    bins = e.size
    small = np.zeros(val.size, dtype=np.int64)
    small_kills = int(kills(small, y[val]).sum())
    allowed = KILL_SHARE * small_kills
    tried: list[dict[str, Any]] = []
    for c in C_GRID:
        if np.unique(y[train]).size < 2:
            break
        proba = _fit(x[train], y[train], bins, c).predict_proba(x[val])
        for penalty in PENALTY_GRID_GB:
            first = expected_bins(proba, e, kill_fraction, penalty)
            tried.append(
                {
                    "C": c,
                    "penalty_gb": penalty,
                    "gb_h": gb_h(first, y[val], e, kill_fraction, dur_s[val]),
                    "kills": int(kills(first, y[val]).sum()),
                }
            )
    if not tried:
        raise ValueError("training: the training rows fill only one bin; nothing to predict")
    feasible = [t for t in tried if t["kills"] <= allowed]
    best = (
        min(feasible, key=lambda t: (t["gb_h"], t["kills"]))
        if feasible
        else min(tried, key=lambda t: (t["kills"], t["gb_h"]))
    )
    fit_on = np.concatenate([train, val])
    model = _fit(x[fit_on], y[fit_on], bins, best["C"])
    report = {
        "chosen": {"C": best["C"], "penalty_gb": best["penalty_gb"]},
        "validation": {
            "chosen": best,
            "smallest_bin": {
                "gb_h": gb_h(small, y[val], e, kill_fraction, dur_s[val]),
                "kills": small_kills,
            },
            "oracle_gb_h": gb_h(y[val], y[val], e, kill_fraction, dur_s[val]),
            "kill_share": KILL_SHARE,
            "feasible": bool(feasible),
            "tried": len(tried),
        },
    }
    return CostRule(
        model, tuple(float(v) for v in e), float(kill_fraction), best["penalty_gb"], report
    )


def held_out_figures(
    rule: CostRule, x: FloatArray, y: IntArray, dur_s: FloatArray, argmax: IntArray
) -> dict[str, Any]:
    """The held-out rows' figures under the cost model (scored once): GB-h and kills of the
    rule, of the classifier's most likely bin (`argmax`), the smallest bin and the oracle."""
    e = np.asarray(rule.edges)
    f = rule.kill_fraction
    rows = {
        "expected-cost": rule.bins(x),
        "classifier": np.asarray(argmax, dtype=np.int64),
        "smallest-bin": np.zeros(y.size, dtype=np.int64),
        "oracle": y,
    }
    return {
        name: {"gb_h": gb_h(first, y, e, f, dur_s), "kills": int(kills(first, y).sum())}
        for name, first in rows.items()
    }
