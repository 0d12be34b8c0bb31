"""Selecting Pennyworth's tree on validation batches with Ray Tune
(`clusteremu.tuners.pennyworth`, which re-exports every name): the validation batches with
their actual run times (the protocol's "validation" split, used for selection only, none
equivalent to a training set; `validation_set`), a tree's plans on them priced with the
actual run times (`score_tree`: mean and worst cost in dollars over `VALIDATION_DRAWS`
replications of each batch's run), and the search of the tree's hyper-parameters
(`search_tree`: one Ray Tune trial per setting of `search_space`, proposed by Optuna's TPE
sampler, seeded, the first proposal `FULL_TREE`, minimising the mean validation cost)."""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import tempfile
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies.pennyworth.exact import engine_runtimes
from clusteremu.cluster.policies.pennyworth.problem import Problem
from clusteremu.cluster.policies.pennyworth.tree import RadTree
from clusteremu.tuners.pennyworth_eval import (
    ActualBatch,
    actual_cost,
    batch_key,
    batch_spec,
    draw_batches,
    tree_policy,
)
from clusteremu.tuners.pennyworth_examples import (
    EXAMPLE_SLACK,
    TRAIN,
    VALIDATION,
    ExamplePlan,
    FloatArray,
    batch_counts,
)
from clusteremu.tuners.pennyworth_store import Examples
from clusteremu.tuners.protocol import Overlap

#: Replications of each validation batch's run (run-time draws) a plan is scored over.
VALIDATION_DRAWS = 20


# --- validation --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Validation:
    """Validation batches with their actual run times (the protocol's "validation" split,
    used for selection only) and how many drawn ones were dropped as equivalent to a
    training set. `runtimes[i]`: batch i's run times in each of `VALIDATION_DRAWS`
    replications of its run (the first is the batch's own): a plan is scored by its mean
    cost over them, so that the selection sees the rare long run times whose lateness
    dominates the cost (a second late costs as much as a dozen VM start-ups)."""

    batches: tuple[ActualBatch, ...]
    overlap: Overlap
    runtimes: tuple[tuple[FloatArray, ...], ...] = ()


def default_validation_batches(batches: int) -> int:
    """Validation batches for `batches` training sets: a tenth, within 20..60."""
    return max(20, min(60, batches // 10))


def training_keys(plan: ExamplePlan) -> set[Hashable]:
    """The equivalence keys of the training sets (task counts, planned on the means)."""
    n = len(plan.task_names)
    return {
        batch_key(batch_counts(n, plan.jobs, plan.seed, TRAIN, i), None)
        for i in range(plan.batches)
    }


def validation_set(
    spec: SimulationSpec,
    base: Problem,
    plan: ExamplePlan,
    count: int,
    jobs: int,
    draws: int | None = None,
) -> Validation:
    """`count` validation batches of `jobs` jobs with actual run times, each in `draws`
    replications of its run (common random numbers with `clusteremu run --seed S
    --replications R`)."""
    batches, overlap = draw_batches(
        spec, base, plan.seed, VALIDATION, count, jobs, training_keys(plan)
    )
    draws = VALIDATION_DRAWS if draws is None else max(1, int(draws))
    runtimes = tuple(
        (b.runtime_s,)
        + tuple(
            engine_runtimes(batch_spec(spec, b.problem.counts, b.seed), b.problem, r)[0]
            for r in range(1, draws)
        )
        for b in batches
    )
    return Validation(tuple(batches), overlap, runtimes)


@dataclass(frozen=True)
class TreeScore:
    """A tree's plans on validation batches priced with the actual run times: the mean
    and worst cost (dollars) and the number of batches."""

    mean_cost_usd: float
    max_cost_usd: float
    batches: int


def score_tree(tree: RadTree, validation: Validation, slack: float) -> TreeScore:
    """Plan every validation batch with `tree` (on the means, keeping `slack` of the SLO's
    bound free) and price the plans with the actual run times."""
    policy = tree_policy(tree, 0.0, slack)
    costs = np.zeros(len(validation.batches))
    for i, batch in enumerate(validation.batches):
        plan = policy(batch.problem)
        draws = validation.runtimes[i] if validation.runtimes else (batch.runtime_s,)
        costs[i] = np.mean(
            [actual_cost(dataclasses.replace(batch, runtime_s=rt), plan) for rt in draws]
        )
    return TreeScore(float(costs.mean()), float(costs.max()), len(costs))


# --- the hyper-parameter search ------------------------------------------------------------


@dataclass(frozen=True)
class TreeParams:
    """A tree's hyper-parameters: scikit-learn's max_depth, min_samples_leaf, ccp_alpha
    (cost-complexity pruning, entropy in bits per example) and the number of batches whose
    examples it is fitted on (the first ones)."""

    max_depth: int
    min_samples_leaf: int
    ccp_alpha: float
    batches_used: int
    #: The share of the SLO's bound the tree plans to keep free.
    slack: float = EXAMPLE_SLACK

    @classmethod
    def from_config(cls, config: Mapping[str, Any], batches: int) -> TreeParams:
        used = max(1, min(batches, math.ceil(float(config["examples_fraction"]) * batches)))
        return cls(
            int(config["max_depth"]),
            int(config["min_samples_leaf"]),
            float(config["ccp_alpha"]),
            used,
            float(config.get("slack", EXAMPLE_SLACK)),
        )


#: The first proposal: a full tree on every example (the paper's J48 without pruning),
#: planning with the examples' padding.
FULL_TREE = {
    "max_depth": 24,
    "min_samples_leaf": 1,
    "ccp_alpha": 1e-6,
    "examples_fraction": 1.0,
    "slack": EXAMPLE_SLACK,
}


def search_space() -> dict[str, Any]:
    from ray import tune

    return {
        "max_depth": tune.randint(2, 25),  # 2..24
        "min_samples_leaf": tune.lograndint(1, 65),
        "ccp_alpha": tune.loguniform(1e-6, 1e-2),
        "examples_fraction": tune.choice([0.25, 0.5, 0.75, 1.0]),
        "slack": tune.uniform(0.05, 0.3),
    }


@dataclass(frozen=True)
class TreeSpace:
    """What a trial needs besides its proposal: the examples, tasks, types and profiles."""

    examples: Examples
    task_names: tuple[str, ...]
    type_names: tuple[str, ...]
    profiles: dict[str, dict[str, list[float]]]
    seed: int

    def fit(self, params: TreeParams) -> RadTree:
        x, y = self.examples.first(params.batches_used)
        return RadTree.fit(
            x,
            y,
            self.task_names,
            self.type_names,
            self.profiles,
            max_depth=params.max_depth,
            min_samples_leaf=params.min_samples_leaf,
            ccp_alpha=params.ccp_alpha,
            seed=self.seed,
        )


def tree_trial(config: dict[str, Any], space: TreeSpace, validation: Validation) -> dict[str, Any]:
    """Ray Tune function trainable: fit one tree, score it on the validation batches."""
    params = TreeParams.from_config(config, space.examples.batches)
    tree = space.fit(params)
    score = score_tree(tree, validation, params.slack)
    return {
        "cost_usd": score.mean_cost_usd,
        "max_cost_usd": score.max_cost_usd,
        "nodes": int(tree.feature.size),
        "depth": tree.depth,
        "examples": int(tree.info["examples"]),
    }


@dataclass
class SearchResult:
    """Every trial (its parameters and scores, in proposal order), the best one's
    parameters and the Tune run's wall seconds."""

    trials: list[dict[str, Any]]
    best: TreeParams
    wall_s: float
    failures: int = 0


def search_tree(
    space: TreeSpace,
    validation: Validation,
    trials: int,
    seed: int = 0,
    workers: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> SearchResult:
    """Search the tree's hyper-parameters with Ray Tune and Optuna's TPE sampler (seeded;
    the first proposal is `FULL_TREE`), `workers` trials at once, minimising the mean
    validation cost; the best has the least cost, then the fewest nodes. Ray must be
    initialised. With more than one worker, TPE's later proposals depend on the order in
    which trials finish."""
    import optuna
    from ray import tune
    from ray.tune.search.optuna import OptunaSearch

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # no console tables over our output
    # Ctrl-C reaches the command (exit 130), not Ray Tune's own SIGINT handler
    os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"
    for name in ("ray.tune", "ray.train"):
        logging.getLogger(name).setLevel(logging.WARNING)
    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=max(2, min(10, trials // 3)))
    searcher = OptunaSearch(
        metric="cost_usd", mode="min", sampler=sampler, points_to_evaluate=[dict(FULL_TREE)]
    )
    done, total = [0], trials

    class Progress(tune.Callback):
        def on_trial_complete(
            self, iteration: int, trials: list[Any], trial: Any, **info: Any
        ) -> None:
            done[0] += 1
            if progress is not None:
                progress(done[0], total)

    trainable = tune.with_resources(
        tune.with_parameters(tree_trial, space=space, validation=validation), {"cpu": 1}
    )
    start = time.perf_counter()
    if progress is not None:  # the phase's clock starts with the search, not its first trial
        progress(0, total)
    with tempfile.TemporaryDirectory(prefix="clusteremu-synthesize-") as tmp:
        grid = tune.Tuner(
            trainable,
            param_space=search_space(),
            tune_config=tune.TuneConfig(
                search_alg=searcher,
                num_samples=trials,
                max_concurrent_trials=max(1, workers),
                reuse_actors=True,
            ),
            run_config=tune.RunConfig(
                name="trials",
                storage_path=tmp,
                verbose=0,
                log_to_file=False,
                callbacks=[Progress()],
            ),
        ).fit()
        results = [grid[i] for i in range(len(grid))]
    rows: list[dict[str, Any]] = []
    failures = 0
    for r in results:
        metrics, config = r.metrics or {}, r.config or {}
        if r.error is not None or "cost_usd" not in metrics:
            failures += 1
            continue
        params = TreeParams.from_config(config, space.examples.batches)
        rows.append(
            {
                **dataclasses.asdict(params),
                **{
                    k: metrics[k]
                    for k in ("cost_usd", "max_cost_usd", "nodes", "depth", "examples")
                },
            }
        )
    if not rows:
        raise RuntimeError(f"every one of the {trials} tree trials failed")
    best = min(rows, key=lambda row: (round(row["cost_usd"], 12), row["nodes"]))
    chosen = TreeParams(**{k: best[k] for k in TreeParams.__dataclass_fields__})
    return SearchResult(rows, chosen, time.perf_counter() - start, failures)
