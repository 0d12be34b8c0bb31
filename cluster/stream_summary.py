"""The run summary from partial aggregates, for a run whose job rows are streamed away
(`clusteremu.cluster.engine.sinks.StreamSink`): counts and sums per class over batches of
rows, measured response times kept for exact percentiles (`clusteremu.cluster.order_stats`).

Equal to `clusteremu.cluster.metrics.summarize` on the same jobs: counts, percentiles and
every figure read from the engine's integrals to the last digit; the means over jobs
(`mean_response_time_s`, `mean_wait_s`, `mean_bounded_slowdown`, per class too) and the
sums over jobs (`wasted_core_s`, `lost_core_s`) are summed batch by batch instead of by
numpy's pairwise sum over all jobs at once: they may differ in the last few ulps.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.layout import FS, IS, JF, JI, JobState
from clusteremu.cluster.metrics import SLOWDOWN_BOUND_S, window_figures
from clusteremu.cluster.order_stats import SpilledValues, percentiles
from clusteremu.cluster.state import RunState

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

QUANTILES = (50, 90, 95, 99)


class ResponseSums:
    """One class's (or all classes') measured jobs: their count, the sums of response,
    wait and bounded slowdown, and the response times (for percentiles)."""

    def __init__(self, memory_values: int, folder: str | None) -> None:
        self.n = 0
        self.response = 0.0
        self.wait = 0.0
        self.slowdown = 0.0
        self.values = SpilledValues(memory_values, folder)

    def add(self, resp: FloatArray, wait: FloatArray) -> None:
        if resp.size == 0:
            return
        self.n += resp.size
        self.response += float(resp.sum())
        self.wait += float(wait.sum())
        run = np.maximum(resp - wait, SLOWDOWN_BOUND_S)
        self.slowdown += float(np.maximum(resp / run, 1.0).sum())
        self.values.add(resp)

    def stats(self) -> dict[str, Any]:
        """`metrics._response_stats`' keys."""
        nan = float("nan")
        if self.n == 0:
            p50 = p90 = p95 = p99 = nan
        else:
            p50, p90, p95, p99 = (float(v) for v in percentiles(self.values, QUANTILES))
        return {
            "jobs_completed": self.n,
            "mean_response_time_s": self.response / self.n if self.n else nan,
            "p50_response_time_s": p50,
            "p90_response_time_s": p90,
            "p95_response_time_s": p95,
            "p99_response_time_s": p99,
            "mean_wait_s": self.wait / self.n if self.n else nan,
            "mean_bounded_slowdown": self.slowdown / self.n if self.n else nan,
        }

    def close(self) -> None:
        self.values.close()


class StreamSummary:
    """Partial aggregates of a run's jobs, batch by batch (`add`); `summary` completes
    them with the engine's integrals into `metrics.summarize`'s (and `fault_summary`'s)
    keys. `memory_values`: response times held in memory per class before they go to a
    temporary file in `folder`."""

    def __init__(self, n_classes: int, memory_values: int, folder: str | None = None) -> None:
        self.n_classes = n_classes
        self.all = ResponseSums(memory_values, folder)
        self.by_class = (
            [ResponseSums(memory_values, folder) for _ in range(n_classes)] if n_classes > 1 else []
        )
        self.rows = 0
        self.failed_class = np.zeros(n_classes, dtype=np.int64)
        self.arrivals_class = np.zeros(n_classes, dtype=np.int64)
        self.retries = 0
        self.wasted = 0.0
        self.failure_kills = 0
        self.lost = 0.0
        self.future = 0
        self.unscheduled = 0

    def add(
        self,
        run: RunState,
        ids: IntArray,
        start: FloatArray,
        end: FloatArray,
        measured: npt.NDArray[np.bool_],
        failed: npt.NDArray[np.bool_],
    ) -> None:
        """Rows of `run.state` (job numbers `ids`) and their derived columns."""
        s = run.state
        jf, ji = s.jobs_f, s.jobs_i
        stop = run.spec.stop
        arrival = jf[JF.ARRIVAL]
        cls = ji[JI.CLS]
        self.rows += ids.size
        resp = (end - arrival)[measured]
        wait = (start - arrival)[measured]
        self.all.add(resp, wait)
        if self.by_class:
            mc = cls[measured]
            for c in np.unique(mc).tolist():
                sel = mc == c
                self.by_class[c].add(resp[sel], wait[sel])
        warm = arrival >= stop.warmup_s if stop.time_s is not None else ids >= stop.warmup_jobs
        self.failed_class += np.bincount(cls[failed & warm], minlength=self.n_classes)
        lo, hi = s.fstate[FS.WIN_START], s.fstate[FS.WIN_END]
        inside = (arrival >= lo) & (arrival <= hi)
        self.arrivals_class += np.bincount(cls[inside], minlength=self.n_classes)
        self.retries += int(ji[JI.RETRIES][warm].sum())
        self.wasted += float(jf[JF.WASTE_CORE_S][warm].sum())
        self.failure_kills += int(ji[JI.FAIL_KILLS][warm].sum())
        self.lost += float(jf[JF.LOST_CORE_S][warm].sum())
        state = ji[JI.STATE]
        self.future += int(np.count_nonzero(state == JobState.FUTURE))
        self.unscheduled += int(
            np.count_nonzero((state == JobState.QUEUED) & (ji[JI.RETRIES] == 0))
        )

    def summary(self, run: RunState) -> dict[str, Any]:
        """The summary (`metrics.summarize`'s keys) once every row has been added."""
        spec, s = run.spec, run.state
        figures, class_rates = window_figures(run, self.arrivals_class)
        used = run.nodes_used
        stats = self.all.stats()
        summary: dict[str, Any] = {
            "scenario": spec.name,
            "seed": spec.seed,
            "replication": run.replication,
            **stats,
            **figures,
            "jobs_unfinished": int(self.rows - s.istate[IS.DONE_COUNT] - self.future),
            "jobs_failed": int(self.failed_class.sum()),
            "unscheduled": self.unscheduled,
            "retries": self.retries,
            "wasted_core_s": self.wasted,
            "jobs_dropped": int(s.istate[IS.DROPPED_COUNT]),
            "nodes_rented": max(used - len(spec.nodes), 0),
        }
        per_class: dict[str, Any] = {}
        for c, jc in enumerate(spec.classes):
            stats_c = self.by_class[c].stats() if self.by_class else dict(stats)
            per_class[jc.name] = {
                **stats_c,
                "jobs_failed": int(self.failed_class[c]),
                **class_rates[c],
            }
        summary["per_class"] = per_class
        return summary

    def fault_summary(self, run: RunState) -> dict[str, Any]:
        """`metrics.fault_summary`'s keys: the jobs' sums from the batches, the nodes'
        figures from the state."""
        from clusteremu.cluster.metrics import fault_summary

        out = fault_summary(run)  # node figures; its job sums cover the rows held now
        out["failure_kills"] = self.failure_kills
        out["lost_core_s"] = self.lost
        return out

    def close(self) -> None:
        """Remove the temporary files of response times."""
        self.all.close()
        for part in self.by_class:
            part.close()
