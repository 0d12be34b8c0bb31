"""Run every replication of a scenario in this process and combine the results.

A run whose policies and metrics allow it (`clusteremu.cluster.engine.streaming`) holds
only what is still live: its engines compact the rows of jobs that have left
(`clusteremu.cluster.engine.compaction`) into a `StreamSink`, which keeps the first
`KEEP_ROWS` jobs' rows (below that, the result and the table's bytes are a plain run's)
and past that streams them: to the Parquet table at `out`, a row group at a time, or
nowhere (a summary-only run).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.engine.compaction import CompactionRefused
from clusteremu.cluster.engine.sinks import KEEP_ROWS, StreamSink
from clusteremu.cluster.engine.streaming import stream_refusal
from clusteremu.cluster.metrics import RunResult, combine
from clusteremu.cluster.model import PolicyRef, SimulationSpec
from clusteremu.cluster.policies.points import paired, replaced
from clusteremu.cluster.row_groups import RowGroups

#: Jobs that leave between two compactions of a streamed run (its job rows held at most:
#: these, the jobs in the system and a chunk of drawn arrivals).
COMPACT_EVERY = 1 << 19


@dataclass
class ScenarioResult:
    """All replications: the concatenated per-job table and the combined summary.

    `streamed`: the rows went past memory (more than `KEEP_ROWS` in all, or `stream=True`):
    `jobs` is then empty (its columns only), the rows are in the table written to `out`,
    in the order jobs left (by job number within a row group), replication by
    replication."""

    jobs: pa.Table
    summary: dict[str, Any]
    replications: list[dict[str, Any]]
    streamed: bool = False


def run_spec(
    spec: SimulationSpec,
    progress: Callable[[float], None] | None = None,
    *,
    out: str | Path | None = None,
    stream: bool | None = None,
) -> ScenarioResult:
    """Run `spec.replications` independent replications (seeds spawned from `spec.seed`).

    `out`: write the per-job table there (Parquet, atomically: a run that fails or is
    interrupted leaves `out` as it was). `stream`: None streams where the scenario allows
    it (`stream_refusal`) once the jobs exceed `KEEP_ROWS`; True streams from the first
    job (`CompactionRefused` naming why where it cannot); False never streams (every row
    is held until the end).
    """
    why = None if stream is False else stream_refusal(spec)
    if stream is True and why is not None:
        raise CompactionRefused(f"scenario {spec.name!r}: cannot stream its results: {why}")
    streams = stream is not False and why is None
    keep = 0 if stream is True else KEEP_ROWS
    summaries = []
    n = spec.replications
    with RowGroups(out, hold_rows=keep if streams else float("inf")) as table:
        for r in range(n):

            def report(done: float, r: int = r) -> None:
                if progress is not None:
                    progress((r + done) / n)

            if streams:
                sink = StreamSink(table=table, keep_rows=keep)
                result = _streamed(spec, r, sink, report, must=stream is True)
            else:
                result = None
            if result is None:  # a plain run (or one the engine would not compact)
                result = Engine(spec, replication=r).run(report)
                table.add(result.jobs)
            summaries.append(result.summary)
        held = table.held()
        jobs = held if held is not None else _empty(table.schema)
        streamed = table.streamed
    return ScenarioResult(jobs, combine(summaries), summaries, streamed)


def _streamed(
    spec: SimulationSpec,
    r: int,
    sink: StreamSink,
    report: Callable[[float], None],
    must: bool,
) -> RunResult | None:
    """Replication `r` through `sink` (its rows go to the sink's table), or None when the
    engine refuses to compact it (a case `stream_refusal` cannot see: run it plainly,
    unless it `must` stream)."""
    try:
        engine = Engine(spec, replication=r, sink=sink, compact_every=COMPACT_EVERY)
    except CompactionRefused:
        if must:
            raise
        return None
    try:
        return engine.run(report)
    finally:
        sink.close()


def _empty(schema: pa.Schema | None) -> pa.Table:
    return schema.empty_table() if schema is not None else pa.table({})


def with_policies(spec: SimulationSpec, **names: str) -> SimulationSpec:
    """A copy of `spec` with some of its scheduler's policies replaced by name.

    `names` maps `placer` / `allocator` / `provisioner` / `scaler` to a policy name,
    optionally with parameters as `name:key=value:key=value`. Naming the scenario's own
    policy keeps its parameters (`placer=scoring` on a scenario that configures `scoring`
    runs exactly that configuration); given parameters then override those keys. Another
    policy starts from no parameters.

    Pairs follow their placer as in a scenario (`clusteremu.cluster.policies.points`): replacing a
    Pennyworth planner (the placer and the scaler) replaces both points' policy (with
    another planner, or a placer and the default scaler); a scaler other than the
    planner's raises `clusteremu.cluster.policies.points.PairError` naming `scheduler.scaler`.
    """
    sched = spec.scheduler
    for kind, text in names.items():
        name, *params = text.split(":")
        current: PolicyRef = getattr(sched, kind)
        values: dict[str, Any] = dict(current.params) if current.name == name else {}
        for item in params:
            key, _, raw = item.partition("=")
            values[key] = _parse_scalar(raw)
        sched = replaced(sched, kind, PolicyRef(name, values))  # type: ignore[arg-type]
    return replace(spec, scheduler=paired(sched))


def _parse_scalar(raw: str) -> Any:
    """A `--policy` parameter's value: an int, a float, true or false (as YAML writes
    them, any case), else the text itself."""
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            pass
    return raw
