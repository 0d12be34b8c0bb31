"""`SchedulerActor`: hosts the scenario's placer, allocator and provisioner objects.

The actor holds no policy logic of its own (the Ray Train v2 pattern in `STYLE.md`): it
builds the policies from the registry exactly as `cluster.engine.Engine` does (same seeds,
same `setup`), keeps the scheduler's *cache* of the cluster (free resources per node,
the waiting queue) and hands views to the policies and their decisions back to the
coordinator, after the engine's own legality checks.

* **exact mode**: the cache is always current; the placer is called after every arrival
  and every completion with a non-empty queue (when the kernel would call it), so its
  decisions are the kernel's; allocations of pool shards come here too.
* **windowed mode**: the cache is the shards' state at the start of the window (up to
  `window` seconds old, as a real scheduler's informer cache is); `route` places the
  window's arrivals on that snapshot with the placer's own decision function (compiled
  when the policy has one) and sends each job to the shard owning the chosen node.
"""

from __future__ import annotations

import heapq
import logging
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import ray
from numba import njit

from actors.arrivals import ArrivalIds, JobBatch, StreamCopy
from actors.reusable import Reusable
from cluster import layout as L
from cluster.engine import (
    Engine,
    FloatArray,
    IntArray,
    Jobs,
    check_placement,
    make_placement_view,
)
from cluster.model import SimulationSpec
from cluster.policies.base import Allocation, PlacementView, PolicyError, PoolView
from cluster.policies.compiled import FIT_EPS, PLACE_FIRST_FIT, PLACE_RANDOM_FIT, place

log = logging.getLogger(__name__)

#: Compiled placers whose choice among the nodes that fit does not depend on the others.
COMPACTABLE = (PLACE_FIRST_FIT, PLACE_RANDOM_FIT)


@dataclass(frozen=True)
class Decisions:
    """Placements to apply now: global job and node ids, run-time overrides (-1 = none),
    set-up delays (s) and the jobs' requests (3 x n: cpu, GB, GPUs)."""

    jobs: IntArray
    nodes: IntArray
    run_s: FloatArray
    setup_s: FloatArray
    requests: FloatArray
    timer_s: float
    timer_job: int

    @property
    def count(self) -> int:
        return int(self.jobs.size)


@njit(cache=True)
def route_batch(
    code: int,
    params: np.ndarray,
    nodes_f: np.ndarray,
    nodes_i: np.ndarray,
    jobs_f: np.ndarray,
    rng: np.ndarray,
    shard_of_node: np.ndarray,
    pressure: np.ndarray,
    shard_cpu: np.ndarray,
    out: np.ndarray,
) -> int:
    """Route each job of a batch with the compiled placer on a snapshot; return how many
    found a node. Jobs that fit nowhere go to the shard with the least queued work per
    core. A request that fit nowhere makes every request at least as large skip the
    placer (capacity only shrinks during the batch)."""
    n = jobs_f.shape[1]
    fail = np.empty((3, max(n, 1)))
    n_fail = 0
    placed = 0
    for j in range(n):
        cpu, mem, gpu = jobs_f[L.REQ_CPU, j], jobs_f[L.REQ_MEM, j], jobs_f[L.REQ_GPU, j]
        dominated = False
        for f in range(n_fail):
            if cpu >= fail[0, f] and mem >= fail[1, f] and gpu >= fail[2, f]:
                dominated = True
                break
        k = -1
        if not dominated:
            k = place(code, params, j, nodes_f, nodes_i, jobs_f, rng)
        if k >= 0:
            nodes_f[L.FREE_CPU, k] -= cpu
            nodes_f[L.FREE_MEM, k] -= mem
            nodes_f[L.FREE_GPU, k] -= gpu
            nodes_f[L.FREE_SLOTS, k] -= 1.0
            out[j] = shard_of_node[k]
            placed += 1
            continue
        if not dominated:
            fail[0, n_fail], fail[1, n_fail], fail[2, n_fail] = cpu, mem, gpu
            n_fail += 1
        best = 0
        for s in range(1, pressure.size):
            if pressure[s] * shard_cpu[best] < pressure[best] * shard_cpu[s]:
                best = s
        pressure[best] += cpu
        out[j] = best
    return placed


class Scheduler(Reusable):
    """The scheduler's cache of the cluster plus the scenario's policy objects."""

    def __init__(self, spec: SimulationSpec, replication: int, label: str = "") -> None:
        self.spec = spec
        self.label = label
        self.stream = StreamCopy(spec, replication)  # drawn when first asked to route ids
        empty = Jobs(np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0))
        # An engine without jobs builds the node arrays and the policies exactly as the
        # single-process run does (same registry objects, same seeds, same set-up).
        self.cache = Engine(spec, replication, jobs=empty)
        self.placer = self.cache.placer
        self.allocator = self.cache.allocator
        self.provisioner = self.cache.provisioner
        self.cls = np.zeros(0, dtype=np.int64)
        self.requests = np.zeros((3, 0))
        self.state = np.zeros(0, dtype=np.int64)
        self.end_s = np.zeros(0)
        self.node_of = np.zeros(0, dtype=np.int64)
        self.queue: list[int] = []
        self.timers: list[tuple[float, int]] = []
        self.patience = np.array([c.timeout_s for c in spec.classes], dtype=np.float64)
        self.decisions = 0
        self.failed = 0

    def __repr__(self) -> str:
        return f"Scheduler({getattr(self, 'label', '')})"  # even if __init__ failed

    def ready(self) -> bool:
        """Answers once the actor is up (the coordinator waits for it before timing)."""
        return True

    # -- exact mode ------------------------------------------------------------------------

    def add_jobs(self, batch: JobBatch) -> None:
        """Learn the next jobs of the stream (ids continue the previous batch)."""
        cpu, mem, gpu = self.provisioner.requests(self.spec, batch.class_index)
        self.cls = np.concatenate([self.cls, batch.class_index])
        self.requests = np.concatenate([self.requests, np.vstack([cpu, mem, gpu])], axis=1)
        self.state = np.concatenate([self.state, np.full(batch.count, L.FUTURE, np.int64)])
        self.end_s = np.concatenate([self.end_s, np.full(batch.count, -1.0)])
        self.node_of = np.concatenate([self.node_of, np.full(batch.count, -1, np.int64)])

    def arrive(self, job: int, now_s: float) -> Decisions:
        """Job `job` arrives (a placement class): queue it, start its patience, place."""
        self.state[job] = L.QUEUED
        self.queue.append(job)
        patience = self.patience[self.cls[job]]
        if patience < math.inf:
            heapq.heappush(self.timers, (now_s + patience, job))
        return self._place(now_s)

    def completed(self, job: int, now_s: float) -> Decisions:
        """Job `job` finished on its node: free the node in the cache and place if needed."""
        k = int(self.node_of[job])
        nf = self.cache.nodes_f
        nf[L.FREE_SLOTS, k] += 1.0
        nf[L.FREE_CPU, k] += self.requests[0, job]
        nf[L.FREE_MEM, k] += self.requests[1, job]
        nf[L.FREE_GPU, k] += self.requests[2, job]
        self.state[job] = L.DONE
        return self._place(now_s) if self.queue else self._none()

    def timeout(self, now_s: float) -> Decisions:
        """The earliest patience timer fires: the job leaves unserved if still waiting."""
        _, job = heapq.heappop(self.timers)
        if self.state[job] == L.QUEUED:
            self.state[job] = L.FAILED
            self.end_s[job] = now_s
            self.queue.remove(job)
            self.failed += 1
        return self._none()

    def _none(self) -> Decisions:
        t, j = self.timers[0] if self.timers else (math.inf, -1)
        empty_f = np.zeros(0)
        return Decisions(
            np.zeros(0, np.int64), np.zeros(0, np.int64), empty_f, empty_f, np.zeros((3, 0)), t, j
        )

    def view(self, now_s: float) -> PlacementView:
        q = np.asarray(self.queue, dtype=np.int64)
        requests = (self.requests[0, q], self.requests[1, q], self.requests[2, q])
        return make_placement_view(
            now_s, q, self.cls[q], requests, self.cache.nodes_f, self.cache.nodes_i
        )

    def _place(self, now_s: float) -> Decisions:
        """Ask the placer; check each decision as `Engine._python_place` does; apply it to
        the cache and return it for the shards."""
        view = self.view(now_s)
        decisions = self.placer.place(view) if view.queue.size else []
        name = self.placer.name
        if not isinstance(decisions, list | tuple):
            raise PolicyError(name, now_s, "place() must return a list of Placement", decisions)
        waiting = set(self.queue)
        nf, ni = self.cache.nodes_f, self.cache.nodes_i
        jobs, nodes, runs, setups = [], [], [], []
        for d in decisions:
            j, k, run_s, setup_s = check_placement(
                name, now_s, d, waiting, lambda j: tuple(self.requests[:, j]), nf, ni
            )
            need = self.requests[:, j]
            waiting.discard(j)
            nf[L.FREE_CPU, k] -= need[0]
            nf[L.FREE_MEM, k] -= need[1]
            nf[L.FREE_GPU, k] -= need[2]
            nf[L.FREE_SLOTS, k] -= 1.0
            self.state[j] = L.RUNNING
            self.node_of[j] = k
            jobs.append(j)
            nodes.append(k)
            runs.append(run_s)
            setups.append(setup_s)
        if jobs:
            self.queue = [j for j in self.queue if j in waiting]
            self.decisions += len(jobs)
        ids = np.asarray(jobs, dtype=np.int64)
        t, tj = self.timers[0] if self.timers else (math.inf, -1)
        return Decisions(
            ids,
            np.asarray(nodes, dtype=np.int64),
            np.asarray(runs),
            np.asarray(setups),
            self.requests[:, ids].copy(),
            t,
            tj,
        )

    def allocate(self, view: PoolView) -> Allocation:
        """A pool shard's allocation decision (exact mode): the scenario's allocator."""
        self.decisions += 1
        return self.allocator.allocate(view)

    def queued_per_class(self) -> IntArray:
        """Jobs waiting in the queue, per class (exact mode; for the metrics)."""
        q = np.asarray(self.queue, dtype=np.int64)
        return np.bincount(self.cls[q], minlength=len(self.spec.classes)).astype(np.int64)

    def unplaced(self) -> tuple[IntArray, IntArray, FloatArray]:
        """Jobs that never reached a node: ids, state (QUEUED / FAILED / FUTURE), end (s)."""
        ids = np.flatnonzero(self.node_of < 0)
        ids = ids[self.state[ids] != L.FUTURE]
        return ids, self.state[ids].copy(), self.end_s[ids].copy()

    # -- windowed mode ---------------------------------------------------------------------

    def route_states(
        self,
        arrivals: JobBatch | ArrivalIds,
        shard_of_node: IntArray,
        shard_cpu: FloatArray,
        *states: Any,
    ) -> IntArray:
        """`route` on the node shards' states at the start of the window (ShardState,
        in shard order, so in node order); the target shard of each job, as int32.
        Given only ids, the jobs' data come from this actor's copy of the stream."""
        if arrivals.count == 0:
            return np.zeros(0, dtype=np.int32)
        batch = self.stream.batch(arrivals)
        free = np.concatenate([st.free for st in states], axis=1)
        queued = np.array([float(st.queued) for st in states])
        return self.route(batch, free, shard_of_node, queued, shard_cpu)[0].astype(np.int32)

    def route(
        self,
        batch: JobBatch,
        free: FloatArray,
        shard_of_node: IntArray,
        queued_cpu: FloatArray,
        shard_cpu: FloatArray,
    ) -> tuple[IntArray, int]:
        """Choose a shard for each arriving job from a snapshot of the nodes.

        `free` is (4, nodes): free cpu, GB, GPUs and slots at the start of the window;
        `queued_cpu` the cores requested by jobs waiting in each shard. Returns the shard
        per job and how many jobs found a node in the snapshot.
        """
        nf = self.cache.nodes_f
        nf[L.FREE_CPU], nf[L.FREE_MEM], nf[L.FREE_GPU], nf[L.FREE_SLOTS] = free
        cpu, mem, gpu = self.provisioner.requests(self.spec, batch.class_index)
        out = np.zeros(batch.count, dtype=np.int64)
        pressure = queued_cpu.astype(np.float64).copy()
        cap = np.maximum(shard_cpu.astype(np.float64), 1e-9)
        code = int(self.placer.kernel_code)
        if code > 0:
            jobs_f = np.zeros((L.JF_ROWS, batch.count))
            jobs_f[L.REQ_CPU], jobs_f[L.REQ_MEM], jobs_f[L.REQ_GPU] = cpu, mem, gpu
            nodes_f, nodes_i, owner = nf, self.cache.nodes_i, shard_of_node
            if code in COMPACTABLE:
                # First-fit and random-fit only look at nodes that fit: route on the nodes
                # with room for the smallest request of the batch, in node order.
                keep = np.flatnonzero(
                    (nodes_i[L.ACTIVE] == 1)
                    & (nf[L.FREE_SLOTS] >= 1.0)
                    & (nf[L.FREE_CPU] >= cpu.min() - FIT_EPS)
                    & (nf[L.FREE_MEM] >= mem.min() - FIT_EPS)
                    & (nf[L.FREE_GPU] >= gpu.min() - FIT_EPS)
                )
                nodes_f, nodes_i, owner = nf[:, keep], nodes_i[:, keep], shard_of_node[keep]
            placed = route_batch(
                code,
                self.cache.placer_params,
                nodes_f,
                nodes_i,
                jobs_f,
                self.cache.rng,
                owner,
                pressure,
                cap,
                out,
            )
        else:
            placed = self._route_python(batch, cpu, mem, gpu, shard_of_node, pressure, cap, out)
        self.decisions += batch.count
        return out, int(placed)

    def _route_python(
        self,
        batch: JobBatch,
        cpu: FloatArray,
        mem: FloatArray,
        gpu: FloatArray,
        shard_of_node: IntArray,
        pressure: FloatArray,
        cap: FloatArray,
        out: IntArray,
    ) -> int:
        nf, ni = self.cache.nodes_f, self.cache.nodes_i
        view = make_placement_view(
            float(batch.arrival_s[0]) if batch.count else 0.0,
            np.arange(batch.count, dtype=np.int64),
            batch.class_index.copy(),
            (cpu, mem, gpu),
            nf,
            ni,
        )
        decided = np.full(batch.count, -1, dtype=np.int64)
        for d in self.placer.place(view) if batch.count else []:
            if 0 <= int(d.job) < batch.count and 0 <= int(d.node) < nf.shape[1]:
                decided[int(d.job)] = shard_of_node[int(d.node)]
        for i in range(batch.count):
            if decided[i] >= 0:
                out[i] = decided[i]
                continue
            best = int(np.argmin(pressure / cap))
            pressure[best] += cpu[i]
            out[i] = best
        return int((decided >= 0).sum())


#: The Ray actor; named `clusteremu/<run>/scheduler` by the launcher.
SchedulerActor = ray.remote(num_cpus=0)(Scheduler)
