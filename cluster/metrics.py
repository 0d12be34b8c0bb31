"""Results of a run: the per-job Arrow table and the summary metrics.

Summary keys (a public contract, see docs/scenarios.md): `jobs_completed`,
`mean_response_time_s`, `p50/p95/p99_response_time_s`, `mean_jobs_in_system`
(time-average), `holding_cost_rate` (cost units per second), `utilization` (busy cores over
all cores, 0..1), `cost_usd`, `throughput_per_s`, `per_class`; with several replications each
mean carries a 95% confidence half-width under `ci95`. A metric without meaning for a run
is NaN (null in JSON, `n/a` when printed), never 0: the time-averages and the throughput
with a zero-length measurement window (a batch), the response times with no measured job,
a half-width from one replication.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from clusteremu.cluster import summary_metrics
from clusteremu.cluster.capacity import fits_a_node_type, node_types_of_run
from clusteremu.cluster.jit import kernel_function, signals_blocked
from clusteremu.cluster.layout import CI, FS, IS, JF, JI, NF, NI, PF, JobState
from clusteremu.cluster.state import RunState

if TYPE_CHECKING:
    from clusteremu.cluster.policies.base import Policy

#: Metrics averaged over replications and given a confidence interval (`summary_metrics`).
MEAN_METRICS = summary_metrics.names("mean")
#: Bounded slowdown's threshold (s): a job's slowdown is response / max(run, this), at
#: least 1 (Feitelson et al., JSSPP 1997; docs/traces.md).
SLOWDOWN_BOUND_S = 10.0


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


@kernel_function
def _fill_job_columns(  # type: ignore[no-untyped-def]
    jobs_f,
    jobs_i,
    class_pool,
    cap_cpu,
    price_per_s,
    now,
    warm_by_time,
    warmup_s,
    warmup_jobs,
    ids,
    start,
    end,
    node,
    pool,
    core_seconds,
    cost,
    measured,
    failed,
):
    """One pass over the jobs: the derived columns of the per-job table, written into the
    arrays given (made in numpy: allocating here would compile numba's array constructors,
    most of this function's first-run cost).

    Placed jobs hold their request from start to end (or to `now` if still running), so
    their cores, core-seconds and cost follow from start, end and their node.
    """
    for j in range(jobs_f.shape[1]):
        state = jobs_i[JI.STATE, j]
        if state == JobState.FUTURE:
            continue
        done = state == JobState.DONE
        failed[j] = state == JobState.FAILED
        began = state == JobState.RUNNING or done
        if done:
            end[j] = jobs_f[JF.END, j]
            if warm_by_time:
                measured[j] = jobs_f[JF.ARRIVAL, j] >= warmup_s
            else:
                measured[j] = ids[j] >= warmup_jobs
        p = class_pool[jobs_i[JI.CLS, j]]
        if p >= 0:
            pool[j] = p
            if jobs_f[JF.START, j] >= 0.0:
                start[j] = jobs_f[JF.START, j]
            core_seconds[j] = jobs_f[JF.CORE_SECONDS, j]
            cost[j] = jobs_f[JF.COST, j]
        elif began:
            k = jobs_i[JI.NODE, j]
            node[j] = k
            start[j] = jobs_f[JF.START, j]
            held = (jobs_f[JF.END, j] if done else now) - jobs_f[JF.START, j]
            cpu = jobs_f[JF.REQ_CPU, j]
            core_seconds[j] = cpu * held
            share = cpu / cap_cpu[k] if cap_cpu[k] > 0 else 1.0
            cost[j] = price_per_s[k] * held * share


def _job_columns(  # noqa: PLR0913 - the state's columns and the warm-up rule
    jobs_f: np.ndarray,
    jobs_i: np.ndarray,
    class_pool: np.ndarray,
    cap_cpu: np.ndarray,
    price_per_s: np.ndarray,
    now: float,
    warm_by_time: bool,
    warmup_s: float,
    warmup_jobs: int,
    ids: np.ndarray | None = None,
) -> tuple[np.ndarray, ...]:
    """The derived columns of the per-job table: start and end (s), node, pool,
    core-seconds, cost ($), measured, failed (`_fill_job_columns`); `ids`: each row's job
    number (default: its row)."""
    n = jobs_f.shape[1]
    if ids is None:
        ids = np.arange(n, dtype=np.int64)
    columns = (
        np.full(n, np.nan),
        np.full(n, np.nan),
        np.full(n, -1, dtype=np.int32),
        np.full(n, -1, dtype=np.int32),
        np.zeros(n),
        np.zeros(n),
        np.zeros(n, dtype=np.bool_),
        np.zeros(n, dtype=np.bool_),
    )
    # Held as for the engine's loop: SIGTERM while numba compiles or loads this function
    # crashed the process (a segfault instead of exit 143 on a fresh numba cache).
    with signals_blocked():
        _fill_job_columns(
            jobs_f,
            jobs_i,
            class_pool,
            cap_cpu,
            price_per_s,
            now,
            warm_by_time,
            warmup_s,
            warmup_jobs,
            ids,
            *columns,
        )
    return columns


def node_names(
    spec_nodes: tuple[str, ...], node_type: np.ndarray, type_names: list[str]
) -> list[str]:
    """`<type>-<index>` for every node row (static nodes first, then rented ones)."""
    return [
        spec_nodes[k] + f"-{k}" if k < len(spec_nodes) else f"{type_names[t]}-{k}"
        for k, t in enumerate(node_type.tolist())
    ]


def _named_nodes(indices: np.ndarray, names: pa.Array) -> pa.DictionaryArray:
    """`_dictionary(indices, names)` with a dictionary of only the nodes `indices` name
    (in node order): a batch's table names a few of many nodes."""
    mask = indices < 0
    used, inverse = np.unique(np.where(mask, 0, indices), return_inverse=True)
    if not used.size:
        used = np.zeros(1, dtype=np.int64)
    return pa.DictionaryArray.from_arrays(
        pa.array(inverse.astype(np.int32), mask=mask if mask.any() else None),
        names.take(pa.array(used)),
    )


def _copied(values: np.ndarray) -> pa.Array:
    """A column holding a copy of `values` (`pa.array` would share a numpy row's memory)."""
    return pa.array(np.array(values, copy=True))


def _original_sizes(last: np.ndarray, drawn: Mapping[int, tuple[float, ...]]) -> np.ndarray:
    """Each job's size as it arrived (work, s on one core): `last` (the state's, the last
    attempt's) but where a failure drew it again (`RunState.sizes_drawn`)."""
    sizes = last.copy()
    for j, draws in drawn.items():
        sizes[j] = draws[0]
    return sizes


def _redrawn_sizes(n: int, drawn: Mapping[int, tuple[float, ...]]) -> pa.Array:
    """The per-job table's `sizes_drawn`: the sizes drawn for each job's attempts after a
    failure (`restart_work: redraw`), in order; empty for a job never re-queued."""
    lists: list[tuple[float, ...]] = [()] * n
    for j, draws in drawn.items():
        lists[j] = draws[1:]
    return pa.array(lists, pa.list_(pa.float64()))


def build_result(
    run: RunState, policies: tuple[Policy, ...] = (), runs: np.ndarray | None = None
) -> RunResult:
    """The per-job table and the summary of a run state; `runs`: each job's workflow run
    (the usage model's `run` feature) for `mean_run_makespan_s`. The table shares no memory
    with the state: a state of read-only views of a live engine's arrays will do (no copy
    of the whole state, `Engine.result`)."""
    spec, s = run.spec, run.state
    jf, ji = s.jobs_f, s.jobs_i
    arrival = jf[JF.ARRIVAL]
    stop = spec.stop

    start, end, node, pool, core_seconds, cost, measured, failed = _job_columns(
        jf,
        ji,
        s.classes_i[CI.POOL],
        s.nodes_f[NF.CAP_CPU],
        s.nodes_f[NF.PRICE_PER_S],
        run.now_s,
        stop.time_s is not None,
        stop.warmup_s,
        stop.warmup_jobs,
    )
    table = job_table(run, (start, end, node, pool, core_seconds, cost, measured, failed))
    response = end - arrival
    summary = summarize(run, measured, response, failed)
    has_usage = bool(s.istate[IS.HAS_USAGE])
    if spec.has_faults:
        summary.update(fault_summary(run))
    if spec.slo is not None:
        table, summary = _with_slo(run, table, summary, node, start, end, measured)
    if has_usage:
        summary.update(usage_summary(run))
    if runs is not None and np.asarray(runs).size == arrival.size:
        spans = run_makespans(arrival, end, failed, runs)
        summary["mean_run_makespan_s"] = float(spans.mean()) if spans.size else float("nan")
    # The world model's metrics and those the scenario selects (`score`), for every policy.
    from clusteremu.cluster.score_metric import scenario_metrics

    summary.update(scenario_metrics(run, table))
    for policy in policies:
        summary.update(policy.extra_summary(table, summary))
    return RunResult(table, summary)


def job_table(
    run: RunState,
    columns: tuple[np.ndarray, ...],
    ids: np.ndarray | None = None,
    names: pa.Array | None = None,
) -> pa.Table:
    """The per-job table of the state's job rows, from their derived `columns`
    (`_job_columns`); `ids`: each row's job number (default: its row; `sizes_drawn` is
    keyed by row). `names`: the node rows' names (`node_names`) made once for many
    tables; the `node` column's dictionary then holds only the nodes its rows name."""
    spec, s = run.spec, run.state
    jf, ji = s.jobs_f, s.jobs_i
    arrival = jf[JF.ARRIVAL]
    start, end, node, pool, core_seconds, cost, measured, failed = columns
    n = arrival.size
    if ids is None:
        ids = np.arange(n)
    if names is None:
        used = run.nodes_used
        types = [t.name for t in spec.node_types]
        node_column = _dictionary(node, node_names(spec.nodes, s.nodes_i[0, :used], types))
    else:
        node_column = _named_nodes(node, names)
    table = pa.table(
        {
            "job": pa.array(ids, pa.int64()),
            "replication": pa.array(np.full(n, run.replication, dtype=np.int32)),
            "class": _dictionary(ji[JI.CLS], [c.name for c in spec.classes]),
            "arrival_s": _copied(arrival),
            "start_s": pa.array(start),
            "end_s": pa.array(end),
            "response_time_s": pa.array(end - arrival),
            "size": pa.array(_original_sizes(jf[JF.SIZE], run.sizes_drawn)),
            "node": node_column,
            "pool": _dictionary(pool, [p.name for p in spec.pools]),
            "core_seconds": pa.array(core_seconds),
            "cost_usd": pa.array(cost),
            # The set-up of the attempt start_s reports: none (NaN) where start_s is NaN.
            "setup_s": pa.array(np.where(np.isnan(start), np.nan, jf[JF.SETUP_S])),
            "request_cpu": _copied(jf[JF.REQ_CPU]),
            "request_memory_gb": _copied(jf[JF.REQ_MEM]),
            "request_gpu": _copied(jf[JF.REQ_GPU]),
            "retries": pa.array(ji[JI.RETRIES].astype(np.int32)),
            "wasted_core_s": _copied(jf[JF.WASTE_CORE_S]),
            "failed": pa.array(failed),
            "measured": pa.array(measured),
        }
    )
    has_usage = bool(s.istate[IS.HAS_USAGE])
    if has_usage:
        for name, values in usage_columns(jf, ji, s.classes_i[CI.POOL], run.now_s).items():
            table = table.append_column(name, values)
    if spec.has_faults:
        table = table.append_column("failure_kills", pa.array(ji[JI.FAIL_KILLS].astype(np.int32)))
        if spec.restart_work == "redraw":
            table = table.append_column("sizes_drawn", _redrawn_sizes(n, run.sizes_drawn))
    return table


def _with_slo(
    run: RunState,
    table: pa.Table,
    summary: dict[str, Any],
    node: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    measured: np.ndarray,
) -> tuple[pa.Table, dict[str, Any]]:
    """Per-job money and SLO loss columns and the summary's `slo_loss_usd` and `total_usd`
    (money plus SLO loss: the Pennyworth paper's eq. 1), for a scenario with `slo:`
    (`clusteremu.cluster.money`)."""
    from clusteremu.cluster.money import job_money, slo_losses

    s = run.state
    used = run.nodes_used
    nodes_f, nodes_i = s.nodes_f[:, :used], s.nodes_i[:, :used]
    startup, operating = job_money(nodes_f, nodes_i, run.now_s, node, start, end)
    loss = slo_losses(
        run.spec,
        nodes_f,
        nodes_i,
        s.jobs_i[JI.CLS],
        node,
        s.jobs_f[JF.ARRIVAL],
        start,
        end,
        measured,
    )
    table = table.append_column("startup_usd", pa.array(startup))
    table = table.append_column("operating_usd", pa.array(operating))
    table = table.append_column("slo_loss_usd", pa.array(loss))
    total_loss = float(loss.sum())
    summary = {**summary, "slo_loss_usd": total_loss, "total_usd": summary["cost_usd"] + total_loss}
    return table, summary


def usage_columns(
    jf: np.ndarray, ji: np.ndarray, class_pool: np.ndarray, now_s: float
) -> dict[str, pa.Array]:
    """Per-job real usage and what the attempts reserved and used (a usage model's runs),
    attempts still running at `now_s` (the stop) up to then, as `core_seconds` counts them.

    A usage of NaN means "exactly the request" and shows as the last request.
    """
    use_cpu = np.where(np.isnan(jf[JF.USE_CPU]), jf[JF.REQ_CPU], jf[JF.USE_CPU])
    use_mem = np.where(np.isnan(jf[JF.USE_MEM]), jf[JF.REQ_MEM], jf[JF.USE_MEM])
    reserved_cpu, reserved_mem, used_cpu, used_mem = usage_integrals(jf, ji, class_pool, now_s)
    return {
        "usage_cpu": pa.array(use_cpu),
        "usage_memory_gb": pa.array(use_mem),
        "oom_kills": pa.array(ji[JI.OOM_KILLS].astype(np.int32)),
        "reserved_cpu_core_s": pa.array(reserved_cpu),
        "reserved_memory_gb_s": pa.array(reserved_mem),
        "used_cpu_core_s": pa.array(used_cpu),
        "used_memory_gb_s": pa.array(used_mem),
    }


def usage_integrals(
    jf: np.ndarray, ji: np.ndarray, class_pool: np.ndarray, now_s: float
) -> np.ndarray:
    """(reserved cores, reserved GB, used cores, used GB) x held seconds per job: the ended
    attempts' integrals (`kernel._account_usage`) plus the attempt each placed job still
    runs, from its start to `now_s` (a job cannot use more than it holds; NaN: its request)."""
    out = jf[[JF.RESERVED_CPU_S, JF.RESERVED_MEM_S, JF.USED_CPU_S, JF.USED_MEM_S]].copy()
    running = (ji[JI.STATE] == JobState.RUNNING) & (class_pool[ji[JI.CLS]] < 0)
    held = np.where(running, now_s - jf[JF.START], 0.0)
    cpu, mem = jf[JF.REQ_CPU], jf[JF.REQ_MEM]
    # fmin: a NaN usage (exactly the request) gives the request.
    out[0] += cpu * held
    out[1] += mem * held
    out[2] += np.fmin(jf[JF.USE_CPU], cpu) * held
    out[3] += np.fmin(jf[JF.USE_MEM], mem) * held
    return out


def failed_no_fit(run: RunState, failed: np.ndarray) -> int:
    """How many of the `failed` jobs request (their last request) more than an empty node
    of any type the run may hold could give (`clusteremu.cluster.capacity.node_types_of_run`)."""

    s = run.state
    types = node_types_of_run(run.spec, s.nodes_i[NI.NODE_TYPE, : run.nodes_used])
    request = s.jobs_f[[JF.REQ_CPU, JF.REQ_MEM, JF.REQ_GPU]][:, failed]
    return sum(
        not fits_a_node_type(run.spec, types, float(cpu), float(mem), float(gpu))
        for cpu, mem, gpu in request.T
    )


def run_makespans(
    arrival: np.ndarray, end: np.ndarray, failed: np.ndarray, runs: np.ndarray
) -> np.ndarray:
    """Per workflow run whose every job completed (`runs`: each job's run id, `end` NaN
    for a job not done, `failed` True for a failed one): its last job's end minus its
    first job's arrival (s), in run order. Out-of-memory kills and retries lengthen it."""
    r = np.asarray(runs).astype(np.int64)
    if r.size == 0:
        return np.zeros(0)
    n = int(r.max()) + 1
    first = np.full(n, np.inf)
    last = np.full(n, -np.inf)
    np.minimum.at(first, r, arrival)
    np.maximum.at(last, r, np.where(np.isnan(end), -np.inf, end))
    open_ = np.zeros(n, dtype=bool)
    np.logical_or.at(open_, r, np.isnan(end) | np.asarray(failed, dtype=bool))
    complete = (np.bincount(r, minlength=n) > 0) & ~open_
    return (last - first)[complete]


def usage_summary(run: RunState) -> dict[str, Any]:
    """Reserved and used resources over every attempt, the running ones up to the stop
    (core-hours, GB-hours; `usage_integrals`),
    out-of-memory kills and failed jobs (all jobs, not only the measured ones); of those,
    the ones whose last request fits no node type of the run (`failed_no_fit`: a lifted
    request larger than every node, or a request no node ever held)."""
    s = run.state
    jf, ji = s.jobs_f, s.jobs_i
    failed = np.flatnonzero(ji[JI.STATE] == JobState.FAILED)
    integrals = usage_integrals(jf, ji, s.classes_i[CI.POOL], run.now_s)
    reserved_cpu, reserved_mem, used_cpu, used_mem = integrals.sum(axis=1)
    return {
        "reserved_memory_gb_h": float(reserved_mem / 3600.0),
        "used_memory_gb_h": float(used_mem / 3600.0),
        "reserved_cpu_core_h": float(reserved_cpu / 3600.0),
        "used_cpu_core_h": float(used_cpu / 3600.0),
        "oom_kills": int(s.istate[IS.OOM_COUNT]),
        "failed_jobs": int(failed.size),
        "failed_no_fit": failed_no_fit(run, failed),
    }


def fault_summary(run: RunState) -> dict[str, Any]:
    """`failure_kills` (attempts of measured jobs killed by node failures, like
    `jobs_failed`) and the work they lost (`lost_core_s`); `node_failures` and
    `availability` (the fraction of node-time, from ready to released, the nodes were not
    down) from the end of the warm-up to the end of the run."""
    s = run.state
    used = run.nodes_used
    nf = s.nodes_f[:, :used]
    lo = float(s.fstate[FS.WIN_START])
    hi = run.now_s
    measured = in_window(run)
    end = np.minimum(nf[NF.RELEASED_AT], run.now_s)
    node_time = np.clip(np.minimum(end, hi) - np.maximum(nf[NF.READY_AT], lo), 0.0, None)
    down_now = nf[NF.DOWN_SINCE] >= 0.0
    since = np.maximum(nf[NF.DOWN_SINCE], nf[NF.READY_AT])
    open_down = np.clip(np.minimum(end, hi) - np.maximum(since, lo), 0.0, None)
    down = float(nf[NF.DOWN_S].sum() + open_down[down_now].sum())
    total = float(node_time.sum())
    return {
        "node_failures": int(s.istate[IS.NODE_FAILURES]),
        "failure_kills": int(s.jobs_i[JI.FAIL_KILLS][measured].sum()),
        "availability": 1.0 - down / total if total > 0 else float("nan"),
        "lost_core_s": float(s.jobs_f[JF.LOST_CORE_S][measured].sum()),
    }


def in_window(run: RunState) -> np.ndarray:
    """Jobs counted in the statistics: past the warm-up (by index or arrival time)."""
    stop = run.spec.stop
    arrival = run.state.jobs_f[JF.ARRIVAL]
    if stop.time_s is not None:
        return arrival >= stop.warmup_s
    return np.arange(arrival.size) >= stop.warmup_jobs


def node_money(run: RunState) -> tuple[float, float]:
    """(start-up, operating) dollars of every node row handed out, up to now.

    A node costs its start-up cost once, plus its price from ready to release (or now).
    """
    from clusteremu.cluster.money import money_by_node

    used = run.nodes_used
    startup, operating = money_by_node(
        run.state.nodes_f[:, :used], run.state.nodes_i[:, :used], run.now_s
    )
    return float(startup.sum()), float(operating.sum())


def _response_stats(resp: np.ndarray, wait: np.ndarray) -> dict[str, Any]:
    if resp.size == 0:
        nan = float("nan")
        return {
            "jobs_completed": 0,
            "mean_response_time_s": nan,
            "p50_response_time_s": nan,
            "p90_response_time_s": nan,
            "p95_response_time_s": nan,
            "p99_response_time_s": nan,
            "mean_wait_s": nan,
            "mean_bounded_slowdown": nan,
        }
    p50, p90, p95, p99 = np.percentile(resp, [50, 90, 95, 99])
    run = np.maximum(resp - wait, SLOWDOWN_BOUND_S)
    return {
        "jobs_completed": int(resp.size),
        "mean_response_time_s": float(resp.mean()),
        "p50_response_time_s": float(p50),
        "p90_response_time_s": float(p90),
        "p95_response_time_s": float(p95),
        "p99_response_time_s": float(p99),
        "mean_wait_s": float(wait.mean()),
        "mean_bounded_slowdown": float(np.maximum(resp / run, 1.0).mean()),
    }


def _split_by_class(classes: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """(positions sorted by class, each class's bounds in them): class c's positions are
    `order[bounds[c]:bounds[c + 1]]`, in their original order (a stable sort: the same
    elements, summed in the same order, as a mask of class c selects), in one pass over
    the jobs however many classes there are."""
    keys = classes.astype(np.int32 if n_classes >= 1 << 15 else np.int16)
    order = np.argsort(keys, kind="stable")
    bounds = np.zeros(n_classes + 1, dtype=np.int64)
    np.cumsum(np.bincount(classes, minlength=n_classes), out=bounds[1:])
    return order, bounds


def summarize(
    run: RunState, measured: np.ndarray, response: np.ndarray, failed: np.ndarray | None = None
) -> dict[str, Any]:
    """The run summary from the state's integrals and the measured jobs' response times."""
    spec, s = run.spec, run.state
    jf, ji = s.jobs_f, s.jobs_i
    resp = response[measured]
    wait = jf[JF.START][measured] - jf[JF.ARRIVAL][measured]
    n_classes = len(spec.classes)
    figures, class_rates = window_figures(run, _arrivals_in_window(run))
    used = run.nodes_used
    if failed is None:
        failed = ji[JI.STATE] == JobState.FAILED
    past_warmup = in_window(run)
    failed_measured = failed & past_warmup
    failed_class = np.bincount(ji[JI.CLS][failed_measured], minlength=n_classes)
    summary: dict[str, Any] = {
        "scenario": spec.name,
        "seed": spec.seed,
        "replication": run.replication,
        **_response_stats(resp, wait),
        **figures,
        "jobs_unfinished": int(
            ji.shape[1] - s.istate[IS.DONE_COUNT] - (ji[JI.STATE] == JobState.FUTURE).sum()
        ),
        "jobs_failed": int(failed_class.sum()),
        # jobs that arrived and never started (pods never placed), measured or not
        "unscheduled": int(
            np.count_nonzero((ji[JI.STATE] == JobState.QUEUED) & (ji[JI.RETRIES] == 0))
            if ji.shape[1]
            else 0
        ),
        # per-job counts and sums cover the jobs past the warm-up (`in_window`), as
        # `jobs_failed`, `failure_kills` and `lost_core_s` do
        "retries": int(ji[JI.RETRIES][past_warmup].sum()),
        "wasted_core_s": float(jf[JF.WASTE_CORE_S][past_warmup].sum()),
        "jobs_dropped": int(s.istate[IS.DROPPED_COUNT]),
        "nodes_rented": max(used - len(spec.nodes), 0),
    }
    per_class: dict[str, Any] = {}
    by_class = _split_by_class(ji[JI.CLS][measured], n_classes) if n_classes > 1 else None
    for c, jc in enumerate(spec.classes):
        if by_class is None:
            stats_c = {k: summary[k] for k in _response_stats(resp[:0], wait[:0])}
        else:
            order, bounds = by_class
            sel = order[bounds[c] : bounds[c + 1]]
            stats_c = _response_stats(resp[sel], wait[sel])
        per_class[jc.name] = {
            **stats_c,
            "jobs_failed": int(failed_class[c]),
            **class_rates[c],
        }
    summary["per_class"] = per_class
    return summary


def window_figures(
    run: RunState, arrivals_class: np.ndarray
) -> tuple[dict[str, Any], list[dict[str, float]]]:
    """The summary's figures read from the state's integrals and money, in the summary's
    order (`mean_jobs_in_system` to `decisions`), and each class's time-averages
    (`mean_jobs_in_system`, `holding_cost_rate`, `throughput_per_s`), given the arrivals
    per class inside the measurement window: one computation for `summarize` and the
    streamed summary (`clusteremu.cluster.stream_summary`)."""
    spec, s = run.spec, run.state
    window = float(s.fstate[FS.MEASURED_TIME])
    # A zero-length measurement window (a batch arriving at one instant) has no
    # time-averages: those metrics are NaN (printed n/a, null in JSON), never 0.
    nan = float("nan")
    mean_n = s.area_class / window if window > 0 else np.full(len(spec.classes), nan)
    hold = np.array([c.holding_cost for c in spec.classes])
    used = run.nodes_used
    total_cores = float(s.nodes_f[NF.CAP_CPU, :used].sum() + s.pools_f[PF.CORES].sum())
    elapsed = run.now_s
    startup, operating = node_money(run)
    pool_cost = float(s.pools_f[PF.PRICE_PER_S].sum() * elapsed)
    figures = {
        "mean_jobs_in_system": float(mean_n.sum()),
        "holding_cost_rate": float(np.dot(hold, mean_n)),
        "utilization": float(s.fstate[FS.BUSY_AREA] / (total_cores * window))
        if window > 0 and total_cores > 0
        else nan,
        "cost_usd": startup + operating + pool_cost,
        "startup_usd": startup,
        "operating_usd": operating + pool_cost,
        "throughput_per_s": float(arrivals_class.sum() / window) if window > 0 else nan,
        "simulated_time_s": elapsed,
        "measured_time_s": window,
        "events": run.events,
        "decisions": int(s.istate[IS.DECISIONS]),
    }
    class_rates = [
        {
            "mean_jobs_in_system": float(mean_n[c]),
            "holding_cost_rate": float(hold[c] * mean_n[c]),
            "throughput_per_s": float(arrivals_class[c] / window) if window > 0 else nan,
        }
        for c in range(len(spec.classes))
    ]
    return figures, class_rates


def _arrivals_in_window(run: RunState) -> np.ndarray:
    """Arrivals per class inside the measurement window (for Little's law: L = lambda W)."""
    s = run.state
    arrival = s.jobs_f[JF.ARRIVAL]
    lo, hi = s.fstate[FS.WIN_START], s.fstate[FS.WIN_END]
    inside = (arrival >= lo) & (arrival <= hi)
    return np.bincount(s.jobs_i[JI.CLS][inside], minlength=len(run.spec.classes))


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
    for key in summary_metrics.names("sum"):  # counts (`summary_metrics`)
        if key in first:
            out[key] = int(sum(s[key] for s in summaries))
    for key in summary_metrics.names("time"):
        out[key] = float(np.mean([s[key] for s in summaries]))
    out.update(_mean_and_ci(summaries))
    out["per_class"] = {}
    for name in first["per_class"]:
        parts = [s["per_class"][name] for s in summaries]
        entry = _mean_and_ci(parts)
        entry["jobs_completed"] = int(sum(p["jobs_completed"] for p in parts))
        entry["jobs_failed"] = int(sum(p.get("jobs_failed", 0) for p in parts))
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
