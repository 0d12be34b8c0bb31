"""Tuned weights judged out of sample, through the evaluation protocol
(`clusteremu.tuners.protocol`).

A search tunes each experiment on the experiment's own seed: its best score is the best of
its budget on that very seed, an in-sample figure that selected the weights. Here the best
weights of every experiment are run again, with the Fixed weights, on fresh seeds the search
never saw, drawn from the protocol's "test" split (`instance_seed(seed, "test", i)`). The
search's seeds (each experiment's scenario `seed:`; `--repeats` replications are streams
spawned from it) come from another stream, so a coincidence is all but impossible; it is
still checked: a fresh seed equal to a search seed is dropped and redrawn from the next
index, and the count is reported (the protocol's `Overlap`).

The test instances are the experiments. The test set is scored once (`TestSet`): every
policy on every experiment and fresh seed in one go. A policy's value on an experiment is
the mean over the fresh seeds of (score - Fixed) / Fixed, a fraction; the figure reported
is the mean over experiments with its 95% Student-t interval over experiments (seeds of one
experiment share its cluster and workload, so they are averaged first, not counted as
independent instances). Every tuner is the method of its own `Comparison`, with the other
tuners as baselines and two ablations:

- ``Fixed``: the Fixed weights themselves, improvement 0 by definition, so the paired
  interval against it is the mean interval; the tuner "learned something" only when that
  interval lies above 0 (a tuner that returns the Fixed weights scores exactly 0);
- ``random search``: random search at the same budget on the same experiments (the
  trivial tuner); the paired interval says whether the tuner beats it out of sample.

The same fresh seeds serve every policy (paired), and every (weights, experiment, seed) is
run once. Runs go to Ray (one CPU each) when Ray is initialised, else run in this process.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from clusteremu.tuners.domains import DEFAULT_TEST_SEEDS, FIXED
from clusteremu.tuners.evaluate import Experiment, evaluate
from clusteremu.tuners.protocol import (
    REPORTED_SPLIT,
    Report,
    Scores,
    Splits,
    TestSet,
    equivalence_report,
    instance_seed,
)

#: The protocol split the fresh seeds come from.
TEST_SPLIT = REPORTED_SPLIT
#: The ablation rows of every tuner's comparison: the Fixed weights and random search.
FIXED_POLICY = "Fixed"
RANDOM_POLICY = "random search"
#: The per-instance value every comparison is about.
METRIC = "improvement over Fixed on the fresh seeds (fraction; mean over seeds per experiment)"

Weights = tuple[float, ...]


def search_seed(experiment: Experiment) -> int:
    """The seed the search ran the experiment on (its scenario's `seed:`)."""
    return int(experiment.data.get("seed", 0))


def _generator(data: Mapping[str, Any]) -> dict[str, Any] | None:
    """The scenario's ``cluster.generator`` block, None when its nodes are listed."""
    cluster = data.get("cluster")
    generator = cluster.get("generator") if isinstance(cluster, dict) else None
    return generator if isinstance(generator, dict) else None


def cluster_seed(experiment: Experiment) -> int | None:
    """The seed the search's cluster was generated from (``cluster.generator.seed``), None
    for a scenario whose nodes are listed (there is no cluster to redraw)."""
    generator = _generator(experiment.data)
    return None if generator is None else int(generator.get("seed", 0))


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
    """The experiment with its scenario run on `seed` instead of its own: new arrivals and
    execution times and, when the scenario generates its cluster, a new cluster drawn from
    `seed` (``cluster.generator.seed``; the same configuration, other nodes)."""
    data = {**experiment.data, "seed": int(seed)}
    generator = _generator(data)
    if generator is not None:
        data["cluster"] = {**data["cluster"], "generator": {**generator, "seed": int(seed)}}
    return dataclasses.replace(experiment, data=data)


def _score(experiment: Experiment, weights: Sequence[float], repeats: int) -> float:
    return float(evaluate(experiment, list(weights), repeats).score)


@dataclass(frozen=True)
class Judged:
    """Every policy on the fresh seeds: `scores[policy][e, s]` is the score of experiment e
    on seed s (higher is better), `Fixed` among them; `report[tuner]` is the protocol's
    report with that tuner as the method."""

    seed: int
    seeds: tuple[int, ...]
    search_seeds: tuple[int, ...]
    skipped: int
    scores: Mapping[str, npt.NDArray[np.float64]]
    reports: Mapping[str, Report]

    def improvements(self, policy: str) -> npt.NDArray[np.float64]:
        """Each experiment's mean over the fresh seeds of (score - Fixed) / Fixed."""
        fixed = self.scores[FIXED_POLICY]
        return np.asarray(((self.scores[policy] - fixed) / fixed).mean(axis=1))

    def summary(self, tuner: str) -> dict[str, Any]:
        """The ``out_of_sample`` object of `tuner` in ``tune --json``."""
        report = self.reports[tuner]
        method = report.test.method
        verdict = report.learned
        against_random = report.test.row(RANDOM_POLICY)
        assert against_random.paired is not None
        return {
            "label": "out of sample (fresh seeds, scored once)",
            "mean_improvement_over_fixed": float(method.mean.estimate),
            "ci95": _half_width(method.mean.low, method.mean.high),
            "interval": [_finite(method.mean.low), _finite(method.mean.high)],
            "interval_over": "experiments (each the mean of its fresh seeds)",
            "experiments": int(report.test.n),
            "seeds": len(self.seeds),
            "test_seeds": list(self.seeds),
            "test_split": TEST_SPLIT,
            "search_seeds": list(self.search_seeds),
            "seeds_equal_to_a_search_seed_skipped": self.skipped,
            "learned_something": bool(verdict.holds),
            "vs_random_search": {
                "mean_difference": float(against_random.paired.estimate),
                "interval": [
                    _finite(against_random.paired.low),
                    _finite(against_random.paired.high),
                ],
                "verdict": against_random.verdict,
            },
            "report": report.to_dict(),
        }


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _half_width(low: float, high: float) -> float:
    """(high - low) / 2; NaN (null in JSON, `n/a` printed) for an unbounded interval."""
    return (high - low) / 2.0 if math.isfinite(low) and math.isfinite(high) else math.nan


def judge(
    experiments: Sequence[Experiment],
    best_weights: Mapping[str, Sequence[Weights]],
    random_weights: Sequence[Weights],
    seed: int,
    count: int = DEFAULT_TEST_SEEDS,
    repeats: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> Judged:
    """Every tuner's best weights (`best_weights[tuner][e]` for experiment e), random
    search's (`random_weights[e]`, same budget) and Fixed on `count` fresh seeds per
    experiment, scored once; one run per distinct (weights, experiment, seed)."""
    if count < 1:
        raise ValueError(f"test seeds: expected at least 1, got {count}")
    clash = {FIXED_POLICY, RANDOM_POLICY} & set(best_weights)
    if clash:
        raise ValueError(f"tuner names {sorted(clash)} are taken by the ablation rows")
    used = [search_seed(e) for e in experiments]
    seeds, skipped = fresh_seeds(seed, count, set(used))
    policies: dict[str, Sequence[Weights]] = {
        **best_weights,
        FIXED_POLICY: [tuple(FIXED)] * len(experiments),
        RANDOM_POLICY: random_weights,
    }
    raw: dict[str, npt.NDArray[np.float64]] = {}

    def scorer(instances: tuple[int, ...]) -> dict[str, npt.NDArray[np.float64]]:
        raw.update(_run_policies(experiments, instances, policies, seeds, repeats, progress))
        fixed = raw[FIXED_POLICY]
        return {p: ((s - fixed) / fixed).mean(axis=1) for p, s in raw.items()}

    scores = TestSet(range(len(experiments)), split=TEST_SPLIT).score(scorer)
    overlap = dataclasses.replace(
        equivalence_report(used, seeds, split=TEST_SPLIT), dropped=skipped
    )
    reports = {
        t: _report(t, scores, list(best_weights), seed, len(experiments), overlap, len(seeds))
        for t in best_weights
    }
    return Judged(seed, tuple(seeds), tuple(used), skipped, raw, reports)


def _report(
    tuner: str,
    scores: Scores,
    tuners: list[str],
    seed: int,
    experiments: int,
    overlap: Any,
    count: int,
) -> Report:
    """The protocol's report with `tuner` as the method."""
    table = scores.compare(
        tuner,
        better="higher",
        metric=METRIC,
        baselines=[t for t in tuners if t != tuner],
        ablations=[FIXED_POLICY, RANDOM_POLICY],
    )
    return Report(
        f"clusteremu tune: {tuner} out of sample",
        Splits(seed, {"search": experiments, TEST_SPLIT: experiments}),
        (overlap,),
        table,
        table.learned_something(FIXED_POLICY),
        notes=(
            "selection: each experiment's best weights were chosen on its own search seed "
            "(in sample); the figures here are on fresh seeds",
            f"a test instance is an experiment run on {count} fresh seed(s) of the "
            f"{TEST_SPLIT!r} split; the overlap line counts those seeds against the "
            "search seeds",
            f"{FIXED_POLICY}: the Fixed weights (improvement 0 by definition); "
            f"{RANDOM_POLICY}: random search at the same budget on the same experiments",
        ),
    )


def _run_policies(
    experiments: Sequence[Experiment],
    instances: Sequence[int],
    policies: Mapping[str, Sequence[Weights]],
    seeds: Sequence[int],
    repeats: int,
    progress: Callable[[int, int], None] | None,
) -> dict[str, npt.NDArray[np.float64]]:
    """Each policy's score matrix [experiment, seed]; each distinct run made once."""
    jobs: dict[tuple[Weights, int, int], float] = {}
    for e in instances:
        for s in seeds:
            for weights in policies.values():
                jobs[(tuple(weights[e]), e, s)] = math.nan
    keys = list(jobs)
    scores = _run([(on_seed(experiments[e], s), w) for w, e, s in keys], repeats, progress)
    jobs.update(zip(keys, scores, strict=True))
    return {
        p: np.array([[jobs[(tuple(w[e]), e, s)] for s in seeds] for e in instances])
        for p, w in policies.items()
    }


def _run(
    runs: list[tuple[Experiment, Weights]],
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
