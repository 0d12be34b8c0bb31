"""A replication's jobs drawn a chunk at a time instead of all before the run (for runs
that compact their job rows: `clusteremu.cluster.engine.compaction`), the same jobs as
`clusteremu.cluster.jobs.generate_jobs` draws: each stream is drawn in the same order, and
arrival times are summed gap by gap across chunks as `numpy.cumsum` sums them in one go.

Only for one class of renewal arrivals (Poisson included) with exponential or fixed gaps
and sizes (`CHUNKABLE`), without per-node-type run times or a usage model; other workloads are drawn
before the run (`drawn_chunks` answers None).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.distributions import Deterministic, Exponential
from clusteremu.cluster.jobs import Jobs, Purpose, stream
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.workload import RenewalArrivals

FloatArray = npt.NDArray[np.float64]

#: Jobs drawn at once.
CHUNK_JOBS = 1 << 18
#: Distributions whose draws in chunks are their draws in one go, value for value (one
#: generator call per value in order; not the truncated lognormal, which redraws rejected
#: values in batches, nor the hyper-exponential, which draws every branch first).
CHUNKABLE = (Exponential, Deterministic)


class DrawnChunks:
    """An iterator of `Jobs` chunks of one class, in arrival order, up to the stop
    (`stop.jobs` jobs, or every arrival up to `stop.time_s`). `last_arrival` is the last
    job's arrival (s) once the last chunk has been drawn (`done`)."""

    def __init__(self, spec: SimulationSpec, seq: np.random.SeedSequence, chunk: int) -> None:
        c = spec.classes[0]
        self.arrival = c.arrival
        assert isinstance(self.arrival, RenewalArrivals)
        self.size = c.size
        self.arrivals_rng = stream(seq, Purpose.ARRIVALS, c.name)
        self.sizes_rng = stream(seq, Purpose.SIZES, c.name)
        self.chunk = chunk
        self.count = int(spec.stop.jobs) if spec.stop.time_s is None else None
        self.until = math.inf if spec.stop.time_s is None else float(spec.stop.time_s)
        self.drawn = 0
        self.last = 0.0
        self.done = False
        self.last_arrival = math.nan

    def __iter__(self) -> Iterator[Jobs]:
        return self

    def __next__(self) -> Jobs:
        if self.done:
            raise StopIteration
        m = self.chunk if self.count is None else min(self.chunk, self.count - self.drawn)
        gaps = self.arrival.interarrival.sample(self.arrivals_rng, m)
        # One running sum across chunks, as numpy.cumsum adds (0.0 + first gap, then each).
        times = np.cumsum(np.concatenate(([self.last], gaps)))[1:]
        if times.size:
            self.last = float(times[-1])
        if times.size and self.last > self.until:
            times = times[times <= self.until]
            self.done = True
        self.drawn += times.size
        if self.count is not None and self.drawn >= self.count:
            self.done = True
        if times.size:
            self.last_arrival = float(times[-1])
        sizes = self.size.sample(self.sizes_rng, times.size).astype(np.float64, copy=False)
        if times.size == 0 and self.done:
            raise StopIteration
        return Jobs(times, np.zeros(times.size, dtype=np.int64), sizes)


def drawn_chunks(
    spec: SimulationSpec, seq: np.random.SeedSequence, chunk: int | None = None
) -> DrawnChunks | None:
    """The scenario's jobs `chunk` (default `CHUNK_JOBS`) at a time, or None where they
    must be drawn up front."""
    chunk = CHUNK_JOBS if chunk is None else chunk
    if len(spec.classes) != 1 or spec.usage is not None:
        return None
    c = spec.classes[0]
    if not isinstance(c.arrival, RenewalArrivals) or c.runtime_by_node_type:
        return None
    if c.arrival.job_sizes(0) is not None or c.arrival.job_requests(0) is not None:
        return None
    if type(c.arrival.interarrival) not in CHUNKABLE or type(c.size) not in CHUNKABLE:
        return None
    if spec.stop.time_s is None and not spec.stop.jobs:
        return None
    # The first chunk holds the first measured job (the window starts at its arrival).
    return DrawnChunks(spec, seq, max(chunk, int(spec.stop.warmup_jobs) + 1))
