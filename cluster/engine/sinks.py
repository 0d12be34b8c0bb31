"""Where the rows of jobs that have left go when the engine compacts its job arrays
(`clusteremu.cluster.engine.compaction`), and the run's result built from them.

`KeepSink` keeps every row and puts the whole run back together at the end: the result is
exactly the one of a run without compaction (what the tests compare). `StreamSink`
(`clusteremu.cluster.stream_result`) keeps only partial aggregates and writes the rows to a
Parquet table as they come: memory stays constant however many jobs the run has.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from clusteremu.cluster.engine.compaction import FinishedRows
from clusteremu.cluster.layout import CI, IS, NF
from clusteremu.cluster.metrics import (
    RunResult,
    _job_columns,
    build_result,
    job_table,
    node_names,
)
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies.base import Policy as _PolicyBase
from clusteremu.cluster.row_groups import RowGroups
from clusteremu.cluster.state import RunState
from clusteremu.cluster.stream_summary import StreamSummary

if TYPE_CHECKING:
    from clusteremu.cluster.policies.base import Policy

IntArray = npt.NDArray[np.int64]


def whole_state(run: RunState, ids: IntArray, fed: int, parts: list[FinishedRows]) -> RunState:
    """The run as if no row had been taken out: the rows of `parts` and the live state's
    first `fed` rows (job numbers `ids`) put back in job order, with the sizes redrawn
    for each, by job number."""
    s = run.state
    if not parts and np.array_equal(ids[:fed], np.arange(fed)):  # never compacted: views
        state = s._replace(
            jobs_f=s.jobs_f[:, :fed], jobs_i=s.jobs_i[:, :fed], run_by_type=s.run_by_type[:, :fed]
        )
        return RunState(run.spec, run.replication, state, run.now_s, dict(run.sizes_drawn))
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

    def refusal(self, run: RunState, policies: tuple[Policy, ...]) -> str | None:
        return None

    def take(self, rows: FinishedRows, run: RunState) -> None:
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


#: Rows kept (as `KeepSink` does) before a `StreamSink` starts to stream: a run of fewer
#: jobs gets exactly the result, and the Parquet bytes, of a run without compaction.
KEEP_ROWS = 1 << 20
#: Response times held in memory per class before they go to a temporary file.
MEMORY_VALUES = 1 << 22


def _columns(run: RunState, ids: IntArray) -> tuple[np.ndarray, ...]:
    """The derived per-job columns (`metrics._job_columns`) of `run`'s job rows."""
    s, stop = run.state, run.spec.stop
    return _job_columns(
        s.jobs_f,
        s.jobs_i,
        s.classes_i[CI.POOL],
        s.nodes_f[NF.CAP_CPU],
        s.nodes_f[NF.PRICE_PER_S],
        run.now_s,
        stop.time_s is not None,
        stop.warmup_s,
        stop.warmup_jobs,
        ids,
    )


def _rows_run(run: RunState, rows: FinishedRows) -> RunState:
    """`run` holding only `rows` (sizes redrawn keyed by their position in `rows`)."""
    state = run.state._replace(jobs_f=rows.jobs_f, jobs_i=rows.jobs_i)
    where = {int(g): i for i, g in enumerate(rows.ids.tolist()) if int(g) in rows.sizes_drawn}
    sizes = {where[g]: v for g, v in rows.sizes_drawn.items()}
    return RunState(run.spec, run.replication, state, run.now_s, sizes)


def table_refusal(
    spec: SimulationSpec, world: bool, usage: bool, policies: tuple[Policy, ...]
) -> str | None:
    """Why a `StreamSink` cannot give the result of a run of `spec` with a world model
    (`world`), a usage model (`usage`) and `policies` (None: it can): metrics that need
    the whole per-job table at once."""
    reasons = []
    if spec.slo is not None:
        reasons.append("an SLO (`slo:`)")
    if world:
        reasons.append("a world model")
    if spec.metrics.score is not None:
        reasons.append("a score metric (`metrics.score`)")
    if usage:
        reasons.append("a usage model")
    names = [p.name for p in policies if type(p).extra_summary is not _PolicyBase.extra_summary]
    if names:
        reasons.append(f"policies that add to the summary ({', '.join(names)})")
    if not reasons:
        return None
    return "streamed results cannot give the metrics of " + ", ".join(reasons)


class StreamSink:
    """Keeps the rows of up to `keep_rows` jobs (then the result is exactly that of a run
    without compaction); past that, streams: each batch of rows is folded into partial
    aggregates (`clusteremu.cluster.stream_summary`) and, with `out`, written to the
    Parquet table as a row group, so that memory no longer grows with the jobs.

    The table is written to a temporary file next to `out`, renamed over it when the
    result is made (`clusteremu.cluster.row_groups`): a run killed before leaves no
    table. Streamed rows come in the order jobs left (by job number within a row group),
    the jobs still in the system last; the summary's means and sums over jobs may differ
    from a whole run's in the last ulps (`stream_summary`). Without `out` the rows are
    dropped once counted.

    `table` instead of `out`: a table several runs share (a scenario's replications,
    `clusteremu.cluster.runner.run_spec`), which its owner closes: kept, the run's whole
    table is added to it; streamed, each batch is written to it.
    """

    def __init__(
        self,
        out: str | Path | None = None,
        keep_rows: int = KEEP_ROWS,
        memory_values: int = MEMORY_VALUES,
        temp_folder: str | None = None,
        table: RowGroups | None = None,
    ) -> None:
        if out is not None and table is not None:
            raise ValueError("StreamSink: give out or table, not both")
        self.out = None if out is None else Path(out)
        self.keep_rows = keep_rows
        self.memory_values = memory_values
        self.temp_folder = temp_folder
        self.parts: list[FinishedRows] = []
        self.kept = 0
        self.summary: StreamSummary | None = None
        # A table of its own is written whole when kept (`write_parquet`'s bytes).
        self._owns = table is None and out is not None
        self.table = RowGroups(out, hold_rows=math.inf) if self._owns else table
        #: Rows streamed so far, and bytes of the table written (when done).
        self.rows_streamed = 0
        self.table_bytes = 0
        self._names: pa.Array | None = None
        self._names_for = -1

    @property
    def streaming(self) -> bool:
        """Whether the rows are streamed (more than `keep_rows` jobs have left)."""
        return self.summary is not None

    def refusal(self, run: RunState, policies: tuple[Policy, ...]) -> str | None:
        """Metrics that need the whole per-job table at once are refused."""
        s = run.state
        return table_refusal(
            run.spec, s.world_f.shape[0] > 0, bool(s.istate[IS.HAS_USAGE]), policies
        )

    # -- rows ------------------------------------------------------------------------------

    def take(self, rows: FinishedRows, run: RunState) -> None:
        if self.summary is None:
            self.parts.append(rows)
            self.kept += rows.ids.size
            if self.kept > self.keep_rows:
                self._start_streaming(run)
            return
        self._stream(rows, run)

    def _start_streaming(self, run: RunState) -> None:
        self.summary = StreamSummary(len(run.spec.classes), self.memory_values, self.temp_folder)
        parts, self.parts, self.kept = self.parts, [], 0
        for part in parts:
            self._stream(part, run)

    def _stream(self, rows: FinishedRows, run: RunState) -> None:
        assert self.summary is not None
        part = _rows_run(run, rows)
        columns = _columns(part, rows.ids)
        start, end, _, _, _, _, measured, failed = columns
        self.summary.add(part, rows.ids, start, end, measured, failed)
        self.rows_streamed += rows.ids.size
        if self.table is not None:
            self.table.write(job_table(part, columns, rows.ids, self._node_names(run)))

    def _node_names(self, run: RunState) -> pa.Array:
        """The node rows' names, made again only when nodes were added (rented)."""
        used = run.nodes_used
        if self._names is None or self._names_for != used:
            spec = run.spec
            types = [t.name for t in spec.node_types]
            names = node_names(spec.nodes, run.state.nodes_i[0, :used], types) or [""]
            self._names, self._names_for = pa.array(names, pa.string()), used
        return self._names

    # -- the result ------------------------------------------------------------------------

    def result(
        self,
        run: RunState,
        ids: IntArray,
        fed: int,
        policies: tuple[Policy, ...] = (),
        runs: Any = None,
    ) -> RunResult:
        """The run's result; with `out`, its per-job table written there. Streamed, the
        table returned is empty (its rows are in the file)."""
        try:
            if self.summary is None:  # every row kept: the whole result, as without compaction
                result = build_result(whole_state(run, ids, fed, self.parts), policies, runs=runs)
                self.parts = []
                if self.table is not None:
                    self.table.add(result.jobs)
                self._done()
                return result
            s = run.state
            live = FinishedRows(
                ids=np.asarray(ids[:fed]),
                jobs_f=s.jobs_f[:, :fed],
                jobs_i=s.jobs_i[:, :fed],
                run_by_type=s.run_by_type[:, :fed],
                sizes_drawn={int(ids[j]): v for j, v in run.sizes_drawn.items()},
            )
            self._stream(live, run)
            summary = self.summary.summary(run)
            if run.spec.has_faults:
                summary.update(self.summary.fault_summary(run))
            schema = None if self.table is None else self.table.schema
            self._done()
        except BaseException:
            self.close()
            raise
        self.close()
        return RunResult(schema.empty_table() if schema is not None else pa.table({}), summary)

    def _done(self) -> None:
        """A table of its own written (renamed over `out`)."""
        if self._owns and self.table is not None:
            self.table.close()
            self.table_bytes = self.table.bytes

    def close(self) -> None:
        """Let go of what the run held: the temporary files of response times, and a
        table of its own not written yet (removed: `out` keeps what it held). Safe to
        call more than once, and after `result`."""
        if self.summary is not None:
            self.summary.close()
        if self._owns and self.table is not None:
            self.table.abort()
        self.parts = []
