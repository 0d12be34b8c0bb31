"""What jobs really use, next to what they request: usage models.

A job *requests* resources (what its node reserves: the provisioner decides it) and *uses*
others (what it really needs). The engine compares the two when the job starts
(`clusteremu.cluster.kernel.start_job`): a memory peak above the request kills the job when the peak
occurs (out-of-memory; the provisioner lifts the request and the job waits again, up to its
retry limit), and fewer cores than it keeps busy stretch its run time (`cpu_rule`).

A usage model draws the usages of all jobs of one replication at once, from its own random
stream, so that it may correlate jobs (the tasks of one workflow run share its input
features). It returns a `Usage` and per-job input features (`dict` name -> float array):
the features are what a provisioner may read to size a request (`Jobs.features`); the
usages are what it has to guess.

Models are registered by name (`register_usage_model`); `independent` draws each class's
`ClassUsage` distributions independently per job.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import import_module
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.model import SimulationSpec

FloatArray = npt.NDArray[np.float64]

#: Ways CPU under-provisioning slows a job (`UsageSpec.cpu_rule`), as kernel codes.
CPU_RULES: dict[str, int] = {"none": 0, "proportional": 1}


@dataclass(frozen=True)
class Usage:
    """Per-job real usage, in job order.

    `cpu`: cores the job keeps busy (NaN: exactly its request); `memory_gb`: its memory
    peak, GB (NaN: never above its request); `peak_at`: fraction of its run time at which
    the peak occurs, in [0, 1].
    """

    cpu: FloatArray
    memory_gb: FloatArray
    peak_at: FloatArray
    #: Work of each job, core-seconds at speed 1, when the model decides it (a heavy input
    #: runs longer); None or NaN: the class's size draw.
    size: FloatArray | None = None

    def __post_init__(self) -> None:
        n = self.cpu.size
        if self.memory_gb.size != n or self.peak_at.size != n:
            raise ValueError("usage: cpu, memory_gb and peak_at must have one value per job")
        if self.size is not None and (
            self.size.size != n or np.any(self.size[~np.isnan(self.size)] <= 0)
        ):
            raise ValueError("usage: size needs one value > 0 (or NaN) per job")
        for name, values in (("cpu", self.cpu), ("memory_gb", self.memory_gb)):
            finite = values[~np.isnan(values)]
            if np.any(finite < 0) or np.any(np.isinf(finite)):
                raise ValueError(f"usage: {name} must be finite and >= 0 (NaN = as requested)")
        if np.any(~((self.peak_at >= 0.0) & (self.peak_at <= 1.0))):
            raise ValueError("usage: peak_at must lie in [0, 1]")

    @classmethod
    def none(cls, n: int) -> Usage:
        """Every job uses exactly its request."""
        nan = np.full(n, np.nan)
        return cls(nan, nan.copy(), np.ones(n))

    def select(self, index: npt.NDArray[Any] | slice) -> Usage:
        size = None if self.size is None else self.size[index]
        return Usage(self.cpu[index], self.memory_gb[index], self.peak_at[index], size)

    @staticmethod
    def concat(parts: list[Usage]) -> Usage:
        size = None
        if any(u.size is not None for u in parts):
            size = np.concatenate(
                [u.size if u.size is not None else np.full(u.cpu.size, np.nan) for u in parts]
            )
        return Usage(
            np.concatenate([u.cpu for u in parts]),
            np.concatenate([u.memory_gb for u in parts]),
            np.concatenate([u.peak_at for u in parts]),
            size,
        )


class Arrivals(Protocol):
    """What a usage model reads of the jobs (a `clusteremu.cluster.jobs.Jobs` is one): each job's
    arrival time (s) and class index."""

    @property
    def arrival_s(self) -> npt.NDArray[np.float64]: ...

    @property
    def class_index(self) -> npt.NDArray[np.int64]: ...


#: A usage model: (spec, jobs, its stream, its params) -> (usages, per-job features).
UsageModelFn = Callable[
    [SimulationSpec, Arrivals, np.random.Generator, Mapping[str, Any]],
    tuple[Usage, dict[str, FloatArray]],
]

_MODELS: dict[str, UsageModelFn] = {}
#: Modules holding the built-in usage models besides `independent`, imported on first lookup.
BUILTIN_MODELS = ("clusteremu.cluster.workflow",)
_loaded = False


def _load() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for module in BUILTIN_MODELS:
            import_module(module)


def register_usage_model(name: str) -> Callable[[UsageModelFn], UsageModelFn]:
    """Register a usage model under `name` (the scenario's `workload.usage.model`)."""

    def decorate(fn: UsageModelFn) -> UsageModelFn:
        if name in _MODELS and _MODELS[name] is not fn:
            raise ValueError(f"usage model {name!r} is already registered")
        _MODELS[name] = fn
        return fn

    return decorate


def usage_models() -> list[str]:
    """Names of the registered usage models."""
    _load()
    return sorted(_MODELS)


def usage_model(name: str) -> UsageModelFn:
    _load()
    if name not in _MODELS:
        raise ValueError(f"unknown usage model {name!r}; registered: {', '.join(usage_models())}")
    return _MODELS[name]


def draw_usage(
    spec: SimulationSpec, jobs: Arrivals, rng: np.random.Generator
) -> tuple[Usage, dict[str, FloatArray]]:
    """The usages and features of `jobs` under the scenario's usage model."""
    assert spec.usage is not None
    usage, features = usage_model(spec.usage.model)(spec, jobs, rng, spec.usage.params)
    n = jobs.arrival_s.size
    if usage.cpu.size != n:
        raise ValueError(
            f"usage model {spec.usage.model!r} returned {usage.cpu.size} usages for {n} jobs"
        )
    for name, values in features.items():
        if np.asarray(values).shape != (n,):
            raise ValueError(
                f"usage model {spec.usage.model!r}: feature {name!r} needs one value per job"
            )
    return usage, {k: np.asarray(v, dtype=np.float64) for k, v in features.items()}


@register_usage_model("independent")
def independent(
    spec: SimulationSpec, jobs: Arrivals, rng: np.random.Generator, params: Mapping[str, Any]
) -> tuple[Usage, dict[str, FloatArray]]:
    """Each class's `usage` distributions, drawn independently per job (no features).

    Draws go class by class in class order, each in its jobs' order, so a class's usages
    do not depend on the other classes' job counts beyond the shared stream position.
    """
    if params:
        raise ValueError(f"usage model 'independent' takes no params (got {sorted(params)})")
    usage = Usage.none(jobs.arrival_s.size)
    for c, jc in enumerate(spec.classes):
        mine = np.flatnonzero(jobs.class_index == c)
        if jc.usage is None or mine.size == 0:
            continue
        if jc.usage.memory_gb is not None:
            usage.memory_gb[mine] = jc.usage.memory_gb.sample(rng, mine.size)
        if jc.usage.cpu is not None:
            usage.cpu[mine] = jc.usage.cpu.sample(rng, mine.size)
        usage.peak_at[mine] = jc.usage.peak_at
    return Usage(usage.cpu, usage.memory_gb, usage.peak_at), {}
