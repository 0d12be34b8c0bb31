"""Results of a run: the per-job Arrow table and the summary metrics.

Summary keys (a public contract, see docs/scenarios.md): `jobs_completed`,
`mean_response_time_s`, `p50/p95/p99_response_time_s`, `mean_jobs_in_system`
(time-average), `holding_cost_rate` (cost units per second), `utilization` (busy cores over
all cores, 0..1), `cost_usd`, `throughput_per_s`, `per_class`; with several replications each
mean carries a 95% confidence half-width under `ci95`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from scipy import stats

from cluster import layout as L

if TYPE_CHECKING:
    from cluster.engine import Engine

#: Metrics averaged over replications and given a confidence interval.
MEAN_METRICS = (
    "mean_response_time_s",
    "p50_response_time_s",
    "p95_response_time_s",
    "p99_response_time_s",
    "mean_jobs_in_system",
    "holding_cost_rate",
    "utilization",
    "cost_usd",
    "throughput_per_s",
    "mean_wait_s",
)


@dataclass
class RunResult:
    """One replication: the per-job table (all jobs, `measured` marks the warm ones) and summary."""

    jobs: pa.Table
    summary: dict[str, Any]


def _dictionary(indices: np.ndarray, names: list[str]) -> pa.DictionaryArray:
    """A dictionary-encoded string column; negative indices are nulls."""
    names = names or [""]  # an empty dictionary cannot be converted to numpy or pandas
    mask = indices < 0
    return pa.DictionaryArray.from_arrays(
        pa.array(np.where(mask, 0, indices).astype(np.int32), mask=mask),
        pa.array(names, pa.string()),
    )


def build_result(engine: Engine) -> RunResult:
    spec = engine.spec
    jf, ji = engine.jobs_f, engine.jobs_i
    arrival = jf[L.ARRIVAL]
    state = ji[L.STATE]
    done = state == L.DONE
    began = (state == L.RUNNING) | done
    pool = engine.classes_i[L.CLASS_POOL][ji[L.CLS]]
    placed = began & (pool < 0)
    in_pool = (pool >= 0) & (state != L.FUTURE)
    start = np.where(began & (jf[L.START] >= 0), jf[L.START], np.nan)
    end = np.where(done, jf[L.END], np.nan)
    stop = spec.stop
    index = np.arange(arrival.size)
    if stop.time_s is not None:
        measured = (arrival >= stop.warmup_s) & done
    else:
        measured = (index >= stop.warmup_jobs) & done
    # Placed jobs hold their request from start to end (or to now, if still running).
    node = np.where(placed, ji[L.NODE], -1)
    k = np.maximum(node, 0)
    held_s = np.where(placed, np.where(done, jf[L.END], engine.now) - jf[L.START], 0.0)
    cap = engine.nodes_f[L.CAP_CPU][k] if engine.nodes_f.shape[1] else np.ones(1)
    share = np.where(cap > 0, jf[L.REQ_CPU] / np.where(cap > 0, cap, 1.0), 1.0)
    price = engine.nodes_f[L.PRICE_PER_S][k] if engine.nodes_f.shape[1] else np.zeros(1)
    core_seconds = np.where(placed, jf[L.REQ_CPU] * held_s, jf[L.CORE_SECONDS])
    cost = np.where(placed, price * held_s * share, jf[L.COST])
    node_names = [f"{name}-{i}" for i, name in enumerate(spec.nodes)]
    table = pa.table(
        {
            "job": pa.array(index, pa.int64()),
            "replication": pa.array(np.full(arrival.size, engine.replication, dtype=np.int32)),
            "class": _dictionary(ji[L.CLS], [c.name for c in spec.classes]),
            "arrival_s": pa.array(arrival),
            "start_s": pa.array(start),
            "end_s": pa.array(end),
            "response_time_s": pa.array(end - arrival),
            "size": pa.array(jf[L.SIZE]),
            "node": _dictionary(node, node_names),
            "pool": _dictionary(np.where(in_pool, pool, -1), [p.name for p in spec.pools]),
            "core_seconds": pa.array(core_seconds),
            "cost_usd": pa.array(cost),
            "setup_s": pa.array(jf[L.SETUP_S]),
            "retries": pa.array(ji[L.RETRIES].astype(np.int32)),
            "failed": pa.array(state == L.FAILED),
            "measured": pa.array(measured),
        }
    )
    summary = summarize(engine, measured)
    for policy in (engine.placer, engine.allocator, engine.provisioner):
        summary.update(policy.extra_summary(table, summary))
    return RunResult(table, summary)


def _response_stats(resp: np.ndarray, wait: np.ndarray) -> dict[str, Any]:
    if resp.size == 0:
        nan = float("nan")
        return {
            "jobs_completed": 0,
            "mean_response_time_s": nan,
            "p50_response_time_s": nan,
            "p95_response_time_s": nan,
            "p99_response_time_s": nan,
            "mean_wait_s": nan,
        }
    p50, p95, p99 = np.percentile(resp, [50, 95, 99])
    return {
        "jobs_completed": int(resp.size),
        "mean_response_time_s": float(resp.mean()),
        "p50_response_time_s": float(p50),
        "p95_response_time_s": float(p95),
        "p99_response_time_s": float(p99),
        "mean_wait_s": float(wait.mean()),
    }


def summarize(engine: Engine, measured: np.ndarray) -> dict[str, Any]:
    spec = engine.spec
    jf, ji = engine.jobs_f, engine.jobs_i
    resp = jf[L.END] - jf[L.ARRIVAL]
    wait = jf[L.START] - jf[L.ARRIVAL]
    window = float(engine.fstate[L.MEASURED_TIME])
    n_classes = len(spec.classes)
    mean_n = engine.area_class / window if window > 0 else np.zeros(n_classes)
    hold = np.array([c.holding_cost for c in spec.classes])
    arrivals_in_window = _arrivals_in_window(engine)
    total_cores = float(engine.nodes_f[L.CAP_CPU].sum() + engine.pools_f[L.P_CORES].sum())
    elapsed = engine.now
    node_cost = float(engine.nodes_f[L.PRICE_PER_S].sum() * elapsed)
    startup = sum(spec.node_type(t).startup_cost for t in spec.nodes)
    pool_cost = float(engine.pools_f[L.P_PRICE_PER_S].sum() * elapsed)
    summary: dict[str, Any] = {
        "scenario": spec.name,
        "seed": spec.seed,
        "replication": engine.replication,
        **_response_stats(resp[measured], wait[measured]),
        "mean_jobs_in_system": float(mean_n.sum()),
        "holding_cost_rate": float(np.dot(hold, mean_n)),
        "utilization": float(engine.fstate[L.BUSY_AREA] / (total_cores * window))
        if window > 0 and total_cores > 0
        else 0.0,
        "cost_usd": node_cost + startup + pool_cost,
        "throughput_per_s": float(arrivals_in_window.sum() / window) if window > 0 else 0.0,
        "simulated_time_s": elapsed,
        "measured_time_s": window,
        "events": engine.events,
        "decisions": int(engine.istate[L.DECISIONS]),
        "jobs_unfinished": int(((ji[L.STATE] != L.DONE) & (ji[L.STATE] != L.FAILED)).sum()),
        "jobs_failed": int(engine.istate[L.FAILED_COUNT]),
    }
    per_class: dict[str, Any] = {}
    for c, jc in enumerate(spec.classes):
        sel = measured & (ji[L.CLS] == c)
        per_class[jc.name] = {
            **_response_stats(resp[sel], wait[sel]),
            "mean_jobs_in_system": float(mean_n[c]),
            "holding_cost_rate": float(hold[c] * mean_n[c]),
            "throughput_per_s": float(arrivals_in_window[c] / window) if window > 0 else 0.0,
        }
    summary["per_class"] = per_class
    return summary


def _arrivals_in_window(engine: Engine) -> np.ndarray:
    """Arrivals per class inside the measurement window (for Little's law: L = lambda W)."""
    arrival = engine.jobs_f[L.ARRIVAL]
    lo, hi = engine.fstate[L.WIN_START], engine.fstate[L.WIN_END]
    inside = (arrival >= lo) & (arrival <= hi)
    return np.bincount(engine.jobs_i[L.CLS][inside], minlength=len(engine.spec.classes))


def ci95_half_width(values: list[float]) -> float:
    """Half-width of the 95% Student-t confidence interval of the mean."""
    x = np.asarray([v for v in values if not math.isnan(v)], dtype=np.float64)
    if x.size < 2:
        return float("nan")
    return float(stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))


def combine(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """Average replication summaries; with two or more, add `ci95` half-widths."""
    if len(summaries) == 1:
        return dict(summaries[0], replications=1)
    first = summaries[0]
    out: dict[str, Any] = {
        "scenario": first["scenario"],
        "seed": first["seed"],
        "replications": len(summaries),
    }
    out["jobs_completed"] = int(sum(s["jobs_completed"] for s in summaries))
    for key in ("simulated_time_s", "measured_time_s"):
        out[key] = float(np.mean([s[key] for s in summaries]))
    for key in ("events", "decisions", "jobs_unfinished", "jobs_failed"):
        out[key] = int(sum(s[key] for s in summaries))
    out.update(_mean_and_ci(summaries))
    out["per_class"] = {}
    for name in first["per_class"]:
        parts = [s["per_class"][name] for s in summaries]
        entry = _mean_and_ci(parts)
        entry["jobs_completed"] = int(sum(p["jobs_completed"] for p in parts))
        out["per_class"][name] = entry
    return out


def _mean_and_ci(parts: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    ci: dict[str, float] = {}
    for key in MEAN_METRICS:
        if key in parts[0]:
            values = [float(p[key]) for p in parts]
            out[key] = (
                float(np.nanmean(values))
                if not all(math.isnan(v) for v in values)
                else float("nan")
            )
            ci[key] = ci95_half_width(values)
    out["ci95"] = ci
    return out
