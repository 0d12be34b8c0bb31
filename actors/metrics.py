"""Live metrics of a Ray run or sweep, exported through Ray's Prometheus endpoint.

`ray.util.metrics` gauges are recorded by the coordinator (the driver) every window
(windowed / real-time mode) or about twice a second (exact mode). Ray prefixes every
name with `ray_`, so the Prometheus series are `ray_clusteremu_jobs_in_system{run,
job_class}` and so on; `monitoring/grafana-dashboard.json` charts them and
`docs/monitoring.md` walks through the path (Ray metrics agent -> Prometheus -> Grafana).

SLO violations: jobs that left the queue unserved when their class's `timeout_s` ran out
(the engine's `failed` jobs) -- the one service-level objective the scenario model has.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from ray.util.metrics import Gauge

#: Metric names without Ray's `ray_` prefix (documented in docs/monitoring.md).
METRIC_NAMES = (
    "clusteremu_jobs_in_system",
    "clusteremu_utilization",
    "clusteremu_decisions_per_second",
    "clusteremu_cost_usd",
    "clusteremu_slo_violations",
    "clusteremu_simulated_time_s",
    "clusteremu_jobs_completed",
    "clusteremu_sweep_runs_done",
    "clusteremu_sweep_runs_total",
)


class RunMetrics:
    """The gauges of one emulated run, tagged with its run name."""

    def __init__(self, run: str) -> None:
        self.run = run
        self.jobs_in_system = Gauge(
            "clusteremu_jobs_in_system",
            description="jobs in system (waiting or running) per class",
            tag_keys=("run", "job_class"),
        )
        self.utilization = Gauge(
            "clusteremu_utilization",
            description="busy cores / cores, per node type or pool (0..1)",
            tag_keys=("run", "resource"),
        )
        self.decision_rate = Gauge(
            "clusteremu_decisions_per_second",
            description="scheduler decisions per wall-clock second",
            tag_keys=("run",),
        )
        self.cost = Gauge(
            "clusteremu_cost_usd", description="money spent so far, dollars", tag_keys=("run",)
        )
        self.slo = Gauge(
            "clusteremu_slo_violations",
            description="jobs that left unserved (queue timeout) so far",
            tag_keys=("run",),
        )
        self.sim_time = Gauge(
            "clusteremu_simulated_time_s", description="simulated time, s", tag_keys=("run",)
        )
        self.completed = Gauge(
            "clusteremu_jobs_completed", description="jobs finished so far", tag_keys=("run",)
        )
        self._last_wall = time.monotonic()
        self._last_decisions = 0

    def record(
        self,
        sim_time_s: float,
        in_system: Mapping[str, float],
        utilization: Mapping[str, float],
        decisions: int,
        cost_usd: float,
        slo_violations: int,
        completed: int,
    ) -> None:
        """Set every gauge; the decision rate is measured since the previous call."""
        tags = {"run": self.run}
        for name, value in in_system.items():
            self.jobs_in_system.set(float(value), tags={"run": self.run, "job_class": name})
        for name, value in utilization.items():
            self.utilization.set(float(value), tags={"run": self.run, "resource": name})
        now = time.monotonic()
        if now > self._last_wall:
            rate = (decisions - self._last_decisions) / (now - self._last_wall)
            self.decision_rate.set(max(rate, 0.0), tags=tags)
        self._last_wall, self._last_decisions = now, decisions
        self.cost.set(float(cost_usd), tags=tags)
        self.slo.set(float(slo_violations), tags=tags)
        self.sim_time.set(float(sim_time_s), tags=tags)
        self.completed.set(float(completed), tags=tags)


class SweepMetrics:
    """Progress of a sweep: runs done out of the total, tagged with the sweep's name."""

    def __init__(self, sweep: str, total: int) -> None:
        self.tags = {"sweep": sweep}
        self.done = Gauge(
            "clusteremu_sweep_runs_done", description="sweep runs written", tag_keys=("sweep",)
        )
        self.total = Gauge(
            "clusteremu_sweep_runs_total", description="sweep runs in all", tag_keys=("sweep",)
        )
        self.total.set(float(total), tags=self.tags)

    def update(self, done: int) -> None:
        self.done.set(float(done), tags=self.tags)
