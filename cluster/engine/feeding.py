"""Jobs handed to an engine after it was built: `add_jobs` (a window's jobs at a time),
`append_jobs` (many small batches in amortised O(batch), the windowed Ray shards), and a
trace table streamed a chunk at a time (`clusteremu.cluster.traces.feed`), fed as the run
reaches it."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.engine.builder import job_state
from clusteremu.cluster.engine.compaction import JobIds
from clusteremu.cluster.engine.store import StateStore
from clusteremu.cluster.jobs import Jobs, concat_jobs, runtime_table
from clusteremu.cluster.layout import JF
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies.base import Provisioner
from clusteremu.cluster.traces.feed import TableSource, streamed_source

IntArray = npt.NDArray[np.int64]


def table_feed(
    spec: SimulationSpec,
) -> tuple[TableSource | None, Iterator[Jobs] | None, Jobs | None, int]:
    """(the table, the chunks after the first, the first chunk, the jobs in all) of a
    scenario whose every class replays one streamed trace table
    (`clusteremu.cluster.traces.feed`), else nothing."""
    source = streamed_source(spec.classes)
    if source is None or spec.usage is not None:
        return None, None, None, 0
    if any(c.runtime_by_node_type for c in spec.classes):
        return None, None, None, 0
    stop = spec.stop
    limit = source.rows if stop.jobs is None else min(source.rows, int(stop.jobs))
    until = math.inf if stop.time_s is None else float(stop.time_s)
    feed = source.chunks({c.name: i for i, c in enumerate(spec.classes)}, limit, until)
    first = next(feed, None)
    if first is None:
        first = Jobs(np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0))
    return source, feed, first, limit


class JobFeed:
    """The jobs of one engine (`jobs`) and the rows that hold them.

    `chunks`: the rest of a streamed trace table (None: none, or it has ended).
    """

    def __init__(
        self,
        store: StateStore,
        spec: SimulationSpec,
        provisioner: Provisioner,
        jobs: Jobs,
        chunks: Iterator[Jobs] | None = None,
        ids: JobIds | None = None,
    ) -> None:
        self.store = store
        #: Each job row's number in the whole run (rows are renumbered by compaction).
        self.ids = ids if ids is not None else JobIds(jobs.arrival_s.size)
        self.spec = spec
        self.provisioner = provisioner
        #: Every job known (grows with `add_jobs`; `append_jobs` leaves it as built).
        self.jobs = jobs
        self.chunks = chunks
        #: The next chunk of the streamed table, fed just before its first arrival.
        self.next_chunk: Jobs | None = None
        #: Rows filled by `append_jobs`; None while every row is a job (no spare rows).
        self._fed: int | None = None

    @property
    def jobs_fed(self) -> int:
        """Job rows that hold jobs; rows from here on are `append_jobs`'s spare rows."""
        return self.store.s.jobs_f.shape[1] if self._fed is None else self._fed

    def add_jobs(self, jobs: Jobs) -> IntArray:
        """Append jobs to a paused engine; return their row indices.

        For feeding an engine window by window (the Ray shards of `actors/`): the new jobs
        must be sorted by arrival and arrive no earlier than `now` and than every job
        already known. The arrays grow; the heap, the queue and every running job are
        kept, so an engine fed this way runs exactly as one given all its jobs up front.
        """
        store = self.store
        m = jobs.arrival_s.size
        s = store.s
        n = s.jobs_f.shape[1]
        if m == 0:
            return np.zeros(0, dtype=np.int64)
        last = s.jobs_f[JF.ARRIVAL, n - 1] if n else -math.inf
        if np.any(np.diff(jobs.arrival_s) < 0) or jobs.arrival_s[0] < max(last, store.now):
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
        arrays.update(store.room(2 * total + store.nodes_used + 1, total))
        store.replace(**arrays)
        store.queue_room(total)
        self.ids.fed(n, total)
        return np.arange(n, total, dtype=np.int64)

    # -- a trace table streamed a chunk at a time -----------------------------------------

    def reserve_jobs(self, total: int) -> None:
        """Make room for `total` job rows, the ones past those held now arriving never
        (+inf) until `append_jobs` fills them: a run fed a known number of jobs in chunks
        (a streamed trace table) holds exactly its jobs' rows, no spare ones."""
        store = self.store
        n = store.s.jobs_f.shape[1]
        if total <= n:
            return
        store.replace(**store.job_rows(total))
        self._fed = n
        store.queue_room(total)

    def trim_jobs(self) -> None:
        """Drop the reserved job rows no job filled (a streamed table that ended early:
        its horizon came first)."""
        store = self.store
        s, fed = store.s, self.jobs_fed
        if fed < s.jobs_f.shape[1]:
            arrays: dict[str, Any] = {"jobs_f": s.jobs_f[:, :fed].copy()}
            arrays["jobs_i"] = s.jobs_i[:, :fed].copy()
            if s.run_by_type.shape[0]:
                arrays["run_by_type"] = s.run_by_type[:, :fed].copy()
            store.replace(**arrays)
        self._fed = None

    def take_chunk(self) -> Jobs | None:
        """The next chunk of a streamed table, or None when it has ended (the unfilled
        rows reserved for it are dropped)."""
        chunk = next(self.chunks, None) if self.chunks is not None else None
        if chunk is None and self.chunks is not None:
            self.chunks = None
            self.trim_jobs()
        return chunk

    def stop_chunks(self) -> None:
        """The run ended before the next chunk: no more chunks; unfilled rows dropped."""
        self.next_chunk, self.chunks = None, None
        self.trim_jobs()

    # -- feeding many small batches (the windowed Ray shards of `actors/`) ----------------

    def append_jobs(self, jobs: Jobs) -> IntArray:
        """`add_jobs` in amortised O(batch) time, for an engine fed many small batches.

        The job arrays keep spare rows that never arrive (arrival +inf, state FUTURE) and
        grow by doubling; each batch fills the next spare rows in place, so feeding n jobs
        costs O(n) instead of `add_jobs`' O(n^2 / batch). Same rules as `add_jobs` (sorted,
        at or after now and after every job fed); returns the batch's row indices. Rows
        from `jobs_fed` on are spare: feed such an engine with `append_jobs` only, and read
        its jobs as the first `jobs_fed` rows (`jobs` keeps the jobs it was built on).
        """
        store = self.store
        m = jobs.arrival_s.size
        lo = self.jobs_fed
        if m == 0:
            return np.zeros(0, dtype=np.int64)
        s = store.s
        last = s.jobs_f[JF.ARRIVAL, lo - 1] if lo else -math.inf
        if np.any(np.diff(jobs.arrival_s) < 0) or jobs.arrival_s[0] < max(last, store.now):
            raise ValueError(
                "append_jobs: jobs must be sorted and arrive at or after now and "
                "after every job already known"
            )
        hi = lo + m
        if hi > s.jobs_f.shape[1]:
            store.replace(**store.job_rows(max(hi, 2 * s.jobs_f.shape[1])))
            s = store.s
        new_f, new_i = job_state(self.spec, self.provisioner, jobs)
        s.jobs_f[:, lo:hi] = new_f
        s.jobs_i[:, lo:hi] = new_i
        table = runtime_table(self.spec, jobs)
        if table.shape[0]:
            if s.run_by_type.shape[0] == 0:
                store.replace(run_by_type=np.full((table.shape[0], s.jobs_f.shape[1]), -1.0))
                s = store.s
            s.run_by_type[:, lo:hi] = table
        self._fed = hi
        store.queue_room(hi)
        self.ids.fed(lo, hi)
        return np.arange(lo, hi, dtype=np.int64)

    # -- compaction (`clusteremu.cluster.engine.compaction`) -----------------------------------

    def spare_rows(self, size: int = 0) -> None:
        """Feed from here on into spare rows (`append_jobs`), with at least `size` rows and
        one spare row: compaction leaves spare rows behind the live ones."""
        store = self.store
        fed = self.jobs_fed
        have = store.s.jobs_f.shape[1]
        want = max(size, fed + 1)
        if want > have:
            store.replace(**store.job_rows(max(want, 2 * have)))
        self._fed = fed
        store.queue_room(store.s.jobs_f.shape[1])

    def set_fed(self, rows: int) -> None:
        """Compaction left `rows` rows holding jobs (the rest are spare)."""
        self._fed = rows
