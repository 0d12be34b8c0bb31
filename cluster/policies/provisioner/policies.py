"""The learning provisioners (after the thesis; docs/provisioner.md): `grouped`, `vpa`,
`predictive` and its two yardsticks `smallest-bin` and `oracle`.

Each learns from profiling runs (`sizing.profile`: the scenario run with static requests on
a seed stream of its own, `profiling_runs` runs) when it is set up, or reads a sizing model
trained before (`model: PATH`, `clusteremu provision train`). Requests are (cores, GB):

- `grouped`: the thesis's manual sizing: light tasks (peak <= 5 GB in profiling) 5 GB,
  moderate ones (<= 20 GB) 20 GB, the others their static memory; one core for tasks that
  never keep more than one busy.
- `vpa`: Kubernetes' Vertical Pod Autoscaler recommender per task: p90 of a decaying
  histogram (half-life 24 h, buckets growing 5%) x 1.15, at least 250 MiB / 25 mCPU.
- `predictive`: `grouped`, and for heavy tasks a memory bin picked from the run's inputs
  by expected cost: a probability model of the bins (logistic regression) and the GB-h a
  bin costs with lift-and-retry (`cost`; models trained before the rule existed fall
  back to the classifier's bin).
- `most-likely-bin`: `predictive` with the thesis's rule: the bin its classifier
  (gradient boosting or SVM, Optuna-tuned on the u-score) finds most likely.
- `smallest-bin`: `predictive` without its classifier (its ablation): the same learnt
  bins, every heavy instance starts at the smallest and is lifted on out-of-memory.
- `oracle`: `predictive` with a perfect classifier: every heavy instance gets the smallest
  of the same bins covering its true peak (an upper bound no provisioner can reach).

`predictive`, `most-likely-bin`, `smallest-bin` and `oracle` learn the same sizing
(profiling and training are shared within a process), so they differ only in the heavy
tasks' first request.

Out-of-memory: `lift` = `next-bin` (the next edge of the task's bins, capped at static; the
default of grouped and predictive), `double` (x `lift_factor`, default 2), or `vpa`
(max(used + 100 MiB, 1.2 x used); the default of vpa), each capped at the static
allocation; up to `retry_limit` retries.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies.base import LiftRule, Provisioner
from clusteremu.cluster.policies.provisioner.binning import bin_index
from clusteremu.cluster.policies.provisioner.models import design_matrix
from clusteremu.cluster.policies.provisioner.sizing import (
    Sizing,
    TaskSizing,
    group_tasks,
    profile,
    static_of,
    train_sizing,
    vpa_recommendation,
)
from clusteremu.cluster.policies.registry import register

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

LIFTS = ("next-bin", "double", "vpa")
#: VPA's out-of-memory bump: + 100 MiB, or x 1.2, whichever is larger.
VPA_OOM_ADD_GB = 100.0 / 1024.0
VPA_OOM_MULT = 1.2
#: VPA's minimum recommendations: 250 MiB, 25 mCPU.
VPA_MIN_GB = 250.0 / 1024.0
VPA_MIN_CPU = 0.025


#: The last sizing learnt in this process (set-up is checked before a run, then repeated).
_LEARNT: dict[tuple[Any, ...], Sizing] = {}


class LearntProvisioner(Provisioner):
    """Common part: parameters, profiling or loading, lift rules, per-task requests."""

    default_lift = "next-bin"
    #: What `learn` learns: provisioners that learn the same share the sizing (`_LEARNT`).
    learns = "grouped"

    def __init__(
        self,
        model: str | None = None,
        profiling_runs: int = 1300,
        trials: int = 20,
        sampler: str = "tpe",
        lift: str | None = None,
        retry_limit: int = 3,
        lift_factor: float = 2.0,
    ) -> None:
        super().__init__(retry_limit)
        lift = lift or self.default_lift
        if lift not in LIFTS:
            raise ValueError(f"lift must be one of {', '.join(LIFTS)}, got {lift!r}")
        if isinstance(lift_factor, bool) or not isinstance(lift_factor, int | float):
            raise ValueError(f"lift_factor must be a number > 1, got {lift_factor!r}")
        if not lift_factor > 1.0 or lift_factor == float("inf"):
            raise ValueError(
                f"lift_factor must be a finite number > 1 (a lift must grow the request), "
                f"got {lift_factor}"
            )
        self.lift_factor = float(lift_factor)
        if not isinstance(profiling_runs, int) or profiling_runs < 2:
            raise ValueError(f"profiling_runs must be an integer >= 2, got {profiling_runs!r}")
        if not isinstance(trials, int) or trials < 1:
            raise ValueError(f"trials must be an integer >= 1, got {trials!r}")
        if sampler not in ("tpe", "gp"):
            raise ValueError(f"sampler must be tpe or gp, got {sampler!r}")
        self.lift_name = lift
        self.profiling_runs, self.trials, self.sampler = profiling_runs, trials, sampler
        self.sizing: Sizing | None = Sizing.load(model) if model is not None else None
        self.model_path = model
        self._tasks: list[TaskSizing] = []

    def setup(self, spec: SimulationSpec, rng: np.random.Generator) -> None:
        if self.sizing is None:
            seed = int(rng.integers(0, 2**31 - 1))
            key = (
                self.learns,
                seed,
                self.profiling_runs,
                self.trials,
                self.sampler,
                repr(spec.classes),
                repr(spec.usage),
            )
            if key not in _LEARNT:  # a run checks its policies, then sets them up again
                _LEARNT.clear()
                _LEARNT[key] = self.learn(spec, seed)
            self.sizing = _LEARNT[key]
        problem = self.sizing.mismatch(spec)
        if problem is not None:
            raise ValueError(f"provisioner {self.name!r}: {problem}")
        self._tasks = [self.sizing.tasks[c.name] for c in spec.classes]

    def learn(self, spec: SimulationSpec, seed: int) -> Sizing:
        raise NotImplementedError

    def requests_for(
        self, spec: SimulationSpec, jobs: Any
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        cpu = np.array([t.cpu for t in self._tasks])[jobs.class_index]
        mem = np.array([t.memory_gb for t in self._tasks])[jobs.class_index]
        gpu = np.zeros(jobs.class_index.size)
        return cpu, mem, gpu

    def lift_rule(self) -> LiftRule:
        caps = tuple(t.static[1] for t in self._tasks)
        if self.lift_name == "double":
            return LiftRule(self.lift_factor, 0.0, cap_gb=caps)
        if self.lift_name == "vpa":
            return LiftRule(VPA_OOM_MULT, VPA_OOM_ADD_GB, cap_gb=caps)
        return LiftRule(1.0, 1e-9, edges=tuple(t.edges for t in self._tasks), cap_gb=caps)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "lift": self.lift_name, "retry_limit": self.retry_limit}


@register("provisioner", "grouped")
class Grouped(LearntProvisioner):
    """Light 5 GB / moderate 20 GB / heavy static; one core for non-parallel tasks."""

    def learn(self, spec: SimulationSpec, seed: int) -> Sizing:
        prof = profile(spec, self.profiling_runs, seed)
        return Sizing(group_tasks(prof, static_of(spec)), {"rows": prof.table.num_rows})


@register("provisioner", "vpa")
class Vpa(LearntProvisioner):
    """Kubernetes VPA's recommender per task (target = p90 x 1.15 of a decaying histogram)."""

    default_lift = "vpa"
    learns = "vpa"

    def learn(self, spec: SimulationSpec, seed: int) -> Sizing:
        prof = profile(spec, self.profiling_runs, seed)
        mem = prof.table.column("memory_usage_max").to_numpy()
        cpu = prof.table.column("cpu_usage_max").to_numpy()
        tasks: dict[str, TaskSizing] = {}
        for name, (cores, gb) in static_of(spec).items():
            rows = prof.task_rows(name)
            t = prof.arrival_s[rows]
            memory = vpa_recommendation(mem[rows], t, first_bucket=1e7 / 2**30, minimum=VPA_MIN_GB)
            busy = vpa_recommendation(cpu[rows], t, first_bucket=0.01, minimum=VPA_MIN_CPU)
            tasks[name] = TaskSizing("vpa", min(busy, cores), min(memory, gb), (cores, gb))
        return Sizing(tasks, {"rows": prof.table.num_rows})


@register("provisioner", "predictive")
class Predictive(LearntProvisioner):
    """`grouped`, plus a bin classifier per heavy task (trained, or read from `model`)."""

    learns = "predictive"

    def learn(self, spec: SimulationSpec, seed: int) -> Sizing:
        prof = profile(spec, self.profiling_runs, seed)
        return train_sizing(prof, static_of(spec), self.trials, seed, self.sampler)

    def requests_for(
        self, spec: SimulationSpec, jobs: Any
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        cpu, mem, gpu = super().requests_for(spec, jobs)
        for c, t in enumerate(self._tasks):
            if t.heavy is None:
                continue
            mine = np.flatnonzero(jobs.class_index == c)
            if mine.size == 0:
                continue
            if not {"region", "products", "days_left"} <= set(jobs.features):
                raise ValueError(
                    f"provisioner {self.name!r}: task {spec.classes[c].name!r} needs the job "
                    "features region, products and days_left (the ml-workflow usage model)"
                )
            mem[mine] = np.asarray(t.heavy.edges)[self.heavy_bins(t, jobs, mine)]
        return cpu, mem, gpu

    def heavy_bins(self, task: TaskSizing, jobs: Any, mine: IntArray) -> IntArray:
        """The bin (index into `task.heavy.edges`) of each of the heavy task's jobs `mine`:
        the expected-cost rule's choice from the jobs' features (the classifier's
        prediction for a model without the rule)."""
        assert task.heavy is not None
        x = design_matrix({k: v[mine] for k, v in jobs.features.items()})
        if task.heavy.cost_rule is not None:
            return task.heavy.cost_rule.bins(x)
        return task.heavy.model.predict(x)


@register("provisioner", "most-likely-bin")
class MostLikelyBin(Predictive):
    """`predictive`'s bins started at its classifier's most likely bin (the thesis's rule:
    the classifier tuned on the u-score, which charges an under-estimation 10x)."""

    def heavy_bins(self, task: TaskSizing, jobs: Any, mine: IntArray) -> IntArray:
        assert task.heavy is not None
        x = design_matrix({k: v[mine] for k, v in jobs.features.items()})
        return task.heavy.model.predict(x)


@register("provisioner", "smallest-bin")
class SmallestBin(Predictive):
    """`predictive`'s bins without its classifier: every heavy instance starts at the
    smallest bin and is lifted (`next-bin` by default) on out-of-memory."""

    def heavy_bins(self, task: TaskSizing, jobs: Any, mine: IntArray) -> IntArray:
        return np.zeros(mine.size, dtype=np.int64)


@register("provisioner", "oracle")
class Oracle(Predictive):
    """`predictive`'s bins with a perfect classifier: the smallest bin covering each heavy
    instance's true memory peak (the last bin when none does). Reads the usage the jobs
    will have, which no real provisioner can: a bound, not a policy."""

    def heavy_bins(self, task: TaskSizing, jobs: Any, mine: IntArray) -> IntArray:
        assert task.heavy is not None
        if jobs.usage is None:
            raise ValueError("provisioner 'oracle': needs a scenario with a usage model")
        return bin_index(jobs.usage.memory_gb[mine], task.heavy.edges)
