"""Compaction: the rows of jobs that have left (done or failed) taken out of the engine's
job arrays between two calls of the loop, so that a run holds only what is still live
(waiting, running and not yet arrived jobs; nodes) however many jobs it runs.

Live rows keep their relative order (a stable renumbering): ties, which break by job
number (a heap key is its kind's tie rank above the job's row), resolve exactly as
before, and the run is the same event for event. Every array that holds job numbers
(`clusteremu.cluster.state.ARRAYS`, `job_ids`) is renumbered at once; `JobIds` keeps each
row's job number in the whole run (the per-job table's `job` column), and the rows taken
out go to a `JobSink` (`clusteremu.cluster.engine.sinks`) with their job numbers.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from clusteremu.cluster import kernel
from clusteremu.cluster.engine.store import StateStore
from clusteremu.cluster.kernel_heap import ID_MASK, KIND_MASK
from clusteremu.cluster.layout import IS, JF, JI, NI, PI, Event, JobState
from clusteremu.cluster.state import ARRAYS, RunState

if TYPE_CHECKING:
    from clusteremu.cluster.metrics import RunResult
    from clusteremu.cluster.policies.base import Policy

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: The arrays compaction renumbers, by name (each entry of `ARRAYS` that declares job
#: numbers outside scratch space; a test checks the two agree).
RENUMBERED = ("jobs_i", "nodes_i", "pools_i", "heap_j", "queue", "istate")
#: Heap kinds whose id is a job (the others are node rows).
_JOB_KINDS = (int(Event.COMPLETE), int(Event.OOM), int(Event.TIMER))


class CompactionRefused(ValueError):
    """`Engine(spec, sink=...)` cannot compact this run's job rows (the message says why)."""


def python_refusal(points: list[str]) -> str:
    """Why policies deciding in Python at `points` ("placer", ...) refuse compaction."""
    verb = "decides" if len(points) == 1 else "decide"
    return (
        f"the {', '.join(points)} {verb} in Python (Python policies see job numbers, which "
        "compaction renumbers); use compiled policies"
    )


class FinishedRows(NamedTuple):
    """Rows of jobs that have left, taken out of the state: their job numbers in the whole
    run (ascending), their `jobs_f`, `jobs_i` and `run_by_type` columns, and the sizes
    redrawn for them after failures (job number -> sizes, `RunState.sizes_drawn`)."""

    ids: IntArray
    jobs_f: FloatArray
    jobs_i: IntArray
    run_by_type: FloatArray
    sizes_drawn: dict[int, tuple[float, ...]]


class JobSink(Protocol):
    """Where the rows of jobs that have left go (`clusteremu.cluster.engine.sinks`)."""

    def refusal(self, run: RunState, policies: tuple[Policy, ...]) -> str | None:
        """Why this sink cannot give the result of the run `run` starts (None: it can)."""
        ...

    def take(self, rows: FinishedRows, run: RunState) -> None:
        """Receive rows taken out of the live state `run` (its nodes, window and clock)."""
        ...

    def result(
        self,
        run: RunState,
        ids: IntArray,
        fed: int,
        policies: tuple[Policy, ...] = (),
        runs: Any = None,
    ) -> RunResult:
        """The run's result from the rows taken and the live state `run` (its first `fed`
        job rows hold jobs `ids`)."""
        ...


class JobIds:
    """Each job row's number in the whole run: row j holds job `ids[j]`. Rows are handed
    out in arrival order; compaction moves the live ones to the front."""

    def __init__(self, rows: int) -> None:
        self.ids = np.arange(rows, dtype=np.int64)
        #: The number the next row fed gets (jobs fed so far).
        self.next_id = rows

    def of(self, j: int) -> int:
        """The job number of row j."""
        return int(self.ids[j])

    def fed(self, lo: int, hi: int) -> None:
        """Rows lo..hi were just filled with the next jobs in arrival order."""
        if hi > self.ids.size:
            grown = np.full(max(hi, 2 * self.ids.size), -1, dtype=np.int64)
            grown[: self.ids.size] = self.ids
            self.ids = grown
        self.ids[lo:hi] = np.arange(self.next_id, self.next_id + hi - lo, dtype=np.int64)
        self.next_id += hi - lo


def _renumbered(values: IntArray, new: IntArray) -> IntArray:
    """`values` with each job number v >= 0 replaced by new[v] (-1 stays -1)."""
    return np.where(values >= 0, new[np.maximum(values, 0)], values)


def compact(
    store: StateStore, ids: JobIds, fed: int, sizes_drawn: dict[int, tuple[float, ...]]
) -> tuple[FinishedRows, int]:
    """Take the rows of the jobs that have left out of the first `fed` rows; return them
    and the number of rows still held (the live rows, now rows 0..m, in their order).

    Call it between two calls of the loop (no scratch array is live then). Rows m..fed
    become spare rows (never arriving). `sizes_drawn` (row -> sizes) is renumbered in
    place; the finished jobs' entries move to the rows returned, by job number.
    """
    s = store.s
    kernel.purge_entry(store.t)  # stale heap entries may name jobs that have left
    state = s.jobs_i[JI.STATE, :fed]
    gone = (state == JobState.DONE) | (state == JobState.FAILED)
    keep = ~gone
    out = np.flatnonzero(gone)
    live = np.flatnonzero(keep)
    m = live.size
    new = np.full(max(fed, 1), -1, dtype=np.int64)
    new[live] = np.arange(m, dtype=np.int64)
    has_types = s.run_by_type.shape[0] > 0
    finished = FinishedRows(
        ids=ids.ids[out].copy(),
        jobs_f=s.jobs_f[:, out],
        jobs_i=s.jobs_i[:, out],
        run_by_type=s.run_by_type[:, out] if has_types else np.zeros((0, out.size)),
        sizes_drawn={ids.of(j): sizes_drawn.pop(j) for j in out.tolist() if j in sizes_drawn},
    )
    # The live rows to the front, in order; the rows after them spare (never arriving).
    s.jobs_f[:, :m] = s.jobs_f[:, live]
    s.jobs_i[:, :m] = s.jobs_i[:, live]
    s.jobs_f[:, m:fed] = 0.0
    s.jobs_f[JF.ARRIVAL, m:fed] = math.inf
    s.jobs_i[:, m:fed] = 0
    if has_types:
        s.run_by_type[:, :m] = s.run_by_type[:, live]
        s.run_by_type[:, m:fed] = ARRAYS["run_by_type"].fill
    ids.ids[:m] = ids.ids[live]
    ids.ids[m:fed] = -1
    moved = {int(new[j]): v for j, v in sizes_drawn.items()}
    sizes_drawn.clear()
    sizes_drawn.update(moved)
    # Every array that holds job numbers (`ARRAYS`' job_ids).
    for row in (JI.NEXT, JI.PREV):
        s.jobs_i[row, :m] = _renumbered(s.jobs_i[row, :m], new)
    for row in (PI.HEAD, PI.TAIL, PI.NEXT_J):
        s.pools_i[row] = _renumbered(s.pools_i[row], new)
    s.nodes_i[NI.JOB_HEAD] = _renumbered(s.nodes_i[NI.JOB_HEAD], new)
    n = int(s.istate[IS.HEAP_N])
    key = s.heap_j[:n]
    jobs = np.isin(s.heap_k[:n] & KIND_MASK, _JOB_KINDS)
    key[jobs] = (key[jobs] & ~ID_MASK) | new[key[jobs] & ID_MASK]
    _compact_queue(store, new)
    istate = s.istate
    arrived = int(istate[IS.NEXT_ARRIVAL])
    istate[IS.NEXT_ARRIVAL] = int(np.count_nonzero(keep[:arrived]))
    if istate[IS.OOM_JOB] >= 0:
        istate[IS.OOM_JOB] = new[istate[IS.OOM_JOB]]
    return finished, m


def _compact_queue(store: StateStore, new: IntArray) -> None:
    """The queue's live entries (each waiting job's current one), renumbered, moved to
    its front in order (what the loop's own `_make_queue_room` does: the dead entries it
    drops are skipped by every reader)."""
    s = store.s
    head, tail = int(s.istate[IS.Q_HEAD]), int(s.istate[IS.Q_TAIL])
    entries = s.queue[head:tail]
    positions = np.arange(head, tail, dtype=np.int64)
    jobs_i = s.jobs_i
    # Read before the rows moved: `new` maps old rows; QPOS and STATE moved with them.
    moved = new[entries]
    ok = moved >= 0
    state = np.where(ok, jobs_i[JI.STATE, np.maximum(moved, 0)], -1)
    qpos = np.where(ok, jobs_i[JI.QPOS, np.maximum(moved, 0)], -1)
    alive = (state == JobState.QUEUED) & (qpos == positions)
    kept = moved[alive]
    w = kept.size
    s.queue[:w] = kept
    jobs_i[JI.QPOS, kept] = np.arange(w, dtype=np.int64)
    s.istate[IS.Q_HEAD] = 0
    s.istate[IS.Q_TAIL] = w
