"""`NodeShardActor`: a slice of the emulated cluster (some nodes, or one pool) and its jobs.

Windowed mode. A shard hosts a `clusteremu.cluster.engine.Engine` built on its slice of the scenario
(a node subset via `dataclasses.replace(spec, nodes=...)`, or no nodes for a pool shard)
with the scenario's policies, fed the jobs routed to it window by window
(`Engine.append_jobs`) and advanced with `Engine.step(until_s=...)`: a shard is exactly
the single-process engine restricted to its slice, and its placer is the only one that
binds its jobs to nodes (the `SchedulerActor` only chooses the shard). Everything a shard
hands out is read from the engine's read-only state: plain numpy arrays, global job ids
and node indices.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import ray

from clusteremu.actors.arrivals import ArrivalIds, JobBatch, StreamCopy, measurement_window
from clusteremu.actors.reusable import Reusable
from clusteremu.cluster.engine import Engine, FloatArray, IntArray, Jobs
from clusteremu.cluster.layout import FS, IS, JF, JI, NF, NI, PF, JobState, NodeStatus
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.money import money_by_node

log = logging.getLogger(__name__)

#: Rows of `ShardState.free`: free cores, memory (GB) and worker slots per node.
FREE_ROWS = (NF.FREE_CPU, NF.FREE_MEM, NF.FREE_SLOTS)
#: The job rows a shard hands back in `finish` (what the per-job table and the summary
#: read beyond the stream's arrival, class and size).
RESULT_F_ROWS = (
    JF.START,
    JF.END,
    JF.CORE_SECONDS,
    JF.REQ_CPU,
    JF.REQ_MEM,
    JF.REQ_GPU,
    JF.COST,
    JF.SETUP_S,
    JF.WASTE_CORE_S,
)
RESULT_I_ROWS = (JI.NODE, JI.STATE, JI.RETRIES)


@dataclass(frozen=True)
class ShardState:
    """What an engine-hosting actor reports: its load and, for routing, its free room.

    `free` is (len(FREE_ROWS), nodes) and `gpu_free` (nodes, GPUs) free milli-GPU, in the
    shard's node order, `up` the nodes that take jobs; all three None for a state built
    without the snapshot (nobody routes on it: the state stays small enough for Ray to
    pass inline). `busy_cpu_by_type` is busy cores of placed jobs per global node type,
    `pool_busy` allocated cores per pool (for the utilisation gauges); `queued_cpu` the
    cores requested by the jobs waiting for a node; `node_usd` the money of this actor's
    nodes so far (pools are counted by the coordinator).
    """

    shard: int
    now_s: float
    free: FloatArray | None
    gpu_free: FloatArray | None
    up: np.ndarray | None
    busy_cpu_by_type: FloatArray
    pool_busy: FloatArray
    queued: int
    queued_cpu: float
    in_system_per_class: IntArray
    pending: bool
    events: int
    decisions: int
    done: int
    failed: int
    node_usd: float


def engine_state(
    engine: Engine, shard: int, type_index: IntArray, n_types: int, snapshot: bool
) -> ShardState:
    """The `ShardState` of `engine` now (read from its read-only state).

    `type_index`: the global node type of each of its node rows.
    """
    s = engine.state
    used = engine.nodes_used
    nf = s.nodes_f[:, :used]
    head, tail = int(s.istate[IS.Q_HEAD]), int(s.istate[IS.Q_TAIL])
    q = s.queue[head:tail]
    # A queue entry is live if its job waits and the entry is the job's current one.
    live = (s.jobs_i[JI.STATE, q] == JobState.QUEUED) & (
        s.jobs_i[JI.QPOS, q] == np.arange(head, tail)
    )
    waiting = q[live]
    busy = np.bincount(
        type_index[:used], weights=nf[NF.CAP_CPU] - nf[NF.FREE_CPU], minlength=n_types
    )
    next_s = engine.peek()
    return ShardState(
        shard=shard,
        now_s=engine.now,
        free=nf[list(FREE_ROWS)].copy() if snapshot else None,
        gpu_free=s.gpu_free[:used].copy() if snapshot else None,
        up=(s.nodes_i[NI.STATUS, :used] == NodeStatus.UP) if snapshot else None,
        busy_cpu_by_type=busy.astype(np.float64),
        pool_busy=s.pools_f[PF.ALLOCATED].copy(),
        queued=int(waiting.size),
        queued_cpu=float(s.jobs_f[JF.REQ_CPU, waiting].sum()),
        in_system_per_class=s.n_class.copy(),
        pending=next_s < math.inf or waiting.size > 0,
        events=engine.events,
        decisions=int(s.istate[IS.DECISIONS]),
        done=engine.jobs_done,
        failed=int(s.istate[IS.FAILED_COUNT]),
        node_usd=float(sum(m.sum() for m in money_by_node(nf, s.nodes_i[:, :used], engine.now))),
    )


class NodeShard(Reusable):
    """One shard: an engine on a node slice (or on one pool) plus the global id mapping."""

    def __init__(
        self,
        spec: SimulationSpec,
        replication: int,
        shard: int,
        node_ids: IntArray,
        label: str = "",
        snapshot: bool = True,
    ) -> None:
        """`node_ids`: global indices of this shard's nodes (empty for a pool shard);
        `snapshot`: whether states carry every node's free room (for routing).

        The shard draws the replication's stream itself (common random numbers), so a
        window's message carries job ids only.
        """
        self.shard = shard
        self.label = label
        self.node_ids = np.asarray(node_ids, dtype=np.int64)
        self.snapshot = snapshot
        self.stream = StreamCopy(spec, replication, draw_now=True)
        self.n_types = len(spec.node_types)
        sub = replace(spec, nodes=tuple(spec.nodes[int(k)] for k in self.node_ids))
        empty = Jobs(np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0))
        self.engine = Engine(sub, replication, jobs=empty)
        start, end = measurement_window(spec, self.stream.drawn())
        # The coordinator owns the end of the run: a shard never stops by itself.
        self.engine.set_window(start, end, math.inf)
        self.global_ids = np.zeros(0, dtype=np.int64)
        types = {t.name: i for i, t in enumerate(spec.node_types)}
        self.type_index = np.array([types[n] for n in sub.nodes], dtype=np.int64)

    def __repr__(self) -> str:
        # Ray asks for the repr even when the constructor failed half-way.
        label = getattr(self, "label", "") or getattr(self, "shard", "")
        return f"NodeShard({label})"

    # -- feeding and advancing ------------------------------------------------------------

    def add(self, batch: JobBatch) -> None:
        """Append the jobs routed here (sorted by arrival, none before the clock)."""
        if batch.count == 0:
            return
        rows = self.engine.append_jobs(batch.jobs())
        end = int(rows[-1]) + 1
        if end > self.global_ids.size:
            grown = np.zeros(max(end, 2 * self.global_ids.size), dtype=np.int64)
            grown[: self.global_ids.size] = self.global_ids
            self.global_ids = grown
        self.global_ids[rows] = batch.ids

    def window_routed(
        self, until_s: float, arrivals: JobBatch | ArrivalIds, target: IntArray
    ) -> ShardState:
        """Take this shard's share of the routed arrivals (`target[i]` is arrival i's
        shard) and run the window."""
        return self.window(until_s, self.stream.batch(arrivals).take(target == self.shard))

    def window(self, until_s: float, arrivals: JobBatch | ArrivalIds | None = None) -> ShardState:
        """Add the arrivals routed here and run the engine up to `until_s` (inclusive)."""
        if arrivals is not None:
            self.add(self.stream.batch(arrivals))
        self.engine.step(until_s=until_s)
        return self.state()

    # -- reporting -------------------------------------------------------------------------

    def state(self) -> ShardState:
        return engine_state(self.engine, self.shard, self.type_index, self.n_types, self.snapshot)

    def finish(self) -> dict[str, Any]:
        """Close the statistics window and hand back this shard's jobs and integrals.

        Only the job rows the result needs travel (`RESULT_F_ROWS` as float64,
        `RESULT_I_ROWS` as int32), keyed by global job id; NODE holds global node indices.
        """
        e = self.engine
        s = e.state
        e.close_window(float(s.fstate[FS.WIN_END]))
        n = e.jobs_fed
        jobs_i = s.jobs_i[list(RESULT_I_ROWS), :n]  # fancy indexing: a copy
        node = jobs_i[0]
        if self.node_ids.size:  # local node rows -> global node indices
            mine = (node >= 0) & (node < self.node_ids.size)
            node[mine] = self.node_ids[node[mine]]
        return {
            "ids": self.global_ids[:n].copy(),
            "jobs_f": s.jobs_f[list(RESULT_F_ROWS), :n],
            "jobs_i": jobs_i.astype(np.int32),
            "area_class": s.area_class.copy(),
            "busy_area": float(s.fstate[FS.BUSY_AREA]),
            "measured_s": float(s.fstate[FS.MEASURED_TIME]),
            "pool_busy_area": s.pools_f[PF.BUSY_AREA].copy(),
            "now_s": e.now,
            "events": e.events,
            "decisions": int(s.istate[IS.DECISIONS]),
        }


#: The Ray actor; named `clusteremu/<run>/node-shard-<i>` by the launcher.
NodeShardActor = ray.remote(num_cpus=1)(NodeShard)
