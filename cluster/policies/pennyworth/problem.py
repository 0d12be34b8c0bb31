"""The allocation problem of one batch (the Pennyworth paper, eq. 1; docs/pennyworth.md).

Jobs are instances of tasks; a task t runs e[t, k] seconds on VM type k (its mean, the
estimate the planner uses). A plan rents VMs, each of one type, and gives each an ordered
job list run one job at a time. Its cost in dollars: for every VM its start-up cost plus
its price x the run times of its jobs, plus the SLO loss of the jobs' response times.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.model import NodeType, SimulationSpec
from clusteremu.cluster.slo import Slo

FloatArray = npt.NDArray[np.float64]
#: Quantile levels of a task's execution-time profile (the RAD-tree's Wasserstein mapping).
PROFILE_LEVELS = np.linspace(0.025, 0.975, 20)
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Problem:
    """Tasks x VM types. `runtime_s[t, k]`: mean run time of task t on type k (inf: it
    cannot run there); `price_per_s[k]`, `startup_usd[k]`, `startup_delay_s[k]`;
    `counts[t]` jobs of task t, whose ids are `job_ids[t]` (in the scenario's job order)."""

    task_names: tuple[str, ...]
    type_names: tuple[str, ...]
    runtime_s: FloatArray
    price_per_s: FloatArray
    startup_usd: FloatArray
    startup_delay_s: FloatArray
    counts: tuple[int, ...]
    job_ids: tuple[tuple[int, ...], ...]
    slo: Slo
    #: Each task's execution-time quantiles per type name (seconds, at
    #: `PROFILE_LEVELS`), when its distributions are known: the RAD-tree maps a task
    #: it never saw to the nearest known one by them.
    profiles: dict[str, dict[str, list[float]]] | None = field(default=None, compare=False)
    #: Standard deviation of each task's run time on each type (s; None: run times are
    #: taken as exact). With `safety_z` > 0 a plan is checked against the SLO with each
    #: job's response time padded by `safety_z` standard deviations of the run times up to
    #: and including it (see `safe_response_s`): plans on estimates that keep a margin.
    runtime_sd_s: FloatArray | None = field(default=None, compare=False)
    #: How many standard deviations of padding the planner keeps (0: plan on the means).
    safety_z: float = 0.0
    #: The share of the SLO's bound kept free as a margin (`with_slack`): `slo` is then the
    #: scenario's objective tightened by it, and `base_slo` the scenario's own.
    slack: float = 0.0
    base_slo: Slo | None = field(default=None, compare=False)
    #: rtpt with a `reference_type`: each task's mean run time on that type (s, one per
    #: task; None: a job's bound follows its own type's mean, `runtime_s`). See
    #: `rtpt_mean_s`.
    reference_mean_s: FloatArray | None = field(default=None, compare=False)

    @property
    def jobs(self) -> int:
        return sum(self.counts)

    def rtpt_mean_s(self) -> FloatArray:
        """The task mean (s) that sets a job's rtpt bound (factor x it), per task and VM
        type: the task's mean on the SLO's `reference_type` whatever type runs it, when
        the SLO names one; else its mean on the type that runs it (`runtime_s`)."""
        if self.reference_mean_s is None or self.slo.reference_type is None:
            return self.runtime_s
        ref = np.asarray(self.reference_mean_s, dtype=np.float64)
        return np.repeat(ref[:, None], np.shape(self.runtime_s)[1], axis=1)

    def runtime_var_s2(self) -> FloatArray:
        """Variance of each task's run time on each type (s^2; zeros when unknown)."""
        if self.runtime_sd_s is None:
            return np.zeros_like(self.runtime_s)
        return np.where(np.isfinite(self.runtime_sd_s), self.runtime_sd_s**2, 0.0)

    def with_safety(self, safety_z: float) -> Problem:
        """The same batch planned with `safety_z` standard deviations of padding."""
        if not (math.isfinite(safety_z) and safety_z >= 0):
            raise ValueError(f"safety_z: expected a number >= 0, got {safety_z!r}")
        return replace(self, safety_z=float(safety_z))

    def with_slack(self, slack: float) -> Problem:
        """The same batch planned against the SLO's bound tightened by `slack` (a fraction
        of the deadline, rtpt factor or target, see `Slo.tightened`): the margin a plan on
        the means keeps for the spread of the actual run times. Not cumulative: the
        scenario's own SLO is tightened each time."""
        base = self.base_slo if self.base_slo is not None else self.slo
        return replace(self, slo=base.tightened(slack), slack=float(slack), base_slo=base)

    def check(self, where: str = "batch") -> None:
        if self.reference_mean_s is not None and np.shape(self.reference_mean_s) != (
            len(self.task_names),
        ):
            raise ValueError(
                f"{where}: reference_mean_s: expected one mean per task "
                f"({len(self.task_names)}), got shape {np.shape(self.reference_mean_s)}"
            )
        for t, name in enumerate(self.task_names):
            if self.counts[t] > 0 and not np.isfinite(self.runtime_s[t]).any():
                raise ValueError(f"{where}: task {name!r} has no run time on any VM type")


def safe_response_s(mean_s: float, var_s2: float, safety_z: float) -> float:
    """A response time padded for the spread of run times (s): the mean of the run times
    up to and including the job plus `safety_z` standard deviations of their sum
    (independent run times: the variances add)."""
    return mean_s + safety_z * math.sqrt(var_s2) if safety_z and var_s2 > 0 else mean_s


def runtime_sd(dist: object) -> float:
    """Standard deviation of a run-time distribution (s; 0 when it has no second moment)."""
    try:
        second = float(dist.second_moment)  # type: ignore[attr-defined]
        mean = float(dist.mean)  # type: ignore[attr-defined]
    except (NotImplementedError, AttributeError):
        return 0.0
    var = second - mean * mean
    return math.sqrt(var) if math.isfinite(var) and var > 0 else 0.0


def vm_types(spec: SimulationSpec) -> list[NodeType]:
    """The VM types of a scenario: its rentable node types (all of them when none is)."""
    return [t for t in spec.node_types if t.rentable] or list(spec.node_types)


class ScenarioFieldError(ValueError):
    """A scenario a Pennyworth command cannot plan: the field and what was expected."""

    def __init__(self, field: str, expected: str) -> None:
        super().__init__(f"{field}: {expected}")
        self.field, self.expected = field, expected


def checked_problem(
    spec: SimulationSpec, command: str, counts: dict[str, int] | None = None
) -> Problem:
    """`problem_from_spec` for a command that plans with the scenario's SLO (`solve`,
    `synthesize`): ScenarioFieldError when it has no `slo:`, or a task without a run time
    on any rentable node type."""
    if spec.slo is None:
        raise ScenarioFieldError(
            "slo", f"{command} needs an slo: {{kind: max|rtpt|avg|percentile, ...}}"
        )
    names = [t.name for t in vm_types(spec)]
    for i, c in enumerate(spec.classes):
        field = f"workload.classes.{i}.runtime_by_node_type"
        if not c.runtime_by_node_type:
            raise ScenarioFieldError(field, f"{command} needs each task's run time per node type")
        if not any(k in c.runtime_by_node_type for k in names):
            raise ScenarioFieldError(
                field,
                f"task {c.name!r} has no run time on any rentable node type ({', '.join(names)})",
            )
    return problem_from_spec(spec, spec.slo, counts)


def problem_from_spec(
    spec: SimulationSpec, slo: Slo, counts: dict[str, int] | None = None
) -> Problem:
    """The batch of a scenario: its classes are tasks (their `runtime_by_node_type` means
    are the estimates), its rentable node types the VM types. Jobs are numbered as the
    engine numbers a batch arriving at once: class by class, in class order."""
    types = vm_types(spec)
    n_tasks = len(spec.classes)
    runtime = np.full((n_tasks, len(types)), math.inf)
    sd = np.zeros((n_tasks, len(types)))
    for i, c in enumerate(spec.classes):
        for k, t in enumerate(types):
            dist = c.runtime_by_node_type.get(t.name)
            if dist is not None:
                runtime[i, k] = float(dist.mean)
                sd[i, k] = runtime_sd(dist)
    if counts is None:
        counts = {c.name: int(getattr(c.arrival, "count", 0)) for c in spec.classes}
    ids: list[tuple[int, ...]] = []
    start = 0
    for c in spec.classes:
        n = int(counts.get(c.name, 0))
        ids.append(tuple(range(start, start + n)))
        start += n
    profiles = {
        c.name: {
            t.name: [float(q) for q in c.runtime_by_node_type[t.name].quantile(PROFILE_LEVELS)]
            for t in types
            if t.name in c.runtime_by_node_type
        }
        for c in spec.classes
    }
    reference = None
    if slo.kind == "rtpt" and slo.reference_type is not None:
        names = [t.name for t in spec.node_types]
        if slo.reference_type not in names:
            raise ScenarioFieldError(
                "slo.reference_type", f"expected one of the node types {', '.join(names)}"
            )
        reference = np.array([c.mean_runtime_on(slo.reference_type) for c in spec.classes])
    problem = Problem(
        tuple(c.name for c in spec.classes),
        tuple(t.name for t in types),
        runtime,
        np.array([t.price_per_hour / 3600.0 for t in types]),
        np.array([t.startup_cost for t in types]),
        np.array([t.startup_delay_s for t in types]),
        tuple(int(counts.get(c.name, 0)) for c in spec.classes),
        tuple(ids),
        slo,
        profiles,
        sd,
        reference_mean_s=reference,
    )
    problem.check()
    return problem
