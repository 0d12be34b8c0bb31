"""Planning and solving the training examples of Pennyworth's synthesis
(`clusteremu.tuners.pennyworth`, which re-exports every name): the scenario's problem
(`scenario_problem`), the example sets drawn from the protocol's instance stream ("train",
i) of the seed (`batch_counts`, `batch_problem`), each solved optimally on the task means by
the exact planner against the SLO tightened by the examples' slack and turned into decision
rows in a canonical renting order (`teacher_plan`, `solve_chunk`), on Ray tasks of
`CHUNK_BATCHES` sets (`run_chunks`), and what an example set is (`ExamplePlan`: the scenario
by name and content, jobs, seed, slack, time limit in seconds, and its chunks, each with a
key hashing what it holds; `plan_examples`)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import ray

from clusteremu.cluster.policies.pennyworth.exact import JobPlan, mean_job_problem, solve_jobs
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
from clusteremu.scenarios import limits
from clusteremu.scenarios.errors import ScenarioError
from clusteremu.scenarios.loader import canonical_name, load_scenario, resolve_path
from clusteremu.tuners.pennyworth_eval import with_counts
from clusteremu.tuners.protocol import instance_rng

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

FORMAT = "clusteremu.pennyworth-examples"
VERSION = 1
#: Batches per Ray task (and per Parquet file); fixed, so the files do not depend on workers.
CHUNK_BATCHES = 50
#: The most seconds the exact planner may spend on one example set before it is skipped
#: (and counted).
BATCH_TIME_LIMIT_S = 20.0
#: The protocol's splits: training sets, validation batches, test batches.
TRAIN, VALIDATION, TEST = "train", "validation", "test"
#: The margin of the examples' plans: the share of the SLO's bound kept free.
EXAMPLE_SLACK = 0.15


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


# --- what an example set is --------------------------------------------------------------------


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
