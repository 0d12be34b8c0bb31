"""Arrival processes: when jobs of a class arrive (seconds of simulated time).

Each process generates arrival times in chunks from its own generator, so the n-th
arrival of a class is the same whatever else the scenario contains (common random
numbers across policies).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.distributions import Distribution, Exponential

FloatArray = npt.NDArray[np.float64]


class ArrivalProcess:
    """Arrival times in increasing order, generated on demand."""

    #: Long-run arrivals per second (None for finite processes such as batches).
    rate_per_s: float | None = None

    def is_finite(self) -> bool:
        return self.rate_per_s is None

    def generate(self, rng: np.random.Generator, until_s: float, max_count: int) -> FloatArray:
        """All arrivals up to `until_s` seconds, at most `max_count` of them."""
        raise NotImplementedError

    def job_sizes(self, count: int) -> FloatArray | None:
        """Sizes of the first `count` arrivals when the process carries them (a trace with a
        size column), else None: the class's size distribution draws them."""
        return None

    def job_requests(self, count: int) -> tuple[FloatArray, FloatArray, FloatArray] | None:
        """Per-job (cores, GB, GPUs) requests when the process carries them (a trace
        table), else None: the class's request."""
        return None

    def job_estimates(self, count: int) -> FloatArray | None:
        """Per-job run-time estimates (s) when the process carries them, else None."""
        return None

    def job_rows(self, count: int) -> npt.NDArray[np.int64] | None:
        """Per-job rows of a trace table (the order of ties at one instant), else None."""
        return None


@dataclass(frozen=True)
class RenewalArrivals(ArrivalProcess):
    """Renewal process: i.i.d. inter-arrival times from `interarrival`, first at one gap."""

    interarrival: Distribution

    @property
    def rate_per_s(self) -> float | None:  # type: ignore[override]
        return 1.0 / self.interarrival.mean

    def generate(self, rng: np.random.Generator, until_s: float, max_count: int) -> FloatArray:
        rate = 1.0 / self.interarrival.mean
        chunk = (
            int(min(max_count, max(1024, 1.05 * rate * until_s + 64)))
            if until_s < math.inf
            else max_count
        )
        parts: list[FloatArray] = []
        last, count = 0.0, 0
        while count < max_count and last <= until_s:
            gaps = self.interarrival.sample(rng, min(chunk, max_count - count))
            times = np.cumsum(gaps)  # a new array: the start is added in place
            if times.dtype == np.float64:
                times += last
            else:
                times = last + times
            parts.append(times)
            count += times.size
            last = float(times[-1])
        out = parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else np.zeros(0)
        if until_s < math.inf:  # no horizon: every time is before it, no masked copy
            out = out[out <= until_s]
        return out[:max_count]


def poisson_arrivals(rate_per_s: float) -> RenewalArrivals:
    """A Poisson process: exponential gaps with mean 1 / rate."""
    return RenewalArrivals(Exponential(1.0 / rate_per_s))


@dataclass(frozen=True)
class BatchArrivals(ArrivalProcess):
    """`count` jobs all arriving at `at_s` seconds."""

    count: int
    at_s: float = 0.0

    def generate(self, rng: np.random.Generator, until_s: float, max_count: int) -> FloatArray:
        n = min(self.count, max_count) if self.at_s <= until_s else 0
        return np.full(n, self.at_s, dtype=np.float64)


@dataclass(frozen=True)
class TraceArrivals(ArrivalProcess):
    """Arrival times replayed from a trace (already loaded, sorted, in seconds).

    `sizes`, when given, is each arrival's size (work in core-seconds at speed 1, in the
    order of `times_s`): the jobs of the class then take their sizes from the trace, not
    from the class's size distribution.
    """

    times_s: tuple[float, ...]
    sizes: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.sizes is not None:
            if len(self.sizes) != len(self.times_s):
                raise ValueError(
                    f"a trace has {len(self.times_s)} arrival times but {len(self.sizes)} sizes"
                )
            sizes = np.asarray(self.sizes, dtype=np.float64)
            if sizes.size and not (np.all(np.isfinite(sizes)) and np.all(sizes > 0)):
                raise ValueError("trace sizes must be finite and positive")
        if any(np.diff(np.asarray(self.times_s, dtype=np.float64)) < 0):
            raise ValueError("trace arrival times must be sorted")

    def generate(self, rng: np.random.Generator, until_s: float, max_count: int) -> FloatArray:
        times = np.asarray(self.times_s, dtype=np.float64)
        return times[times <= until_s][:max_count]

    def job_sizes(self, count: int) -> FloatArray | None:
        if self.sizes is None:
            return None
        if count > len(self.sizes):
            raise ValueError(f"a trace of {len(self.sizes)} sizes has no size for job {count}")
        return np.asarray(self.sizes[:count], dtype=np.float64)


@dataclass(frozen=True, eq=False)
class TableArrivals(ArrivalProcess):
    """A class's jobs replayed from a trace table (`docs/traces.md`): per-job columns read
    once into arrays, never Python objects per job.

    `times_s` (sorted), `sizes` (the run time in s at speed 1 of a rigid job; +inf: runs
    until the end of the run), `request_cpu` (cores), `request_memory_gb` (GB),
    `request_gpu` (GPUs: a share of one below 1, whole GPUs from 1), `estimate_s` (the
    user's estimate, s; 0: none) and `rows` (each job's row in the table: ties at one
    instant keep the table's order across classes).
    """

    times_s: FloatArray
    sizes: FloatArray
    request_cpu: FloatArray
    request_memory_gb: FloatArray
    request_gpu: FloatArray
    estimate_s: FloatArray
    rows: npt.NDArray[np.int64]

    def generate(self, rng: np.random.Generator, until_s: float, max_count: int) -> FloatArray:
        n = int(np.searchsorted(self.times_s, until_s, side="right"))
        return self.times_s[: min(n, max_count)]

    def job_sizes(self, count: int) -> FloatArray | None:
        return self.sizes[:count]

    def job_requests(self, count: int) -> tuple[FloatArray, FloatArray, FloatArray] | None:
        """Each of the first `count` jobs' own (cores, GB, GPUs) request."""
        return (
            self.request_cpu[:count],
            self.request_memory_gb[:count],
            self.request_gpu[:count],
        )

    def job_estimates(self, count: int) -> FloatArray | None:
        """Each of the first `count` jobs' run-time estimate, s (0: none)."""
        return self.estimate_s[:count]

    def job_rows(self, count: int) -> npt.NDArray[np.int64] | None:
        """Each of the first `count` jobs' row in the trace table (ties keep its order)."""
        return self.rows[:count]


@dataclass(frozen=True)
class RateChanges(ArrivalProcess):
    """`base`'s arrivals until the first change, then a Poisson process at each change's
    rate (arrivals per second, 0: none) from its time on: a timeline's `set_rate` events.

    `changes` holds (at_s, rate_per_s) pairs sorted by time; the draws come from the one
    generator the class's arrivals use.
    """

    base: ArrivalProcess
    changes: tuple[tuple[float, float], ...]

    @property
    def rate_per_s(self) -> float | None:  # type: ignore[override]
        last = self.changes[-1][1]
        return last if last > 0 else None

    def generate(self, rng: np.random.Generator, until_s: float, max_count: int) -> FloatArray:
        first = self.changes[0][0]
        before = self.base.generate(rng, min(until_s, first), max_count)
        parts = [before[before < first]]
        count = parts[0].size
        for i, (at_s, rate) in enumerate(self.changes):
            end = self.changes[i + 1][0] if i + 1 < len(self.changes) else math.inf
            end = min(end, until_s)
            if rate <= 0 or at_s > until_s or count >= max_count:
                continue
            times = at_s + poisson_arrivals(rate).generate(rng, end - at_s, max_count - count)
            times = times[times < end] if end < until_s else times[times <= until_s]
            parts.append(times)
            count += times.size
        return np.concatenate(parts)[:max_count]
