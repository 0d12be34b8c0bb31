"""The thesis's metrics for sizing requests by bins (Jialun Song's master's thesis;
docs/provisioner.md).

A *binning* of a task's memory is a list of edges e_1 < ... < e_B = A (GB), A its static
allocation; an instance that needs u GB gets b(u), the smallest edge >= u.

- Optimal improvement (a perfect classifier): OI = 1 - sum_j b(u_j) / (N * A); time-based
  OI_t = 1 - sum_j b(u_j) d_j / (A * sum_j d_j) with d_j the run durations.
- u-score: (O + U * penalty) / Total * 100 with O, U the over- and under-estimated
  predictions (penalty > 1; the thesis uses 10).
- Estimated improvement: optimal improvement x accuracy - u-rate (fractions or percent,
  consistently: 88.1 x 0.975 - 0.2 = 85.7).
- Binning search: for a bin count and a stride, every edge set on the stride grid below A
  (each bin keeping at least `min_samples`), the one with the largest (time-based) OI.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def bin_index(usage: FloatArray, edges: Sequence[float] | FloatArray) -> IntArray:
    """The bin of each usage: the index of the smallest edge >= it (the last bin if none)."""
    e = np.asarray(edges, dtype=np.float64)
    return np.minimum(
        np.searchsorted(e, np.asarray(usage, dtype=np.float64), side="left"), e.size - 1
    )


def optimal_improvement(
    usage: FloatArray, edges: Sequence[float], durations: FloatArray | None = None
) -> float:
    """OI (or OI_t with `durations`) of a binning whose last edge is the static allocation."""
    e = np.asarray(edges, dtype=np.float64)
    alloc = e[bin_index(usage, e)]
    top = float(e[-1])
    if durations is None:
        return float(1.0 - alloc.sum() / (alloc.size * top))
    d = np.asarray(durations, dtype=np.float64)
    return float(1.0 - (alloc * d).sum() / (top * d.sum()))


def u_score(predicted: IntArray, actual: IntArray, penalty: float = 10.0) -> float:
    """(O + U x penalty) / Total x 100 over predicted and true bin indices (lower: better)."""
    if penalty <= 1.0:
        raise ValueError(f"u-score penalty must be > 1, got {penalty}")
    p, a = np.asarray(predicted), np.asarray(actual)
    if p.size == 0:
        return 0.0
    over = int((p > a).sum())
    under = int((p < a).sum())
    return (over + under * penalty) / p.size * 100.0


def u_rate(predicted: IntArray, actual: IntArray) -> float:
    """Fraction of predictions below the true bin (under-estimations)."""
    p, a = np.asarray(predicted), np.asarray(actual)
    return float((p < a).mean()) if p.size else 0.0


def estimated_improvement(optimal: float, accuracy: float, under_rate: float) -> float:
    """Optimal improvement x accuracy - u-rate (all in one unit: fractions or percent)."""
    return optimal * accuracy - under_rate


@dataclass(frozen=True)
class Binning:
    """A binning and its optimal improvements (fractions)."""

    edges: tuple[float, ...]
    improvement: float
    time_improvement: float


def search_binning(
    usage: FloatArray,
    static_gb: float,
    bins: int,
    stride_gb: float,
    durations: FloatArray | None = None,
    min_samples: int = 10,
    time_based: bool = True,
) -> Binning:
    """The binning with `bins` bins (the last edge `static_gb`) of largest optimal
    improvement (time-based when `time_based` and durations are given), its edges on the
    grid stride_gb, 2 stride_gb, ... below `static_gb`, each bin with >= `min_samples`."""
    if bins < 1 or stride_gb <= 0 or static_gb <= 0:
        raise ValueError("binning search: bins >= 1, stride > 0 and a static allocation > 0")
    u = np.asarray(usage, dtype=np.float64)
    if np.any(u > static_gb):
        raise ValueError("binning search: a usage exceeds the static allocation")
    grid = np.arange(stride_gb, static_gb, stride_gb)
    # Only edges at or above the smallest usage can be the first edge of a useful bin.
    grid = grid[grid >= np.min(u)] if u.size else grid
    best: Binning | None = None
    use_time = time_based and durations is not None
    for inner in itertools.combinations(grid.tolist(), bins - 1):
        edges = (*inner, float(static_gb))
        counts = np.bincount(bin_index(u, edges), minlength=bins)
        if np.any(counts < min_samples):
            continue
        oi = optimal_improvement(u, edges)
        oi_t = optimal_improvement(u, edges, durations) if durations is not None else oi
        score = oi_t if use_time else oi
        if best is None or score > (best.time_improvement if use_time else best.improvement):
            best = Binning(edges, oi, oi_t)
    if best is None:
        return Binning((float(static_gb),), 0.0, 0.0)
    return best
