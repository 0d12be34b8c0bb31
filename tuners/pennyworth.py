"""Synthesising a RAD-tree on Ray (Pennyworth): examples from optimal plans, a Ray Tune
search of the tree's hyper-parameters selected on validation batches, and one score on
held-out test batches (the evaluation protocol of `clusteremu.tuners.protocol`).

Examples. `M` example job sets of `n` jobs are drawn over varying task mixes, as the
Pennyworth paper did (set i: a number of tasks m uniform in 1..T, m distinct tasks, each
job's task uniform among them), from the protocol's instance stream ("train", i) of the
seed, so a set depends on nothing else and the examples are identical whatever the number
of workers. Each set is planned optimally on the task means by the exact planner
(`exact.solve_jobs`) against the SLO tightened by the examples' slack (`Problem.with_slack`:
a share of the bound kept free as margin for the spread of the run times), and the optimal
plan, in a canonical renting order (`teacher_plan`), turned into decision rows
(`features.examples_of_plan`); a set not proven optimal within the time limit is skipped
and counted. Batches go to Ray tasks `CHUNK_BATCHES` at a time; the
driver writes each finished chunk atomically as one Parquet file::

    DIR/_examples.json                 what the examples are (scenario hash, jobs, seed, ...)
    DIR/chunk-000003-<key>.parquet     batches 150..199: columns batch, step, the features, label

so the folder is always a valid Parquet dataset of finished chunks (readers skip names
starting with `_` or `.`). A re-run with the same scenario (by content), `--jobs` and
`--seed` solves only the chunks without a readable file; another `--batches` keeps the
chunks that still match and removes the others; another scenario, `--jobs`, `--seed` or
feature layout is refused (`ExamplesError`, naming what differs) before any work.

Validation. Batches of the scenario's size (32 jobs in the shipped family) with actual run
times come from the protocol's "validation" split (`clusteremu.tuners.pennyworth_eval`); a tree
plans
them on the means and `score_tree` prices its plans with the actual run times (eq. 1, SLO
loss included), in `VALIDATION_DRAWS` replications of each batch's run: the mean cost in
dollars is what the search minimises.

Search. `search_tree` runs one Ray Tune trial per hyper-parameter setting (max_depth,
min_samples_leaf, ccp_alpha, the share of the sets whose examples are used, and the slack
the tree plans with), proposed by Optuna's TPE sampler (seeded; the first proposal
is the full tree) and minimising the validation cost; ties go to the smaller tree.

Test. After the selection, `held_out_report` scores the chosen tree once on the "test"
split (batches of the same size, none equivalent to a training or validation one) against
its ablation (`pennyworth-rules`: the feasibility rules alone, same padding) and the
baselines, and the protocol's report says whether the tree learned something.

The code lives in three modules, re-exported here (import from this one): planning and
solving the examples in `clusteremu.tuners.pennyworth_examples`, the chunked example store
in `clusteremu.tuners.pennyworth_store`, validation and the Ray Tune search in
`clusteremu.tuners.pennyworth_search`; this module runs all of it (`synthesize`) and scores
the chosen tree on the test split (`held_out_report`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies.pennyworth.problem import Problem, ScenarioFieldError
from clusteremu.cluster.policies.pennyworth.tree import RadTree
from clusteremu.scenarios.loader import load_scenario
from clusteremu.tuners.pennyworth_eval import (  # noqa: F401  (with_counts: re-exported)
    baseline_policies,
    costs_of,
    draw_batches,
    rules_policy,
    tree_policy,
    with_counts,
)
from clusteremu.tuners.pennyworth_examples import (  # noqa: F401  (re-exported)
    BATCH_TIME_LIMIT_S,
    CHUNK_BATCHES,
    EXAMPLE_SLACK,
    FORMAT,
    TEST,
    TRAIN,
    VALIDATION,
    VERSION,
    Chunk,
    ChunkResult,
    ExamplePlan,
    ExamplesError,
    FloatArray,
    IntArray,
    batch_counts,
    batch_problem,
    plan_examples,
    run_chunks,
    scenario_problem,
    solve_chunk,
    teacher_plan,
)
from clusteremu.tuners.pennyworth_search import (  # noqa: F401  (re-exported)
    FULL_TREE,
    VALIDATION_DRAWS,
    SearchResult,
    TreeParams,
    TreeScore,
    TreeSpace,
    Validation,
    default_validation_batches,
    score_tree,
    search_space,
    search_tree,
    training_keys,
    tree_trial,
    validation_set,
)
from clusteremu.tuners.pennyworth_store import (  # noqa: F401  (re-exported)
    MANIFEST,
    MAX_CHUNK_BYTES,
    MAX_MANIFEST_BYTES,
    Examples,
    ExamplesOutcome,
    check_folder,
    chunk_table,
    done_chunks,
    generate_examples,
    read_examples,
    read_manifest,
)
from clusteremu.tuners.protocol import Report, Splits, TestSet

# --- all of it ---------------------------------------------------------------------------------


@dataclass
class Synthesis:
    """A synthesised tree, its parameters, its validation score (selection only), the
    search's trials, the example generation, the held-out test report (scored once), and
    wall seconds per phase."""

    tree: RadTree
    params: TreeParams
    score: TreeScore
    search: SearchResult
    examples: ExamplesOutcome
    validation_batches: int
    report: Report | None = None
    seconds: dict[str, float] = field(default_factory=dict)


#: The policies a tree is compared with on the test split: its ablation, then baselines.
ABLATION = "pennyworth-rules"
METHOD = "pennyworth (RAD-tree)"


def held_out_report(
    tree: RadTree,
    spec: SimulationSpec,
    base: Problem,
    plan: ExamplePlan,
    validation: Validation,
    test_batches: int,
    jobs: int,
    title: str,
) -> Report:
    """Score the chosen tree once on `test_batches` test batches (none equivalent to a
    training set or a validation batch), with its ablation and the baselines; the
    protocol's report (actual cost per batch in dollars, paired ratios to the tree)."""
    train = training_keys(plan)
    batches, overlap = draw_batches(
        spec,
        base,
        plan.seed,
        TEST,
        test_batches,
        jobs,
        train | {b.plan_key for b in validation.batches},
    )
    z, slack = tree.safety_z, tree.slack
    policies = {
        METHOD: tree_policy(tree, z, slack),
        ABLATION: rules_policy(z, slack),
        **baseline_policies(),
    }
    scores = TestSet(batches).score(lambda bs: costs_of(policies, bs))
    table = scores.compare(
        METHOD,
        better="lower",
        metric="actual cost per batch ($)",
        baselines=list(baseline_policies()),
        ablations=[ABLATION],
        kind="ratio",
    )
    splits = Splits(
        plan.seed,
        {TRAIN: plan.batches, VALIDATION: len(validation.batches), TEST: len(batches)},
    )
    return Report(
        title,
        splits,
        (validation.overlap, overlap),
        table,
        table.learned_something(ABLATION),
        notes=(
            f"training: {plan.batches} example sets of {plan.jobs} jobs planned on the means "
            f"(the exact optimum with {plan.slack:.0%} of the SLO's bound kept free); "
            f"validation and test: batches of {jobs} "
            "jobs with actual run times drawn as the engine draws them",
            f"the tree plans keeping {slack:.1%} of the SLO's bound free (selected on validation)",
        ),
    )


def synthesize(
    base: Problem,
    plan: ExamplePlan,
    folder: str | Path,
    trials: int,
    workers: int = 1,
    validation_batches: int | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    spec: SimulationSpec | None = None,
    test_batches: int = 50,
) -> Synthesis:
    """Examples into `folder` (resumable), validation batches, the Tune search, the best
    tree fitted again on its examples, and (with `spec`, the scenario) the held-out test
    report. Ray must be initialised. `progress(phase, done, total)` reports the phases
    "examples" (sets) and "search" (trials)."""

    def report(phase: str) -> Callable[[int, int], None] | None:
        if progress is None:
            return None
        return lambda done, total: progress(phase, done, total)

    if spec is None:
        spec = load_scenario(plan.scenario)
    jobs = scenario_jobs(spec)
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    outcome = generate_examples(base, plan, folder, workers, report("examples"))
    seconds["examples_s"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    count = validation_batches or default_validation_batches(plan.batches)
    validation = validation_set(spec, base, plan, count, jobs)
    seconds["validation_s"] = time.perf_counter() - t1
    space = TreeSpace(
        read_examples(folder, plan),
        base.task_names,
        base.type_names,
        base.profiles or {},
        plan.seed,
    )
    if space.examples.y.size == 0:
        raise ExamplesError(
            f"no example set of {plan.jobs} jobs was solved within --time-limit "
            f"{plan.time_limit_s:g} s: raise --time-limit or use fewer --jobs"
        )
    search = search_tree(space, validation, trials, plan.seed, workers, report("search"))
    seconds["search_s"] = search.wall_s
    t2 = time.perf_counter()
    tree = space.fit(search.best)
    score = score_tree(tree, validation, search.best.slack)
    seconds["fit_s"] = time.perf_counter() - t2
    tree.info.update(
        {
            "scenario": plan.scenario,
            "slo": base.slo.kind,
            "jobs_per_set": plan.jobs,
            "batches_used": search.best.batches_used,
            "seed": plan.seed,
            "safety_z": 0.0,
            "slack": search.best.slack,
            "validation_cost_usd": score.mean_cost_usd,
        }
    )
    t3 = time.perf_counter()
    held_out = None
    if test_batches > 0:
        held_out = held_out_report(
            tree,
            spec,
            base,
            plan,
            validation,
            test_batches,
            jobs,
            f"{plan.scenario}: the RAD-tree on held-out batches",
        )
    seconds["test_s"] = time.perf_counter() - t3
    return Synthesis(tree, search.best, score, search, outcome, count, held_out, seconds)


def scenario_jobs(spec: SimulationSpec) -> int:
    """Jobs of the scenario's batch (the size of validation and test batches)."""
    total = sum(int(getattr(c.arrival, "count", 0)) for c in spec.classes)
    if total < 1:
        raise ScenarioFieldError("workload.classes", "batch arrivals with a count (kind: batch)")
    return total
