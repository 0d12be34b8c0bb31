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
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import re
import tempfile
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import ray
from clusteremu.cluster import readback
from clusteremu.cluster.io import write_json, write_parquet
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies.pennyworth.exact import (
    JobPlan,
    engine_runtimes,
    mean_job_problem,
    solve_jobs,
)
from clusteremu.cluster.policies.pennyworth.features import (
    action_names,
    examples_of_plan,
    feature_names,
    feature_width,
)
from clusteremu.cluster.policies.pennyworth.plan import Plan
from clusteremu.cluster.policies.pennyworth.problem import (
    Problem,
    ScenarioFieldError,
    checked_problem,
)
from clusteremu.cluster.policies.pennyworth.tree import RadTree
from clusteremu.scenarios import limits
from clusteremu.scenarios.errors import ScenarioError
from clusteremu.scenarios.loader import canonical_name, load_scenario, resolve_path
from clusteremu.tuners.pennyworth_eval import (
    ActualBatch,
    actual_cost,
    baseline_policies,
    batch_key,
    batch_spec,
    costs_of,
    draw_batches,
    rules_policy,
    tree_policy,
    with_counts,
)
from clusteremu.tuners.protocol import Overlap, Report, Splits, TestSet, instance_rng

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

FORMAT = "clusteremu.pennyworth-examples"
VERSION = 1
MANIFEST = "_examples.json"
#: Batches per Ray task (and per Parquet file); fixed, so the files do not depend on workers.
CHUNK_BATCHES = 50
#: The most seconds the exact planner may spend on one example set before it is skipped
#: (and counted).
BATCH_TIME_LIMIT_S = 20.0
#: The protocol's splits: training sets, validation batches, test batches.
TRAIN, VALIDATION, TEST = "train", "validation", "test"
#: Replications of each validation batch's run (run-time draws) a plan is scored over.
VALIDATION_DRAWS = 20
#: The margin of the examples' plans: the share of the SLO's bound kept free.
EXAMPLE_SLACK = 0.15
_CHUNK_FILE = re.compile(r"^chunk-(\d{6})-([0-9a-f]{12})\.parquet$")


#: Largest examples chunk read back (bytes) and examples manifest.
MAX_CHUNK_BYTES = 1 * 2**30
MAX_MANIFEST_BYTES = 16 * 2**20


class ExamplesError(ValueError):
    """An examples folder holds other examples, or no example set could be solved; the
    message names the folder (or option) and what was expected."""


# --- the scenario and its batches ------------------------------------------------------------


def scenario_problem(scenario: str) -> Problem:
    """The tasks, VM types and SLO of a scenario, with no jobs (ScenarioError if it has no
    `slo:` or a task without a run time on a rentable node type)."""
    spec = load_scenario(scenario)
    try:
        return checked_problem(spec, "synthesize", counts={})
    except ScenarioFieldError as exc:
        raise ScenarioError(str(resolve_path(scenario)), [(exc.field, exc.expected)]) from None


def batch_counts(n_tasks: int, jobs: int, seed: int, split: str, index: int) -> tuple[int, ...]:
    """Jobs per task of example set `index` of `split`: a task mix of m tasks (m uniform in
    1..n_tasks, the tasks distinct and uniform), each job's task uniform in the mix; from
    the protocol's instance stream (seed, split, index) only."""
    rng = instance_rng(seed, split, index)
    m = int(rng.integers(1, n_tasks + 1))
    mix = rng.choice(n_tasks, m, replace=False)
    counts = np.bincount(rng.choice(mix, jobs), minlength=n_tasks)
    return tuple(int(c) for c in counts)


def batch_problem(base: Problem, jobs: int, seed: int, split: str, index: int) -> Problem:
    """Example set `index` of `split` as a problem (see `batch_counts`)."""
    return with_counts(base, batch_counts(len(base.task_names), jobs, seed, split, index))


@dataclass
class ChunkResult:
    """Solved batches `first`..`last - 1`: decision rows (features `x`, labels `y`, their
    batch and step) and each batch's optimal cost (dollars); `seconds`: the planner's wall time."""

    x: FloatArray
    y: IntArray
    batch: IntArray
    step: IntArray
    optimal_usd: FloatArray
    seconds: float
    #: Sets not proven optimal within the time limit (skipped; no rows).
    skipped: int = 0


def teacher_plan(problem: Problem, plan: JobPlan) -> Plan:
    """An optimal plan over the batch's jobs as a plan over tasks in a canonical renting
    order, the decisions a tree imitates: VMs of the larger types first, then the VM with
    the longest job first (ties: more jobs, then the task list); each VM's jobs in the
    exact planner's run order (its best order for the SLO)."""
    task_of = [t for t, c in enumerate(problem.counts) for _ in range(c)]
    vms = [(k, tuple(task_of[j] for j in jobs)) for k, jobs in plan.vms]
    vms.sort(
        key=lambda vm: (
            -vm[0],
            -max(float(problem.runtime_s[t, vm[0]]) for t in vm[1]),
            -len(vm[1]),
            vm[1],
        )
    )
    return Plan(tuple(vms))


def solve_chunk(
    base: Problem,
    jobs: int,
    seed: int,
    split: str,
    first: int,
    last: int,
    time_limit_s: float = BATCH_TIME_LIMIT_S,
    slack: float = EXAMPLE_SLACK,
) -> ChunkResult:
    """Solve sets first..last-1 of `split` optimally on the means against the SLO
    tightened by `slack` (the exact planner, `exact.solve_jobs`: it proves sets of 20 and
    more jobs optimal where A* on the task counts cannot); their examples (`teacher_plan`'s
    decisions) and optimal costs. A set not proven optimal within `time_limit_s` is
    skipped (and counted)."""
    start = time.perf_counter()
    xs: list[FloatArray] = []
    ys: list[IntArray] = []
    batches: list[IntArray] = []
    steps: list[IntArray] = []
    costs: list[float] = []
    skipped = 0
    for i in range(first, last):
        problem = batch_problem(base, jobs, seed, split, i).with_safety(0.0).with_slack(slack)
        # No time at all proves nothing: every set is skipped (the tests use it).
        found = solve_jobs(mean_job_problem(problem), time_limit_s) if time_limit_s > 0 else None
        if found is None or not found.optimal:
            skipped += 1
            continue
        x, y = examples_of_plan(problem, teacher_plan(problem, found.plan))
        xs.append(x)
        ys.append(y)
        batches.append(np.full(len(y), i, dtype=np.int64))
        steps.append(np.arange(len(y), dtype=np.int64))
        costs.append(found.cost)
    width = feature_width(len(base.task_names), len(base.type_names))
    return ChunkResult(
        np.vstack(xs) if xs else np.zeros((0, width)),
        np.concatenate(ys) if ys else np.zeros(0, dtype=np.int64),
        np.concatenate(batches) if batches else np.zeros(0, dtype=np.int64),
        np.concatenate(steps) if steps else np.zeros(0, dtype=np.int64),
        np.asarray(costs, dtype=np.float64),
        time.perf_counter() - start,
        skipped,
    )


_remote_solve_chunk: Any = None


def _remote() -> Any:
    global _remote_solve_chunk
    if _remote_solve_chunk is None:
        _remote_solve_chunk = ray.remote(num_cpus=1, max_retries=0)(solve_chunk)
    return _remote_solve_chunk


def run_chunks(
    base: Problem,
    jobs: int,
    seed: int,
    split: str,
    chunks: Sequence[tuple[int, int, int]],
    workers: int,
    on_result: Callable[[int, ChunkResult], None],
    time_limit_s: float = BATCH_TIME_LIMIT_S,
    slack: float = EXAMPLE_SLACK,
) -> None:
    """Solve `chunks` ((index, first, last) each) as Ray tasks, at most `workers` at once,
    calling `on_result(index, result)` in the driver as each finishes. Ray must be
    initialised. Interrupted, the running tasks are cancelled (the finished ones were
    already handed to `on_result`)."""
    remote = _remote()
    base_ref = ray.put(base)
    queue = list(reversed(chunks))
    running: dict[Any, int] = {}
    try:
        while queue or running:
            while queue and len(running) < max(1, workers):
                index, first, last = queue.pop()
                ref = remote.remote(base_ref, jobs, seed, split, first, last, time_limit_s, slack)
                running[ref] = index
            ready, _ = ray.wait(list(running), num_returns=1)
            index = running.pop(ready[0])
            on_result(index, ray.get(ready[0]))
    finally:
        for ref in running:
            with suppress(Exception):
                ray.cancel(ref, force=True)


# --- the examples folder ---------------------------------------------------------------------


@dataclass(frozen=True)
class Chunk:
    """Batches `first`..`last - 1`, stored as `filename` (its key hashes what it holds)."""

    index: int
    first: int
    last: int
    key: str

    @property
    def filename(self) -> str:
        return f"chunk-{self.index:06d}-{self.key}.parquet"


@dataclass(frozen=True)
class ExamplePlan:
    """What an example set is: the scenario (by name and content), its tasks and VM types,
    the batches (`batches` of `jobs` jobs, drawn from `seed`) and the chunk size."""

    scenario: str
    scenario_sha256: str
    task_names: tuple[str, ...]
    type_names: tuple[str, ...]
    batches: int
    jobs: int
    seed: int
    chunk_batches: int = CHUNK_BATCHES
    #: The examples' margin (share of the SLO's bound) and the time limit per set (s).
    slack: float = EXAMPLE_SLACK
    time_limit_s: float = BATCH_TIME_LIMIT_S

    def identity(self) -> dict[str, Any]:
        """The manifest entries a folder must share to be resumed (not the batch count)."""
        return {
            "format": FORMAT,
            "version": VERSION,
            "scenario_sha256": self.scenario_sha256,
            "jobs": self.jobs,
            "seed": self.seed,
            "teacher": "exact",
            "slack": self.slack,
            "time_limit_s": self.time_limit_s,
            "chunk_batches": self.chunk_batches,
            "features": feature_names(self.task_names, self.type_names),
            "labels": action_names(self.task_names, self.type_names),
        }

    def manifest(self) -> dict[str, Any]:
        return {**self.identity(), "scenario": self.scenario, "batches": self.batches}

    @property
    def chunks(self) -> tuple[Chunk, ...]:
        out = []
        for index, first in enumerate(range(0, self.batches, self.chunk_batches)):
            last = min(first + self.chunk_batches, self.batches)
            text = json.dumps(
                [
                    self.scenario_sha256,
                    self.jobs,
                    self.seed,
                    first,
                    last,
                    FORMAT,
                    VERSION,
                    "exact",
                    self.slack,
                    self.time_limit_s,
                ],
                separators=(",", ":"),
            )
            out.append(Chunk(index, first, last, hashlib.sha256(text.encode()).hexdigest()[:12]))
        return tuple(out)


def plan_examples(
    scenario: str,
    base: Problem,
    batches: int,
    jobs: int,
    seed: int,
    chunk_batches: int = CHUNK_BATCHES,
    slack: float = EXAMPLE_SLACK,
    time_limit_s: float = BATCH_TIME_LIMIT_S,
) -> ExamplePlan:
    """The example set of `scenario` (whose problem is `base`); ExamplesError when it
    would not fit in memory."""
    width = feature_width(len(base.task_names), len(base.type_names))
    per_batch = 2 * jobs * (width + 3) * 8  # at most 2 decisions a job, float64 rows
    refusal = limits.count_refusal(batches, per_batch, "batches")
    if refusal is not None:
        raise ExamplesError(f"--batches {batches} of --jobs {jobs}: {refusal}")
    sha = hashlib.sha256(resolve_path(scenario).read_bytes()).hexdigest()
    return ExamplePlan(
        canonical_name(scenario),
        sha,
        base.task_names,
        base.type_names,
        batches,
        jobs,
        seed,
        chunk_batches,
        float(slack),
        float(time_limit_s),
    )


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The examples manifest in `folder`, None when there is none (ExamplesError when it
    cannot be read)."""
    path = folder / MANIFEST
    if not path.exists():
        return None
    try:
        data = readback.load_json(path, "an examples manifest", limit=MAX_MANIFEST_BYTES)
    except readback.ReadBackError as exc:
        raise ExamplesError(
            f"{path} cannot be read ({exc.problem}; cut short?): it says which examples "
            f"{folder} holds; "
            f"delete {folder} to start clean, or use another --out"
        ) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ExamplesError(f"{path} is not an examples manifest ({FORMAT}); use another --out")
    return data


def check_folder(folder: Path, plan: ExamplePlan) -> None:
    """Refuse, writing nothing, a folder that is not one (or holds other files), or holds
    examples of another scenario, --jobs, --seed or feature layout."""
    if folder.exists() and not folder.is_dir():
        raise ExamplesError(f"{folder} is a file; expected the examples folder")
    old = read_manifest(folder)
    if old is None:
        if folder.is_dir() and any(not p.name.startswith(".") for p in folder.iterdir()):
            raise ExamplesError(
                f"{folder} holds files but no {MANIFEST}, so they are not examples of "
                "clusteremu synthesize; use another --out or empty the folder"
            )
        return
    new = plan.identity()
    differ = [k for k in new if old.get(k) != new[k]]
    if differ:
        shown = ", ".join(
            f"{k} {old.get(k)!r} (now {new[k]!r})"
            if k not in ("features", "labels")
            else f"{k} (the tasks or VM types changed)"
            for k in differ
        )
        raise ExamplesError(
            f"{folder} holds examples of another configuration: {shown}; use another --out, "
            f"the same scenario, --jobs and --seed to resume, or delete {folder} to start clean"
        )


def _readable(path: Path) -> bool:
    """Whether a chunk file is whole (its footer reads; a chunk whose sets were all past
    the time limit has no rows and is whole too)."""
    try:  # a FIFO or a device is not opened
        return readback.parquet_rows(path, "an examples chunk", MAX_CHUNK_BYTES) >= 0
    except readback.ReadBackError:
        return False


def done_chunks(folder: Path, plan: ExamplePlan) -> set[int]:
    """Indices of the plan's chunks with a readable file. A chunk file of this example set
    that the plan does not hold (another --batches) or that cannot be read is removed."""
    done: set[int] = set()
    if not folder.is_dir():
        return done
    chunks = plan.chunks
    for path in sorted(folder.iterdir()):
        m = _CHUNK_FILE.match(path.name)
        if m is None:
            continue
        index = int(m.group(1))
        if index < len(chunks) and chunks[index].key == m.group(2) and _readable(path):
            done.add(index)
            continue
        log.info("%s: not a chunk of this example set (or cut short); removed", path)
        with suppress(OSError):
            path.unlink()
    return done


def chunk_table(plan: ExamplePlan, result: ChunkResult) -> pa.Table:
    """The Parquet table of a chunk: batch, step, one column per feature, label."""
    columns: dict[str, Any] = {
        "batch": pa.array(result.batch, pa.int32()),
        "step": pa.array(result.step, pa.int32()),
    }
    for j, name in enumerate(feature_names(plan.task_names, plan.type_names)):
        columns[name] = pa.array(result.x[:, j], pa.float64())
    columns["label"] = pa.array(result.y, pa.int32())
    return pa.table(columns)


@dataclass
class ExamplesOutcome:
    """One generation: chunks in all, already on disk, solved now; rows; wall seconds."""

    chunks: int
    skipped: int
    ran: int
    rows: int = 0
    wall_s: float = 0.0
    #: Sets solved now that were not proven optimal within the time limit (no examples).
    unsolved: int = 0


def generate_examples(
    base: Problem,
    plan: ExamplePlan,
    folder: str | Path,
    workers: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> ExamplesOutcome:
    """Write the plan's chunks that `folder` lacks (Ray must be initialised); the others
    are kept. `progress(batches done, batches)` is called as chunks finish."""
    start = time.perf_counter()
    out = Path(folder)
    check_folder(out, plan)
    out.mkdir(parents=True, exist_ok=True)
    if read_manifest(out) != plan.manifest():
        write_json(plan.manifest(), out / MANIFEST)
    chunks = plan.chunks
    done = done_chunks(out, plan)
    outcome = ExamplesOutcome(len(chunks), len(done), 0)
    outcome.rows = sum(
        readback.parquet_rows(out / chunks[i].filename, "an examples chunk", MAX_CHUNK_BYTES)
        for i in done
    )
    finished = [sum(chunks[i].last - chunks[i].first for i in done)]
    if progress is not None:
        progress(finished[0], plan.batches)

    def on_result(index: int, result: ChunkResult) -> None:
        chunk = chunks[index]
        write_parquet(chunk_table(plan, result), out / chunk.filename)
        outcome.ran += 1
        outcome.rows += len(result.y)
        outcome.unsolved += result.skipped
        finished[0] += chunk.last - chunk.first
        if progress is not None:
            progress(finished[0], plan.batches)

    todo = [(c.index, c.first, c.last) for c in chunks if c.index not in done]
    if todo:
        run_chunks(
            base,
            plan.jobs,
            plan.seed,
            TRAIN,
            todo,
            workers,
            on_result,
            plan.time_limit_s,
            plan.slack,
        )
    outcome.wall_s = time.perf_counter() - start
    return outcome


@dataclass(frozen=True)
class Examples:
    """Decision rows of an example set: features `x`, labels `y` and each row's batch."""

    x: FloatArray
    y: IntArray
    batch: IntArray
    batches: int

    def first(self, batches: int) -> tuple[FloatArray, IntArray]:
        """The rows of batches 0..batches-1."""
        keep = self.batch < batches
        return self.x[keep], self.y[keep]


def read_examples(folder: str | Path, plan: ExamplePlan) -> Examples:
    """The plan's rows from `folder`, in batch order (every chunk must be there)."""
    out = Path(folder)
    names = feature_names(plan.task_names, plan.type_names)
    tables = [_read_chunk(out / c.filename, c, plan, names) for c in plan.chunks]
    table = pa.concat_tables(tables)
    x = np.column_stack([table[n].to_numpy() for n in names]).astype(np.float64, copy=False)
    return Examples(
        x,
        table["label"].to_numpy().astype(np.int64),
        table["batch"].to_numpy().astype(np.int64),
        plan.batches,
    )


def _read_chunk(path: Path, chunk: Chunk, plan: ExamplePlan, names: list[str]) -> pa.Table:
    """A chunk file read back: readable Parquet with the chunk's columns (`chunk_table`),
    its batches in the chunk's range, labels among the decisions, finite features
    (ExamplesError naming the file and column otherwise)."""

    def bad(column: str, expected: str) -> ExamplesError:
        return ExamplesError(
            f"{path}: column {column!r}: expected {expected}; delete the file to compute "
            "its examples again"
        )

    try:
        table = readback.read_parquet(path, "an examples chunk", MAX_CHUNK_BYTES)
    except readback.ReadBackError as exc:
        raise ExamplesError(f"{exc}; delete the file to compute its examples again") from None
    for name in ("batch", "step", *names, "label"):
        if name not in table.column_names:
            raise bad(name, "a column of an examples chunk (the file is not one)")
    for name in ("batch", "step", "label"):
        if not pa.types.is_integer(table.schema.field(name).type):
            raise bad(name, "whole numbers")
    batch = table["batch"].to_numpy(zero_copy_only=False)
    if batch.size and (batch.min() < chunk.first or batch.max() >= chunk.last):
        raise bad("batch", f"batches {chunk.first} to {chunk.last - 1}")
    label = table["label"].to_numpy(zero_copy_only=False)
    actions = len(plan.task_names) + len(plan.type_names)
    if label.size and (label.min() < 0 or label.max() >= actions):
        raise bad("label", f"decisions 0 to {actions - 1}")
    for name in names:
        if not pa.types.is_floating(table.schema.field(name).type):
            raise bad(name, "numbers")
        values = table[name].to_numpy(zero_copy_only=False)
        if not np.all(np.isfinite(values)):
            raise bad(name, "finite feature values")
    return table


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
