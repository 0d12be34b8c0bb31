"""Jobs handed to an engine after it was built, as a mixin of `clusteremu.cluster.engine.Engine`:
`add_jobs` (a window's jobs at a time) and `append_jobs` (many small batches in amortised
O(batch), the windowed Ray shards), the job arrays they fill (`job_state`), and the room
the heap and the queue need."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
from clusteremu.cluster.jobs import (
    Jobs,
    concat_jobs,
    runtime_table,
)
from clusteremu.cluster.layout import (
    IS,
    JF,
    JI,
)
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies.base import (
    PolicyError,
    Provisioner,
)
from clusteremu.cluster.state import (
    EngineState,
    check_gpu_request,
    grown,
)
from clusteremu.cluster.usage import Usage

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def job_rows(jobs: Jobs) -> tuple[FloatArray, IntArray]:
    """Per-job state arrays with each job's arrival (s), size and class filled, every
    other row zero (what the engine and a merged Ray result start from)."""
    n = jobs.arrival_s.size
    jobs_f = np.zeros((len(JF), n))
    jobs_i = np.zeros((len(JI), n), dtype=np.int64)
    jobs_f[JF.ARRIVAL] = jobs.arrival_s
    jobs_f[JF.SIZE] = jobs.size
    jobs_i[JI.CLS] = jobs.class_index
    if jobs.estimate_s is not None:
        jobs_f[JF.ESTIMATE] = jobs.estimate_s
    return jobs_f, jobs_i


def job_state(
    spec: SimulationSpec, provisioner: Provisioner, jobs: Jobs
) -> tuple[FloatArray, IntArray]:
    """Fresh per-job state arrays for the given jobs (requests from the provisioner).

    Only the rows the loop reads before writing are filled; the others stay zero pages
    that the operating system maps lazily (a row a run never writes costs no memory).
    """
    n = jobs.arrival_s.size
    jobs_f, jobs_i = job_rows(jobs)
    cpu, mem, gpu = provisioner.requests_for(spec, jobs)
    for row, values in ((JF.REQ_CPU, cpu), (JF.REQ_MEM, mem), (JF.REQ_GPU, gpu)):
        values = np.asarray(values, dtype=np.float64)
        if values.shape != (n,) or not np.all(np.isfinite(values)) or np.any(values < 0):
            raise PolicyError(
                provisioner.name,
                0.0,
                f"requests must give one finite value >= 0 per job for {row.name.lower()} "
                f"({n} jobs)",
            )
        if np.any(values):
            jobs_f[row] = values
    gpu = np.asarray(gpu, dtype=np.float64)
    if jobs.request is not None and np.any(gpu > 1.0):
        bad = gpu[(gpu > 1.0) & (gpu != np.floor(gpu))]
        if bad.size:
            check_gpu_request("a job's GPU request", float(bad[0]))
    if spec.usage is not None or jobs.usage is not None:
        usage = jobs.usage if jobs.usage is not None else Usage.none(n)
        jobs_f[JF.USE_CPU] = usage.cpu
        jobs_f[JF.USE_MEM] = usage.memory_gb
        jobs_f[JF.PEAK_AT] = usage.peak_at
    return jobs_f, jobs_i


def _widened(array: npt.NDArray[Any], size: int, fill: float = 0) -> Any:
    """`array` with columns added up to exactly `size`, each `fill`."""
    extra = np.full((array.shape[0], size - array.shape[1]), fill, dtype=array.dtype)
    return np.concatenate([array, extra], axis=1)


class JobFeeding:
    """Job feeding of `Engine` (state `_s`, `spec`, `jobs`, `provisioner`:
    `clusteremu.cluster.engine`)."""

    _s: EngineState
    spec: SimulationSpec

    def add_jobs(self, jobs: Jobs) -> IntArray:
        """Append jobs to a paused engine; return their row indices.

        For feeding an engine window by window (the Ray shards of `actors/`): the new jobs
        must be sorted by arrival and arrive no earlier than `now` and than every job
        already known. The arrays grow; the heap, the queue and every running job are
        kept, so an engine fed this way runs exactly as one given all its jobs up front.
        """
        m = jobs.arrival_s.size
        s = self._s
        n = s.jobs_f.shape[1]
        if m == 0:
            return np.zeros(0, dtype=np.int64)
        last = s.jobs_f[JF.ARRIVAL, n - 1] if n else -math.inf
        if np.any(np.diff(jobs.arrival_s) < 0) or jobs.arrival_s[0] < max(last, self.now):
            raise ValueError(
                "add_jobs: jobs must be sorted and arrive at or after now and "
                "after every job already known"
            )
        new_f, new_i = job_state(self.spec, self.provisioner, jobs)
        arrays: dict[str, Any] = {
            "jobs_f": np.concatenate([s.jobs_f, new_f], axis=1),
            "jobs_i": np.concatenate([s.jobs_i, new_i], axis=1),
        }
        table = runtime_table(self.spec, jobs)
        if table.shape[0] or s.run_by_type.shape[0]:
            types = len(self.spec.node_types)
            old = s.run_by_type if s.run_by_type.shape[0] else np.full((types, n), -1.0)
            table = table if table.shape[0] else np.full((types, m), -1.0)
            arrays["run_by_type"] = np.concatenate([old, table], axis=1)
        self.jobs = concat_jobs(self.jobs, jobs)
        total = n + m
        arrays.update(self._room(2 * total + self.nodes_used + 1, total))
        self._replace(**arrays)
        self._queue_room(total)
        return np.arange(n, total, dtype=np.int64)

    def _queue_room(self, jobs: int, extra: int = 0) -> None:
        """Grow the queue so that every job of the first `jobs` rows still to arrive, and
        `extra` re-queued ones, find room behind its entries so far (a killed and re-queued
        job takes a second entry)."""
        s = self._s
        need = int(s.istate[IS.Q_TAIL]) + max(jobs - int(s.istate[IS.NEXT_ARRIVAL]), 0) + extra
        if need > s.queue.size:
            self._replace(**self._room(s.heap_t.size, need))

    def _room(self, heap: int, queue: int) -> dict[str, Any]:
        s = self._s
        return {
            "heap_t": grown(s.heap_t, heap),
            "heap_j": grown(s.heap_j, heap),
            "heap_k": grown(s.heap_k, heap),
            "queue": grown(s.queue, queue),
            "members": grown(s.members, queue),
            "alloc_out": grown(s.alloc_out, queue),
            "decisions": grown(s.decisions, queue),
            "decision_setup_s": grown(s.decision_setup_s, queue),
            "wait_i": grown(s.wait_i, queue),
            "wait_f": grown(s.wait_f, queue),
        }

    # -- a trace table streamed a chunk at a time (`clusteremu.cluster.traces.feed`) ---------------

    def reserve_jobs(self, total: int) -> None:
        """Make room for `total` job rows, the ones past those held now arriving never
        (+inf) until `append_jobs` fills them: a run fed a known number of jobs in chunks
        (a streamed trace table) holds exactly its jobs' rows, no spare ones."""
        n = self._s.jobs_f.shape[1]
        if total <= n:
            return
        self._replace(**self._job_rows(total))
        self._fed = n
        self._queue_room(total)

    def _job_rows(self, size: int) -> dict[str, Any]:
        """The job arrays grown to exactly `size` rows, the new rows arriving never (+inf),
        with the room the heap and the queue need for them."""
        s = self._s
        held = s.jobs_f.shape[1]
        jobs_f = _widened(s.jobs_f, size)
        jobs_f[JF.ARRIVAL, held:] = math.inf
        arrays: dict[str, Any] = {"jobs_f": jobs_f, "jobs_i": _widened(s.jobs_i, size)}
        if s.run_by_type.shape[0]:
            arrays["run_by_type"] = _widened(s.run_by_type, size, fill=-1.0)
        arrays.update(self._room(2 * size + self.nodes_used + 1, size))
        return arrays

    def trim_jobs(self) -> None:
        """Drop the reserved job rows no job filled (a streamed table that ended early:
        its horizon came first)."""
        s, fed = self._s, self.jobs_fed
        if fed < s.jobs_f.shape[1]:
            arrays: dict[str, Any] = {"jobs_f": s.jobs_f[:, :fed].copy()}
            arrays["jobs_i"] = s.jobs_i[:, :fed].copy()
            if s.run_by_type.shape[0]:
                arrays["run_by_type"] = s.run_by_type[:, :fed].copy()
            self._replace(**arrays)
        self._fed = None

    # -- feeding many small batches (the windowed Ray shards of `actors/`) ---------------

    #: Rows filled by `append_jobs`; None while every row is a job (no spare rows).
    _fed: int | None = None

    @property
    def jobs_fed(self) -> int:
        """Job rows that hold jobs; rows from here on are `append_jobs`'s spare rows."""
        return self._s.jobs_f.shape[1] if self._fed is None else self._fed

    def append_jobs(self, jobs: Jobs) -> IntArray:
        """`add_jobs` in amortised O(batch) time, for an engine fed many small batches.

        The job arrays keep spare rows that never arrive (arrival +inf, state FUTURE) and
        grow by doubling; each batch fills the next spare rows in place, so feeding n jobs
        costs O(n) instead of `add_jobs`' O(n^2 / batch). Same rules as `add_jobs` (sorted,
        at or after now and after every job fed); returns the batch's row indices. Rows
        from `jobs_fed` on are spare: feed such an engine with `append_jobs` only, and read
        its jobs as the first `jobs_fed` rows (`self.jobs` keeps the jobs it was built on).
        """
        m = jobs.arrival_s.size
        lo = self.jobs_fed
        if m == 0:
            return np.zeros(0, dtype=np.int64)
        s = self._s
        last = s.jobs_f[JF.ARRIVAL, lo - 1] if lo else -math.inf
        if np.any(np.diff(jobs.arrival_s) < 0) or jobs.arrival_s[0] < max(last, self.now):
            raise ValueError(
                "append_jobs: jobs must be sorted and arrive at or after now and "
                "after every job already known"
            )
        hi = lo + m
        if hi > s.jobs_f.shape[1]:
            self._replace(**self._job_rows(max(hi, 2 * s.jobs_f.shape[1])))
            s = self._s
        new_f, new_i = job_state(self.spec, self.provisioner, jobs)
        s.jobs_f[:, lo:hi] = new_f
        s.jobs_i[:, lo:hi] = new_i
        table = runtime_table(self.spec, jobs)
        if table.shape[0]:
            if s.run_by_type.shape[0] == 0:
                self._replace(run_by_type=np.full((table.shape[0], s.jobs_f.shape[1]), -1.0))
                s = self._s
            s.run_by_type[:, lo:hi] = table
        self._fed = hi
        self._queue_room(hi)
        return np.arange(lo, hi, dtype=np.int64)
