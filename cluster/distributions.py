"""Probability distributions for job sizes and inter-arrival times (seconds or core-seconds).

Each distribution is a small frozen dataclass with `sample(rng, n)` and `mean`. Sampling
always goes through a caller-owned `numpy.random.Generator`, so every random stream of a
scenario is reproducible on its own (common random numbers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


class Distribution:
    """A non-negative random variable: `sample` draws, `mean` is E[X]."""

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        raise NotImplementedError

    @property
    def mean(self) -> float:
        raise NotImplementedError

    @property
    def second_moment(self) -> float:
        """E[X^2], used by analytical checks (M/G/1 and friends)."""
        raise NotImplementedError


@dataclass(frozen=True)
class Exponential(Distribution):
    """Exponential with the given mean."""

    mean_value: float

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        return rng.exponential(self.mean_value, n)

    @property
    def mean(self) -> float:
        return self.mean_value

    @property
    def second_moment(self) -> float:
        return 2.0 * self.mean_value**2


@dataclass(frozen=True)
class HyperExponential(Distribution):
    """Mixture of exponentials: branch i with probability probabilities[i], mean means[i]."""

    probabilities: tuple[float, ...]
    means: tuple[float, ...]

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        p = np.asarray(self.probabilities)
        branch = rng.choice(len(p), size=n, p=p / p.sum())
        return rng.exponential(1.0, n) * np.asarray(self.means)[branch]

    @property
    def mean(self) -> float:
        return float(np.dot(self.probabilities, self.means))

    @property
    def second_moment(self) -> float:
        return float(np.dot(self.probabilities, 2.0 * np.square(self.means)))


@dataclass(frozen=True)
class Deterministic(Distribution):
    """Always the same value."""

    value: float

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        return np.full(n, self.value, dtype=np.float64)

    @property
    def mean(self) -> float:
        return self.value

    @property
    def second_moment(self) -> float:
        return self.value**2


@dataclass(frozen=True)
class BoundedLognormal(Distribution):
    """Lognormal with log-mean `mu` and log-sd `sigma`, redrawn until inside [low, high]."""

    mu: float
    sigma: float
    low: float = 0.0
    high: float = math.inf

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        out = rng.lognormal(self.mu, self.sigma, n)
        bad = (out < self.low) | (out > self.high)
        for _ in range(1000):
            if not bad.any():
                break
            out[bad] = rng.lognormal(self.mu, self.sigma, int(bad.sum()))
            bad = (out < self.low) | (out > self.high)
        if bad.any():
            out[bad] = np.clip(out[bad], self.low, self.high)
        return out

    @property
    def mean(self) -> float:
        if self.low <= 0.0 and math.isinf(self.high):
            return math.exp(self.mu + self.sigma**2 / 2.0)
        return self._truncated_moment(1)

    @property
    def second_moment(self) -> float:
        if self.low <= 0.0 and math.isinf(self.high):
            return math.exp(2.0 * self.mu + 2.0 * self.sigma**2)
        return self._truncated_moment(2)

    def _truncated_moment(self, order: int) -> float:
        from scipy import stats

        a = -math.inf if self.low <= 0 else (math.log(self.low) - self.mu) / self.sigma
        b = math.inf if math.isinf(self.high) else (math.log(self.high) - self.mu) / self.sigma
        s = order * self.sigma
        mass = stats.norm.cdf(b) - stats.norm.cdf(a)
        shifted = stats.norm.cdf(b - s) - stats.norm.cdf(a - s)
        return float(math.exp(order * self.mu + s * s / 2.0) * shifted / mass)


@dataclass(frozen=True)
class Empirical(Distribution):
    """Resamples uniformly, with replacement, from observed values."""

    values: tuple[float, ...]

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        return rng.choice(np.asarray(self.values, dtype=np.float64), size=n, replace=True)

    @property
    def mean(self) -> float:
        return float(np.mean(self.values))

    @property
    def second_moment(self) -> float:
        return float(np.mean(np.square(self.values)))
