"""`SchedulerActor`: routes a windowed run's arrivals between node shards.

Windowed mode only (exact mode runs the one engine, `clusteremu.actors.engine_host`). For a window
(T, T + W] the router chooses a shard for every arriving job from the shards' states at T
(a snapshot up to W old, as a real scheduler's informer cache is); the choice is binding:
the job joins that shard's queue, and the shard's own copy of the scenario's placer is the
only placer that ever sees it (one placer call per job). The rule, per job in arrival
order:

1. the shard of the first node (in node order) with room for the job on the snapshot,
   minus what the window's earlier jobs took (nodes of a shard whose queue is not empty
   have no room: its waiting jobs come first);
2. otherwise, among the shards that *can* run the job (a node type of the shard is big
   enough for its cores, memory, GPUs and a worker slot: static capacity, not free room),
   the one with the least queued cores per core it owns.

So a job is never routed to a shard that can never run it (a 4-core job never waits behind
2-core nodes). A job no shard can run goes to the least-loaded shard (it never starts,
as in the single-process run) and is counted in `stats()["unrunnable"]`.
"""

from __future__ import annotations

import logging

import numpy as np
import ray
from numba import njit

from clusteremu.actors.arrivals import ArrivalIds, JobBatch, StreamCopy
from clusteremu.actors.node_shard import ShardState
from clusteremu.actors.reusable import Reusable
from clusteremu.cluster.engine import IntArray
from clusteremu.cluster.jobs import Purpose, replication_seed, stream
from clusteremu.cluster.layout import GPU_MILLI
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies import registry
from clusteremu.cluster.policies.base import Provisioner
from clusteremu.cluster.policies.compiled import FIT_EPS, choose_gpus, has_room
from clusteremu.cluster.state import gpu_count

log = logging.getLogger(__name__)

#: Columns of the node-type capacity table: cores, GB, whole GPUs, worker slots.
CAP_CPU, CAP_MEM, CAP_GPU, CAP_SLOTS = range(4)


@njit(cache=True)
def can_run(
    s: int,
    cpu: float,
    mem: float,
    gpu: float,
    type_cap: np.ndarray,
    shard_types: np.ndarray,
) -> bool:
    """Whether shard s holds a node type big enough for the request (static capacity)."""
    for t in range(type_cap.shape[0]):
        if not shard_types[s, t]:
            continue
        cap = type_cap[t]
        if cap[CAP_SLOTS] < 1.0 or cap[CAP_CPU] < cpu - FIT_EPS or cap[CAP_MEM] < mem - FIT_EPS:
            continue
        if gpu <= 0.0 or (gpu < 1.0 and cap[CAP_GPU] >= 1.0):
            return True
        if gpu >= 1.0 and cap[CAP_GPU] >= np.floor(gpu + 0.5):
            return True
    return False


@njit(cache=True)
def route_batch(
    cpu: np.ndarray,
    mem: np.ndarray,
    gpu: np.ndarray,
    free: np.ndarray,
    gpu_free: np.ndarray,
    owner: np.ndarray,
    type_cap: np.ndarray,
    shard_types: np.ndarray,
    pressure: np.ndarray,
    shard_cpu: np.ndarray,
    out: np.ndarray,
) -> tuple[int, int]:
    """Route a window's jobs (requests `cpu`, `mem`, `gpu`); write each job's shard to
    `out`; return (jobs that found room on the snapshot, jobs no shard can run).

    `free` (cores, GB, slots) x nodes and `gpu_free` (nodes, GPUs) are the snapshot's
    nodes with room, in node order (consumed as jobs take them); `owner` their shards;
    `pressure` the queued cores per shard (grows with the jobs routed without room).
    """
    n, nodes, shards = cpu.size, owner.size, pressure.size
    fail = np.empty((3, max(n, 1)))
    n_fail = 0
    placed = unrunnable = 0
    lo = 0
    cpu_min = cpu.min() if n else 0.0
    mem_min = mem.min() if n else 0.0
    for j in range(n):
        c, m, g = cpu[j], mem[j], gpu[j]
        # A request that found no room makes every request at least as large skip the
        # scan (room only shrinks during the window).
        dominated = False
        for f in range(n_fail):
            if c >= fail[0, f] and m >= fail[1, f] and g >= fail[2, f]:
                dominated = True
                break
        k = -1
        if not dominated:
            # Nodes before `lo` cannot take even the smallest request of the window.
            while lo < nodes and not (
                free[2, lo] >= 1.0
                and free[0, lo] >= cpu_min - FIT_EPS
                and free[1, lo] >= mem_min - FIT_EPS
            ):
                lo += 1
            for i in range(lo, nodes):
                if has_room(free[0, i], free[1, i], free[2, i], gpu_free, i, c, m, g):
                    k = i
                    break
        if k >= 0:
            free[0, k] -= c
            free[1, k] -= m
            free[2, k] -= 1.0
            if g > 0.0:
                mask = choose_gpus(gpu_free, k, g)
                milli = np.floor(g * GPU_MILLI + 0.5) if g < 1.0 else float(GPU_MILLI)
                for b in range(gpu_free.shape[1]):
                    if (mask >> b) & 1:
                        gpu_free[k, b] -= milli
            out[j] = owner[k]
            placed += 1
            continue
        if not dominated:
            fail[0, n_fail], fail[1, n_fail], fail[2, n_fail] = c, m, g
            n_fail += 1
        best = -1
        for s in range(shards):
            if can_run(s, c, m, g, type_cap, shard_types) and (
                best < 0 or pressure[s] * shard_cpu[best] < pressure[best] * shard_cpu[s]
            ):
                best = s
        if best < 0:
            unrunnable += 1
            best = 0
            for s in range(1, shards):
                if pressure[s] * shard_cpu[best] < pressure[best] * shard_cpu[s]:
                    best = s
        pressure[best] += max(c, 1e-3)
        out[j] = best
    return placed, unrunnable


class Scheduler(Reusable):
    """The router of a windowed run over node shards `slices` (global node indices)."""

    def __init__(
        self,
        spec: SimulationSpec,
        replication: int,
        slices: list[IntArray],
        label: str = "",
    ) -> None:
        self.spec = spec
        self.label = label
        self.stream = StreamCopy(spec, replication)  # drawn when first asked to route ids
        # The jobs' requests, as the shards' engines set them (same policy, same stream).
        ref = spec.scheduler.provisioner
        provisioner = registry.create("provisioner", ref.name, **ref.params)
        if not isinstance(provisioner, Provisioner):
            raise TypeError(f"{provisioner!r} is not a Provisioner")
        self.provisioner = provisioner
        seq = replication_seed(spec, replication)
        self.provisioner.setup(spec, stream(seq, Purpose.PROVISIONER))
        types = {t.name: i for i, t in enumerate(spec.node_types)}
        self.type_cap = np.array(
            [[t.cpu, t.memory_gb, gpu_count(t), t.max_jobs] for t in spec.node_types],
            dtype=np.float64,
        ).reshape(len(spec.node_types), 4)
        node_type = np.array([types[n] for n in spec.nodes], dtype=np.int64)
        self.shard_types = np.zeros((len(slices), len(spec.node_types)), dtype=np.bool_)
        self.shard_of_node = np.zeros(len(spec.nodes), dtype=np.int64)
        for s, nodes in enumerate(slices):
            self.shard_types[s, node_type[nodes]] = True
            self.shard_of_node[nodes] = s
        cores = np.bincount(
            self.shard_of_node, weights=self.type_cap[node_type, CAP_CPU], minlength=len(slices)
        )
        self.shard_cpu = np.maximum(cores, 1e-9)
        self.gpus = max(1, int(self.type_cap[:, CAP_GPU].max(initial=0.0)))
        self.counts = {"routed": 0, "with_room": 0, "unrunnable": 0}

    def __repr__(self) -> str:
        return f"Scheduler({getattr(self, 'label', '')})"  # even if __init__ failed

    def ready(self) -> bool:
        """Answers once the actor is up."""
        return True

    def stats(self) -> dict[str, int]:
        """Jobs routed so far; of them, routed to room on the snapshot; that no shard can run."""
        return dict(self.counts)

    def route_states(self, arrivals: JobBatch | ArrivalIds, *states: ShardState) -> IntArray:
        """`route` on the node shards' states at the start of the window (in shard order,
        so in node order); the target shard of each job, as int32. Given only ids, the
        jobs' data come from this actor's copy of the stream."""
        if arrivals.count == 0:
            return np.zeros(0, dtype=np.int32)
        return self.route(self.stream.batch(arrivals), list(states)).astype(np.int32)

    def route(self, batch: JobBatch, states: list[ShardState]) -> IntArray:
        """The shard of each job of `batch` (see the module's rule), from `states`: one
        per node shard, each with its snapshot (`free`, `gpu_free`, `up`)."""
        cpu, mem, gpu = self.provisioner.requests(self.spec, batch.class_index)
        cpu, mem, gpu = (np.ascontiguousarray(a, dtype=np.float64) for a in (cpu, mem, gpu))
        free_parts, gpu_parts, up_parts = [], [], []
        for st in states:
            if st.free is None or st.gpu_free is None or st.up is None:
                raise ValueError(f"shard {st.shard}: its state carries no snapshot to route on")
            free_parts.append(st.free)
            g = np.zeros((st.gpu_free.shape[0], self.gpus))
            g[:, : min(self.gpus, st.gpu_free.shape[1])] = st.gpu_free[:, : self.gpus]
            gpu_parts.append(g)
            up_parts.append(st.up)
        free = np.concatenate(free_parts, axis=1)
        gpu_free = np.concatenate(gpu_parts, axis=0)
        open_shard = np.array([st.queued == 0 for st in states], dtype=np.bool_)
        owner = self.shard_of_node[: free.shape[1]]
        # Only nodes that can take the window's smallest request matter (in node order).
        keep = np.flatnonzero(
            np.concatenate(up_parts)
            & open_shard[owner]
            & (free[2] >= 1.0)
            & (free[0] >= cpu.min() - FIT_EPS)
            & (free[1] >= mem.min() - FIT_EPS)
        )
        pressure = np.array([st.queued_cpu for st in states], dtype=np.float64)
        out = np.zeros(batch.count, dtype=np.int64)
        placed, unrunnable = route_batch(
            cpu,
            mem,
            gpu,
            np.ascontiguousarray(free[:, keep]),
            np.ascontiguousarray(gpu_free[keep]),
            np.ascontiguousarray(owner[keep]),
            self.type_cap,
            self.shard_types,
            pressure,
            self.shard_cpu,
            out,
        )
        if unrunnable and not self.counts["unrunnable"]:
            log.warning(
                "%s: %d job(s) fit no node type of the cluster; they will never start",
                self.label,
                unrunnable,
            )
        self.counts["routed"] += batch.count
        self.counts["with_room"] += int(placed)
        self.counts["unrunnable"] += int(unrunnable)
        return out


#: The Ray actor; named `clusteremu/<run>/scheduler` by the launcher.
SchedulerActor = ray.remote(num_cpus=0)(Scheduler)
