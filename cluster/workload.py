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

from cluster.distributions import Distribution, Exponential

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
            times = last + np.cumsum(gaps)
            parts.append(times)
            count += times.size
            last = float(times[-1])
        out = np.concatenate(parts) if parts else np.zeros(0)
        return out[out <= until_s][:max_count]


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
    """Arrival times replayed from a trace (already loaded, sorted, in seconds)."""

    times_s: tuple[float, ...]
    sizes: tuple[float, ...] | None = None

    def generate(self, rng: np.random.Generator, until_s: float, max_count: int) -> FloatArray:
        times = np.asarray(self.times_s, dtype=np.float64)
        return times[times <= until_s][:max_count]
