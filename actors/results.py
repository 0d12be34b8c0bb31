"""Put the shards of a windowed run back together into the engine's result.

Each shard returns its jobs' result rows keyed by global job id, plus its engine's time
integrals over the statistics window (jobs in system per class, busy cores, pools' busy
cores). `merge_result` lays them over the stream's jobs in a frozen `RunState` of the whole
scenario and builds the per-job table and summary with `clusteremu.cluster.metrics.build_result`, so
the table has exactly the columns of `clusteremu run`; the integrals are sums of the
shards' (each shard integrates its own jobs and nodes, event by event).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from clusteremu.actors.node_shard import RESULT_F_ROWS, RESULT_I_ROWS
from clusteremu.cluster.engine import job_rows
from clusteremu.cluster.jobs import Jobs, replication_seed
from clusteremu.cluster.layout import FS, IS, JF, JI, PF, JobState
from clusteremu.cluster.metrics import RunResult, build_result
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies.base import Policy
from clusteremu.cluster.policies.points import build_policies, distinct, setup_policies
from clusteremu.cluster.state import (
    RunState,
    class_arrays,
    pool_arrays,
    read_only,
    state_from,
    static_nodes,
)


def scenario_policies(spec: SimulationSpec, replication: int) -> tuple[Policy, ...]:
    """The scenario's policies (one object per pair), set up as `Engine` sets them up
    (same streams), for their `extra_summary` keys."""
    policies = build_policies(spec)
    setup_policies(policies, spec, replication_seed(spec, replication))
    return tuple(policy for _, policy in distinct(policies))


def merged_state(
    spec: SimulationSpec,
    replication: int,
    jobs: Jobs,
    window: tuple[float, float],
    parts: list[dict[str, Any]],
) -> RunState:
    """A frozen `RunState` of the whole scenario from shard parts (`NodeShard.finish`).

    `jobs` are the replication's jobs (the stream), `window` the statistics window
    (start, end) in seconds. Node rows are the scenario's nodes, in order.
    """
    jobs_f, jobs_i = job_rows(jobs)
    n_classes = len(spec.classes)
    area_class = np.zeros(n_classes)
    pools_f, pools_i = pool_arrays(spec)
    busy_area = measured = now = 0.0
    events = decisions = 0
    for part in parts:
        ids = part["ids"]
        for i, row in enumerate(RESULT_F_ROWS):
            jobs_f[row, ids] = part["jobs_f"][i]
        for i, irow in enumerate(RESULT_I_ROWS):
            jobs_i[irow, ids] = part["jobs_i"][i]
        area_class += part["area_class"]
        busy_area += float(part["busy_area"])
        pools_f[PF.BUSY_AREA] += part["pool_busy_area"]
        measured = max(measured, float(part["measured_s"]))
        now = max(now, float(part["now_s"]))
        events += int(part["events"])
        decisions += int(part["decisions"])
    state = jobs_i[JI.STATE]
    gone = (state == JobState.DONE) | (state == JobState.FAILED)
    if spec.stop.time_s is not None:
        now = float(spec.stop.time_s)
    else:
        now = max(now, float(jobs_f[JF.END, gone].max(initial=0.0)))

    m = len(spec.nodes)
    nodes_f, nodes_i, gpu_free, _ = static_nodes(spec)
    classes_f, classes_i, tx, ty = class_arrays(spec)
    istate = np.zeros(len(IS), dtype=np.int64)
    istate[IS.NODES_USED] = m
    istate[IS.DONE_COUNT] = int(gone.sum())
    istate[IS.FAILED_COUNT] = int((state == JobState.FAILED).sum())
    istate[IS.N_SYSTEM] = int(((state == JobState.QUEUED) | (state == JobState.RUNNING)).sum())
    istate[IS.EVENTS] = events
    istate[IS.DECISIONS] = decisions
    fstate = np.zeros(len(FS))
    fstate[FS.NOW] = now
    fstate[FS.WIN_START], fstate[FS.WIN_END] = window
    fstate[FS.MEASURED_TIME] = measured
    fstate[FS.BUSY_AREA] = busy_area
    merged = state_from(
        jobs_f=jobs_f,
        jobs_i=jobs_i,
        nodes_f=nodes_f,
        nodes_i=nodes_i,
        gpu_free=gpu_free,
        pools_f=pools_f,
        pools_i=pools_i,
        classes_f=classes_f,
        classes_i=classes_i,
        class_tx=tx,
        class_ty=ty,
        n_class=np.bincount(
            jobs_i[JI.CLS, ~gone & (state != JobState.FUTURE)], minlength=n_classes
        ).astype(np.int64),
        area_class=area_class,
        istate=istate,
        fstate=fstate,
    )
    return RunState(spec, replication, read_only(merged), now)


def merge_result(
    spec: SimulationSpec,
    replication: int,
    jobs: Jobs,
    window: tuple[float, float],
    parts: list[dict[str, Any]],
    policies: tuple[Policy, ...] | None = None,
) -> RunResult:
    """The per-job table and summary of a windowed run from its shard parts.

    `policies` carry the summary's extra keys (default: the scenario's, built here).
    """
    run = merged_state(spec, replication, jobs, window, parts)
    if policies is None:
        policies = scenario_policies(spec, replication)
    return build_result(run, policies, runs=jobs.features.get("run"))
