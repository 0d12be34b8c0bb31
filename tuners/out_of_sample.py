"""Tuned weights judged out of sample (the evaluation protocol, `tuners.protocol`).

A search tunes each experiment on the experiment's own seed: its best score is the best of
its budget on that very seed, an in-sample figure that selected the weights. Here the best
weights of every experiment and the Fixed weights are run again on fresh seeds the search
never saw, drawn from the protocol's own split (`instance_seed(seed, TEST_SPLIT, i)`);
a seed equal to one the search used is dropped and redrawn from the next index (and
counted). Each experiment's out-of-sample improvement is the mean over its fresh seeds of
(best - Fixed) / Fixed; the figure reported is the mean over experiments with its 95%
Student-t interval over experiments (`tuners.protocol.mean_interval`). It learned
something only when that interval lies above 0: a tuner that returns the Fixed weights
scores exactly 0 here.

The same fresh seeds serve every tuner (paired), and the Fixed runs are shared by them.
Runs go to Ray (one CPU each) when Ray is initialised, else run in this process.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tuners.domains import FIXED
from tuners.evaluate import Experiment, evaluate
from tuners.protocol import instance_seed, mean_interval

#: The protocol split the fresh seeds come from.
TEST_SPLIT = "tune-test"
#: Fresh seeds per experiment by default.
DEFAULT_TEST_SEEDS = 3


def search_seed(experiment: Experiment) -> int:
    """The seed the search ran the experiment on (its scenario's `seed:`)."""
    return int(experiment.data.get("seed", 0))


def fresh_seeds(seed: int, count: int, used: set[int]) -> tuple[list[int], int]:
    """`count` seeds of the test split under `seed`, skipping any seed in `used` (the
    search's own); returns them and how many were skipped."""
    seeds: list[int] = []
    skipped = 0
    i = 0
    while len(seeds) < count:
        s = instance_seed(seed, TEST_SPLIT, i)
        i += 1
        if s in used or s in seeds:
            skipped += 1
            continue
        seeds.append(s)
    return seeds, skipped


def on_seed(experiment: Experiment, seed: int) -> Experiment:
    """The experiment with its scenario run on `seed` instead of its own."""
    return dataclasses.replace(experiment, data={**experiment.data, "seed": int(seed)})


def _score(experiment: Experiment, weights: Sequence[float], repeats: int) -> float:
    return float(evaluate(experiment, list(weights), repeats).score)


@dataclass(frozen=True)
class OutOfSample:
    """One tuner's best weights against Fixed on the fresh seeds: `best[e, s]` and
    `fixed[e, s]` are the scores of experiment e on seed s (higher is better)."""

    tuner: str
    seeds: tuple[int, ...]
    skipped: int
    best: np.ndarray
    fixed: np.ndarray

    def improvements(self) -> np.ndarray:
        """Each experiment's mean over the fresh seeds of (best - Fixed) / Fixed."""
        return ((self.best - self.fixed) / self.fixed).mean(axis=1)

    def summary(self) -> dict[str, Any]:
        imp = self.improvements()
        ci = mean_interval(imp) if imp.size >= 2 else None
        ends = (ci.low, ci.high) if ci is not None else (-math.inf, math.inf)
        return {
            "label": "out of sample (fresh seeds, scored once)",
            "mean_improvement_over_fixed": float(imp.mean()),
            "ci95": float(ci.half_width) if ci is not None else float("nan"),
            "interval": [e if math.isfinite(e) else None for e in ends],
            "experiments": int(imp.size),
            "seeds": len(self.seeds),
            "test_seeds": list(self.seeds),
            "seeds_equal_to_a_search_seed_skipped": self.skipped,
            "learned_something": bool(ci is not None and ci.low > 0),
        }


def judge(
    experiments: Sequence[Experiment],
    best_weights: dict[str, list[tuple[float, ...]]],
    seed: int,
    count: int = DEFAULT_TEST_SEEDS,
    repeats: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, OutOfSample]:
    """Every tuner's best weights (`best_weights[tuner][e]` for experiment e) and Fixed on
    `count` fresh seeds per experiment; one run per (weights, experiment, seed)."""
    if count < 1:
        raise ValueError(f"test seeds: expected at least 1, got {count}")
    seeds, skipped = fresh_seeds(seed, count, {search_seed(e) for e in experiments})
    jobs: dict[tuple[tuple[float, ...], int, int], float] = {}
    for e in range(len(experiments)):
        for s in seeds:
            jobs[(tuple(FIXED), e, s)] = math.nan
            for weights in best_weights.values():
                jobs[(tuple(weights[e]), e, s)] = math.nan
    keys = list(jobs)
    scores = _run([(on_seed(experiments[e], s), w) for w, e, s in keys], repeats, progress)
    jobs.update(zip(keys, scores, strict=True))
    out = {}
    for tuner, weights in best_weights.items():
        best = np.array(
            [[jobs[(tuple(weights[e]), e, s)] for s in seeds] for e in range(len(experiments))]
        )
        fixed = np.array(
            [[jobs[(tuple(FIXED), e, s)] for s in seeds] for e in range(len(experiments))]
        )
        out[tuner] = OutOfSample(tuner, tuple(seeds), skipped, best, fixed)
    return out


def _run(
    runs: list[tuple[Experiment, tuple[float, ...]]],
    repeats: int,
    progress: Callable[[int, int], None] | None,
) -> list[float]:
    """The score of every (experiment, weights) run: as Ray tasks when Ray is up."""
    import ray

    if not ray.is_initialized():
        out = []
        for i, (exp, w) in enumerate(runs):
            out.append(_score(exp, w, repeats))
            if progress is not None:
                progress(i + 1, len(runs))
        return out
    task = ray.remote(num_cpus=1)(_score)
    refs = [task.remote(exp, w, repeats) for exp, w in runs]
    index = {ref: i for i, ref in enumerate(refs)}
    out = [math.nan] * len(refs)
    pending = list(refs)
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        for ref in done:
            out[index[ref]] = float(ray.get(ref))
        if progress is not None:
            progress(len(refs) - len(pending), len(refs))
    return out
