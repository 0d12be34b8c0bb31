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
from numba import njit

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
    if not mask.any():
        return pa.DictionaryArray.from_arrays(
            pa.array(indices.astype(np.int32, copy=False)), pa.array(names, pa.string())
        )
    return pa.DictionaryArray.from_arrays(
        pa.array(np.where(mask, 0, indices).astype(np.int32), mask=mask),
        pa.array(names, pa.string()),
    )


@njit(cache=True)
def _job_columns(  # type: ignore[no-untyped-def]
    jobs_f, jobs_i, class_pool, cap_cpu, price_per_s, now, warm_by_time, warmup_s, warmup_jobs
):
    """One pass over the jobs: the derived columns of the per-job table.

    Placed jobs hold their request from start to end (or to `now` if still running), so
    their cores, core-seconds and cost follow from start, end and their node.
    """
    n = jobs_f.shape[1]
    start = np.full(n, np.nan)
    end = np.full(n, np.nan)
    node = np.full(n, -1, dtype=np.int32)
    pool = np.full(n, -1, dtype=np.int32)
    core_seconds = np.zeros(n)
    cost = np.zeros(n)
    measured = np.zeros(n, dtype=np.bool_)
    failed = np.zeros(n, dtype=np.bool_)
    for j in range(n):
        state = jobs_i[L.STATE, j]
        if state == L.FUTURE:
            continue
        done = state == L.DONE
        failed[j] = state == L.FAILED
        began = state == L.RUNNING or done
        if done:
            end[j] = jobs_f[L.END, j]
            if warm_by_time:
                measured[j] = jobs_f[L.ARRIVAL, j] >= warmup_s
            else:
                measured[j] = j >= warmup_jobs
        p = class_pool[jobs_i[L.CLS, j]]
        if p >= 0:
            pool[j] = p
            if jobs_f[L.START, j] >= 0.0:
                start[j] = jobs_f[L.START, j]
            core_seconds[j] = jobs_f[L.CORE_SECONDS, j]
            cost[j] = jobs_f[L.COST, j]
        elif began:
            k = jobs_i[L.NODE, j]
            node[j] = k
            start[j] = jobs_f[L.START, j]
            held = (jobs_f[L.END, j] if done else now) - jobs_f[L.START, j]
            cpu = jobs_f[L.REQ_CPU, j]
            core_seconds[j] = cpu * held
            share = cpu / cap_cpu[k] if cap_cpu[k] > 0 else 1.0
            cost[j] = price_per_s[k] * held * share
    return start, end, node, pool, core_seconds, cost, measured, failed


def build_result(engine: Engine) -> RunResult:
    spec = engine.spec
    jf, ji = engine.jobs_f, engine.jobs_i
    arrival = jf[L.ARRIVAL]
    stop = spec.stop
    start, end, node, pool, core_seconds, cost, measured, failed = _job_columns(
        jf,
        ji,
        engine.classes_i[L.CLASS_POOL],
        engine.nodes_f[L.CAP_CPU],
        engine.nodes_f[L.PRICE_PER_S],
        engine.now,
        stop.time_s is not None,
        stop.warmup_s,
        stop.warmup_jobs,
    )
    n = arrival.size
    node_names = [f"{name}-{i}" for i, name in enumerate(spec.nodes)]
    table = pa.table(
        {
            "job": pa.array(np.arange(n), pa.int64()),
            "replication": pa.array(np.full(n, engine.replication, dtype=np.int32)),
            "class": _dictionary(ji[L.CLS], [c.name for c in spec.classes]),
            "arrival_s": pa.array(arrival),
            "start_s": pa.array(start),
            "end_s": pa.array(end),
            "response_time_s": pa.array(response := end - arrival),
            "size": pa.array(jf[L.SIZE]),
            "node": _dictionary(node, node_names),
            "pool": _dictionary(pool, [p.name for p in spec.pools]),
            "core_seconds": pa.array(core_seconds),
            "cost_usd": pa.array(cost),
            "setup_s": pa.array(jf[L.SETUP_S]),
            "retries": pa.array(ji[L.RETRIES].astype(np.int32)),
            "failed": pa.array(failed),
            "measured": pa.array(measured),
        }
    )
    summary = summarize(engine, measured, response)
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


def summarize(engine: Engine, measured: np.ndarray, response: np.ndarray) -> dict[str, Any]:
    """The run summary from the engine's integrals and the measured jobs' response times."""
    spec = engine.spec
    jf, ji = engine.jobs_f, engine.jobs_i
    resp = response[measured]
    wait = jf[L.START][measured] - jf[L.ARRIVAL][measured]
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
        **_response_stats(resp, wait),
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
        "jobs_unfinished": int(
            ji.shape[1] - engine.istate[L.DONE_COUNT] - (ji[L.STATE] == L.FUTURE).sum()
        ),
        "jobs_failed": int(engine.istate[L.FAILED_COUNT]),
    }
    per_class: dict[str, Any] = {}
    measured_class = ji[L.CLS][measured] if n_classes > 1 else None
    for c, jc in enumerate(spec.classes):
        if measured_class is None:
            stats_c = {k: summary[k] for k in _response_stats(resp[:0], wait[:0])}
        else:
            sel = measured_class == c
            stats_c = _response_stats(resp[sel], wait[sel])
        per_class[jc.name] = {
            **stats_c,
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
    from scipy import stats  # imported on use: scipy.stats costs ~0.4 s at start-up

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
    # Keys a policy family adds (extra_summary): numbers are averaged (with a ci95), mappings
    # averaged leaf by leaf, anything else taken from the first replication.
    for key in first:
        if key not in out and key != "replication":
            values = [s[key] for s in summaries if key in s]
            out[key] = _average(values)
            if all(_is_number(v) for v in values):
                out["ci95"][key] = ci95_half_width([float(v) for v in values])
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _average(values: list[Any]) -> Any:
    """Mean of numbers, leaf-wise mean of mappings with the same keys, else the first."""
    if all(_is_number(v) for v in values):
        return float(np.mean(values))
    if all(isinstance(v, dict) for v in values):
        keys = [k for k in values[0] if all(k in v for v in values)]
        return {k: _average([v[k] for v in values]) for k in keys}
    return values[0]


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
