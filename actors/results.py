"""Put the pieces of a distributed run back together into the engine's result.

Each shard returns its jobs' state columns keyed by global job id; the scheduler returns
the jobs that never reached a node. `merge_result` overlays them on the stream's jobs and
builds the per-job table and summary with `cluster.metrics.build_result`, so the table has
exactly the columns (and, in exact mode, the values) of `clusteremu run`.

Time averages (jobs in system, busy cores of placed jobs) are integrated from the per-job
intervals over the statistics window rather than event by event; they agree with the
kernel's integrals up to floating-point rounding. Pool busy areas come from the pool
shards' own integrals.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from actors.node_shard import RESULT_F_ROWS, RESULT_I_ROWS
from cluster import layout as L
from cluster.engine import Engine, FloatArray, Jobs
from cluster.metrics import RunResult
from cluster.model import SimulationSpec


def _overlap(lo: FloatArray, hi: FloatArray, a: float, b: float) -> FloatArray:
    return np.clip(np.minimum(hi, b) - np.maximum(lo, a), 0.0, None)


def _contiguous(ids: np.ndarray) -> bool:
    return (
        bool(ids.size)
        and int(ids[-1]) - int(ids[0]) + 1 == ids.size
        and (ids.size < 2 or bool(np.all(ids[1:] > ids[:-1])))
    )


def merge_result(
    spec: SimulationSpec,
    replication: int,
    jobs: Jobs,
    window: tuple[float, float],
    parts: list[dict[str, Any]],
    unplaced: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
    extra_events: int = 0,
    extra_decisions: int = 0,
    skeleton: Engine | None = None,
) -> RunResult:
    """Merge shard parts (from `NodeShard.finish`) into one replication's result.

    `unplaced` is the scheduler's (ids, state, end) of jobs that never reached a node
    (exact mode). The result is built by an engine on the full scenario whose state
    arrays are replaced by the merged ones, so it has every column and summary key of a
    single-process run. `skeleton`: that engine, built beforehand (`Engine(spec,
    replication, jobs=jobs)`, not run), e.g. while the actors start; it is overwritten.
    """
    merged = Engine(spec, replication, jobs=jobs) if skeleton is None else skeleton
    jf, ji = merged.jobs_f, merged.jobs_i
    pools_f = merged.pools_f
    now = 0.0
    events, decisions = extra_events, extra_decisions
    for part in parts:
        ids = part["ids"]
        # A contiguous run of ids (a one-shard run) is written as a slice, not scattered.
        at = slice(int(ids[0]), int(ids[-1]) + 1) if _contiguous(ids) else ids
        for i, row in enumerate(RESULT_F_ROWS):
            jf[row, at] = part["jobs_f"][i]
        for i, row in enumerate(RESULT_I_ROWS):
            ji[row, at] = part["jobs_i"][i]
        pools_f[L.P_BUSY_AREA] += part["pool_busy_area"]
        now = max(now, float(part["now_s"]))
        events += int(part["events"])
        decisions += int(part["decisions"])
    if unplaced is not None:
        ids, state, end = unplaced
        ji[L.STATE, ids] = state
        jf[L.END, ids] = np.where(state == L.FAILED, end, jf[L.END, ids])
        now = max(now, float(end.max(initial=0.0)))
    if spec.stop.time_s is not None:
        now = float(spec.stop.time_s)
    else:
        finished = (ji[L.STATE] == L.DONE) | (ji[L.STATE] == L.FAILED)
        now = max(now, float(jf[L.END, finished].max(initial=0.0)))

    lo, hi = window
    state = ji[L.STATE]
    gone = (state == L.DONE) | (state == L.FAILED)
    leave = np.where(gone, jf[L.END], np.inf)
    in_system = _overlap(jf[L.ARRIVAL], leave, lo, hi)
    area_class = np.bincount(ji[L.CLS], weights=in_system, minlength=len(spec.classes))
    on_node = (merged.classes_i[L.CLASS_POOL][ji[L.CLS]] < 0) & (
        (state == L.RUNNING) | (state == L.DONE)
    )
    busy = jf[L.REQ_CPU, on_node] * _overlap(
        jf[L.START, on_node], np.where(state[on_node] == L.DONE, jf[L.END, on_node], np.inf), lo, hi
    )
    fstate = merged.fstate
    fstate[L.NOW] = now
    fstate[L.WIN_START], fstate[L.WIN_END] = lo, hi
    fstate[L.MEASURED_TIME] = max(hi - lo, 0.0)
    fstate[L.BUSY_AREA] = float(busy.sum() + pools_f[L.P_BUSY_AREA].sum())
    istate = merged.istate
    istate[L.DECISIONS] = decisions
    istate[L.FAILED_COUNT] = int((state == L.FAILED).sum())
    istate[L.EVENTS] = events
    istate[L.DONE_COUNT] = int(gone.sum())
    merged.area_class[:] = area_class
    return merged.result()
