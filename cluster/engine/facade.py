"""`Engine`: one replication of a scenario, composed of its parts (see the package's
docstring), behind the engine's public API."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np
import numpy.typing as npt

from clusteremu.cluster import kernel
from clusteremu.cluster.engine.builder import build_state, compiled_functions, new_fit_index
from clusteremu.cluster.engine.compaction import (
    CompactionRefused,
    FinishedRows,
    JobIds,
    JobSink,
    compact,
    python_refusal,
)
from clusteremu.cluster.engine.fault_feed import FaultFeed
from clusteremu.cluster.engine.feeding import JobFeed, table_feed
from clusteremu.cluster.engine.loop import Loop
from clusteremu.cluster.engine.operations import Operations
from clusteremu.cluster.engine.policy_bridge import PolicyBridge
from clusteremu.cluster.engine.store import StateStore
from clusteremu.cluster.job_chunks import drawn_chunks
from clusteremu.cluster.jobs import Jobs, Purpose, generate_jobs, replication_seed, stream
from clusteremu.cluster.layout import CF, FS, IS, JF, PI, Status
from clusteremu.cluster.metrics import RunResult, build_result
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies.base import (
    Allocator,
    PlacementView,
    Placer,
    PoolView,
    Provisioner,
    Scaler,
    ScaleView,
)
from clusteremu.cluster.policies.points import build_policies, distinct, setup_policies
from clusteremu.cluster.state import EngineState, RunState, check_gpu_request

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Events per call of the compiled loop between progress reports.
EVENTS_PER_CALL = 1 << 18


class Engine:
    """One replication of a scenario: its state, its policies and the loop that drives it."""

    def __init__(
        self,
        spec: SimulationSpec,
        replication: int = 0,
        placer: Placer | None = None,
        allocator: Allocator | None = None,
        provisioner: Provisioner | None = None,
        force_python_policies: bool = False,
        jobs: Jobs | None = None,
        scaler: Scaler | None = None,
        fit_index: bool | None = None,
        sink: JobSink | None = None,
        compact_every: int = 1 << 20,
    ) -> None:
        """Build the state of one replication.

        `jobs` replaces the jobs drawn from the scenario's streams (e.g. jobs routed to a
        shard by a Ray scheduler); policies default to the scenario's scheduler block (an
        object given for a point replaces the scenario's policy there; a pair's object, such
        as a Pennyworth planner, is given at each of its points: `Engine(spec, placer=p,
        scaler=p)`); `force_python_policies` takes the Python decision path even for
        compiled policies.
        `fit_index` keeps an index of free capacity (`clusteremu.cluster.fit_index`; the
        same runs, faster first-fit placements on many nodes) or not; None: with a compiled
        placer that uses it (`uses_fit_index`: the built-in first-fit, one of yours that
        calls `compiled_table.next_fit`) on `fit_index.MIN_ROWS` node rows or more.
        """
        self.spec = spec
        self.replication = replication
        seq = replication_seed(spec, replication)
        # One object per policy: a pair (Pennyworth's planners, placer and scaler) is one
        # object at each of its points, named so by the scenario
        # (`clusteremu.cluster.policies.points`).
        self.policies = build_policies(
            spec, placer=placer, allocator=allocator, provisioner=provisioner, scaler=scaler
        )
        self.placer: Placer = self.policies["placer"]  # type: ignore[assignment]
        self.allocator: Allocator = self.policies["allocator"]  # type: ignore[assignment]
        self.provisioner: Provisioner = self.policies["provisioner"]  # type: ignore[assignment]
        self.scaler: Scaler = self.policies["scaler"]  # type: ignore[assignment]
        placer_rng = stream(seq, Purpose.PLACER)
        setup_policies(self.policies, spec, seq)
        for c in spec.classes:
            check_gpu_request(f"workload class {c.name!r}: request.gpu", c.request.gpu)
        # A trace table is read a chunk at a time and fed as the run reaches it.
        jobs_given = jobs is not None
        source, chunks, first, total = table_feed(spec) if jobs is None else (None, None, None, 0)
        if first is not None:
            jobs = first
        # Compacting a scenario's own jobs: drawn a chunk at a time where they can be.
        drawn = drawn_chunks(spec, seq) if sink is not None and jobs is None else None
        if drawn is not None:
            jobs = next(drawn)
            chunks = drawn
        jobs = jobs if jobs is not None else generate_jobs(spec, seq)
        faults = FaultFeed(spec, seq)
        self._compiled = compiled_functions(
            spec, self.placer, self.allocator, self.scaler, force_python_policies
        )
        fit_index_of = partial(new_fit_index, spec, self.placer, fit_index)
        state, lift_rule = build_state(
            spec, jobs, self.policies, self._compiled, faults, placer_rng, fit_index
        )
        self.store = store = StateStore(state)
        faults.first_failures(store)
        #: Each job row's number in the whole run (compaction renumbers rows).
        self.ids = JobIds(jobs.arrival_s.size)
        self.feed = JobFeed(store, spec, self.provisioner, jobs, chunks, self.ids)
        self.operations = Operations(
            store, spec, seq, self.provisioner, self.feed, faults, fit_index_of, lift_rule, self.ids
        )
        self.bridge = PolicyBridge(
            store, spec, self.placer, self.allocator, self.scaler, self.operations
        )
        ops, bridge = self.operations, self.bridge
        self.loop = Loop(
            store,
            self._compiled.fns,
            {
                Status.PLACER_HANDED_BACK: bridge.placer_handed_back,
                Status.NEED_SCALE_DECISION: bridge.python_scale,
                Status.NEED_ALLOC_DECISION: bridge.python_allocate,
                Status.BAD_DECISION: bridge.refused,
                Status.BAD_COMPILED_DECISION: bridge.refused_compiled,
                Status.BAD_ALLOCATION: bridge.refused_allocation,
                Status.NEED_SCALE_ACTIONS: bridge.compiled_scale,
                Status.NEED_LIFT_DECISION: ops.lift,
                Status.NEED_TIMELINE_ACTION: ops.timeline_action,
                Status.NEED_FAULT_DRAWS: partial(faults.refill, store),
                Status.NEED_SIZE_REDRAWS: ops.redraw_sizes,
            },
            bridge.placer_call,
        )
        self.status = -1
        self._total_jobs = jobs.arrival_s.size
        self.sink = sink
        if compact_every < 1:
            raise ValueError(f"compact_every must be at least 1, got {compact_every}")
        self.compact_every = compact_every
        self._left_at_compaction = 0
        if sink is not None:
            why = compaction_refusal(self, jobs_given) or sink.refusal(
                self._live_run(), tuple(policy for _, policy in distinct(self.policies))
            )
            if why:
                raise CompactionRefused(f"scenario {spec.name!r}: cannot compact job rows: {why}")
            self.feed.spare_rows()
        self._drawn = drawn
        if drawn is not None:
            stop = spec.stop
            self._total_jobs = int(stop.jobs or 0)
            if stop.time_s is None:  # the window ends at the last job's arrival, drawn later
                self.set_window(
                    start_s=float(jobs.arrival_s[min(stop.warmup_jobs, jobs.arrival_s.size - 1)])
                )
                self.set_window(end_s=drawn.last_arrival if drawn.done else math.inf)
            self.feed.next_chunk = self.feed.take_chunk()
        if source is not None:
            self._total_jobs = total
            stop = spec.stop
            if stop.time_s is None and total > jobs.arrival_s.size:
                # The window of a job-count stop: the arrivals of its first measured and
                # its last job, which later chunks hold.
                warm = min(stop.warmup_jobs, total - 1)
                held = jobs.arrival_s
                self.set_window(
                    start_s=held[warm] if warm < held.size else source.arrival_at(warm),
                    end_s=source.arrival_at(total - 1),
                )
            if sink is None:
                self.feed.reserve_jobs(total)
            self.feed.next_chunk = self.feed.take_chunk()

    # -- state ------------------------------------------------------------------------

    @property
    def jobs(self) -> Jobs:
        """The jobs of the run (those `add_jobs` gave included)."""
        return self.feed.jobs

    @property
    def state(self) -> EngineState:
        """Read-only views of every state array."""
        return self.store.read_only

    # Read-only views of the arrays most readers want (writing them raises ValueError).
    @property
    def jobs_f(self) -> FloatArray:
        return self.state.jobs_f

    @property
    def jobs_i(self) -> IntArray:
        return self.state.jobs_i

    @property
    def nodes_f(self) -> FloatArray:
        return self.state.nodes_f

    @property
    def nodes_i(self) -> IntArray:
        return self.state.nodes_i

    @property
    def pools_f(self) -> FloatArray:
        return self.state.pools_f

    @property
    def pools_i(self) -> IntArray:
        return self.state.pools_i

    @property
    def now(self) -> float:
        """Simulated time, seconds."""
        return self.store.now

    @property
    def events(self) -> int:
        return int(self.store.s.istate[IS.EVENTS])

    @property
    def jobs_done(self) -> int:
        """Jobs that have left the system (completed or failed)."""
        return int(self.store.s.istate[IS.DONE_COUNT])

    @property
    def jobs_in_system(self) -> int:
        return int(self.store.s.istate[IS.N_SYSTEM])

    @property
    def nodes_used(self) -> int:
        """Node rows handed out so far (the static nodes, then rented ones)."""
        return self.store.nodes_used

    @property
    def jobs_fed(self) -> int:
        """Job rows that hold jobs; rows from here on are `append_jobs`'s spare rows."""
        return self.feed.jobs_fed

    @property
    def finished(self) -> bool:
        return self.status == Status.FINISHED

    def snapshot(self) -> RunState:
        """The state now, frozen: a read-only copy that never changes as the engine moves on
        (`state` gives read-only views of the live arrays instead)."""
        sizes = dict(self.operations.sizes_drawn)
        return RunState(self.spec, self.replication, self.store.copy(), self.now, sizes)

    # -- driving ----------------------------------------------------------------------

    def peek(self) -> float:
        """Time of the next event, seconds (+inf if none)."""
        return float(kernel.peek_entry(self.store.t))

    def step(self, until_s: float = math.inf, max_events: int = EVENTS_PER_CALL) -> int:
        """Advance until `until_s`, `max_events` events or the end; answer policy calls.

        Returns a `clusteremu.cluster.layout.Status`: FINISHED, PAUSED (next event after
        `until_s`) or YIELDED (`max_events` events done). A streamed trace table's next
        chunk is fed just before the time of its first arrival.
        """
        feed, store = self.feed, self.store
        while True:
            chunk = feed.next_chunk
            if chunk is None:
                return self._run_loop(until_s, max_events)
            if feed.jobs_fed >= store.s.jobs_f.shape[1]:  # a spare row for its arrival
                feed.spare_rows(feed.jobs_fed + chunk.arrival_s.size)
            first = float(chunk.arrival_s[0])
            limit = min(until_s, float(np.nextafter(first, -math.inf)))
            # The loop sees the chunk's first arrival as the next one (and pauses before
            # it): without it, an idle gap would look like the end of the run.
            store.s.jobs_f[JF.ARRIVAL, feed.jobs_fed] = first
            status = self._run_loop(limit, max_events)
            if status == Status.YIELDED or (status == Status.PAUSED and limit == until_s):
                return status
            if first > store.s.fstate[FS.HORIZON]:  # the run ended before it
                feed.stop_chunks()
                return status
            feed.append_jobs(chunk)
            feed.next_chunk = feed.take_chunk()
            drawn = self._drawn
            if drawn is not None and drawn.done and self.spec.stop.time_s is None:
                self.set_window(end_s=drawn.last_arrival)

    def _run_loop(self, until_s: float, max_events: int) -> int:
        self.status = status = self.loop.run(until_s, max_events)
        if self.sink is not None and status != Status.FINISHED:
            left = self.jobs_done - self._left_at_compaction
            if left >= self.compact_every:
                self.compact()
        return status

    def compact(self) -> FinishedRows:
        """Take the rows of the jobs that have left out of the state now and hand them to
        the sink (`clusteremu.cluster.engine.compaction`); the loop must be stopped (between
        two calls of `step`). Returns the rows taken out."""
        if self.sink is None:
            raise ValueError("compact: the engine was built without a sink")
        feed = self.feed
        rows, held = compact(self.store, self.ids, feed.jobs_fed, self.operations.sizes_drawn)
        feed.set_fed(held)
        self._left_at_compaction = self.jobs_done
        self.sink.take(rows, self._live_run())
        return rows

    def _live_run(self) -> RunState:
        """The run now, as read-only views of the live state."""
        return RunState(
            self.spec, self.replication, self.state, self.now, self.operations.sizes_drawn
        )

    def run(self, progress: Callable[[float], None] | None = None) -> RunResult:
        """Run to the end and return the per-job table and summary.

        `progress` receives the fraction done (by jobs completed, or simulated time).
        """
        total = max(self._total_jobs, 1)
        horizon = self.spec.stop.time_s
        # With compaction, the loop returns often enough to compact every so many jobs.
        events = EVENTS_PER_CALL if self.sink is None else min(EVENTS_PER_CALL, self.compact_every)
        while self.step(max_events=events) != Status.FINISHED:
            if progress is not None:
                done = self.now / horizon if horizon else self.jobs_done / total
                progress(min(float(done), 1.0))
        if progress is not None:
            progress(1.0)
        return self.result()

    def result(self) -> RunResult:
        """The per-job table and summary of the run so far (read from the live state: the
        table shares no memory with it, so the engine may go on). With a sink, the sink's
        result from the rows it took and the live state (the engine may not go on)."""
        if self.sink is not None:
            fed = self.feed.jobs_fed
            return self.sink.result(
                self._live_run(),
                self.ids.ids[:fed],
                fed,
                tuple(policy for _, policy in distinct(self.policies)),
                self.jobs.features.get("run"),
            )
        return build_result(
            RunState(
                self.spec, self.replication, self.state, self.now, self.operations.sizes_drawn
            ),
            tuple(policy for _, policy in distinct(self.policies)),
            runs=self.jobs.features.get("run"),
        )

    def advance(self, t: float) -> None:
        """Move the clock to `t` with no event (pools' work and integrals brought up to t).

        `t` must not lie beyond the next event: call `step(until_s=t)` first.
        """
        if t < self.now:
            raise ValueError(f"advance: {t} s is before now ({self.now} s)")
        if t > self.peek():
            raise ValueError(f"advance: {t} s is after the next event ({self.peek()} s)")
        kernel.advance_entry(self.store.t, t)

    def set_window(
        self,
        start_s: float | None = None,
        end_s: float | None = None,
        horizon_s: float | None = None,
    ) -> None:
        """Set the measurement window [start_s, end_s] and the horizon (seconds)."""
        f = self.store.s.fstate
        if start_s is not None:
            f[FS.WIN_START] = start_s
        if end_s is not None:
            f[FS.WIN_END] = end_s
        if horizon_s is not None:
            f[FS.HORIZON] = horizon_s

    def close_window(self, t: float) -> None:
        """Account time integrals up to `t` (end of a shard's run) without moving jobs."""
        kernel.accumulate_entry(self.store.t, t)

    def set_speedup(self, cls: int, params: Sequence[float]) -> None:
        """Change class `cls`'s speed-up parameters now; running pool jobs' rates follow.

        Pools are brought up to now first, so the change takes effect exactly at `now`.
        """
        s = self.store.s
        values = [float(v) for v in params]
        s.classes_f[CF.SP_PARAM, cls] = values[0]
        if len(values) > 1:
            s.classes_f[CF.SP_PARAM2, cls] = values[1]
        kernel.reallocate_entry(self.store.t, self.now)

    def request_allocation(self, pool: int) -> None:
        """Ask the allocator to decide pool `pool` again before the next event."""
        self.store.s.pools_i[PI.NEED_ALLOC, pool] = 1

    # -- operations (`Operations`) ----------------------------------------------------------

    def start(
        self,
        job: int,
        node: int,
        gpus: Sequence[int] | None = None,
        setup_s: float = 0.0,
        policy: str = "engine",
    ) -> None:
        """Start queued `job` on `node` now (checked: it must be waiting and fit).

        `gpus` names the node's GPUs the job gets (default: the first with room); `setup_s`
        is a delay before execution while the job holds its request.
        """
        self.operations.start(job, node, gpus, setup_s, policy)

    def kill(
        self,
        job: int,
        requeue: bool = True,
        request: tuple[float, float, float] | None = None,
    ) -> None:
        """Kill running placed `job` now: its work is lost and counted as waste.

        With `requeue` it waits in the queue again, with `request` (cores, GB, GPUs) if
        given, and its `retries` grows; otherwise it fails.
        """
        self.operations.kill(job, requeue, request)

    def drop(self, job: int) -> None:
        """Drop waiting `job` now: it leaves the queue unplaced and fails."""
        self.operations.drop(job)

    def rent(self, node_type: str | int) -> int:
        """Rent a node of `node_type` now; it takes jobs after the type's start-up delay.

        Returns the node's index. Money: the type's start-up cost, plus its price from
        ready to release.
        """
        return self.operations.rent(node_type)

    def release(self, node: int) -> None:
        """Give node `node` back now (it must run no job); its price stops."""
        self.operations.release(node)

    # -- jobs fed after the start (`JobFeed`) -----------------------------------------------

    def add_jobs(self, jobs: Jobs) -> IntArray:
        """Append jobs to a paused engine; return their row indices (`JobFeed.add_jobs`)."""
        return self.feed.add_jobs(jobs)

    def append_jobs(self, jobs: Jobs) -> IntArray:
        """`add_jobs` in amortised O(batch) time (`JobFeed.append_jobs`)."""
        return self.feed.append_jobs(jobs)

    def reserve_jobs(self, total: int) -> None:
        """Make room for `total` job rows (`JobFeed.reserve_jobs`)."""
        self.feed.reserve_jobs(total)

    def trim_jobs(self) -> None:
        """Drop the reserved job rows no job filled (`JobFeed.trim_jobs`)."""
        self.feed.trim_jobs()

    # -- what Python policies see (`PolicyBridge`) ------------------------------------------

    def placement_view(self) -> PlacementView:
        """The queue and the nodes now, as a Python placer sees them (valid until the next
        call)."""
        return self.bridge.placement_view()

    def scale_view(self) -> ScaleView:
        """The queue and the nodes now, as a Python scaler sees them."""
        return self.bridge.scale_view()

    def pool_view(self, p: int) -> PoolView:
        """Pool `p`'s jobs now, as a Python allocator sees them."""
        return self.bridge.pool_view(p)


def compaction_refusal(engine: Engine, jobs_given: bool) -> str | None:
    """Why `engine`'s job rows cannot be compacted (None: they can). Compaction renumbers
    job rows; whatever sees job numbers between two calls of the loop would see them
    change: Python policies (views, decisions, a provisioner's `lift`), jobs handed in."""
    s = engine.store.s
    python = [
        point
        for point, code in (
            ("placer", IS.PLACER_CODE),
            ("allocator", IS.ALLOC_CODE),
            ("scaler", IS.SCALER_CODE),
        )
        if s.istate[code] == 0 and (point != "allocator" or s.pools_f.shape[1] > 0)
    ]
    if python:
        return python_refusal(python)
    if s.istate[IS.HAS_USAGE] and not s.istate[IS.LIFT_CODE]:
        return "the provisioner lifts out-of-memory requests in Python (it sees job numbers)"
    if jobs_given:
        return "jobs were handed in (`jobs=`): compaction runs a scenario's own jobs"
    return None


__all__ = ["EVENTS_PER_CALL", "Engine", "compaction_refusal"]
