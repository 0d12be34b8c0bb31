"""Load-time checks that a built scenario can run and measure jobs.

- `check_gpus`: the engine's GPU rules (whole GPUs per node type, requests that are a share
  of one GPU or whole GPUs);
- `check_feasible`: every node-placed class fits some node type, and open arrival streams
  are stable (offered busy cores below capacity, per pool and on the nodes) in every phase
  of the timeline's `set_rate` events (rates in jobs/s, sizes in core-seconds at speed 1);
- `check_job_supply`: classes of finite arrivals only (batches, traces) bring at least
  `stop.jobs` jobs, and some inside the `stop.time_s` window.

Every problem raises `ScenarioError` naming the file and the field.
"""

from __future__ import annotations

import math

import numpy as np

from clusteremu.cluster import workload as wl
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.traces.feed import TableClassStream
from clusteremu.scenarios import schema
from clusteremu.scenarios.errors import ScenarioError


def check_gpus(model: schema.ScenarioModel, spec: SimulationSpec, source: str) -> None:
    """The engine's GPU rules, checked at load (not as a traceback when the run starts):
    whole GPUs per node type, at most a node row's (`gpu_count`), and requests that are a
    share of one GPU or whole GPUs (`check_gpu_request`)."""
    from clusteremu.cluster.state import check_gpu_request, gpu_count

    problems: list[tuple[str, str]] = []
    where = {t.name: i for i, t in enumerate(model.cluster.node_types)}
    for t in spec.node_types:
        try:
            gpu_count(t)
        except ValueError as exc:
            i = where.get(t.name)
            field = "cluster.node_types" if i is None else f"cluster.node_types.{i}.gpu"
            problems.append((field, str(exc)))
    for i, c in enumerate(spec.classes):
        try:
            check_gpu_request("request.gpu", c.request.gpu)
        except ValueError as exc:
            problems.append((f"workload.classes.{i}.request.gpu", str(exc).split(": ", 1)[1]))
    if problems:
        raise ScenarioError(source, problems)


def check_feasible(spec: SimulationSpec, source: str) -> None:
    """Reject jobs that fit on no node and open workloads whose load exceeds capacity."""
    problems: list[tuple[str, str]] = []
    for i, jc in enumerate(spec.classes):
        if jc.pool is not None:
            continue
        fits = any(
            spec.node_type(t).cpu >= jc.request.cpu
            and spec.node_type(t).memory_gb >= jc.request.memory_gb
            and spec.node_type(t).gpu >= jc.request.gpu
            for t in set(spec.nodes) | {nt.name for nt in spec.node_types if nt.rentable}
        )
        if not fits:
            problems.append(
                (
                    f"workload.classes.{i}.request",
                    "expected a request that fits on at least one node type",
                )
            )
    if problems:
        raise ScenarioError(source, problems)
    # Stability of open arrival streams: offered busy cores must stay below capacity, in
    # every phase of the timeline's `set_rate` events.
    for start_s, rates in _rate_phases(spec):
        phase = _phase_words(spec, start_s)
        for pool in spec.pools:
            load = sum(
                rate * jc.size.mean / pool.speed
                for jc, rate in zip(spec.classes, rates, strict=True)
                if jc.pool == pool.name
            )
            if load >= pool.cores:
                problems.append(
                    (
                        "workload.classes",
                        f"unstable load on pool {pool.name!r}{phase}: the classes bring "
                        f"{load:.4g} core-seconds of work per second at best (one core per "
                        f"job) but the pool has {pool.cores:g} cores; expected a load below 1",
                    )
                )
        placed = [
            (jc, rate)
            for jc, rate in zip(spec.classes, rates, strict=True)
            if jc.pool is None and rate > 0
        ]
        if placed and spec.nodes:
            best_speed = max(spec.node_type(t).speed for t in set(spec.nodes))
            demand = 0.0
            for jc, rate in placed:
                cores = jc.request.cpu if jc.request.cpu > 0 else 1.0  # as the engine does
                speed = float(jc.speedup.value(cores)) * best_speed
                demand += rate * jc.size.mean / speed * jc.request.cpu
            capacity = sum(spec.node_type(t).cpu for t in spec.nodes)
            if demand >= capacity and not math.isclose(capacity, 0.0):
                problems.append(
                    (
                        "workload.classes",
                        f"unstable load on the nodes{phase}: jobs occupy {demand:.4g} cores "
                        f"on average at the fastest node speed, the nodes have "
                        f"{capacity:g}; expected a load below 1",
                    )
                )
        if problems:
            raise ScenarioError(source, problems)


def _rate_phases(spec: SimulationSpec) -> list[tuple[float, list[float]]]:
    """Each phase of the timeline's `set_rate` events (its start, s) with every class's
    arrival rate in it (jobs/s; 0 for a class without one): one phase without them."""
    starts = sorted({0.0} | {e.at_s for e in spec.events if e.action == "set_rate"})
    phases = []
    for start_s in starts:
        rates = []
        for jc in spec.classes:
            arrival = jc.arrival
            if isinstance(arrival, wl.RateChanges):
                rate = arrival.base.rate_per_s or 0.0
                for at_s, changed in arrival.changes:
                    if at_s <= start_s:
                        rate = changed
            else:
                rate = arrival.rate_per_s or 0.0
            rates.append(float(rate))
        phases.append((start_s, rates))
    return phases


def _phase_words(spec: SimulationSpec, start_s: float) -> str:
    """' from 2500 s on (after the timeline's set_rate)', or '' with one phase."""
    if not any(e.action == "set_rate" for e in spec.events):
        return ""
    if start_s == 0.0:
        return " before the timeline's first set_rate"
    return f" from {start_s:g} s on (the timeline's set_rate)"


def check_job_supply(spec: SimulationSpec, source: str) -> None:
    """Refuse a run that cannot measure a job: finite classes only (batches, traces) that
    bring fewer jobs than `stop.jobs`, or none inside the `stop.time_s` window."""
    if not spec.classes or not all(jc.arrival.is_finite() for jc in spec.classes):
        return
    stop = spec.stop
    horizon = math.inf if stop.time_s is None else float(stop.time_s)
    start = 0.0 if stop.time_s is None else stop.warmup_s
    total = inside = 0
    for jc in spec.classes:
        a = jc.arrival
        if isinstance(a, wl.BatchArrivals):
            total += a.count
            inside += a.count if start <= a.at_s <= horizon else 0
        elif isinstance(a, TableClassStream):  # counted when the table was checked
            total += a.count
            inside += int(a.source.window_rows.get(a.name, 0))
        elif isinstance(a, wl.TraceArrivals | wl.TableArrivals):
            times = np.asarray(a.times_s, dtype=np.float64)
            total += times.size
            inside += int(np.count_nonzero((times >= start) & (times <= horizon)))
        else:
            return  # a finite process this check does not know
    if stop.jobs is not None and total < stop.jobs:
        raise ScenarioError(
            source,
            [
                (
                    "stop.jobs",
                    f"the classes' batches and traces bring {total:,} jobs, fewer than "
                    f"stop.jobs = {stop.jobs:,}; expected stop.jobs <= {total:,} "
                    "(or an open arrival process)",
                )
            ],
        )
    if stop.time_s is not None and inside == 0:
        raise ScenarioError(
            source,
            [
                (
                    "stop.time_s",
                    f"no batch or trace job arrives between warmup_s = {stop.warmup_s:g} s and "
                    f"time_s = {horizon:g} s; expected a window that holds arrivals",
                )
            ],
        )
