"""The event engine: builds the struct-of-arrays state for one replication of a scenario
and drives the compiled loop (`cluster.kernel`), calling Python policies when asked.

Random streams (common random numbers): the scenario seed spawns one `SeedSequence` per
replication, and each replication spawns one stream per (class, purpose): arrivals of
class i, sizes of class i, and the placer's stream. Two policies run on the same seed see
the same jobs, whatever else differs.

>>> from cluster.model import *
>>> from cluster.distributions import Exponential
>>> from cluster.speedup import LinearSpeedup
>>> from cluster.workload import poisson_arrivals
>>> spec = SimulationSpec(
...     name="mm1", seed=1, stop=StopRule(jobs=1000),
...     node_types=(NodeType("core", cpu=1, memory_gb=1),), nodes=("core",), pools=(),
...     classes=(JobClass("a", poisson_arrivals(0.5), Exponential(1.0), LinearSpeedup()),))
>>> run = Engine(spec).run()
>>> run.summary["jobs_completed"]
1000
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from cluster import kernel
from cluster import layout as L
from cluster.metrics import RunResult, build_result
from cluster.model import SimulationSpec
from cluster.policies import registry
from cluster.policies.base import (
    Allocation,
    Allocator,
    Placement,
    PlacementView,
    Placer,
    PolicyError,
    PoolView,
    Provisioner,
)
from cluster.speedup import MAX_TABLE_POINTS

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Events per call of the compiled loop between progress reports.
EVENTS_PER_CALL = 1 << 18
#: Tolerance on over-allocation of a pool (cores).
ALLOC_EPS = 1e-9


@dataclass(frozen=True)
class Jobs:
    """The jobs of one replication, sorted by arrival (ties: class order, then draw order)."""

    arrival_s: FloatArray
    class_index: IntArray
    size: FloatArray
    #: One uniform draw per job, mapped to a run time on each node type that has one.
    runtime_u: FloatArray | None = None


def replication_seeds(seed: int, replications: int) -> list[np.random.SeedSequence]:
    """One SeedSequence per replication, spawned from the scenario seed."""
    return np.random.SeedSequence(seed).spawn(replications)


def generate_jobs(spec: SimulationSpec, seq: np.random.SeedSequence) -> Jobs:
    """Draw the arrival times and sizes of every job of one replication.

    With `stop.jobs`, exactly that many jobs (the earliest arrivals across classes); with
    `stop.time_s`, every arrival up to the horizon. Each class draws from its own streams,
    so the jobs of one class do not depend on the other classes.
    """
    n_classes = len(spec.classes)
    streams = seq.spawn(3 * n_classes)
    if spec.stop.time_s is not None:
        counts = [np.iinfo(np.int64).max] * n_classes
        times = _draw_arrivals(spec, streams, spec.stop.time_s, counts)
        limit = sum(t.size for t in times)
    else:
        limit = int(spec.stop.jobs or 0)
        times = _arrivals_for_count(spec, streams, limit)
    sizes = [
        c.size.sample(np.random.default_rng(streams[2 * i + 1]), t.size)
        for i, (c, t) in enumerate(zip(spec.classes, times, strict=True))
    ]
    if n_classes == 1:
        # One stream is already in arrival order: no merge, no copies.
        cls: IntArray = np.zeros(times[0].size, dtype=np.int64)
        arrival = times[0]
        order: slice | IntArray = slice(0, limit)
    else:
        cls = np.concatenate([np.full(t.size, i, dtype=np.int64) for i, t in enumerate(times)])
        arrival = np.concatenate(times)
        # Stable: equal times keep class order, then each class's draw order.
        order = np.argsort(arrival, kind="stable")[:limit]
    runtime_u = None
    if any(c.runtime_by_node_type for c in spec.classes):
        runtime_u = np.concatenate(
            [
                np.random.default_rng(streams[2 * n_classes + i]).random(t.size)
                for i, t in enumerate(times)
            ]
        )[order]
    size = sizes[0] if n_classes == 1 else np.concatenate(sizes)
    return Jobs(arrival[order], cls[order], size[order].astype(np.float64, copy=False), runtime_u)


def _draw_arrivals(
    spec: SimulationSpec, streams: list[np.random.SeedSequence], until_s: float, counts: list[int]
) -> list[FloatArray]:
    return [
        c.arrival.generate(np.random.default_rng(streams[2 * i]), until_s, counts[i])
        for i, c in enumerate(spec.classes)
    ]


def _arrivals_for_count(
    spec: SimulationSpec, streams: list[np.random.SeedSequence], count: int
) -> list[FloatArray]:
    """Arrivals per class that cover the first `count` jobs of the merged stream.

    Open classes draw in proportion to their rate (with head-room); if the merged stream is
    not covered, every class redraws from its seed with twice the head-room.
    """
    if len(spec.classes) == 1:
        return _draw_arrivals(spec, streams, math.inf, [count])
    rates = [c.arrival.rate_per_s or 0.0 for c in spec.classes]
    total_rate = sum(rates)
    headroom = 1.1
    while True:
        counts = [
            count if r == 0.0 else min(count, int(headroom * count * r / total_rate) + 64)
            for r in rates
        ]
        times = _draw_arrivals(spec, streams, math.inf, counts)
        merged = np.sort(np.concatenate(times))[:count] if count else np.zeros(0)
        # Only classes cut short by their count bound the covered horizon.
        covered = min(
            (
                float(t[-1])
                for t, n, r in zip(times, counts, rates, strict=True)
                if r > 0.0 and t.size == n and n < count
            ),
            default=math.inf,
        )
        if merged.size < count and covered == math.inf:
            return times  # finite classes only: fewer jobs than asked for
        if merged.size == count and (count == 0 or merged[-1] <= covered):
            return times
        headroom *= 2.0


def runtime_table(spec: SimulationSpec, jobs: Jobs) -> FloatArray:
    """Run time in seconds of every job on every node type (-1 = size / (speed * s(cpu))).

    Shape (node types, jobs), or (0, 0) when no class sets `runtime_by_node_type`.
    """
    if jobs.runtime_u is None or not any(c.runtime_by_node_type for c in spec.classes):
        return np.zeros((0, 0))
    table = np.full((len(spec.node_types), jobs.arrival_s.size), -1.0)
    for c, jc in enumerate(spec.classes):
        mine = jobs.class_index == c
        for t, nt in enumerate(spec.node_types):
            dist = jc.runtime_by_node_type.get(nt.name)
            if dist is not None and mine.any():
                table[t, mine] = dist.quantile(jobs.runtime_u[mine])
    return table


def job_state(
    spec: SimulationSpec, provisioner: Provisioner, jobs: Jobs
) -> tuple[FloatArray, IntArray]:
    """Fresh per-job state arrays (rows in cluster.layout) for the given jobs.

    Only the rows the loop reads before writing are filled; the others stay zero pages
    that the operating system maps lazily (a row a run never writes costs no memory).
    """
    n = jobs.arrival_s.size
    jobs_f = np.zeros((L.JF_ROWS, n))
    jobs_i = np.zeros((L.JI_ROWS, n), dtype=np.int64)
    jobs_f[L.ARRIVAL] = jobs.arrival_s
    jobs_f[L.SIZE] = jobs.size
    jobs_i[L.CLS] = jobs.class_index
    cpu, mem, gpu = provisioner.requests(spec, jobs.class_index)
    for row, values in ((L.REQ_CPU, cpu), (L.REQ_MEM, mem), (L.REQ_GPU, gpu)):
        if np.any(values):
            jobs_f[row] = values
    return jobs_f, jobs_i


class Engine:
    """One replication of a scenario: state arrays, policies and the driving loop."""

    def __init__(
        self,
        spec: SimulationSpec,
        replication: int = 0,
        placer: Placer | None = None,
        allocator: Allocator | None = None,
        provisioner: Provisioner | None = None,
        force_python_policies: bool = False,
        jobs: Jobs | None = None,
    ) -> None:
        """Build the state of one replication.

        `jobs` replaces the jobs drawn from the scenario's streams (e.g. jobs routed to a
        shard by a Ray scheduler); policies default to the scenario's scheduler block;
        `force_python_policies` takes the Python decision path even for compiled policies.
        """
        self.spec = spec
        self.replication = replication
        seq = replication_seeds(spec.seed, max(spec.replications, replication + 1))[replication]
        job_seq, policy_seq = seq.spawn(2)
        self.placer = placer or _make(
            registry.create("placer", spec.scheduler.placer.name, **spec.scheduler.placer.params),
            Placer,
        )
        self.allocator = allocator or _make(
            registry.create(
                "allocator", spec.scheduler.allocator.name, **spec.scheduler.allocator.params
            ),
            Allocator,
        )
        self.provisioner = provisioner or _make(
            registry.create(
                "provisioner", spec.scheduler.provisioner.name, **spec.scheduler.provisioner.params
            ),
            Provisioner,
        )
        place_seq, alloc_seq = policy_seq.spawn(2)
        self.placer.setup(spec, np.random.default_rng(place_seq))
        self.allocator.setup(spec, np.random.default_rng(alloc_seq))
        self.provisioner.setup(spec, np.random.default_rng(0))
        self.jobs = jobs if jobs is not None else generate_jobs(spec, job_seq)
        self._build_state(np.random.default_rng(place_seq), force_python_policies)
        self.status = -1

    # -- state ------------------------------------------------------------------------

    def _build_state(self, placer_rng: np.random.Generator, force_python: bool) -> None:
        spec, jobs = self.spec, self.jobs
        n = jobs.arrival_s.size
        self.jobs_f, self.jobs_i = job_state(spec, self.provisioner, jobs)

        types = {t.name: i for i, t in enumerate(spec.node_types)}
        m = len(spec.nodes)
        self.nodes_f = np.zeros((L.NF_ROWS, m))
        self.nodes_i = np.zeros((L.NI_ROWS, m), dtype=np.int64)
        for k, type_name in enumerate(spec.nodes):
            t = spec.node_types[types[type_name]]
            self.nodes_f[[L.CAP_CPU, L.CAP_MEM, L.CAP_GPU], k] = (t.cpu, t.memory_gb, t.gpu)
            self.nodes_f[L.SPEED, k] = t.speed
            self.nodes_f[L.PRICE_PER_S, k] = t.price_per_hour / 3600.0
            self.nodes_i[L.NODE_TYPE, k] = types[type_name]
            self.nodes_i[L.ACTIVE, k] = 1
            self.nodes_f[L.CAP_SLOTS, k] = t.max_jobs
        self.nodes_f[[L.FREE_CPU, L.FREE_MEM, L.FREE_GPU, L.FREE_SLOTS]] = self.nodes_f[
            [L.CAP_CPU, L.CAP_MEM, L.CAP_GPU, L.CAP_SLOTS]
        ]

        n_pools = len(spec.pools)
        self.pools_f = np.zeros((L.PF_ROWS, n_pools))
        self.pools_i = np.full((L.PI_ROWS, n_pools), -1, dtype=np.int64)
        for p, pool in enumerate(spec.pools):
            self.pools_f[L.P_CORES, p] = pool.cores
            self.pools_f[L.P_SPEED, p] = pool.speed
            self.pools_f[L.P_PRICE_PER_S, p] = pool.price_per_hour / 3600.0
        self.pools_i[L.P_COUNT] = 0
        self.pools_i[L.P_NEED_ALLOC] = 0

        n_classes = len(spec.classes)
        self.classes_f = np.zeros((L.CF_ROWS, n_classes))
        self.classes_i = np.zeros((L.CI_ROWS, n_classes), dtype=np.int64)
        self.class_tx = np.zeros((n_classes, MAX_TABLE_POINTS))
        self.class_ty = np.zeros((n_classes, MAX_TABLE_POINTS))
        for c, jc in enumerate(spec.classes):
            self.classes_f[L.HOLDING_COST, c] = jc.holding_cost
            sp_params = jc.speedup.kernel_params()
            self.classes_f[L.SP_PARAM, c] = sp_params[0]
            self.classes_f[L.SP_PARAM2, c] = sp_params[1] if sp_params.size > 1 else 0.0
            self.classes_f[L.TIMEOUT_S, c] = jc.timeout_s
            self.classes_i[L.SP_KIND, c] = jc.speedup.kernel_code
            self.classes_i[L.CLASS_POOL, c] = spec.pool_index(jc.pool) if jc.pool else -1
            xs, ys = jc.speedup.table_points()
            self.classes_i[L.SP_NPTS, c] = xs.size
            self.class_tx[c, : xs.size], self.class_ty[c, : ys.size] = xs, ys

        # A completion and a patience timer per job at most.
        self.run_by_type = runtime_table(spec, jobs)
        self.heap_t = np.zeros(2 * n + 1)
        self.heap_j = np.zeros(2 * n + 1, dtype=np.int64)
        self.heap_k = np.zeros(2 * n + 1, dtype=np.int64)
        self.queue = np.zeros(max(n, 1), dtype=np.int64)
        self.members = np.zeros(max(n, 1), dtype=np.int64)
        self.n_class = np.zeros(n_classes, dtype=np.int64)
        self.area_class = np.zeros(n_classes)
        self.istate = np.zeros(L.IS_ROWS, dtype=np.int64)
        self.fstate = np.zeros(L.FS_ROWS)
        self.istate[L.PLACER_CODE] = 0 if force_python else self.placer.kernel_code
        self.istate[L.ALLOC_CODE] = 0 if force_python else self.allocator.kernel_code
        self.rng = np.array([placer_rng.integers(0, 2**63)], dtype=np.uint64)
        self.placer_params = np.asarray(self.placer.kernel_params(), dtype=np.float64)
        self.alloc_params = np.asarray(self.allocator.kernel_params(), dtype=np.float64)

        stop = spec.stop
        if stop.time_s is not None:
            self.fstate[L.WIN_START] = stop.warmup_s
            self.fstate[L.WIN_END] = stop.time_s
            self.fstate[L.HORIZON] = stop.time_s
        else:
            warm = min(stop.warmup_jobs, max(n - 1, 0))
            self.fstate[L.WIN_START] = jobs.arrival_s[warm] if n else 0.0
            self.fstate[L.WIN_END] = jobs.arrival_s[-1] if n else 0.0
            self.fstate[L.HORIZON] = math.inf

    # -- driving ----------------------------------------------------------------------

    @property
    def now(self) -> float:
        """Simulated time, seconds."""
        return float(self.fstate[L.NOW])

    @property
    def events(self) -> int:
        return int(self.istate[L.EVENTS])

    @property
    def finished(self) -> bool:
        return self.status == L.FINISHED

    def step(self, until_s: float = math.inf, max_events: int = EVENTS_PER_CALL) -> int:
        """Advance until `until_s`, `max_events` events or the end; answer policy calls."""
        while True:
            status = kernel.run_kernel(
                self.jobs_f,
                self.jobs_i,
                self.nodes_f,
                self.nodes_i,
                self.pools_f,
                self.pools_i,
                self.classes_f,
                self.classes_i,
                self.class_tx,
                self.class_ty,
                self.heap_t,
                self.heap_j,
                self.heap_k,
                self.run_by_type,
                self.queue,
                self.members,
                self.n_class,
                self.area_class,
                self.istate,
                self.fstate,
                self.rng,
                self.placer_params,
                self.alloc_params,
                until_s,
                max_events,
            )
            if status == L.NEED_PLACE_DECISION:
                self._python_place()
            elif status == L.NEED_ALLOC_DECISION:
                self._python_allocate(int(self.istate[L.STATUS_POOL]))
            else:
                self.status = status
                return status

    def run(self, progress: Callable[[float], None] | None = None) -> RunResult:
        """Run to the end and return the per-job table and summary.

        `progress` receives the fraction done (by jobs completed, or simulated time).
        """
        total = max(self.jobs.arrival_s.size, 1)
        horizon = self.spec.stop.time_s
        while self.step() != L.FINISHED:
            if progress is not None:
                done = self.now / horizon if horizon else self.istate[L.DONE_COUNT] / total
                progress(min(float(done), 1.0))
        if progress is not None:
            progress(1.0)
        return self.result()

    def result(self) -> RunResult:
        return build_result(self)

    def add_jobs(self, jobs: Jobs) -> IntArray:
        """Append jobs to a paused engine; return their row indices.

        For feeding an engine window by window (the Ray shards of `actors/`): the new jobs
        must be sorted by arrival and arrive no earlier than `now` and than every job
        already known. The arrays grow; the heap, the queue and every running job are
        kept, so an engine fed this way between `step(until_s=...)` calls runs exactly as
        one given all its jobs up front. Requests come from the provisioner.
        """
        m = jobs.arrival_s.size
        n = self.jobs_f.shape[1]
        if m == 0:
            return np.zeros(0, dtype=np.int64)
        last = self.jobs_f[L.ARRIVAL, n - 1] if n else -math.inf
        if np.any(np.diff(jobs.arrival_s) < 0) or jobs.arrival_s[0] < max(last, self.now):
            raise ValueError(
                "add_jobs: jobs must be sorted and arrive at or after now and "
                "after every job already known"
            )
        new_f, new_i = job_state(self.spec, self.provisioner, jobs)
        self.jobs_f = np.concatenate([self.jobs_f, new_f], axis=1)
        self.jobs_i = np.concatenate([self.jobs_i, new_i], axis=1)
        table = runtime_table(self.spec, jobs)
        if table.shape[0] or self.run_by_type.shape[0]:
            old = (
                self.run_by_type
                if self.run_by_type.shape[0]
                else np.full((len(self.spec.node_types), n), -1.0)
            )
            table = table if table.shape[0] else np.full((len(self.spec.node_types), m), -1.0)
            self.run_by_type = np.concatenate([old, table], axis=1)
        runtime_u = None
        if jobs.runtime_u is not None or self.jobs.runtime_u is not None:
            runtime_u = np.concatenate(
                [
                    self.jobs.runtime_u if self.jobs.runtime_u is not None else np.zeros(n),
                    jobs.runtime_u if jobs.runtime_u is not None else np.zeros(m),
                ]
            )
        self.jobs = Jobs(
            np.concatenate([self.jobs.arrival_s, jobs.arrival_s]),
            np.concatenate([self.jobs.class_index, jobs.class_index]),
            np.concatenate([self.jobs.size, jobs.size]),
            runtime_u,
        )
        total = n + m
        if self.heap_t.size < 2 * total + 1:
            grow = max(2 * total + 1, 2 * self.heap_t.size) - self.heap_t.size
            self.heap_t = np.concatenate([self.heap_t, np.zeros(grow)])
            self.heap_j = np.concatenate([self.heap_j, np.zeros(grow, dtype=np.int64)])
            self.heap_k = np.concatenate([self.heap_k, np.zeros(grow, dtype=np.int64)])
        if self.queue.size < total:
            grow = max(total, 2 * self.queue.size) - self.queue.size
            self.queue = np.concatenate([self.queue, np.zeros(grow, np.int64)])
            self.members = np.concatenate([self.members, np.zeros(grow, np.int64)])
        return np.arange(n, total, dtype=np.int64)

    # -- Python policies --------------------------------------------------------------

    def placement_view(self) -> PlacementView:
        q = self.queue[self.istate[L.Q_HEAD] : self.istate[L.Q_TAIL]]
        q = q[self.jobs_i[L.STATE, q] == L.QUEUED]  # fancy indexing copies
        if not hasattr(self, "_node_static"):
            self._node_static = static_node_arrays(self.nodes_f, self.nodes_i)
        jf = self.jobs_f
        return make_placement_view(
            self.now,
            q,
            self.jobs_i[L.CLS, q],
            (jf[L.REQ_CPU, q], jf[L.REQ_MEM, q], jf[L.REQ_GPU, q]),
            self.nodes_f,
            self.nodes_i,
            self._node_static,
        )

    def _python_place(self) -> None:
        view = self.placement_view()
        decisions = self.placer.place(view) if view.queue.size else []
        name, now = self.placer.name, self.now
        if not isinstance(decisions, list | tuple):
            raise PolicyError(name, now, "place() must return a list of Placement", decisions)
        waiting = set(view.queue.tolist())
        jf, nf = self.jobs_f, self.nodes_f
        for d in decisions:
            j, k, run_s, setup_s = check_placement(
                name,
                now,
                d,
                waiting,
                lambda j: (jf[L.REQ_CPU, j], jf[L.REQ_MEM, j], jf[L.REQ_GPU, j]),
                nf,
                self.nodes_i,
            )
            waiting.discard(j)
            kernel.start_job(
                j,
                k,
                self.now,
                self.jobs_f,
                self.jobs_i,
                self.nodes_f,
                self.nodes_i,
                self.classes_f,
                self.classes_i,
                self.class_tx,
                self.class_ty,
                self.heap_t,
                self.heap_j,
                self.heap_k,
                self.istate,
                self.fstate,
                self.run_by_type,
                run_s,
                setup_s,
            )
        kernel.next_queued(self.queue, self.istate, self.jobs_i)
        self.istate[L.NEED_PLACE] = 0

    def pool_view(self, p: int) -> PoolView:
        n = kernel.pool_members(p, self.pools_i, self.jobs_i, self.members)
        ids = self.members[:n].copy()
        cls = self.jobs_i[L.CLS, ids]
        return PoolView(
            time_s=self.now,
            pool=self.spec.pools[p].name,
            cores=float(self.pools_f[L.P_CORES, p]),
            job_ids=ids,
            class_index=cls.copy(),
            arrival_s=self.jobs_f[L.ARRIVAL, ids].copy(),
            size=self.jobs_f[L.SIZE, ids].copy(),
            remaining=self.jobs_f[L.REM, ids].copy(),
            holding_cost=self.classes_f[L.HOLDING_COST, cls].copy(),
            current_cores=self.jobs_f[L.CORES, ids].copy(),
        )

    def _python_allocate(self, p: int) -> None:
        view = self.pool_view(p)
        if view.job_ids.size:
            decision = self.allocator.allocate(view)
            cores = check_allocation(self.allocator.name, view, decision)
            self.jobs_f[L.CORES, view.job_ids] = cores
        kernel.apply_allocation(
            p,
            self.now,
            self.jobs_f,
            self.jobs_i,
            self.pools_f,
            self.pools_i,
            self.classes_f,
            self.classes_i,
            self.class_tx,
            self.class_ty,
            self.fstate,
            self.istate,
        )


def static_node_arrays(nodes_f: FloatArray, nodes_i: IntArray) -> dict[str, npt.NDArray[Any]]:
    """Node arrays that never change during a run, as read-only copies views can share."""
    arrays: dict[str, npt.NDArray[Any]] = {
        "capacity_cpu": nodes_f[L.CAP_CPU].copy(),
        "capacity_memory_gb": nodes_f[L.CAP_MEM].copy(),
        "capacity_gpu": nodes_f[L.CAP_GPU].copy(),
        "speed": nodes_f[L.SPEED].copy(),
        "node_type": nodes_i[L.NODE_TYPE].copy(),
    }
    for array in arrays.values():
        array.flags.writeable = False
    return arrays


def make_placement_view(
    time_s: float,
    queue: IntArray,
    class_index: IntArray,
    requests: tuple[FloatArray, FloatArray, FloatArray],
    nodes_f: FloatArray,
    nodes_i: IntArray,
    static: dict[str, npt.NDArray[Any]] | None = None,
) -> PlacementView:
    """A PlacementView of queued jobs (their (cpu, GB, gpu) requests) on the given nodes.

    Free resources are copied; `static` (from `static_node_arrays`) is shared if given.
    """
    return PlacementView(
        time_s=time_s,
        queue=queue,
        class_index=class_index,
        request_cpu=requests[0],
        request_memory_gb=requests[1],
        request_gpu=requests[2],
        free_cpu=nodes_f[L.FREE_CPU].copy(),
        free_memory_gb=nodes_f[L.FREE_MEM].copy(),
        free_gpu=nodes_f[L.FREE_GPU].copy(),
        active=nodes_i[L.ACTIVE] == 1,
        free_slots=nodes_f[L.FREE_SLOTS].copy(),
        **(static if static is not None else static_node_arrays(nodes_f, nodes_i)),
    )


def check_placement(
    policy: str,
    now: float,
    decision: object,
    waiting: set[int],
    request_of: Callable[[int], tuple[float, float, float]],
    nodes_f: FloatArray,
    nodes_i: IntArray,
) -> tuple[int, int, float, float]:
    """Validate one placement against the waiting jobs and the nodes' free resources.

    Returns (job, node, run_s, setup_s) with run_s = -1 for "size / rate"; raises
    PolicyError naming the policy, the time and the decision otherwise. Shared by the engine
    and the Ray scheduler actor, which checks decisions on its cached view of the shards.
    """
    if not isinstance(decision, Placement):
        raise PolicyError(policy, now, "not a Placement", decision)
    j, k = int(decision.job), int(decision.node)
    if j not in waiting:
        raise PolicyError(policy, now, f"job {j} is not waiting in the queue", decision)
    if not 0 <= k < nodes_f.shape[1] or nodes_i[L.ACTIVE, k] != 1:
        raise PolicyError(policy, now, f"node {k} does not exist or is not up", decision)
    need = request_of(j)
    free = (nodes_f[L.FREE_CPU, k], nodes_f[L.FREE_MEM, k], nodes_f[L.FREE_GPU, k])
    slots = nodes_f[L.FREE_SLOTS, k]
    if any(f < n - ALLOC_EPS for f, n in zip(free, need, strict=True)) or slots < 1.0:
        raise PolicyError(
            policy,
            now,
            f"job {j} (cpu, GB, gpu) = {tuple(map(float, need))} does not fit node {k} "
            f"with free {tuple(map(float, free))} and {slots:g} slots",
            decision,
        )
    run_s = -1.0 if decision.run_s is None else float(decision.run_s)
    setup_s = float(decision.setup_s)
    if not (run_s == -1.0 or (math.isfinite(run_s) and run_s > 0)) or not (
        math.isfinite(setup_s) and setup_s >= 0
    ):
        raise PolicyError(policy, now, "run_s must be positive and setup_s non-negative", decision)
    return j, k, run_s, setup_s


def check_allocation(policy: str, view: PoolView, decision: Allocation) -> FloatArray:
    """Validate an allocator's decision; return the cores as a float array."""
    if not isinstance(decision, Allocation):
        raise PolicyError(policy, view.time_s, "allocate() must return an Allocation", decision)
    cores = np.asarray(decision.cores, dtype=np.float64)
    if cores.shape != view.job_ids.shape:
        raise PolicyError(
            policy, view.time_s, f"{cores.size} core counts for {view.job_ids.size} jobs", decision
        )
    if not np.all(np.isfinite(cores)) or np.any(cores < 0):
        raise PolicyError(
            policy, view.time_s, "core counts must be finite and non-negative", decision
        )
    if cores.sum() > view.cores * (1 + ALLOC_EPS) + ALLOC_EPS:
        raise PolicyError(
            policy,
            view.time_s,
            f"allocated {cores.sum():.6g} cores in pool {view.pool!r} of {view.cores:g}",
            decision,
        )
    return cores


def _make(policy: object, kind: type) -> Any:
    if not isinstance(policy, kind):
        raise TypeError(f"{policy!r} is not a {kind.__name__}")
    return policy
