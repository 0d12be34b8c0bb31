"""Speed-up curves s(k): the rate at which a job does work on k cores.

Every curve is linear below one core (s(x) = x for x < 1, as the MDP paper defines) and is
validated to satisfy s(1) = 1, non-decreasing and concave on k >= 1. Work is measured in
core-seconds at speed 1, so a job of size x on k cores of a speed-v node runs for
x / (v * s(k)) seconds.

The engine evaluates curves inside its compiled loop; each curve therefore also has a
plain-data encoding (`kernel_code`, `kernel_params`) read by
`clusteremu.cluster.kernel.speedup_value`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# Kernel codes: keep in sync with clusteremu.cluster.kernel.speedup_value.
LINEAR, AMDAHL, POWER, ROOFTOP, TABLE = 0, 1, 2, 3, 4
SMOOTH_ROOFTOP = 5
RIGID = 6
#: Longest tabulated curve the kernel carries (points on the concave hull).
MAX_TABLE_POINTS = 64


class SpeedupError(ValueError):
    """A speed-up curve violates s(1) = 1, monotonicity or concavity."""


@dataclass(frozen=True)
class Speedup:
    """Base class: s(k) for k cores, vectorised over numpy arrays."""

    kernel_code: ClassVar[int] = LINEAR

    def value(self, cores: npt.ArrayLike) -> FloatArray:
        """s(k) for k cores (k >= 0); linear below one core."""
        k = np.asarray(cores, dtype=np.float64)
        return np.where(k < 1.0, k, self._above_one(np.maximum(k, 1.0)))

    def derivative(self, cores: npt.ArrayLike) -> FloatArray:
        """s'(k), the right derivative at k = 1 and at table breakpoints."""
        k = np.asarray(cores, dtype=np.float64)
        return np.where(k < 1.0, 1.0, self._derivative_above_one(np.maximum(k, 1.0)))

    def _above_one(self, k: FloatArray) -> FloatArray:
        return k

    def _derivative_above_one(self, k: FloatArray) -> FloatArray:
        return np.ones_like(k)

    def kernel_params(self) -> FloatArray:
        """Parameters read by the compiled loop (first entry is the scalar parameter)."""
        return np.zeros(1)

    def table_points(self) -> tuple[FloatArray, FloatArray]:
        """Breakpoints (cores, speed-up) for tabulated curves; empty for closed forms."""
        return np.zeros(0), np.zeros(0)

    def is_linear(self) -> bool:
        return False


@dataclass(frozen=True)
class LinearSpeedup(Speedup):
    """s(k) = k: perfectly parallel (processor sharing under EQUI)."""

    kernel_code: ClassVar[int] = LINEAR

    def is_linear(self) -> bool:
        return True


@dataclass(frozen=True)
class AmdahlSpeedup(Speedup):
    """s(k) = 1 / ((1 - p) + p / k) for k >= 1, p the parallel fraction in [0, 1]."""

    parallel_fraction: float
    kernel_code: ClassVar[int] = AMDAHL

    def __post_init__(self) -> None:
        if not 0.0 <= self.parallel_fraction <= 1.0:
            raise SpeedupError(
                f"amdahl parallel_fraction must lie in [0, 1], got {self.parallel_fraction}"
            )

    def _above_one(self, k: FloatArray) -> FloatArray:
        p = self.parallel_fraction
        return 1.0 / ((1.0 - p) + p / k)

    def _derivative_above_one(self, k: FloatArray) -> FloatArray:
        p = self.parallel_fraction
        return p / (k * k * ((1.0 - p) + p / k) ** 2)

    def kernel_params(self) -> FloatArray:
        return np.array([self.parallel_fraction])

    def is_linear(self) -> bool:
        return self.parallel_fraction == 1.0


@dataclass(frozen=True)
class PowerSpeedup(Speedup):
    """s(k) = k**a for k >= 1, exponent a in (0, 1]."""

    exponent: float
    kernel_code: ClassVar[int] = POWER

    def __post_init__(self) -> None:
        if not 0.0 < self.exponent <= 1.0:
            raise SpeedupError(f"power exponent must lie in (0, 1], got {self.exponent}")

    def _above_one(self, k: FloatArray) -> FloatArray:
        return k**self.exponent

    def _derivative_above_one(self, k: FloatArray) -> FloatArray:
        return self.exponent * k ** (self.exponent - 1.0)

    def kernel_params(self) -> FloatArray:
        return np.array([self.exponent])

    def is_linear(self) -> bool:
        return self.exponent == 1.0


@dataclass(frozen=True)
class RigidSpeedup(Speedup):
    """s(k) = 1 for every k > 0: a rigid job runs its size in seconds (at speed 1) on the
    cores it holds, below one core too (a trace's jobs hold their request for their logged
    run time; docs/traces.md). Not linear below one core, unlike the other curves."""

    kernel_code: ClassVar[int] = RIGID

    def value(self, cores: npt.ArrayLike) -> FloatArray:
        k = np.asarray(cores, dtype=np.float64)
        return np.where(k > 0.0, 1.0, 0.0)

    def derivative(self, cores: npt.ArrayLike) -> FloatArray:
        return np.zeros_like(np.asarray(cores, dtype=np.float64))

    def _above_one(self, k: FloatArray) -> FloatArray:
        return np.ones_like(k)

    def _derivative_above_one(self, k: FloatArray) -> FloatArray:
        return np.zeros_like(k)


@dataclass(frozen=True)
class RooftopSpeedup(Speedup):
    """s(k) = min(k, max_cores): linear up to a cap, flat beyond it."""

    max_cores: float
    kernel_code: ClassVar[int] = ROOFTOP

    def __post_init__(self) -> None:
        if not self.max_cores >= 1.0:
            raise SpeedupError(f"rooftop max_cores must be at least 1, got {self.max_cores}")

    def _above_one(self, k: FloatArray) -> FloatArray:
        return np.minimum(k, self.max_cores)

    def _derivative_above_one(self, k: FloatArray) -> FloatArray:
        return np.where(k < self.max_cores, 1.0, 0.0)

    def kernel_params(self) -> FloatArray:
        return np.array([self.max_cores])


@dataclass(frozen=True)
class SmoothRooftopSpeedup(Speedup):
    """A rooftop with a rounded knee: s(k) = ((k^-q + m^-q) / (1 + m^-q))^(-1/q) for k >= 1.

    The power mean of k and the cap m with exponent -q, scaled so s(1) = 1: concave,
    strictly increasing and twice differentiable (the WHAM paper's assumptions, which the sharp
    rooftop breaks), tending to min(k, m) (times (1 + m^-q)^(1/q)) as the sharpness q grows.
    Its f of Definition 6.6 is c m^q / k^(q+1) (see clusteremu.cluster.policies.relaxed_bound).
    """

    max_cores: float
    sharpness: float = 4.0
    kernel_code: ClassVar[int] = SMOOTH_ROOFTOP

    def __post_init__(self) -> None:
        if not self.max_cores >= 1.0:
            raise SpeedupError(f"smooth-rooftop max_cores must be at least 1, got {self.max_cores}")
        if not 0.0 < self.sharpness <= 64.0:
            raise SpeedupError(
                f"smooth-rooftop sharpness must lie in (0, 64], got {self.sharpness}"
            )

    def _above_one(self, k: FloatArray) -> FloatArray:
        m, q = self.max_cores, self.sharpness
        return ((k**-q + m**-q) / (1.0 + m**-q)) ** (-1.0 / q)

    def _derivative_above_one(self, k: FloatArray) -> FloatArray:
        m, q = self.max_cores, self.sharpness
        # s = g / g(1) with g(k) = (k^-q + m^-q)^(-1/q); g'(k) = (g(k) / k)^(q + 1).
        g1 = (1.0 + m**-q) ** (-1.0 / q)
        return (1.0 + (k / m) ** q) ** (-(q + 1.0) / q) / g1

    def kernel_params(self) -> FloatArray:
        return np.array([self.max_cores, self.sharpness])


@dataclass(frozen=True)
class TableSpeedup(Speedup):
    """A measured curve: the upper concave hull of (cores, speed-up) points.

    The points must include (1, 1) and be non-decreasing in speed-up; the curve is the
    piecewise-linear upper concave hull through them, flat beyond the last point.
    """

    cores: tuple[float, ...]
    speedups: tuple[float, ...]
    hull_cores: tuple[float, ...] = field(init=False)
    hull_speedups: tuple[float, ...] = field(init=False)
    kernel_code: ClassVar[int] = TABLE

    def __post_init__(self) -> None:
        xs = np.asarray(self.cores, dtype=np.float64)
        ys = np.asarray(self.speedups, dtype=np.float64)
        if xs.shape != ys.shape or xs.size < 1:
            raise SpeedupError("table needs as many speed-ups as core counts, at least one")
        if not (np.all(np.isfinite(xs)) and np.all(np.isfinite(ys))):
            raise SpeedupError("table points must be finite numbers")
        order = np.argsort(xs, kind="stable")
        xs, ys = xs[order], ys[order]
        if np.any(np.diff(xs) <= 0):
            raise SpeedupError("table core counts must be distinct")
        if xs[0] < 1.0 or not np.any(np.isclose(xs, 1.0)):
            raise SpeedupError("table must start at the point (1, 1) (cores >= 1, s(1) = 1)")
        if not np.isclose(ys[0], 1.0):
            raise SpeedupError(f"table must have s(1) = 1, got s(1) = {ys[0]}")
        if np.any(np.diff(ys) < 0):
            raise SpeedupError("table speed-ups must be non-decreasing in the core count")
        hx, hy = upper_concave_hull(xs, ys)
        if hx.size > MAX_TABLE_POINTS:
            raise SpeedupError(f"table hull has {hx.size} points; at most {MAX_TABLE_POINTS}")
        if hx.size >= 2 and (hy[1] - hy[0]) / (hx[1] - hx[0]) > 1.0 + 1e-12:
            raise SpeedupError("table slope above one core exceeds 1 (super-linear speed-up)")
        object.__setattr__(self, "hull_cores", tuple(float(v) for v in hx))
        object.__setattr__(self, "hull_speedups", tuple(float(v) for v in hy))

    def _above_one(self, k: FloatArray) -> FloatArray:
        return np.interp(k, self.hull_cores, self.hull_speedups)

    def _derivative_above_one(self, k: FloatArray) -> FloatArray:
        hx = np.asarray(self.hull_cores)
        hy = np.asarray(self.hull_speedups)
        if hx.size < 2:
            return np.zeros_like(k)
        slopes = np.append(np.diff(hy) / np.diff(hx), 0.0)
        idx = np.searchsorted(hx, k, side="right") - 1
        return slopes[np.clip(idx, 0, slopes.size - 1)]

    def table_points(self) -> tuple[FloatArray, FloatArray]:
        return np.asarray(self.hull_cores), np.asarray(self.hull_speedups)


def upper_concave_hull(xs: FloatArray, ys: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Upper concave hull of points sorted by x (Andrew's monotone chain, upper half)."""
    hull: list[tuple[float, float]] = []
    for x, y in zip(xs.tolist(), ys.tolist(), strict=True):
        while len(hull) >= 2:
            (x1, y1), (x2, y2) = hull[-2], hull[-1]
            # Drop the middle point if it lies on or below the chord from hull[-2] to (x, y).
            if (y2 - y1) * (x - x1) <= (y - y1) * (x2 - x1):
                hull.pop()
            else:
                break
        hull.append((x, y))
    arr = np.asarray(hull, dtype=np.float64)
    return arr[:, 0], arr[:, 1]


def check_speedup(speedup: Speedup, max_cores: float = 1024.0) -> None:
    """Check s(1) = 1, non-decreasing and concave on a grid of [1, max_cores]; raise otherwise."""
    grid = np.unique(np.concatenate([np.linspace(1.0, 8.0, 57), np.geomspace(1.0, max_cores, 200)]))
    s = speedup.value(grid)
    if not np.all(np.isfinite(s)):
        raise SpeedupError("speed-up is not finite on [1, max_cores]")
    if not np.isclose(s[0], 1.0):
        raise SpeedupError(f"speed-up must have s(1) = 1, got {s[0]}")
    if np.any(np.diff(s) < -1e-12):
        raise SpeedupError("speed-up must be non-decreasing in the number of cores")
    slopes = np.diff(s) / np.diff(grid)
    if np.any(np.diff(slopes) > 1e-9 * np.maximum(1.0, np.abs(slopes[1:]))):
        raise SpeedupError("speed-up must be concave in the number of cores")
    if slopes[0] > 1.0 + 1e-9:
        raise SpeedupError("speed-up must not be super-linear (s(k) <= k)")
