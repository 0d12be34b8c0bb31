"""Summary metrics of the world model and the Learning to Score paper's score (eq. 2), for
every placer.

`build_result` (cluster/metrics.py) calls `scenario_metrics` for every run, so `run`,
`compare`, `sweep` and tuning see the same keys whatever the policies:

- when the scenario has a world model (`clusteremu.cluster.world`): `mean_setup_s` (mean set-up
delay
  of the measured completed jobs, s), `image_pulls` (images pulled onto nodes over the run),
  `fetched_mb` (MB of images, models and data items fetched onto nodes) and
  `data_transfer_mb` (MB of per-start data moved);
- when the scenario selects it (``metrics: {score: ...}``): `per_function` and `score`.

The score (Asenov et al., "Learning to Score", eq. 2; docs/scoring.md): per function f
(job class), mean execution time fet_f, mean wait time wait_f and success ratio
N_success / N_total over the requests that arrived in the measurement window, each
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
from typing import Any

import numpy as np
import pyarrow as pa

from clusteremu.cluster.model import JobClass, ScoreBounds, SimulationSpec
from clusteremu.cluster.state import RunState
from clusteremu.cluster.world import WF, Stat

#: Eq. 2 bounds of one function (exec_s, wait_s), seconds.
Bounds = ScoreBounds
#: Wait bound (s) of a class without a timeout.
DEFAULT_WAIT_HI_S = 60.0


def norm(value: float, lo: float, hi: float) -> float:
    """clip((value - lo) / (hi - lo), 0, 1); NaN (no data) counts as the worst, 1."""
    if math.isnan(value):
        return 1.0
    if not hi > lo:
        return 0.0 if value <= lo else 1.0
    return float(min(max((value - lo) / (hi - lo), 0.0), 1.0))


def check_bounds(name: str, pair: Sequence[float]) -> tuple[float, float]:
    """A [lo, hi] pair of seconds with 0 <= lo < hi (ValueError naming `name` if not)."""
    try:
        lo, hi = (float(x) for x in pair)
    except (TypeError, ValueError):
        raise ValueError(
            f"score_bounds.{name}: expected [lo, hi] in seconds, got {pair!r}"
        ) from None
    if not (math.isfinite(lo) and math.isfinite(hi) and 0 <= lo < hi):
        raise ValueError(f"score_bounds.{name}: expected 0 <= lo < hi, got {pair!r}")
    return lo, hi


def default_bounds(jc: JobClass) -> ScoreBounds:
    """Bounds of a class the scenario gives none for: exec [0, 2 x the largest mean run
    time] (s), wait [0, the class timeout] (60 s when it has none)."""
    means = [d.mean for d in jc.runtime_by_node_type.values()] or [jc.size.mean]
    hi = 2.0 * max(means) if max(means) > 0 else 1.0
    wait_hi = jc.timeout_s if math.isfinite(jc.timeout_s) else DEFAULT_WAIT_HI_S
    return ScoreBounds((0.0, hi), (0.0, wait_hi))


def score_bounds(spec: SimulationSpec) -> dict[str, ScoreBounds]:
    """Per class name: the scenario's eq. 2 bounds, or `default_bounds`."""
    given = spec.metrics.score.bounds if spec.metrics.score is not None else {}
    return {jc.name: given.get(jc.name) or default_bounds(jc) for jc in spec.classes}


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


def seed_score(
    stats: Mapping[str, Mapping[str, float]], bounds: Mapping[str, ScoreBounds]
) -> float:
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


def score_window(spec: SimulationSpec, jobs: pa.Table) -> np.ndarray:
    """The requests eq. 2 counts: arrived in [warmup_s, time_s], or index >= warmup_jobs."""
    stop = spec.stop
    if stop.time_s is not None:
        arrival = jobs["arrival_s"].to_numpy()
        return (arrival >= stop.warmup_s) & (arrival <= stop.time_s)
    return jobs["job"].to_numpy() >= stop.warmup_jobs


def score_summary(spec: SimulationSpec, jobs: pa.Table) -> dict[str, Any]:
    """`per_function` (with the bounds used) and eq. 2's `score` of a per-job table."""
    names = [c.name for c in spec.classes]
    bounds = score_bounds(spec)
    if jobs.num_rows == 0:
        return {"per_function": {}, "score": float("nan")}
    stats = per_function(jobs, names, score_window(spec, jobs))
    for name, s in stats.items():
        s["exec_bounds_s"] = list(bounds[name].exec_s)
        s["wait_bounds_s"] = list(bounds[name].wait_s)
    return {"per_function": stats, "score": seed_score(stats, bounds)}


def world_summary(run: RunState, jobs: pa.Table) -> dict[str, Any]:
    """The world model's keys (empty when the scenario has none)."""
    wf = run.state.world_f
    if wf.shape[0] == 0:
        return {}
    measured = jobs["measured"].to_numpy(zero_copy_only=False)
    setup = jobs["setup_s"].to_numpy()[measured]
    stats = wf[WF.STATS]
    return {
        "mean_setup_s": float(setup.mean()) if setup.size else float("nan"),
        "image_pulls": int(stats[Stat.IMAGE_PULLS]),
        "fetched_mb": float(stats[Stat.FETCHED_MB]),
        "data_transfer_mb": float(stats[Stat.DATA_MB]),
    }


def scenario_metrics(run: RunState, jobs: pa.Table) -> dict[str, Any]:
    """Every metric of this module that applies to the run (see the module doc)."""
    out = world_summary(run, jobs)
    if run.spec.metrics.score is not None:
        out.update(score_summary(run.spec, jobs))
    return out


__all__ = [
    "Bounds",
    "check_bounds",
    "default_bounds",
    "norm",
    "per_function",
    "scenario_metrics",
    "score_bounds",
    "score_summary",
    "seed_score",
    "world_summary",
]
