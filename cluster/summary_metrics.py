"""The summary's metrics, one table: each metric's name, how it reduces over replications,
whether `compare --metric` and `sweep --metric` can chart it, and where the text summary
shows it. The combined summary (`metrics.combine`), the command line's lists of chartable
metrics and its headline derive from it; a new metric is one entry here plus the code that
computes it (`metrics.summarize`, or a counter in the compiled loop)."""

from __future__ import annotations

from dataclasses import dataclass

#: How a metric reduces over replications: "mean" (the mean, with a 95% interval; also per
#: class), "sum" (an integer count, summed), "time" (the mean, no interval: simulated and
#: measured time), "average" (a number's mean with its interval; a mapping's leaf by leaf).
REDUCTIONS = ("mean", "sum", "time", "average")
#: Groups of the text summary's headline, in the order printed: "base" always; "slo" with
#: an SLO; "faults" with node failures or a timeline; "trace" for a replayed trace;
#: "unserved" always (a run that did not finish never looks complete).
HEADLINE_GROUPS = ("base", "slo", "faults", "trace", "unserved")


@dataclass(frozen=True)
class Metric:
    """One summary metric.

    `chart`: "core" (in every run's summary: chartable everywhere), "family" (added by a
    scenario's features: world model, usage model, SLO, faults; chartable where present),
    or None (not chartable). `headline`: (group, rank) in the text summary, or None.
    """

    name: str
    reduce: str
    chart: str | None = "core"
    headline: tuple[str, int] | None = None


METRICS: tuple[Metric, ...] = (
    # response and waiting (measured jobs)
    Metric("mean_response_time_s", "mean", headline=("base", 1)),
    Metric("p50_response_time_s", "mean"),
    Metric("p90_response_time_s", "mean"),
    Metric("p95_response_time_s", "mean", headline=("base", 2)),
    Metric("p99_response_time_s", "mean"),
    Metric("mean_wait_s", "mean", headline=("trace", 0)),
    Metric("mean_bounded_slowdown", "mean", headline=("trace", 1)),
    # time averages over the window
    Metric("mean_jobs_in_system", "mean", headline=("base", 3)),
    Metric("holding_cost_rate", "mean", headline=("base", 4)),
    Metric("utilization", "mean", headline=("base", 5)),
    # money ($)
    Metric("cost_usd", "mean", headline=("base", 6)),
    Metric("startup_usd", "average", headline=("slo", 0)),
    Metric("operating_usd", "average", headline=("slo", 1)),
    Metric("throughput_per_s", "mean"),
    # counts
    Metric("jobs_completed", "sum", headline=("base", 0)),
    Metric("jobs_failed", "sum", headline=("unserved", 0)),
    Metric("jobs_unfinished", "sum", headline=("unserved", 1)),
    Metric("unscheduled", "sum", headline=("unserved", 2)),
    Metric("retries", "sum"),
    Metric("jobs_dropped", "average", None),
    Metric("wasted_core_s", "average"),
    Metric("nodes_rented", "average", headline=("slo", 4)),
    Metric("simulated_time_s", "time"),
    Metric("measured_time_s", "time"),
    Metric("events", "sum"),
    Metric("decisions", "sum"),
    # added by a scenario's world model and selected metrics (`score_metric`)
    Metric("score", "average", "family"),
    Metric("image_pulls", "average", "family"),
    Metric("mean_setup_s", "average", "family"),
    Metric("fetched_mb", "average", "family"),
    Metric("data_transfer_mb", "average", "family"),
    # a usage model's (`usage`): requests against real usage
    Metric("reserved_memory_gb_h", "average", "family"),
    Metric("used_memory_gb_h", "average", "family"),
    Metric("reserved_cpu_core_h", "average", "family"),
    Metric("used_cpu_core_h", "average", "family"),
    Metric("oom_kills", "average", "family"),
    Metric("failed_jobs", "average", "family"),
    Metric("failed_no_fit", "average", "family"),
    # a usage model whose jobs carry a `run` feature (the ml-workflow family): per workflow
    # run, its last end minus its first arrival, over the runs that completed
    Metric("mean_run_makespan_s", "average", "family"),
    # a scenario with `slo:` (`money`): its loss and money plus loss (the Pennyworth
    # paper's eq. 1)
    Metric("slo_loss_usd", "average", "family", headline=("slo", 2)),
    Metric("total_usd", "average", "family", headline=("slo", 3)),
    # a scenario with node failures or a timeline (docs/faults.md)
    Metric("node_failures", "average", "family", headline=("faults", 0)),
    Metric("failure_kills", "average", "family", headline=("faults", 1)),
    Metric("availability", "average", "family", headline=("faults", 2)),
    Metric("lost_core_s", "average", "family", headline=("faults", 3)),
)

BY_NAME = {m.name: m for m in METRICS}


def names(reduce: str | None = None, chart: str | None = None) -> tuple[str, ...]:
    """The metrics' names, in the table's order, with this reduction and/or chart class."""
    return tuple(
        m.name
        for m in METRICS
        if (reduce is None or m.reduce == reduce) and (chart is None or m.chart == chart)
    )


def headline(group: str) -> tuple[str, ...]:
    """The metrics of one headline group, in the order printed."""
    shown = [m for m in METRICS if m.headline is not None and m.headline[0] == group]
    return tuple(m.name for m in sorted(shown, key=lambda m: m.headline[1]))  # type: ignore[index]
