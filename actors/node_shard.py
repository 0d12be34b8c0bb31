"""`NodeShardActor`: a slice of the emulated cluster (some nodes, or one pool) and its jobs.

A shard hosts a `cluster.engine.Engine` built on its slice of the scenario (a node subset
via `dataclasses.replace(spec, nodes=...)`, or no nodes for a pool shard) and fed jobs
window by window with `Engine.add_jobs`; it advances the compiled kernel with
`Engine.step(until_s=...)`, so a shard is exactly the single-process engine restricted to
its slice. Two roles:

* **windowed** (and pool shards in every mode): the shard receives the arrivals the
  scheduler routed to it and runs the kernel over a window, binding jobs to its nodes
  (or splitting its pool) with its copy of the scenario's policy objects from the
  registry;
* **exact** node shards: the shard holds the metadata of every job (so its heap breaks
  ties by global job id, as the kernel does) but only runs jobs the `SchedulerActor`
  placed on its nodes; it never sees arrivals and advances one event at a time.

Everything that leaves a shard is plain numpy arrays (global job ids and node indices).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import ray

from actors.arrivals import ArrivalIds, JobBatch, StreamCopy, measurement_window
from actors.reusable import Reusable
from cluster import kernel
from cluster import layout as L
from cluster.engine import Engine, FloatArray, IntArray, Jobs, job_state, runtime_table
from cluster.model import SimulationSpec
from cluster.policies.base import Allocation, Allocator, PoolView

log = logging.getLogger(__name__)


#: Rows of `ShardState.free`: free cores, memory (GB), GPUs and worker slots per node.
FREE_ROWS = (L.FREE_CPU, L.FREE_MEM, L.FREE_GPU, L.FREE_SLOTS)
#: The job rows a shard hands back in `finish` (what the kernel writes and the per-job
#: table and summary read; arrival, class and size come from the arrival stream).
RESULT_F_ROWS = (L.START, L.END, L.CORE_SECONDS, L.REQ_CPU, L.COST, L.SETUP_S)
RESULT_I_ROWS = (L.NODE, L.STATE, L.RETRIES)


@dataclass(frozen=True)
class ShardState:
    """What a shard reports after a window: its load and, for routing, its free resources.

    `free` is (4, nodes) in the shard's node order (rows `FREE_ROWS`, global node ids in
    `NodeShard.node_ids`), or None for a shard built with `snapshot=False` (nobody routes
    on it: a state then stays small enough for Ray to pass inline). `busy_cpu_by_type`
    is busy cores (of placed jobs) per global node type, for the utilisation gauges.
    """

    shard: int
    now_s: float
    free: FloatArray | None
    busy_cpu_by_type: FloatArray
    queued: int
    in_system_per_class: IntArray
    busy_cpu: float
    pending: bool
    next_event_s: float
    top_job: int
    events: int
    decisions: int
    done: int
    failed: int


class SchedulerAllocator(Allocator):
    """Stands in for the allocator inside a pool shard: asks the `SchedulerActor`.

    Used in exact mode, where every decision is taken by the scheduler's policy objects.
    """

    name = "scheduler-proxy"

    def __init__(self, scheduler: Any, pool: int) -> None:
        self.scheduler, self.pool = scheduler, pool

    def allocate(self, view: PoolView) -> Allocation:
        result: Allocation = ray.get(self.scheduler.allocate.remote(view))
        return result


class NodeShard(Reusable):
    """One shard: an engine on a node slice (or on one pool) plus the global id mapping."""

    def __init__(
        self,
        spec: SimulationSpec,
        replication: int,
        shard: int,
        node_ids: IntArray,
        stream: tuple[int, float, float] | None,
        label: str = "",
        exact_nodes: bool = False,
        scheduler: Any = None,
        pool: int | None = None,
        share: float = 1.0,
        snapshot: bool = True,
    ) -> None:
        """`node_ids`: global indices of the nodes of this shard (empty for a pool shard);
        `stream`: `ArrivalStream.info()`, i.e. the replication's job count (the most jobs
        this shard can receive) and its statistics window (start, end) in seconds, or None
        for a windowed shard, which draws the stream itself (and so starts without waiting
        for the ArrivalActor); `scheduler`: the SchedulerActor handle a pool shard asks in
        exact mode; `share`: the expected fraction of the jobs this shard receives (it
        grows when it gets more); `snapshot`: whether states carry the free resources of
        every node (for routing)."""
        self.shard = shard
        self.label = label
        self.node_ids = np.asarray(node_ids, dtype=np.int64)
        self.exact_nodes = exact_nodes
        self.snapshot = snapshot
        # Windowed shards are sent job ids only: they draw the stream's data themselves.
        windowed = not exact_nodes and scheduler is None
        self.stream = StreamCopy(spec, replication, draw_now=windowed)
        if stream is None:
            if not windowed:
                raise ValueError(f"shard {shard}: exact mode needs the stream's info")
            jobs = self.stream.drawn()
            stream = (int(jobs.arrival_s.size), *measurement_window(spec, jobs))
        window = (stream[1], stream[2])
        capacity = min(stream[0], int(math.ceil(stream[0] * share)) + 1024)
        self.n_types = len(spec.node_types)
        sub = replace(spec, nodes=tuple(spec.nodes[int(k)] for k in self.node_ids))
        # The engine is built for `capacity` jobs that never arrive (arrival = inf) and
        # the columns are filled in place as jobs come: feeding a window costs its own
        # jobs only (Engine.add_jobs would copy every job known so far).
        never = Jobs(
            np.full(capacity, math.inf), np.zeros(capacity, dtype=np.int64), np.ones(capacity)
        )
        allocator = (
            SchedulerAllocator(scheduler, pool if pool is not None else -1)
            if scheduler is not None
            else None
        )
        self.engine = Engine(sub, replication, jobs=never, allocator=allocator)
        self.engine.fstate[L.WIN_START], self.engine.fstate[L.WIN_END] = window
        # The coordinator owns the end of the run: a shard never stops by itself.
        self.engine.fstate[L.HORIZON] = math.inf
        self.used = 0
        self.global_ids = np.zeros(capacity, dtype=np.int64)
        self.type_index = self.engine.nodes_i[L.NODE_TYPE].copy()

    def __repr__(self) -> str:
        # Ray asks for the repr even when the constructor failed half-way.
        label = getattr(self, "label", "") or getattr(self, "shard", "")
        return f"NodeShard({label})"

    # -- feeding and advancing ------------------------------------------------------------

    def add(self, batch: JobBatch) -> None:
        """Fill the next job columns (sorted by arrival, none earlier than the clock)."""
        m = batch.count
        if m == 0:
            return
        e = self.engine
        lo, hi = self.used, self.used + m
        if hi > self.global_ids.size:
            self._grow(max(hi, 2 * self.global_ids.size) - self.global_ids.size)
        if batch.arrival_s[0] < e.now:
            raise ValueError(
                f"shard {self.shard}: a job arrives at {batch.arrival_s[0]} "
                f"before the shard's clock {e.now}"
            )
        new_f, new_i = job_state(e.spec, e.provisioner, batch.jobs())
        e.jobs_f[:, lo:hi] = new_f
        e.jobs_i[:, lo:hi] = new_i
        table = runtime_table(e.spec, batch.jobs())
        if table.shape[0]:
            if e.run_by_type.shape[0] == 0:
                e.run_by_type = np.full((table.shape[0], self.global_ids.size), -1.0)
            e.run_by_type[:, lo:hi] = table
        self.global_ids[lo:hi] = batch.ids
        self.used = hi
        if self.exact_nodes:
            # Exact node shards hold every job's metadata but never see arrivals.
            e.istate[L.NEXT_ARRIVAL] = self.global_ids.size

    def _grow(self, extra: int) -> None:
        """Add `extra` never-arriving job columns (amortised doubling)."""
        e = self.engine
        with np.errstate(invalid="ignore"):  # inf - inf in add_jobs' order check
            e.add_jobs(
                Jobs(np.full(extra, math.inf), np.zeros(extra, dtype=np.int64), np.ones(extra))
            )
        if e.run_by_type.shape[0]:
            e.run_by_type[:, self.global_ids.size :] = -1.0
        self.global_ids = np.concatenate([self.global_ids, np.zeros(extra, dtype=np.int64)])

    def window_routed(
        self, until_s: float, arrivals: JobBatch | ArrivalIds, target: IntArray
    ) -> ShardState:
        """Windowed mode: take this shard's share of the routed arrivals, run the window."""
        return self.window(until_s, self.stream.batch(arrivals).take(target == self.shard))

    def window(self, until_s: float, arrivals: JobBatch | ArrivalIds | None = None) -> ShardState:
        """Add the arrivals routed here and run the kernel up to `until_s` (inclusive)."""
        if arrivals is not None:
            self.add(self.stream.batch(arrivals))
        self.engine.step(until_s=until_s)
        return self.state()

    def advance_one(self, until_s: float) -> ShardState:
        """Exact mode: process the next event if it happens at or before `until_s`."""
        self.engine.step(until_s=until_s, max_events=1)
        return self.state()

    def start(
        self,
        now_s: float,
        jobs: IntArray,
        nodes: IntArray,
        run_s: FloatArray,
        setup_s: FloatArray,
        requests: FloatArray,
    ) -> ShardState:
        """Exact mode: start jobs (global ids) the scheduler placed on local `nodes` now.

        `requests` is (3, n): cpu, memory GB, GPUs as the scheduler's provisioner set them.
        """
        e = self.engine
        if now_s > e.now:  # bring the shard's clock (and its time integrals) up to now
            kernel.accumulate(now_s, e.fstate, e.istate, e.n_class, e.area_class, e.pools_f)
            e.fstate[L.NOW] = now_s
        local = np.searchsorted(self.global_ids[: self.used], jobs)
        for i, j in enumerate(local.tolist()):
            e.jobs_f[L.REQ_CPU, j], e.jobs_f[L.REQ_MEM, j], e.jobs_f[L.REQ_GPU, j] = requests[:, i]
            e.n_class[e.jobs_i[L.CLS, j]] += 1
            e.istate[L.N_SYSTEM] += 1
            kernel.start_job(
                j,
                int(nodes[i]),
                now_s,
                e.jobs_f,
                e.jobs_i,
                e.nodes_f,
                e.nodes_i,
                e.classes_f,
                e.classes_i,
                e.class_tx,
                e.class_ty,
                e.heap_t,
                e.heap_j,
                e.heap_k,
                e.istate,
                e.fstate,
                e.run_by_type,
                float(run_s[i]),
                float(setup_s[i]),
            )
        return self.state()

    # -- reporting -------------------------------------------------------------------------

    def state(self) -> ShardState:
        e = self.engine
        nf = e.nodes_f
        n = self.used
        heap_n = int(e.istate[L.HEAP_N])
        queued = int(e.istate[L.Q_TAIL] - e.istate[L.Q_HEAD])
        next_arrival = int(e.istate[L.NEXT_ARRIVAL])
        t_heap = float(e.heap_t[0]) if heap_n else math.inf
        top = int(self.global_ids[e.heap_j[0]]) if heap_n else -1
        t_pool = min(
            (
                float(e.pools_f[L.P_NEXT_T, p])
                for p in range(e.pools_f.shape[1])
                if e.pools_i[L.P_NEXT_J, p] >= 0
            ),
            default=math.inf,
        )
        t_arr = float(e.jobs_f[L.ARRIVAL, next_arrival]) if next_arrival < n else math.inf
        return ShardState(
            shard=self.shard,
            now_s=e.now,
            free=nf[list(FREE_ROWS)] if self.snapshot else None,
            busy_cpu_by_type=self.busy_cpu_per_type(),
            queued=queued,
            in_system_per_class=e.n_class.copy(),
            busy_cpu=float(e.fstate[L.BUSY_CPU]),
            pending=heap_n > 0 or queued > 0 or next_arrival < n or t_pool < math.inf,
            next_event_s=min(t_heap, t_pool, t_arr),
            top_job=top,
            events=e.events,
            decisions=int(e.istate[L.DECISIONS]),
            done=int(e.istate[L.DONE_COUNT]),
            failed=int(e.istate[L.FAILED_COUNT]),
        )

    def busy_cpu_per_type(self) -> FloatArray:
        """Busy cores per node type (global type index), for the utilisation gauges."""
        nf = self.engine.nodes_f
        busy = np.bincount(
            self.type_index, weights=nf[L.CAP_CPU] - nf[L.FREE_CPU], minlength=self.n_types
        )
        return busy.astype(np.float64)

    def finish(self) -> dict[str, Any]:
        """Close the statistics window and hand back this shard's jobs and integrals.

        Only the job rows the result needs travel (`RESULT_F_ROWS` as float64,
        `RESULT_I_ROWS` as int32), keyed by global job id; NODE holds global node indices.
        """
        e = self.engine
        kernel.accumulate(
            float(e.fstate[L.WIN_END]), e.fstate, e.istate, e.n_class, e.area_class, e.pools_f
        )
        used = self.used
        jobs_i = e.jobs_i[list(RESULT_I_ROWS), :used]  # fancy indexing: a copy
        node, state = jobs_i[0], jobs_i[1]
        placed = (e.classes_i[L.CLASS_POOL][e.jobs_i[L.CLS, :used]] < 0) & (
            (state == L.RUNNING) | (state == L.DONE)
        )
        node[placed] = self.node_ids[node[placed]]
        jobs_f = e.jobs_f[list(RESULT_F_ROWS), :used]
        ids = self.global_ids[:used]
        if self.exact_nodes:
            ids, jobs_f, jobs_i = ids[placed], jobs_f[:, placed], jobs_i[:, placed]
        return {
            "ids": ids.copy(),
            "jobs_f": jobs_f,
            "jobs_i": jobs_i.astype(np.int32),
            "pool_busy_area": e.pools_f[L.P_BUSY_AREA].copy(),
            "now_s": e.now,
            "events": e.events,
            "decisions": int(e.istate[L.DECISIONS]),
        }


#: The Ray actor; named `clusteremu/<run>/node-shard-<i>` by the launcher.
NodeShardActor = ray.remote(num_cpus=1)(NodeShard)
