"""The engine's arrays and their growth: `StateStore` holds the one `EngineState` of a
replication, the tuple the compiled entries take, the read-only views readers get, and the
cache of Python objects built on the arrays (placers' views), dropped whenever an array is
replaced. Every part of the engine reads and writes state through it."""

from __future__ import annotations

import math
from typing import Any

from clusteremu.cluster.layout import FS, IS, JF
from clusteremu.cluster.state import (
    ARRAYS,
    HEAP_PER_JOB,
    EngineState,
    arrays_growing_with,
    grown,
    read_only,
    widened,
)

#: The arrays sized by the event heap, by the queue, and by the jobs (`state.ARRAYS`).
HEAP_ARRAYS = arrays_growing_with("heap")
QUEUE_ARRAYS = arrays_growing_with("queue")
JOB_ARRAYS = arrays_growing_with("job")


class StateStore:
    """One replication's state arrays (`s`) and the tuple the compiled loop takes (`t`).

    `replace` swaps in grown arrays; `version` counts the swaps, so that whoever holds
    something built on the old arrays (a loop entry, a view) knows to rebuild it.
    """

    def __init__(self, state: EngineState) -> None:
        self.s = state
        self.t: tuple[Any, ...] = tuple(state)
        self.version = 0
        #: Python objects built on the arrays (e.g. the placer's view): cleared on replace.
        self.views: dict[str, Any] = {}
        self._read_only: EngineState | None = None

    def replace(self, **arrays: Any) -> None:
        """Swap in grown arrays (the state is immutable as a tuple; its arrays are not)."""
        self.s = self.s._replace(**arrays)
        self.t = tuple(self.s)
        self.version += 1
        self._read_only = None
        self.views.clear()

    @property
    def read_only(self) -> EngineState:
        """Read-only views of every state array (writing them raises ValueError)."""
        if self._read_only is None:
            self._read_only = read_only(self.s)
        return self._read_only

    def copy(self) -> EngineState:
        """A read-only copy of every array: it never changes as the engine moves on."""
        return read_only(EngineState(*(a.copy() for a in self.s)))  # type: ignore[arg-type]

    # -- scalars the parts share ----------------------------------------------------------

    @property
    def now(self) -> float:
        """Simulated time, seconds."""
        return float(self.s.fstate[FS.NOW])

    @property
    def nodes_used(self) -> int:
        """Node rows handed out so far (the static nodes, then rented ones)."""
        return int(self.s.istate[IS.NODES_USED])

    # -- growth -----------------------------------------------------------------------------

    def room(self, heap: int, queue: int) -> dict[str, Any]:
        """The heap's arrays grown to `heap` entries and the queue's to `queue` (at least)."""
        s = self.s
        out = {name: grown(getattr(s, name), heap) for name in HEAP_ARRAYS}
        out.update({name: grown(getattr(s, name), queue) for name in QUEUE_ARRAYS})
        return out

    def queue_room(self, jobs: int, extra: int = 0) -> None:
        """Grow the queue so that every job of the first `jobs` rows still to arrive, and
        `extra` re-queued ones, find room behind its entries so far (a killed and re-queued
        job takes a second entry)."""
        s = self.s
        need = int(s.istate[IS.Q_TAIL]) + max(jobs - int(s.istate[IS.NEXT_ARRIVAL]), 0) + extra
        if need > s.queue.size:
            self.replace(**self.room(s.heap_t.size, need))

    def job_rows(self, size: int) -> dict[str, Any]:
        """The job arrays grown to exactly `size` rows, the new rows arriving never (+inf),
        with the room the heap and the queue need for them (arrays without rows, such as
        `run_by_type` without per-type run times, stay as they are)."""
        s = self.s
        held = s.jobs_f.shape[1]
        arrays: dict[str, Any] = {}
        for name in JOB_ARRAYS:
            array = getattr(s, name)
            if array.shape[0]:
                arrays[name] = widened(array, size, fill=ARRAYS[name].fill)
        arrays["jobs_f"][JF.ARRIVAL, held:] = math.inf
        arrays.update(self.room(HEAP_PER_JOB * size + self.nodes_used + 1, size))
        return arrays
