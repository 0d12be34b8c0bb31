"""Where the rows of jobs that have left go when the engine compacts its job arrays
(`clusteremu.cluster.engine.compaction`), and the run's result built from them.

`KeepSink` keeps every row and puts the whole run back together at the end: the result is
exactly the one of a run without compaction (what the tests compare). `StreamSink`
(`clusteremu.cluster.stream_result`) keeps only partial aggregates and writes the rows to a
Parquet table as they come: memory stays constant however many jobs the run has.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.engine.compaction import FinishedRows
from clusteremu.cluster.metrics import RunResult, build_result
from clusteremu.cluster.state import RunState

if TYPE_CHECKING:
    from clusteremu.cluster.policies.base import Policy

IntArray = npt.NDArray[np.int64]


def whole_state(run: RunState, ids: IntArray, fed: int, parts: list[FinishedRows]) -> RunState:
    """The run as if no row had been taken out: the rows of `parts` and the live state's
    first `fed` rows (job numbers `ids`) put back in job order, with the sizes redrawn
    for each, by job number."""
    s = run.state
    total = fed + sum(p.ids.size for p in parts)
    jobs_f = np.zeros((s.jobs_f.shape[0], total))
    jobs_i = np.zeros((s.jobs_i.shape[0], total), dtype=np.int64)
    types = s.run_by_type.shape[0]
    run_by_type = np.full((types, total), -1.0) if types else s.run_by_type[:, :0]
    sizes: dict[int, tuple[float, ...]] = {}
    for p in parts:
        jobs_f[:, p.ids] = p.jobs_f
        jobs_i[:, p.ids] = p.jobs_i
        if types:
            run_by_type[:, p.ids] = p.run_by_type
        sizes.update(p.sizes_drawn)
    live = ids[:fed]
    jobs_f[:, live] = s.jobs_f[:, :fed]
    jobs_i[:, live] = s.jobs_i[:, :fed]
    if types:
        run_by_type[:, live] = s.run_by_type[:, :fed]
    sizes.update({int(ids[j]): v for j, v in run.sizes_drawn.items()})
    state = s._replace(jobs_f=jobs_f, jobs_i=jobs_i, run_by_type=run_by_type)
    return RunState(run.spec, run.replication, state, run.now_s, sizes)


class KeepSink:
    """Keeps every row taken out; the result is the run's whole result, as without
    compaction (for tests and checks: memory grows with the jobs)."""

    def __init__(self) -> None:
        self.parts: list[FinishedRows] = []

    def take(self, rows: FinishedRows, now_s: float) -> None:
        self.parts.append(rows)

    def result(
        self,
        run: RunState,
        ids: IntArray,
        fed: int,
        policies: tuple[Policy, ...] = (),
        runs: Any = None,
    ) -> RunResult:
        """The per-job table and summary of the whole run (`build_result`)."""
        return build_result(whole_state(run, ids, fed, self.parts), policies, runs=runs)
