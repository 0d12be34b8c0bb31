"""Exact mode equals the kernel; windowed mode is deterministic (issue 3, acceptance 1)."""

from __future__ import annotations

import numpy as np
import pytest

from clusteremu.actors.actor_set import ActorSet
from clusteremu.actors.coordinator import Coordinator, RayRunOptions, run_replication
from clusteremu.actors.launch import run_on_ray
from clusteremu.cluster.runner import run_spec
from clusteremu.scenarios.loader import load_scenario
from tests.actors.helpers import assert_same_jobs

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_local")]

#: Shipped scenarios, shortened: placement (M/M/c), a malleable pool (EQUI, Amdahl) and
#: several node types (three types, two classes, jobs still running at the horizon).
SCENARIOS = {
    "mm-c": ["stop.jobs=1200", "stop.warmup_jobs=100"],
    "ps-amdahl": ["stop.jobs=400", "stop.warmup_jobs=50"],
    "hetero-placement": ["stop.time_s=120", "stop.warmup_s=10"],
}
#: hetero-placement with impatient batch jobs: queue timeouts (the scheduler's timers).
PATIENCE = [
    "stop.time_s=200",
    "stop.warmup_s=10",
    "workload.classes.1.timeout_s=3",
    "workload.classes.1.arrival.rate_per_s=2.0",
]


@pytest.mark.parametrize("name", [*sorted(SCENARIOS), "hetero-placement+timeouts"])
def test_exact_mode_equals_kernel(name: str) -> None:
    if name.endswith("+timeouts"):
        spec = load_scenario("hetero-placement", PATIENCE)
    else:
        spec = load_scenario(name, SCENARIOS[name])
    reference = run_spec(spec)
    result = run_on_ray(spec, RayRunOptions(shards=2))
    assert_same_jobs(reference.jobs, result.jobs)
    for key in ("jobs_completed", "mean_response_time_s", "p95_response_time_s"):
        assert result.summary[key] == reference.summary[key]
    # Time averages are integrated per job instead of per event: equal up to rounding.
    for key in ("mean_jobs_in_system", "utilization", "cost_usd"):
        assert result.summary[key] == pytest.approx(reference.summary[key], rel=1e-9)
    assert result.summary["ray"]["mode"] == "exact"
    assert result.summary["jobs_failed"] == reference.summary["jobs_failed"]
    if name.endswith("+timeouts"):
        assert reference.summary["jobs_failed"] > 0


def test_windowed_one_shard_equals_kernel() -> None:
    """With one node shard the routing has one choice, so the shard's kernel, fed window
    by window, runs exactly the single-process run."""
    spec = load_scenario("hetero-placement", SCENARIOS["hetero-placement"])
    reference = run_spec(spec)
    result = run_on_ray(spec, RayRunOptions(shards=1, window_s=2.0))
    assert_same_jobs(reference.jobs, result.jobs)


def test_windowed_is_deterministic_and_stale() -> None:
    spec = load_scenario("hetero-placement", SCENARIOS["hetero-placement"])
    first = run_on_ray(spec, RayRunOptions(shards=3, window_s=1.0))
    second = run_on_ray(spec, RayRunOptions(shards=3, window_s=1.0))
    assert_same_jobs(first.jobs, second.jobs)
    reference = run_spec(spec)
    # Same jobs (common random numbers), decided on a stale snapshot: placements differ.
    assert first.jobs.column("arrival_s").equals(reference.jobs.column("arrival_s"))
    assert first.jobs.column("node").to_pylist() != reference.jobs.column("node").to_pylist()
    done = ~np.isnan(first.jobs.column("end_s").to_numpy(zero_copy_only=False))
    assert done.sum() > 0.9 * first.jobs.num_rows


def test_realtime_mode_paces_to_the_wall_clock() -> None:
    import time

    spec = load_scenario("mm-c", ["stop.jobs=200", "stop.warmup_jobs=10"])
    horizon = float(run_spec(spec).summary["simulated_time_s"])
    start = time.monotonic()
    result = run_on_ray(spec, RayRunOptions(window_s=2.0, realtime=20.0))
    wall = time.monotonic() - start
    assert result.summary["ray"]["mode"] == "realtime"
    assert result.summary["jobs_completed"] == 190
    assert wall >= horizon / 20.0 - 2.0 / 20.0


def test_replications_and_option_errors() -> None:
    spec = load_scenario("ps-amdahl", ["stop.jobs=150", "stop.warmup_jobs=10", "replications=2"])
    reference = run_spec(spec)
    result = run_on_ray(spec, RayRunOptions(window_s=5.0))
    assert_same_jobs(reference.jobs, result.jobs)
    assert result.summary["replications"] == 2
    with pytest.raises(ValueError, match="shards"):
        RayRunOptions(shards=0)
    with pytest.raises(ValueError, match="window"):
        RayRunOptions(window_s=-1.0)
    with pytest.raises(ValueError, match="shard CPUs"):
        RayRunOptions(shard_cpus=-1.0)


@pytest.mark.parametrize(
    ("name", "overrides", "options"),
    [
        # Short runs: the check is that reused actors give a fresh run's table, which any
        # length shows (every window / event goes through the actors: 3 runs each).
        (
            "hetero-placement",
            ["stop.time_s=40", "stop.warmup_s=5"],
            RayRunOptions(shards=2, window_s=1.0),
        ),
        ("ps-amdahl", ["stop.jobs=100", "stop.warmup_jobs=10"], RayRunOptions(shards=2)),
    ],
    ids=["windowed", "exact"],
)
def test_replications_reuse_the_run_actors(
    name: str, overrides: list[str], options: RayRunOptions
) -> None:
    """Replication 2 on the actors of replication 1 (reset, not restarted) gives the table
    of replication 2 on fresh actors."""
    spec = load_scenario(name, overrides)
    actors = ActorSet(spec, options, "reuse")
    try:
        Coordinator(spec, 0, options, "reuse", actors).run_replication()
        started = [a._actor_id for a in actors.all]
        second = Coordinator(spec, 1, options, "reuse", actors).run_replication()
        assert [a._actor_id for a in actors.all] == started  # the same actors, reset
    finally:
        actors.close()
    assert actors.all == []
    fresh = run_replication(spec, 1, options, "fresh")
    assert_same_jobs(fresh.jobs, second.jobs)
    assert second.summary["mean_jobs_in_system"] == fresh.summary["mean_jobs_in_system"]


def test_exact_mode_equals_kernel_with_failures_and_a_timeline() -> None:
    """Random node failures, kills and re-queues, and every timeline action that touches
    nodes: the engine actor runs the same loop, so the per-job tables are identical."""
    spec = load_scenario(
        "faults-mm2",
        [
            "stop.jobs=3000",
            "stop.warmup_jobs=100",
            "restart_work=same",
            "cluster.nodes.0.count=3",
            "events=[{at_s: 300, fail: {node: 0}}, {at_s: 400, recover: {type: core, count: 1}},"
            " {at_s: 500, join: {type: core, count: 1}}, {at_s: 900, drain: {node: 1}},"
            " {at_s: 1200, set_rate: {class: a, rate_per_s: 2.0}}]",
        ],
    )
    reference = run_spec(spec)
    result = run_on_ray(spec, RayRunOptions(shards=2))
    assert_same_jobs(reference.jobs, result.jobs)
    assert reference.summary["failure_kills"] > 50
    for key in ("node_failures", "failure_kills", "lost_core_s", "availability", "retries"):
        assert result.summary[key] == reference.summary[key], key


def test_windowed_mode_refuses_failures_before_ray_starts() -> None:
    from tests.clusteremu.badinput import refused

    refused(
        [
            "run",
            "faults-mm2",
            "--ray",
            "--window",
            "2",
            "--set",
            "stop.jobs=1000",
            "--set",
            "stop.warmup_jobs=10",
        ],
        "run",
        "ray mode",
        "--window: node failures and timeline events",
    )
