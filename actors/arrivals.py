"""`ArrivalActor`: streams the arrivals of one replication's job classes.

The jobs are the kernel's own (`clusteremu.cluster.jobs.generate_jobs` on the replication's
stream, common random numbers), so every mode sees exactly the jobs `clusteremu run`
sees. The coordinator pulls them in batches by simulated time; job ids are the row
indices of the single-process engine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import ray

from clusteremu.actors.reusable import Reusable
from clusteremu.cluster.engine import FloatArray, IntArray, Jobs
from clusteremu.cluster.jobs import generate_jobs, replication_seed
from clusteremu.cluster.model import SimulationSpec


@dataclass(frozen=True)
class JobBatch:
    """Consecutive jobs of the stream: global ids, arrival times (s), classes, sizes."""

    ids: IntArray
    arrival_s: FloatArray
    class_index: IntArray
    size: FloatArray
    #: The engine's per-job uniform draw for node-type run times (None when unused).
    runtime_u: FloatArray | None = None

    def take(self, mask: np.ndarray) -> JobBatch:
        u = None if self.runtime_u is None else self.runtime_u[mask]
        return JobBatch(
            self.ids[mask], self.arrival_s[mask], self.class_index[mask], self.size[mask], u
        )

    def jobs(self) -> Jobs:
        return Jobs(self.arrival_s, self.class_index, self.size, self.runtime_u)

    @property
    def count(self) -> int:
        return int(self.ids.size)


@dataclass(frozen=True)
class ArrivalIds:
    """Which jobs of the stream arrive in a window, without their data (windowed mode).

    Ids `lo` .. `hi - 1`, or `lo + offsets` when only some of them go to one destination.
    Every actor that needs the jobs' data draws the replication's stream itself (common
    random numbers: the same jobs everywhere, for about 0.05 s per million jobs), so a
    window's message stays small enough for Ray to pass it inline rather than through
    the object store.
    """

    lo: int
    hi: int
    offsets: np.ndarray | None = None  # uint32, ascending

    @property
    def count(self) -> int:
        return self.hi - self.lo if self.offsets is None else int(self.offsets.size)

    def ids(self) -> IntArray:
        if self.offsets is None:
            return np.arange(self.lo, self.hi, dtype=np.int64)
        return self.lo + self.offsets.astype(np.int64)

    def batch(self, jobs: Jobs) -> JobBatch:
        """These jobs' data, from the replication's `jobs`."""
        at: slice | IntArray = slice(self.lo, self.hi) if self.offsets is None else self.ids()
        u = jobs.runtime_u
        return JobBatch(
            self.ids(),
            jobs.arrival_s[at],
            jobs.class_index[at],
            jobs.size[at],
            None if u is None else u[at],
        )


def replication_jobs(spec: SimulationSpec, replication: int) -> Jobs:
    """The jobs `clusteremu.cluster.engine.Engine(spec, replication)` would draw."""
    return generate_jobs(spec, replication_seed(spec, replication))


def measurement_window(spec: SimulationSpec, jobs: Jobs) -> tuple[float, float]:
    """(start, end) of the statistics window, seconds, as the engine sets it."""
    stop = spec.stop
    n = jobs.arrival_s.size
    if stop.time_s is not None:
        return float(stop.warmup_s), float(stop.time_s)
    warm = min(stop.warmup_jobs, max(n - 1, 0))
    return (float(jobs.arrival_s[warm]) if n else 0.0, float(jobs.arrival_s[-1]) if n else 0.0)


class StreamCopy:
    """An actor's own copy of the replication's stream (drawn now, or on first use): turns
    a window's job ids into the jobs' data."""

    def __init__(self, spec: SimulationSpec, replication: int, draw_now: bool = False) -> None:
        self.spec, self.replication = spec, replication
        self.jobs = replication_jobs(spec, replication) if draw_now else None

    def drawn(self) -> Jobs:
        if self.jobs is None:
            self.jobs = replication_jobs(self.spec, self.replication)
        return self.jobs

    def batch(self, arrivals: JobBatch | ArrivalIds) -> JobBatch:
        """The jobs' data: given (a batch), or looked up by id in this copy."""
        return arrivals if isinstance(arrivals, JobBatch) else arrivals.batch(self.drawn())


class ArrivalStream(Reusable):
    """The arrival stream of one replication, handed out in batches."""

    def __init__(self, spec: SimulationSpec, replication: int) -> None:
        self.jobs = replication_jobs(spec, replication)
        self.window = measurement_window(spec, self.jobs)
        self.next = 0

    def info(self) -> tuple[int, float, float]:
        """(number of jobs, measurement window start s, end s)."""
        return int(self.jobs.arrival_s.size), self.window[0], self.window[1]

    def _advance(self, until_s: float, max_jobs: int = 1 << 62) -> tuple[int, int]:
        """Ids [lo, hi) of the next jobs arriving at or before `until_s`, at most about
        `max_jobs` (a cut batch is extended to every job sharing its last arrival time,
        so a batch always ends between two distinct arrival instants)."""
        arr = self.jobs.arrival_s
        lo = self.next
        hi = int(np.searchsorted(arr, until_s, side="right"))
        if hi - lo > max_jobs:
            hi = int(np.searchsorted(arr, arr[lo + max_jobs - 1], side="right"))
        hi = max(hi, lo)
        self.next = hi
        return lo, hi

    def next_batch(self, until_s: float = math.inf, max_jobs: int = 1 << 62) -> JobBatch:
        """The next jobs arriving at or before `until_s`, at most about `max_jobs`."""
        return ArrivalIds(*self._advance(until_s, max_jobs)).batch(self.jobs)

    def split_ids(
        self, until_s: float, class_group: IntArray, groups: int
    ) -> ArrivalIds | tuple[ArrivalIds, ...]:
        """The ids of the jobs arriving up to `until_s`, split by `class_group[class]`
        into `groups` destinations (Ray returns them as separate objects, so each goes to
        its shard without the driver); one group is returned as is."""
        lo, hi = self._advance(until_s)
        if groups == 1:
            return ArrivalIds(lo, hi)
        group = class_group[self.jobs.class_index[lo:hi]]
        return tuple(
            ArrivalIds(lo, hi, np.flatnonzero(group == g).astype(np.uint32)) for g in range(groups)
        )

    def exhausted(self) -> bool:
        return self.next >= self.jobs.arrival_s.size


#: The Ray actor; named `clusteremu/<run>/arrivals` by the launcher.
ArrivalActor = ray.remote(num_cpus=0)(ArrivalStream)
