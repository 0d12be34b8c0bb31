"""The seed's score (Asenov et al., "Learning to Score", eq. 2; SPEC.md section 4).

Per function f (job class): mean execution time fet_f, mean wait time wait_f and success
ratio N_success / N_total over the requests that arrived in the measurement window, each
normalised to [0, 1] with fixed bounds; the score is their mean over functions, with the
time terms inverted so that higher is better:

    score = mean_f (1/3) * [(1 - norm(fet_f)) + (1 - norm(wait_f)) + success_f],
    norm(v) = clip((v - lo) / (hi - lo), 0, 1).

Execution time is run time on the node (end - start - set-up); wait time is the time from
arrival until the function starts executing (queueing for a feasible node plus the set-up:
image pull, model download and data transfer). A request that failed (no feasible node within
its timeout) or had not finished by the end of the run is unsuccessful. A function with no
successful request gets the worst time terms (norm = 1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa


@dataclass(frozen=True)
class Bounds:
    """Normalisation bounds (seconds) of one function's execution and wait times."""

    exec_s: tuple[float, float]
    wait_s: tuple[float, float]


def norm(value: float, lo: float, hi: float) -> float:
    """clip((value - lo) / (hi - lo), 0, 1); NaN (no data) counts as the worst, 1."""
    if math.isnan(value):
        return 1.0
    if not hi > lo:
        return 0.0 if value <= lo else 1.0
    return float(min(max((value - lo) / (hi - lo), 0.0), 1.0))


def check_bounds(name: str, pair: Sequence[float]) -> tuple[float, float]:
    try:
        lo, hi = (float(x) for x in pair)
    except (TypeError, ValueError):
        raise ValueError(
            f"score_bounds.{name}: expected [lo, hi] in seconds, got {pair!r}"
        ) from None
    if not (math.isfinite(lo) and math.isfinite(hi) and 0 <= lo < hi):
        raise ValueError(f"score_bounds.{name}: expected 0 <= lo < hi, got {pair!r}")
    return lo, hi


def per_function(
    jobs: pa.Table, class_names: Sequence[str], in_window: np.ndarray
) -> dict[str, Any]:
    """Per class: requests, successes, success ratio, mean execution and wait times (s)."""
    cls = jobs["class"].combine_chunks().indices.to_numpy(zero_copy_only=False)
    arrival = jobs["arrival_s"].to_numpy()
    start = jobs["start_s"].to_numpy()
    end = jobs["end_s"].to_numpy()
    setup = jobs["setup_s"].to_numpy()
    failed = jobs["failed"].to_numpy(zero_copy_only=False)
    ok = ~np.isnan(end) & ~failed
    out: dict[str, Any] = {}
    for c, name in enumerate(class_names):
        mine = in_window & (cls == c)
        good = mine & ok
        n_total, n_ok = int(mine.sum()), int(good.sum())
        out[name] = {
            "requests": n_total,
            "successful": n_ok,
            "success_ratio": n_ok / n_total if n_total else float("nan"),
            "mean_exec_s": float(np.mean(end[good] - start[good] - setup[good]))
            if n_ok
            else float("nan"),
            "mean_wait_s": float(np.mean(start[good] - arrival[good] + setup[good]))
            if n_ok
            else float("nan"),
        }
    return out


def seed_score(stats: Mapping[str, Mapping[str, float]], bounds: Mapping[str, Bounds]) -> float:
    """Eq. 2: the mean over functions with requests of (1/3)[(1-n(fet)) + (1-n(wait)) + success]."""
    terms = []
    for name, s in stats.items():
        if not s["requests"]:
            continue
        b = bounds[name]
        terms.append(
            (
                (1.0 - norm(s["mean_exec_s"], *b.exec_s))
                + (1.0 - norm(s["mean_wait_s"], *b.wait_s))
                + s["success_ratio"]
            )
            / 3.0
        )
    return float(np.mean(terms)) if terms else float("nan")
