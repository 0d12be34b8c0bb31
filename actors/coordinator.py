"""The coordinator: owns simulated time and drives a replication's actors.

One replication of a scenario runs on a set of named actors (`clusteremu/<run>/...`,
`clusteremu.actors.actor_set`). Modes (DESIGN.md, "Actors"):

* **exact** (`window_s == 0`): the one `clusteremu.cluster.engine.Engine`, hosted in an
`EngineActor`
  and driven through its API (`step`, then its result): the per-job table is
  `clusteremu run`'s, whatever the number of shards. The coordinator steps it for about
  `METRICS_EVERY_S` of wall time at a time, reporting progress and the live gauges.
* **windowed** (`window_s > 0`): for each window (T, T + W] the `SchedulerActor` routes
  the arrivals between the node shards on their states at T (a snapshot up to W old; the
  route is binding and never names a shard that cannot run the job) and every shard runs
  its engine over the window in parallel; its own placer binds the job to a node.
  Deterministic for (scenario, seed, shards, window).
* **real-time** (`realtime > 0`): windowed, each window paced to W / X wall seconds.

Progress: `progress` (or the callback installed with `reporting`) receives the fraction of
the whole run done (0..1, over the scenario's replications).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np
import ray

from clusteremu.actors.actor_set import ActorSet
from clusteremu.actors.arrivals import measurement_window, replication_jobs
from clusteremu.actors.engine_host import EngineReport
from clusteremu.actors.metrics import RunMetrics
from clusteremu.actors.node_shard import ShardState
from clusteremu.actors.options import RayRunOptions
from clusteremu.actors.results import merge_result
from clusteremu.cluster.metrics import RunResult
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies.points import scheduler_points

log = logging.getLogger(__name__)

#: Wall-clock seconds between progress and metric updates.
METRICS_EVERY_S = 0.5
#: Windows the driver submits ahead of the oldest unfinished one (bounds the tasks queued
#: at the actors and the objects they hold).
WINDOWS_AHEAD = 64

Progress = Callable[[float], None]

#: The progress callback of runs started in this context (see `reporting`).
PROGRESS: ContextVar[Progress | None] = ContextVar("clusteremu_ray_progress", default=None)


@contextmanager
def reporting(progress: Progress | None) -> Iterator[None]:
    """Within the block, Ray runs report the fraction done (0..1) to `progress`.

    For callers that reach the coordinator through `clusteremu.actors.launch.run_on_ray` (the
    command line's progress bar)."""
    token = PROGRESS.set(progress)
    try:
        yield
    finally:
        PROGRESS.reset(token)


class Coordinator:
    """Runs one replication of `spec` on actors and returns the engine-shaped result."""

    def __init__(
        self,
        spec: SimulationSpec,
        replication: int,
        options: RayRunOptions,
        run_name: str,
        actors: ActorSet | None = None,
        progress: Progress | None = None,
    ) -> None:
        """`actors`: the run's actor set, reused across replications (the caller closes
        it); without it the coordinator starts its own and kills it after the run.
        `progress`: the fraction of the whole run done (default: `PROGRESS`)."""
        self.spec, self.replication, self.options = spec, replication, options
        self.run = run_name
        if actors is not None and actors.options != options:
            raise ValueError(f"run {run_name}: the actor set was started with other options")
        if options.mode != "exact":
            check_windowed(spec)
        self.own_actors = actors is None
        self.actors = ActorSet(spec, options, run_name) if actors is None else actors
        self.metrics = RunMetrics(run_name) if options.metrics else None
        self.progress = progress if progress is not None else PROGRESS.get()
        self.timings: dict[str, float] = {}
        self.routing: dict[str, int] = {}
        types = {t.name: i for i, t in enumerate(spec.node_types)}
        node_type = np.array([types[n] for n in spec.nodes], dtype=np.int64)
        self.type_cores = np.bincount(
            node_type,
            weights=np.array([spec.node_type(n).cpu for n in spec.nodes], dtype=np.float64),
            minlength=len(spec.node_types),
        )

    # -- running ---------------------------------------------------------------------------

    def run_replication(self) -> RunResult:
        """Start (or reset) the actors, run, merge; wall seconds of each phase go to
        `timings` (`start_s`, `run_s`, `merge_s`)."""
        exact = self.options.mode == "exact"
        t0 = time.monotonic()
        failed = True
        try:
            self.actors.start(self.replication, exact)
            if exact:
                ray.get(self.actors.engine.ready.remote())
                t1 = time.monotonic()
                result_ref = self._run_exact()
                t2 = time.monotonic()
                result: RunResult = ray.get(result_ref)
            else:
                t1, t2, result = self._windowed()
            self.timings = {"start_s": t1 - t0, "run_s": t2 - t1, "merge_s": time.monotonic() - t2}
            log.info(
                "run %s: actors up in %.2f s, ran in %.2f s, merged in %.2f s",
                self.run,
                *self.timings.values(),
            )
            self._report(1.0)
            failed = False
            return result
        finally:
            if self.own_actors or failed:  # a failed run may leave actors mid-window
                self.actors.close()

    def _report(self, fraction: float) -> None:
        """Hand the fraction of the whole run done to the progress callback."""
        if self.progress is not None:
            n = max(self.spec.replications, self.replication + 1)
            self.progress(min((self.replication + fraction) / n, 1.0))

    def _run_exact(self) -> Any:
        """Step the engine actor to the end; return the reference of its result."""
        engine = self.actors.engine
        while True:
            report: EngineReport = ray.get(engine.advance.remote(METRICS_EVERY_S))
            self._report(report.fraction)
            if self.metrics is not None:
                self._record(report.state.now_s, [report.state])
            if report.finished:
                return engine.result.remote()

    def _windowed(self) -> tuple[float, float, RunResult]:
        """Windowed run: (time the actors were up, time the windows ended, the result)."""
        t0 = time.monotonic()
        a = self.actors
        refs = [s.state.remote() for s in [*a.shards, *a.pool_shards.values()]]
        if a.scheduler is not None:
            refs.append(a.scheduler.ready.remote())
        # The driver draws the stream too (common random numbers: cheaper than shipping it
        # back) while the actors start.
        jobs = replication_jobs(self.spec, self.replication)
        window = measurement_window(self.spec, jobs)
        ray.get(refs)
        t1 = time.monotonic()
        parts = self._run_windowed(float(jobs.arrival_s[-1]) if jobs.arrival_s.size else 0.0)
        t2 = time.monotonic()
        if a.scheduler is not None:
            self.routing = ray.get(a.scheduler.stats.remote())
        log.debug("run %s: windows in %.2f s after start-up %.2f s", self.run, t2 - t1, t1 - t0)
        return t1, t2, merge_result(self.spec, self.replication, jobs, window, parts)

    def _run_windowed(self, last_arrival: float) -> list[dict[str, Any]]:
        """Windows as a data flow: the driver submits each window's tasks without waiting.

        Window (T, T + W]: the ArrivalActor splits its arrivals by destination (node
        shards, each pool); the scheduler routes the node shards' share on their states
        at T (the objects the previous window returned, passed actor to actor); every
        shard runs its engine to T + W. The driver only blocks for real-time pacing, when
        `WINDOWS_AHEAD` windows are unfinished, for progress and metrics (on windows
        already finished) and at the end.
        """
        a = self.actors
        w = self.options.effective_window_s
        horizon = self.spec.stop.horizon_s
        realtime = self.options.realtime > 0
        end = horizon if horizon < math.inf else last_arrival
        pools = sorted(a.pool_shards)
        group = np.array([0 if p < 0 else 1 + pools.index(p) for p in a.class_pool], dtype=np.int64)
        states: list[Any] = [s.state.remote() for s in a.shards]
        pool_states: list[Any] = []
        pending: list[tuple[float, list[Any]]] = []
        wall0 = last_look = time.monotonic()
        t = 0.0
        while True:
            final = not realtime and (t + w >= last_arrival or t + w >= horizon)
            until = horizon if final else min(t + w, horizon)
            parts = a.arrivals.split_ids.options(num_returns=1 + len(pools)).remote(
                until, group, 1 + len(pools)
            )
            placed = parts[0] if pools else parts
            if len(a.shards) == 1:  # one node shard: every arrival goes there
                states = [a.shards[0].window.remote(until, placed)]
            elif a.shards:
                target = a.scheduler.route_states.remote(placed, *states)
                states = [s.window_routed.remote(until, placed, target) for s in a.shards]
            pool_states = [
                a.pool_shards[p].window.remote(until, parts[1 + i]) for i, p in enumerate(pools)
            ]
            t = until
            pending.append((t, [*states, *pool_states]))
            full = len(pending) > WINDOWS_AHEAD
            if full:  # bounded memory: wait for the oldest window
                oldest = pending[0][1]
                ray.wait(oldest, num_returns=len(oldest))
            due = time.monotonic() - last_look > METRICS_EVERY_S
            if full or due:
                pending = self._look(pending, end, report=due)
                last_look = time.monotonic() if due else last_look
            if realtime:
                done_states = ray.get([*states, *pool_states])
                delay = wall0 + t / self.options.realtime - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                if t >= last_arrival and not any(st.pending for st in done_states):
                    break
            if final or t >= horizon:
                break
        while pending:  # the shards run the last windows
            ray.wait(pending[-1][1], num_returns=len(pending[-1][1]), timeout=METRICS_EVERY_S)
            pending = self._look(pending, end)
        return ray.get([s.finish.remote() for s in [*a.shards, *a.pool_shards.values()]])

    def _look(
        self, pending: list[tuple[float, list[Any]]], end: float, report: bool = True
    ) -> list[tuple[float, list[Any]]]:
        """Drop the finished windows, reporting progress and metrics of the latest one
        (if `report`); keep the others.

        Windows finish in order, so only the oldest pending windows are checked.
        """
        latest = None
        while pending:
            refs = pending[0][1]
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            if len(ready) < len(refs):
                break
            latest = pending.pop(0)
        if latest is not None and report:
            t, refs = latest
            self._report(min(t / end, 1.0) if end > 0 else 1.0)
            if self.metrics is not None:
                self._record(t, ray.get(refs))
        return pending

    def _record(self, t: float, states: list[ShardState]) -> None:
        """Set the live gauges from the states of every actor hosting an engine."""
        assert self.metrics is not None
        spec = self.spec
        zeros = np.zeros(len(spec.classes), dtype=np.float64)
        in_sys = sum((s.in_system_per_class.astype(np.float64) for s in states), zeros)
        busy = sum((s.busy_cpu_by_type for s in states), np.zeros(len(spec.node_types)))
        util: dict[str, float] = {
            nt.name: float(busy[ti] / self.type_cores[ti])
            for ti, nt in enumerate(spec.node_types)
            if self.type_cores[ti] > 0
        }
        pool_busy = sum((s.pool_busy for s in states), np.zeros(len(spec.pools)))
        for p, pool in enumerate(spec.pools):
            util[f"pool:{pool.name}"] = float(pool_busy[p] / max(pool.cores, 1e-12))
        pool_price = sum(p.price_per_hour for p in spec.pools) / 3600.0
        self.metrics.record(
            sim_time_s=t,
            in_system={c.name: float(in_sys[i]) for i, c in enumerate(spec.classes)},
            utilization=util,
            decisions=sum(s.decisions for s in states),
            cost_usd=sum(s.node_usd for s in states) + pool_price * t,
            slo_violations=sum(s.failed for s in states),
            completed=sum(s.done for s in states),
        )


def check_windowed(spec: SimulationSpec) -> None:
    """Windowed mode splits a fixed set of nodes: refuse a policy that rents nodes, at
    whichever extension point it is named (every point is checked alike: a Pennyworth
    planner is the placer and the scaler), and usage models (the shards' job batches carry
    no usages)."""
    for point in scheduler_points(spec.scheduler):
        if point.rents:
            also = "" if point.kind == "scaler" else " (it is the run's scaler too)"
            raise ValueError(
                f"{point.kind} {point.ref.name!r} rents and releases nodes{also}, which "
                "windowed mode (a fixed set of nodes split into shards) does not model; run "
                "exact mode (no --window)"
            )
    if spec.usage is not None:
        raise ValueError(
            "workload.usage (real usages, out-of-memory kills) runs in exact mode only; "
            "drop --window"
        )
    if spec.has_faults:
        raise ValueError(
            "node failures and timeline events (node_types' failures, events) run in exact "
            "mode only: a node's failure must kill and re-queue jobs across the shards' "
            "windows; drop --window"
        )


def run_replication(
    spec: SimulationSpec,
    replication: int,
    options: RayRunOptions,
    run_name: str,
    actors: ActorSet | None = None,
    progress: Progress | None = None,
) -> RunResult:
    """Run one replication of `spec` on actors (Ray must be initialised); `actors`: the
    run's `ActorSet`, to reuse across replications; `progress`: see `Coordinator`."""
    return Coordinator(spec, replication, options, run_name, actors, progress).run_replication()
