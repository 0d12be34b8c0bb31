"""Tuning scoring weights on Ray Tune: many experiments at once, one Tune trial per evaluation.

`run_tuning(experiments, tuner, budget, ...)` runs every experiment's search
(`clusteremu.tuners.strategies`)
in one `ray.tune.Tuner`:

- a trial is one evaluation: a function trainable (`evaluation_trial`) runs the experiment's
  scenario under the proposed weights and returns scalars (``score``, ``jobs``,
  ``run_wall_s``); the per-function detail goes to ``detail.parquet`` in the trial directory;
- the search algorithm (`ExperimentSearcher`, a `ray.tune.search.Searcher`) holds one strategy
  per experiment and hands Tune the next proposal of any experiment that has none in flight.
  Evaluations within an experiment are sequential (each proposal may depend on the scores
  before it); experiments run in parallel, up to `workers` trials at once, on actors that
  Tune reuses (``reuse_actors``) so that trial overhead stays small next to a run.

Each experiment's strategy is seeded by (seed, experiment index) and sees only its own
scores, so proposals and results are the same whatever the number of workers and whatever
order trials finish in.
"""

from __future__ import annotations

import logging
import math
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from scipy import stats

from clusteremu.tuners.evaluate import Experiment, evaluate
from clusteremu.tuners.strategies import Strategy, make_strategy

log = logging.getLogger(__name__)
#: Ray Tune installs a SIGINT handler of its own unless this variable is 1.
TUNE_SIGINT_ENV = "TUNE_DISABLE_SIGINT_HANDLER"


@dataclass
class ExperimentOutcome:
    """Everything one experiment's search tried: weights, scores, run wall times (s)."""

    experiment: Experiment
    tuner: str
    tried: list[tuple[float, ...]] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    run_wall_s: list[float] = field(default_factory=list)

    @property
    def fixed_score(self) -> float:
        return self.scores[0]

    @property
    def best_index(self) -> int:
        finite = [s if math.isfinite(s) else -math.inf for s in self.scores]
        return int(np.argmax(finite))

    @property
    def best_score(self) -> float:
        return self.scores[self.best_index]

    @property
    def best_weights(self) -> tuple[float, ...]:
        return self.tried[self.best_index]

    @property
    def improvement(self) -> float:
        """(best - Fixed) / Fixed."""
        return (self.best_score - self.fixed_score) / self.fixed_score

    def row(self) -> dict[str, Any]:
        return {
            "experiment": self.experiment.name,
            "tuner": self.tuner,
            **self.experiment.row,
            "weights_tried": [list(w) for w in self.tried],
            "scores": list(self.scores),
            "run_wall_s": list(self.run_wall_s),
            "fixed_score": self.fixed_score,
            "best_score": self.best_score,
            "best_weights": list(self.best_weights),
            "improvement": self.improvement,
        }


def experiment_seed(seed: int, index: int) -> int:
    """The strategy seed of experiment `index` under the tuning seed."""
    return int(np.random.SeedSequence([int(seed), int(index)]).generate_state(1)[0])


def _searcher_base() -> Any:
    from ray.tune.search import Searcher

    return Searcher


class ExperimentSearcher(_searcher_base()):  # type: ignore[misc]
    """Ray Tune search algorithm multiplexing one strategy per experiment."""

    def __init__(
        self,
        experiments: Sequence[Experiment],
        strategies: Sequence[Strategy],
        on_result: Callable[[int, ExperimentOutcome], None] | None = None,
    ) -> None:
        super().__init__(metric="score", mode="max")
        self.strategies = list(strategies)
        self.outcomes = [
            ExperimentOutcome(e, s.name) for e, s in zip(experiments, strategies, strict=True)
        ]
        self.remaining = [s.evaluations() for s in self.strategies]
        self.in_flight = [False] * len(self.strategies)
        self.pending: dict[str, tuple[int, tuple[float, ...]]] = {}
        self.on_result = on_result
        self.failures: list[str] = []

    def total(self) -> int:
        return sum(self.remaining)

    def save(self, checkpoint_path: str) -> None:
        """Nothing to save: a tuning is rerun from its seed, not resumed."""

    def restore(self, checkpoint_path: str) -> None:
        """See `save`."""

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        for i, strategy in enumerate(self.strategies):
            if not self.in_flight[i] and self.remaining[i] > 0:
                weights = strategy.ask()
                self.in_flight[i] = True
                self.remaining[i] -= 1
                self.pending[trial_id] = (i, weights)
                return {
                    "experiment": i,
                    "step": len(strategy.tried),
                    "weights": [float(w) for w in weights],
                }
        if not any(self.in_flight) and not any(self.remaining):
            return self.FINISHED
        return None

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        if trial_id not in self.pending:
            return
        i, weights = self.pending.pop(trial_id)
        ok = not error and result is not None and "score" in result
        score = float(result["score"]) if ok else math.nan  # type: ignore[index]
        if not ok:
            self.failures.append(f"experiment {i}: evaluation failed (trial {trial_id})")
        self.strategies[i].tell(weights, score)
        out = self.outcomes[i]
        out.tried.append(weights)
        out.scores.append(score)
        out.run_wall_s.append(float(result.get("run_wall_s", math.nan)) if ok else math.nan)  # type: ignore[union-attr]
        self.in_flight[i] = False
        if self.on_result is not None:
            self.on_result(i, out)


def evaluation_trial(
    config: dict[str, Any], experiments: Sequence[Experiment], repeats: int
) -> dict[str, Any]:
    """Ray Tune function trainable: one evaluation; detail to ``detail.parquet``."""
    import pyarrow.parquet as pq
    from ray import tune

    try:  # torch (GPSampler, the RL agent) is only in the driver; keep any copy to one thread
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass
    exp = experiments[int(config["experiment"])]
    ev = evaluate(exp, config["weights"], repeats)
    rows = [
        {
            "experiment": exp.name,
            "step": int(config["step"]),
            "function": name,
            **{k: float(v) for k, v in stats_.items() if isinstance(v, (int, float))},
        }
        for name, stats_ in ev.per_function.items()
    ]
    trial_dir = tune.get_context().get_trial_dir()
    if trial_dir and rows:
        pq.write_table(pa.Table.from_pylist(rows), os.path.join(trial_dir, "detail.parquet"))
    return {"score": ev.score, "jobs": ev.jobs, "run_wall_s": ev.wall_s}


@dataclass
class TuningResult:
    """All experiments' outcomes, with the Tune run's wall time (s)."""

    tuner: str
    budget: int
    outcomes: list[ExperimentOutcome]
    wall_s: float
    failures: list[str]
    #: The best weights against Fixed on fresh seeds (`clusteremu.tuners.out_of_sample`), once
    #: judged.
    out_of_sample: dict[str, Any] | None = None

    def improvements(self) -> np.ndarray:
        return np.array([o.improvement for o in self.outcomes])

    def summary(self) -> dict[str, Any]:
        """The ``--json`` object: mean best score, mean improvement over Fixed (a fraction)
        with its 95% Student-t half-width, and the number of experiments. These are
        in-sample: the best of the budget on the seed the search ran on, which selected
        the weights; `out_of_sample` (when judged) has the same weights on fresh seeds."""
        imp = self.improvements()
        best = np.array([o.best_score for o in self.outcomes])
        return {
            "tuner": self.tuner,
            "budget": self.budget,
            "label": "in sample (the search's own seed, used for selection)",
            "mean_best_score": float(best.mean()),
            "mean_fixed_score": float(np.mean([o.fixed_score for o in self.outcomes])),
            "mean_improvement_over_fixed": float(imp.mean()),
            "ci95": ci95(imp),
            "experiments": len(self.outcomes),
            "evaluations": int(sum(len(o.scores) for o in self.outcomes)),
            "wall_s": round(self.wall_s, 3),
            **({"out_of_sample": self.out_of_sample} if self.out_of_sample is not None else {}),
        }

    def table(self) -> pa.Table:
        return pa.Table.from_pylist([o.row() for o in self.outcomes])


def ci95(values: np.ndarray) -> float:
    """95% Student-t half-width of the mean (NaN, null in JSON and `n/a` when printed, for
    fewer than two values: one sample has no interval)."""
    n = len(values)
    if n < 2:
        return float("nan")
    return float(stats.t.ppf(0.975, n - 1) * np.std(values, ddof=1) / math.sqrt(n))


def _trial_dirname(trial: Any) -> str:
    config = trial.config
    return f"experiment-{int(config['experiment']):04d}-step-{int(config['step'])}-{trial.trial_id}"


#: The file Ray Tune writes in an experiment's folder to check that trials can reach it.
STORAGE_MARKER = ".validate_storage_marker"


def run_tuning(
    experiments: Sequence[Experiment],
    tuner: str,
    budget: int,
    seed: int = 0,
    workers: int = 2,
    repeats: int = 1,
    storage: str | Path | None = None,
    strategy_options: dict[str, Any] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> TuningResult:
    """Tune every experiment with `tuner` on Ray Tune (Ray must be initialised). Trial
    directories go under `storage` (a temporary folder, removed after, when None)."""
    from ray import tune

    strategies = [
        make_strategy(tuner, budget, experiment_seed(seed, i), e.static, **(strategy_options or {}))
        for i, e in enumerate(experiments)
    ]
    done = [0]
    searcher = ExperimentSearcher(experiments, strategies)
    total = searcher.total()

    def on_result(i: int, outcome: ExperimentOutcome) -> None:
        done[0] += 1
        if progress is not None:
            progress(done[0], total)

    searcher.on_result = on_result
    # Tune's console tables and INFO lines would bury the command's own output.
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    # Ray Tune's own SIGINT handler would absorb Ctrl-C and end the run early with the
    # outcomes cut short; the command's handlers stop it instead (exit 130 / 143).
    os.environ[TUNE_SIGINT_ENV] = "1"
    for name in ("ray.tune", "ray.train"):
        logging.getLogger(name).setLevel(logging.WARNING)
    trainable = tune.with_resources(
        tune.with_parameters(evaluation_trial, experiments=list(experiments), repeats=repeats),
        {"cpu": 1},
    )
    with tempfile.TemporaryDirectory(prefix="clusteremu-tune-") as tmp:
        root = Path(storage) if storage is not None else Path(tmp)
        runner = tune.Tuner(
            trainable,
            tune_config=tune.TuneConfig(
                search_alg=searcher,
                num_samples=total,
                max_concurrent_trials=max(1, int(workers)),
                reuse_actors=True,
                trial_dirname_creator=_trial_dirname,
            ),
            run_config=tune.RunConfig(
                name="trials",
                storage_path=str(root.resolve()),
                verbose=0,
                log_to_file=False,
                # a trial writes detail.parquet in its working folder; copy it to storage
                sync_config=tune.SyncConfig(sync_artifacts=True),
            ),
        )
        start = time.perf_counter()
        try:
            runner.fit()
        finally:
            # Ray Tune's check that the driver and trials share the folder; not a result.
            (root / "trials" / STORAGE_MARKER).unlink(missing_ok=True)
        wall = time.perf_counter() - start
    return TuningResult(tuner, budget, searcher.outcomes, wall, searcher.failures)
