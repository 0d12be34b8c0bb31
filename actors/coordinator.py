"""The coordinator: owns simulated time and advances the shards window by window.

One replication of a scenario runs on a set of named actors (`clusteremu/<run>/...`):
an `ArrivalActor`, a `SchedulerActor`, node shards (contiguous slices of the nodes) and
one shard per malleable pool. Modes (DESIGN.md, "Actors"):

* **exact** (`window_s == 0`): a window ends at the next event. The coordinator takes the
  earliest event across the shards (completions, ordered by time then job id as in the
  kernel's heap), the scheduler's patience timers and the arrival stream (heap events
  first on ties, as in the kernel), lets the owner process exactly that event, and
  asks the scheduler for decisions whenever the kernel would. Pool shards run on their
  own (pools never interact with nodes) and ask the scheduler for every allocation. The
  per-job table is identical to `clusteremu run`.
* **windowed** (`window_s > 0`): the scheduler routes the arrivals of (T, T + W] on the
  shards' state at T (a snapshot up to W old) and every shard runs the compiled kernel
  over the window in parallel. Deterministic for (scenario, seed, shards, window).
* **real-time** (`realtime > 0`): windowed, each window paced to W / X wall seconds.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import ray

from actors.actor_set import ActorSet
from actors.arrivals import JobBatch, measurement_window, replication_jobs
from actors.metrics import RunMetrics
from actors.node_shard import ShardState
from actors.options import RayRunOptions
from actors.results import merge_result
from actors.scheduler import Decisions
from cluster import layout as L
from cluster.engine import Engine, Jobs
from cluster.metrics import RunResult
from cluster.model import SimulationSpec

log = logging.getLogger(__name__)

#: Jobs per arrival batch pulled from the ArrivalActor in exact mode.
BATCH_JOBS = 4096
#: Wall-clock seconds between metric updates in exact mode.
METRICS_EVERY_S = 0.5


@dataclass
class _Live:
    """Running totals of exact mode that the shards do not count (for the metrics)."""

    completed: int = 0
    decisions: int = 0


class Coordinator:
    """Runs one replication of `spec` on actors and returns the engine-shaped result."""

    def __init__(
        self,
        spec: SimulationSpec,
        replication: int,
        options: RayRunOptions,
        run_name: str,
        actors: ActorSet | None = None,
    ) -> None:
        """`actors`: the run's actor set, reused across replications (the caller closes
        it); without it the coordinator starts its own and kills it after the run."""
        self.spec, self.replication, self.options = spec, replication, options
        self.run = run_name
        self.template = Engine(
            spec, replication, jobs=Jobs(np.zeros(0), np.zeros(0, np.int64), np.zeros(0))
        )
        if actors is not None and actors.options != options:
            raise ValueError(f"run {run_name}: the actor set was started with other options")
        self.own_actors = actors is None
        self.actors = ActorSet(spec, options, run_name) if actors is None else actors
        self.class_pool = self.actors.class_pool
        self.slices, self.shard_of_node = self.actors.slices, self.actors.shard_of_node
        self.offset = self.actors.offset
        self.metrics = RunMetrics(run_name) if options.metrics else None
        self.live = _Live()
        self.timings: dict[str, float] = {}

    # -- running ---------------------------------------------------------------------------

    def run_replication(self) -> RunResult:
        """Start (or reset) the actors, run, merge; wall seconds of each phase go to
        `timings` (`start_s`, `run_s`, `merge_s`)."""
        exact = self.options.mode == "exact"
        t0 = time.monotonic()
        failed = True
        try:
            self.actors.start(self.replication, exact)
            a = self.actors
            self.arrivals, self.scheduler = a.arrivals, a.scheduler
            self.shards, self.pool_shards = a.shards, a.pool_shards
            ready = [s.state.remote() for s in [*self.shards, *self.pool_shards.values()]] + (
                [] if self.scheduler is None else [self.scheduler.ready.remote()]
            )
            # The driver draws the stream too (the ArrivalActor's own jobs, by common random
            # numbers: cheaper than shipping them back) and writes the result into an
            # engine built on it: now in exact mode (the driver is busy later), while the
            # shards run the last windows in windowed mode.
            self.jobs = replication_jobs(self.spec, self.replication)
            self.window = measurement_window(self.spec, self.jobs)
            self.skeleton: Engine | None = None
            if exact:
                self._build_skeleton()
            ray.get(ready)
            t1 = time.monotonic()
            parts, unplaced, extra = self._run_exact() if exact else self._run_windowed()
            t2 = time.monotonic()
            if self.skeleton is None:
                self._build_skeleton()
            assert self.skeleton is not None
            result = merge_result(
                self.spec,
                self.replication,
                self.jobs,
                self.window,
                parts,
                unplaced,
                extra_events=extra,
                skeleton=self.skeleton,
            )
            self.timings = {"start_s": t1 - t0, "run_s": t2 - t1, "merge_s": time.monotonic() - t2}
            log.info(
                "run %s: actors up in %.2f s, ran in %.2f s, merged in %.2f s",
                self.run,
                *self.timings.values(),
            )
            failed = False
            return result
        finally:
            if self.own_actors or failed:  # a failed run may leave actors mid-window
                self.actors.close()

    def _build_skeleton(self) -> None:
        """The engine the merged result is written into (built on the stream, not run)."""
        self.skeleton = Engine(self.spec, self.replication, jobs=self.jobs)

    def _split_pools(self, batch: JobBatch) -> tuple[JobBatch, dict[int, JobBatch]]:
        pools = self.class_pool[batch.class_index]
        return batch.take(pools < 0), {p: batch.take(pools == p) for p in self.pool_shards}

    def _run_exact(self) -> tuple[list[dict[str, Any]], Any, int]:
        horizon = self.spec.stop.horizon_s
        tops = [(math.inf, -1)] * len(self.shards)
        timer = (math.inf, -1)
        pool_refs: list[Any] = []
        buf_t = np.zeros(0)
        buf_j = np.zeros(0, np.int64)
        pos = 0
        exhausted = False
        arrivals_handled = 0
        last_metrics = time.monotonic()

        while True:
            if pos >= buf_t.size and not exhausted:
                batch = ray.get(self.arrivals.next_batch.remote(math.inf, BATCH_JOBS))
                exhausted = batch.count == 0
                if not exhausted:
                    self.scheduler.add_jobs.remote(batch)
                    for shard in self.shards:
                        shard.add.remote(batch)
                    placed, pooled = self._split_pools(batch)
                    until = float(batch.arrival_s[-1])
                    for p, sub in pooled.items():
                        pool_refs.append(self.pool_shards[p].window.remote(until, sub))
                    buf_t, buf_j, pos = placed.arrival_s, placed.ids, 0
                    continue
            t_a = float(buf_t[pos]) if pos < buf_t.size else math.inf
            s_min = min(range(len(tops)), key=lambda s: tops[s], default=-1)
            top = tops[s_min] if s_min >= 0 else (math.inf, -1)
            heap = min(top, timer)
            t = min(t_a, heap[0])
            if t == math.inf or t > horizon:
                break
            advance = None
            if heap[0] <= t_a:
                if heap == timer and timer < top:
                    d: Decisions = ray.get(self.scheduler.timeout.remote(t))
                else:
                    advance = self.shards[s_min].advance_one.remote(t)
                    d = ray.get(self.scheduler.completed.remote(top[1], t))
                    self.live.completed += 1
            else:
                j = int(buf_j[pos])
                pos += 1
                arrivals_handled += 1
                d = ray.get(self.scheduler.arrive.remote(j, t))
            timer = (d.timer_s, d.timer_job)
            refs: dict[int, Any] = {}
            if advance is not None:
                refs[s_min] = advance
            if d.count:
                self.live.decisions += d.count
                owner = self.shard_of_node[d.nodes]
                for s in np.unique(owner).tolist():
                    sel = owner == s
                    refs[s] = self.shards[s].start.remote(
                        t,
                        d.jobs[sel],
                        d.nodes[sel] - self.offset[s],
                        d.run_s[sel],
                        d.setup_s[sel],
                        d.requests[:, sel],
                    )
            for s, ref in refs.items():
                st: ShardState = ray.get(ref)
                tops[s] = (st.next_event_s, st.top_job)
            if self.metrics is not None and time.monotonic() - last_metrics > METRICS_EVERY_S:
                last_metrics = time.monotonic()
                self._record_exact(t)

        end = horizon if horizon < math.inf else math.inf
        for shard in self.pool_shards.values():
            pool_refs.append(shard.window.remote(end))
        ray.get(pool_refs)
        parts = ray.get([s.finish.remote() for s in [*self.shards, *self.pool_shards.values()]])
        unplaced = ray.get(self.scheduler.unplaced.remote())
        if self.metrics is not None:
            self._record_exact(float(max((p["now_s"] for p in parts), default=0.0)))
        return parts, unplaced, arrivals_handled

    def _record_exact(self, t: float) -> None:
        states: list[ShardState] = ray.get([s.state.remote() for s in self.shards])
        queued = ray.get(self.scheduler.queued_per_class.remote())
        # Pool shards are busy with their whole stream in exact mode: not asked here.
        in_sys = sum((s.in_system_per_class for s in states), queued.astype(np.float64))
        self._record(t, states, in_sys, {})

    def _run_windowed(self) -> tuple[list[dict[str, Any]], None, int]:
        """Windows as a data flow: the driver submits each window's tasks without waiting.

        Window (T, T + W]: the ArrivalActor splits its arrivals by destination (node
        shards, each pool); the scheduler routes them on the node shards' states at T
        (the objects the previous window returned, passed actor to actor); every shard
        runs its kernel to T + W. The driver only blocks for real-time pacing, metrics
        (on windows already finished) and the end.
        """
        w = self.options.effective_window_s
        horizon = self.spec.stop.horizon_s
        realtime = self.options.realtime > 0
        arrival = self.jobs.arrival_s
        last_arrival = float(arrival[-1]) if arrival.size else -math.inf
        shard_cpu = np.array([self.template.nodes_f[L.CAP_CPU, s].sum() for s in self.slices])
        pools = sorted(self.pool_shards)
        group = np.array(
            [0 if p < 0 else 1 + pools.index(p) for p in self.class_pool], dtype=np.int64
        )
        states = [s.state.remote() for s in self.shards]
        pool_states: list[Any] = []
        pending_metrics: list[tuple[float, list[Any], list[Any]]] = []
        wall0 = last_metrics = time.monotonic()
        t = 0.0
        while True:
            final = not realtime and (t + w >= last_arrival or t + w >= horizon)
            until = horizon if final else min(t + w, horizon)
            parts = self.arrivals.split_ids.options(num_returns=1 + len(pools)).remote(
                until, group, 1 + len(pools)
            )
            placed = parts[0] if pools else parts
            if len(self.shards) == 1:  # one node shard: every arrival goes there
                states = [self.shards[0].window.remote(until, placed)]
            elif self.shards:
                target = self.scheduler.route_states.remote(
                    placed, self.shard_of_node, shard_cpu, *states
                )
                states = [
                    shard.window_routed.remote(until, placed, target) for shard in self.shards
                ]
            pool_states = [
                self.pool_shards[p].window.remote(until, parts[1 + i]) for i, p in enumerate(pools)
            ]
            t = until
            if self.metrics is not None:
                pending_metrics.append((t, states, pool_states))
                if time.monotonic() - last_metrics > METRICS_EVERY_S:
                    last_metrics = time.monotonic()
                    pending_metrics = self._record_ready(pending_metrics)
            if realtime:
                done_states = ray.get([*states, *pool_states])
                delay = wall0 + t / self.options.realtime - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                if t >= last_arrival and not any(st.pending for st in done_states):
                    break
            if final or t >= horizon:
                break
        self._build_skeleton()  # while the shards run the last windows
        ray.wait([*states, *pool_states], num_returns=len(states) + len(pool_states))
        if self.metrics is not None:
            self._record_ready(pending_metrics[-1:])
        parts_out = ray.get([s.finish.remote() for s in [*self.shards, *self.pool_shards.values()]])
        return parts_out, None, 0

    def _record_ready(
        self, pending: list[tuple[float, list[Any], list[Any]]]
    ) -> list[tuple[float, list[Any], list[Any]]]:
        """Record metrics of the latest finished window; keep the unfinished ones.

        Windows finish in order, so only the oldest pending windows are checked.
        """
        latest = None
        while pending:
            refs = [*pending[0][1], *pending[0][2]]
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            if len(ready) < len(refs):
                break
            latest = pending.pop(0)
        keep = pending
        if latest is not None:
            t, state_refs, pool_refs = latest
            states: list[ShardState] = ray.get(state_refs)
            pools: list[ShardState] = ray.get(pool_refs)
            in_sys = sum(
                (s.in_system_per_class for s in [*states, *pools]), np.zeros(len(self.spec.classes))
            )
            pool_map = dict(zip(sorted(self.pool_shards), pools, strict=True))
            self._record(t, states, in_sys, pool_map)
        return keep

    def _record(
        self,
        t: float,
        states: list[ShardState],
        in_sys: np.ndarray,
        pool_states: dict[int, ShardState],
    ) -> None:
        assert self.metrics is not None
        spec, nf = self.spec, self.template.nodes_f
        types = self.template.nodes_i[L.NODE_TYPE]
        cap = np.bincount(types, weights=nf[L.CAP_CPU], minlength=len(spec.node_types))
        busy = sum((s.busy_cpu_by_type for s in states), np.zeros(len(spec.node_types)))
        util: dict[str, float] = {
            nt.name: float(busy[ti] / max(cap[ti], 1e-12))
            for ti, nt in enumerate(spec.node_types)
            if (types == ti).any() and len(states) == len(self.shards)
        }
        for p, st in pool_states.items():
            util[f"pool:{spec.pools[p].name}"] = st.busy_cpu / max(spec.pools[p].cores, 1e-12)
        done = sum(s.done for s in [*states, *pool_states.values()])
        failed = sum(s.failed for s in [*states, *pool_states.values()])
        price = float(nf[L.PRICE_PER_S].sum() + self.template.pools_f[L.P_PRICE_PER_S].sum())
        startup = sum(spec.node_type(n).startup_cost for n in spec.nodes)
        decisions = sum(s.decisions for s in [*states, *pool_states.values()])
        self.metrics.record(
            sim_time_s=t,
            in_system={c.name: float(in_sys[i]) for i, c in enumerate(spec.classes)},
            utilization=util,
            decisions=self.live.decisions + decisions,
            cost_usd=price * t + startup,
            slo_violations=failed,
            completed=max(done, self.live.completed),
        )


def run_replication(
    spec: SimulationSpec,
    replication: int,
    options: RayRunOptions,
    run_name: str,
    actors: ActorSet | None = None,
) -> RunResult:
    """Run one replication of `spec` on actors (Ray must be initialised); `actors`: the
    run's `ActorSet`, to reuse across replications."""
    return Coordinator(spec, replication, options, run_name, actors).run_replication()
