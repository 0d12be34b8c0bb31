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

    def cdf(self, x: FloatArray) -> FloatArray:
        raise NotImplementedError

    def quantile(self, u: FloatArray) -> FloatArray:
        """Inverse CDF at probabilities u in [0, 1) (bisection on `cdf` unless overridden)."""
        u = np.asarray(u, dtype=np.float64)
        lo = np.zeros_like(u)
        hi = np.full_like(u, max(self.mean, 1e-12))
        for _ in range(200):
            grow = self.cdf(hi) < u
            if not grow.any():
                break
            hi = np.where(grow, hi * 2.0, hi)
        for _ in range(100):
            mid = 0.5 * (lo + hi)
            below = self.cdf(mid) < u
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        return 0.5 * (lo + hi)


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

    def cdf(self, x: FloatArray) -> FloatArray:
        return -np.expm1(-np.asarray(x, dtype=np.float64) / self.mean_value)

    def quantile(self, u: FloatArray) -> FloatArray:
        return -self.mean_value * np.log1p(-np.asarray(u, dtype=np.float64))


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

    def cdf(self, x: FloatArray) -> FloatArray:
        p = np.asarray(self.probabilities) / np.sum(self.probabilities)
        x = np.asarray(x, dtype=np.float64)[..., None]
        return np.sum(p * -np.expm1(-x / np.asarray(self.means)), axis=-1)


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

    def cdf(self, x: FloatArray) -> FloatArray:
        return np.where(np.asarray(x) >= self.value, 1.0, 0.0)

    def quantile(self, u: FloatArray) -> FloatArray:
        return np.full(np.shape(u), self.value, dtype=np.float64)


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

    def _log_bounds(self) -> tuple[float, float]:
        from scipy import stats

        a = (
            0.0
            if self.low <= 0
            else float(stats.norm.cdf((math.log(self.low) - self.mu) / self.sigma))
        )
        b = (
            1.0
            if math.isinf(self.high)
            else float(stats.norm.cdf((math.log(self.high) - self.mu) / self.sigma))
        )
        return a, b

    def cdf(self, x: FloatArray) -> FloatArray:
        from scipy import stats

        a, b = self._log_bounds()
        x = np.asarray(x, dtype=np.float64)
        z = stats.norm.cdf((np.log(np.maximum(x, 1e-300)) - self.mu) / self.sigma)
        return np.clip((z - a) / (b - a), 0.0, 1.0)

    def quantile(self, u: FloatArray) -> FloatArray:
        """Quantile of the lognormal truncated to [low, high]."""
        from scipy import stats

        a, b = self._log_bounds()
        z = stats.norm.ppf(a + np.asarray(u, dtype=np.float64) * (b - a))
        return np.clip(np.exp(self.mu + self.sigma * z), self.low, self.high)

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

    def cdf(self, x: FloatArray) -> FloatArray:
        v = np.sort(np.asarray(self.values, dtype=np.float64))
        return np.searchsorted(v, np.asarray(x, dtype=np.float64), side="right") / v.size

    def quantile(self, u: FloatArray) -> FloatArray:
        return np.quantile(
            np.asarray(self.values, dtype=np.float64), np.asarray(u), method="inverted_cdf"
        )
