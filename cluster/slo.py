"""Service-level objectives and their losses, in dollars (the Pennyworth paper).

A batch's jobs get response times r_j (seconds). Four kinds of objective:

- `max`: every job within `deadline_s`; loss = penalty_per_s x sum_j max(0, r_j - deadline).
- `rtpt` (response time per task): every job within `factor` x its task's mean run time on
  the node type it runs on, or on `reference_type` when the objective names one (one bound
  per task, whatever type runs it: the Pennyworth paper's "3x the mean response time of an
  instance of that task"); loss = penalty_per_s x sum_j max(0, r_j - factor x mean).
- `avg`: the mean response time within `target_s`; loss = penalty_per_s x max(0, mean - target).
- `percentile`: the ceil(p / 100 x N)-th smallest response time within `target_s`;
  loss = penalty_per_s x max(0, that time - target).

`max` and `rtpt` are sums of per-job terms that never decrease as a job's response time
grows (an A* search may charge them job by job); `avg` and `percentile` depend on the whole
batch (charge them once, at the end). Usable by any scenario: `slo:` at the top level.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

KINDS = ("max", "rtpt", "avg", "percentile")


@dataclass(frozen=True)
class Slo:
    """One objective (see the module doc). Units: seconds, dollars per second late.

    `count_startup_delay`: whether a VM's start-up delay counts in the response times of
    the jobs it runs. `reference_type` (rtpt only): the node type whose task means set the
    bounds (None: the type each job runs on).
    """

    kind: str
    penalty_per_s: float
    deadline_s: float = math.inf
    factor: float = math.inf
    target_s: float = math.inf
    percentile: float = 100.0
    count_startup_delay: bool = False
    reference_type: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"slo.kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if not (math.isfinite(self.penalty_per_s) and self.penalty_per_s >= 0):
            raise ValueError(
                f"slo.penalty_per_s must be a finite number >= 0, got {self.penalty_per_s}"
            )
        needed = {
            "max": ("deadline_s",),
            "rtpt": ("factor",),
            "avg": ("target_s",),
            "percentile": ("target_s", "percentile"),
        }[self.kind]
        for name in needed:
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(
                    f"slo.{name} must be a finite number > 0 for kind {self.kind}, got {value}"
                )
        if self.reference_type is not None and self.kind != "rtpt":
            raise ValueError(f"slo.reference_type applies to kind rtpt only, not {self.kind}")
        if self.kind == "percentile" and not 0 < self.percentile <= 100:
            raise ValueError(f"slo.percentile must lie in (0, 100], got {self.percentile}")

    def tightened(self, slack: float) -> Slo:
        """The same objective with its bound `slack` (a fraction in [0, 1)) tighter: the
        deadline, the rtpt factor or the target times (1 - slack). A plan on estimates that
        meets the tightened bound keeps that share of it as a margin for the spread of the
        actual run times."""
        if not (math.isfinite(slack) and 0.0 <= slack < 1.0):
            raise ValueError(f"slack: expected a fraction from 0 to below 1, got {slack!r}")
        keep = 1.0 - slack
        return replace(
            self,
            deadline_s=self.deadline_s * keep,
            factor=self.factor * keep,
            target_s=self.target_s * keep,
        )

    @property
    def per_job(self) -> bool:
        """Whether the loss is a sum of non-decreasing per-job terms (max, rtpt)."""
        return self.kind in ("max", "rtpt")

    def job_loss(self, response_s: float, task_mean_s: float) -> float:
        """A per-job objective's loss for one job (max, rtpt), dollars."""
        if self.kind == "max":
            return self.penalty_per_s * max(0.0, response_s - self.deadline_s)
        if self.kind == "rtpt":
            return self.penalty_per_s * max(0.0, response_s - self.factor * task_mean_s)
        raise ValueError(f"{self.kind} has no per-job loss")

    def lateness_s(
        self,
        response_s: FloatArray,
        task_mean_s: Sequence[float] | FloatArray | None = None,
    ) -> FloatArray:
        """Each job's time past its limit (seconds) under a per-job objective (max, rtpt)."""
        if self.kind == "max":
            return np.maximum(response_s - self.deadline_s, 0.0)
        if self.kind == "rtpt":
            if task_mean_s is None:
                raise ValueError("rtpt needs each job's task mean run time")
            m = np.asarray(task_mean_s, dtype=np.float64)
            return np.maximum(response_s - self.factor * m, 0.0)
        raise ValueError(f"{self.kind} has no per-job loss")

    def loss(
        self,
        response_s: Sequence[float] | FloatArray,
        task_mean_s: Sequence[float] | FloatArray | None = None,
    ) -> float:
        """The loss of a batch with these response times (and, for rtpt, each job's task
        mean run time: on the node type it ran on, or on `reference_type`), dollars."""
        r = np.asarray(response_s, dtype=np.float64)
        if r.size == 0:
            return 0.0
        if self.per_job:
            return float(self.penalty_per_s * self.lateness_s(r, task_mean_s).sum())
        if self.kind == "avg":
            return float(self.penalty_per_s * max(0.0, float(r.mean()) - self.target_s))
        q = percentile_time(r, self.percentile)
        return float(self.penalty_per_s * max(0.0, q - self.target_s))


def job_losses(
    slo: Slo,
    response_s: Sequence[float] | FloatArray,
    task_mean_s: Sequence[float] | FloatArray | None = None,
) -> FloatArray:
    """Each job's share of the loss, dollars, summing to `slo.loss(...)`: its own term for
    `max` and `rtpt`; the batch-wide loss of `avg` and `percentile` spread evenly."""
    r = np.asarray(response_s, dtype=np.float64)
    if r.size == 0:
        return np.zeros(0)
    if slo.per_job:
        return slo.penalty_per_s * slo.lateness_s(r, task_mean_s)
    return np.full(r.size, slo.loss(r) / r.size)


def percentile_rank(p: float, n: int) -> int:
    """Which response time the percentile SLO judges among n: ceil(p / 100 x n), at least
    the first and at most the n-th (1-based; 0 when n is 0)."""
    return min(n, max(1, math.ceil(p / 100.0 * n - 1e-12)))


def percentile_time(response_s: Sequence[float] | FloatArray, p: float) -> float:
    """The ceil(p / 100 x N)-th smallest response time (at least the smallest)."""
    r = np.sort(np.asarray(response_s, dtype=np.float64))
    return float(r[percentile_rank(p, r.size) - 1])


def slo_from_mapping(data: Mapping[str, Any]) -> Slo:
    """An `Slo` from a scenario's `slo:` block (already schema-checked)."""
    kind = str(data["kind"])
    return Slo(
        kind=kind,
        penalty_per_s=float(data["penalty_per_s"]),
        deadline_s=float(data.get("deadline_s", math.inf)),
        factor=float(data.get("factor", math.inf)),
        target_s=float(data.get("target_s", math.inf)),
        percentile=float(data.get("percentile", 100.0)),
        count_startup_delay=bool(data.get("count_startup_delay", False)),
        reference_type=data.get("reference_type"),
    )
