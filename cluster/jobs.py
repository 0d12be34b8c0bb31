"""The jobs of one replication and the random streams they are drawn from.

Common random numbers: the scenario seed spawns one `SeedSequence` per replication; every
stream of a replication is keyed by *what it is for*, never by its position: (class name,
purpose) for a class's arrivals, sizes and run-time quantiles, and (extension point) for
the policies' streams. Adding, removing or reordering a class therefore changes no other
class's draws, and two policies run on one seed see the same jobs.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.model import JobClass, SimulationSpec
from clusteremu.cluster.usage import Usage, draw_usage

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class Purpose(IntEnum):
    """What a stream is for (part of its key)."""

    ARRIVALS = 1
    SIZES = 2
    RUNTIME = 3
    USAGE = 4
    FAILURE_UP = 5  #: a node's up times (keyed by its type's name and its ordinal)
    FAILURE_DOWN = 6  #: a node's down times
    RESTART = 7  #: fresh work of jobs re-queued after a failure (`restart_work: redraw`)
    PLACER = 11
    ALLOCATOR = 12
    PROVISIONER = 13
    SCALER = 14


@dataclass(frozen=True)
class Jobs:
    """The jobs of one replication, sorted by arrival (ties: class order, then draw order)."""

    arrival_s: FloatArray
    class_index: IntArray
    size: FloatArray
    #: One uniform draw per job, mapped to a run time on each node type that has one.
    runtime_u: FloatArray | None = None
    #: What each job really uses (None: exactly its request); see `clusteremu.cluster.usage`.
    usage: Usage | None = None
    #: Per-job input features a provisioner may read (name -> one float per job).
    features: dict[str, FloatArray] = field(default_factory=dict)
    #: Per-job (cores, GB, GPUs) requests given by the workload itself (a trace's pods);
    #: the `static` provisioner uses them instead of the class request. None: per class.
    request: tuple[FloatArray, FloatArray, FloatArray] | None = None
    #: Per-job run-time estimates, s (a trace's requested time; 0: none). None: no job has one.
    estimate_s: FloatArray | None = None

    def __post_init__(self) -> None:
        n = self.arrival_s.size
        if self.usage is not None and self.usage.cpu.size != n:
            raise ValueError(f"jobs: {self.usage.cpu.size} usages for {n} jobs")
        for name, values in self.features.items():
            if values.shape != (n,):
                raise ValueError(f"jobs: feature {name!r} needs one value per job")
        if self.request is not None and any(r.shape != (n,) for r in self.request):
            raise ValueError("jobs: request needs one (cpu, memory_gb, gpu) per job")
        if self.estimate_s is not None and self.estimate_s.shape != (n,):
            raise ValueError("jobs: estimate_s needs one value per job")

    def select(self, index: npt.NDArray[Any] | slice) -> Jobs:
        """The jobs at `index` (a mask, indices or a slice), every per-job field with them."""
        return Jobs(
            self.arrival_s[index],
            self.class_index[index],
            self.size[index],
            None if self.runtime_u is None else self.runtime_u[index],
            None if self.usage is None else self.usage.select(index),
            {k: v[index] for k, v in self.features.items()},
            None if self.request is None else tuple(r[index] for r in self.request),  # type: ignore[arg-type]
            None if self.estimate_s is None else self.estimate_s[index],
        )


def replication_seeds(seed: int, replications: int) -> list[np.random.SeedSequence]:
    """One SeedSequence per replication, spawned from the scenario seed."""
    return np.random.SeedSequence(seed).spawn(replications)


def replication_seed(spec: SimulationSpec, replication: int) -> np.random.SeedSequence:
    return replication_seeds(spec.seed, max(spec.replications, replication + 1))[replication]


def name_key(name: str) -> int:
    """A stable 32-bit key of a name (CRC-32 of its UTF-8 bytes)."""
    return zlib.crc32(name.encode("utf-8"))


def stream(seq: np.random.SeedSequence, purpose: Purpose, name: str = "") -> np.random.Generator:
    """The generator for (purpose, name) under a replication's SeedSequence."""
    child = np.random.SeedSequence(
        entropy=seq.entropy,
        spawn_key=(*seq.spawn_key, int(purpose), name_key(name)),
        pool_size=seq.pool_size,
    )
    return np.random.default_rng(child)


def generate_jobs(spec: SimulationSpec, seq: np.random.SeedSequence) -> Jobs:
    """Draw the arrival times and sizes of every job of one replication.

    With `stop.jobs`, exactly that many jobs (the earliest arrivals across classes); with
    `stop.time_s`, every arrival up to the horizon. Each class draws from its own streams,
    keyed by its name, so the jobs of one class do not depend on the other classes.
    """
    n_classes = len(spec.classes)
    table = any(c.arrival.job_requests(0) is not None for c in spec.classes)
    if spec.stop.time_s is not None:
        counts = [np.iinfo(np.int64).max] * n_classes
        times = _draw_arrivals(spec, seq, spec.stop.time_s, counts)
        limit = sum(t.size for t in times)
    else:
        limit = int(spec.stop.jobs or 0)
        times = _arrivals_for_count(spec, seq, limit)
    sizes = [_sizes(c, seq, t.size) for c, t in zip(spec.classes, times, strict=True)]
    if n_classes == 1:
        # One stream is already in arrival order: no merge, no copies.
        cls: IntArray = np.zeros(times[0].size, dtype=np.int64)
        arrival = times[0]
        order: slice | IntArray = slice(0, limit)
    else:
        cls = np.concatenate([np.full(t.size, i, dtype=np.int64) for i, t in enumerate(times)])
        arrival = np.concatenate(times)
        if table:
            # A trace table (docs/traces.md): ties at one instant keep the table's row
            # order across classes (generated jobs after them).
            order = _table_order(spec, times, arrival, limit)
        else:
            # Stable: equal times keep class order, then each class's draw order.
            order = np.argsort(arrival, kind="stable")[:limit]
    runtime_u = None
    if any(c.runtime_by_node_type for c in spec.classes):
        runtime_u = np.concatenate(
            [
                stream(seq, Purpose.RUNTIME, c.name).random(t.size)
                for c, t in zip(spec.classes, times, strict=True)
            ]
        )[order]
    size = sizes[0] if n_classes == 1 else np.concatenate(sizes)
    request, estimate = None, None
    if table:  # each job's own request and estimate
        request, estimate = _per_job_columns(spec, times, order)
    jobs = Jobs(
        arrival[order],
        cls[order],
        size[order].astype(np.float64, copy=False),
        runtime_u,
        request=request,
        estimate_s=estimate,
    )
    if spec.usage is None:
        return jobs
    usage, features = draw_usage(spec, jobs, stream(seq, Purpose.USAGE, spec.usage.model))
    size = jobs.size
    if usage.size is not None:
        size = np.where(np.isnan(usage.size), size, usage.size)
    return Jobs(
        jobs.arrival_s, jobs.class_index, size, runtime_u, usage, features, request, estimate
    )


def _table_order(
    spec: SimulationSpec, times: list[FloatArray], arrival: FloatArray, limit: int
) -> IntArray:
    """The merged order of classes some of which replay a trace table: by arrival, then by
    table row (a generated job after every table row, in class order, then draw order)."""
    parts = []
    offset = 1 << 62
    for c, t in zip(spec.classes, times, strict=True):
        rows = c.arrival.job_rows(t.size)
        if rows is None:
            rows = offset + np.arange(t.size, dtype=np.int64)
            offset += t.size
        parts.append(np.asarray(rows, dtype=np.int64))
    rows = np.concatenate(parts)
    n = rows.size
    if offset == 1 << 62 and n and int(rows.max()) == n - 1:
        # Every row of one table (in arrival order already): the order is the inverse of
        # the rows' permutation, O(n) without a sort.
        order = np.empty(n, dtype=np.int64)
        order[rows] = np.arange(n, dtype=np.int64)
        return order[:limit]
    return np.lexsort((rows, arrival))[:limit]


def _per_job_columns(
    spec: SimulationSpec, times: list[FloatArray], order: slice | IntArray
) -> tuple[tuple[FloatArray, FloatArray, FloatArray], FloatArray]:
    """Every job's (cores, GB, GPUs) request and run-time estimate (s, 0: none), in the
    merged order: a table class's own columns, a generated class's request."""
    cpu, mem, gpu, est = [], [], [], []
    for c, t in zip(spec.classes, times, strict=True):
        n = t.size
        given = c.arrival.job_requests(n)
        if given is None:
            r = c.request
            given = (np.full(n, r.cpu), np.full(n, r.memory_gb), np.full(n, r.gpu))
        cpu.append(given[0])
        mem.append(given[1])
        gpu.append(given[2])
        e = c.arrival.job_estimates(n)
        est.append(np.zeros(n) if e is None else e)
    request = (
        np.concatenate(cpu)[order],
        np.concatenate(mem)[order],
        np.concatenate(gpu)[order],
    )
    return request, np.concatenate(est)[order]


def _sizes(c: JobClass, seq: np.random.SeedSequence, count: int) -> FloatArray:
    """The sizes of a class's first `count` jobs: from its trace's size column if it has
    one, else drawn from its size distribution (its own stream)."""
    given = c.arrival.job_sizes(count)
    if given is not None:
        return given
    return c.size.sample(stream(seq, Purpose.SIZES, c.name), count)


def _draw_arrivals(
    spec: SimulationSpec, seq: np.random.SeedSequence, until_s: float, counts: list[int]
) -> list[FloatArray]:
    return [
        c.arrival.generate(stream(seq, Purpose.ARRIVALS, c.name), until_s, counts[i])
        for i, c in enumerate(spec.classes)
    ]


def _arrivals_for_count(
    spec: SimulationSpec, seq: np.random.SeedSequence, count: int
) -> list[FloatArray]:
    """Arrivals per class that cover the first `count` jobs of the merged stream.

    Open classes draw in proportion to their rate (with head-room); if the merged stream is
    not covered, every class redraws from its seed with twice the head-room.
    """
    if len(spec.classes) == 1:
        return _draw_arrivals(spec, seq, math.inf, [count])
    rates = [c.arrival.rate_per_s or 0.0 for c in spec.classes]
    total_rate = sum(rates)
    headroom = 1.1
    while True:
        counts = [
            count if r == 0.0 else min(count, int(headroom * count * r / total_rate) + 64)
            for r in rates
        ]
        times = _draw_arrivals(spec, seq, math.inf, counts)
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


def concat_jobs(a: Jobs, b: Jobs) -> Jobs:
    """The jobs of `a` followed by those of `b` (optional per-job fields filled in where
    one side lacks them: uniform 0, usage as requested, feature NaN, class requests)."""
    na, nb = a.arrival_s.size, b.arrival_s.size
    runtime_u = None
    if a.runtime_u is not None or b.runtime_u is not None:
        runtime_u = np.concatenate(
            [
                a.runtime_u if a.runtime_u is not None else np.zeros(na),
                b.runtime_u if b.runtime_u is not None else np.zeros(nb),
            ]
        )
    usage = None
    if a.usage is not None or b.usage is not None:
        usage = Usage.concat([a.usage or Usage.none(na), b.usage or Usage.none(nb)])
    features = {
        k: np.concatenate(
            [a.features.get(k, np.full(na, np.nan)), b.features.get(k, np.full(nb, np.nan))]
        )
        for k in {**a.features, **b.features}
    }
    request = None
    if a.request is not None or b.request is not None:
        if a.request is None or b.request is None:
            raise ValueError("concat_jobs: per-job requests on one side only")
        request = tuple(np.concatenate([x, y]) for x, y in zip(a.request, b.request, strict=True))
    estimate = None
    if a.estimate_s is not None or b.estimate_s is not None:
        estimate = np.concatenate(
            [
                a.estimate_s if a.estimate_s is not None else np.zeros(na),
                b.estimate_s if b.estimate_s is not None else np.zeros(nb),
            ]
        )
    return Jobs(
        np.concatenate([a.arrival_s, b.arrival_s]),
        np.concatenate([a.class_index, b.class_index]),
        np.concatenate([a.size, b.size]),
        runtime_u,
        usage,
        features,
        request,  # type: ignore[arg-type]
        estimate,
    )
