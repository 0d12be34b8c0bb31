"""What happens at one instant (docs/engine.md, "Ties"): events at the same time run in
one total order, by kind first (placed jobs' completions, pools' completions, out-of-memory
kills, patience timeouts, random node failures and recoveries, nodes finishing start-up,
timeline events in list order, arrivals), then by job number or node row within a kind.
Decisions (placements) are made between two events.

Each test is a micro-scenario whose result is worked out by hand in its comment, for one
pair of kinds; and the fault semantics of docs/faults.md that ties touch: a timeline `fail`
of a node a random failure took down, the queue order of jobs killed together, a drain by
type."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from clusteremu.cluster.engine import Engine
from clusteremu.scenarios.errors import ScenarioError
from clusteremu.scenarios.loader import spec_from_dict
from tests.cluster.test_faults import scenario


def run(data: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    result = Engine(spec_from_dict(copy.deepcopy(data))).run()
    return result.jobs.to_pandas().sort_values("job"), result.summary


def deterministic_failures(data: dict[str, Any], up_s: float, down_s: float) -> None:
    data["cluster"]["node_types"][0]["failures"] = {
        "up": {"kind": "deterministic", "value_s": up_s},
        "down": {"kind": "deterministic", "value_s": down_s},
    }


def test_completions_come_before_random_failures_whatever_the_numbering() -> None:
    # Three one-core nodes that fail at 10 s (fixed up time) and three 10 s jobs at 0 s:
    # job i on node i. Every job completes at 10 s, before its node's failure, however
    # job numbers compare with node rows (they used to decide: job 1 on node 0 was killed).
    data = scenario(jobs=[(0.0, 10.0)] * 3, nodes=3)
    deterministic_failures(data, up_s=10.0, down_s=5.0)
    jobs, summary = run(data)
    assert jobs["end_s"].tolist() == [10.0, 10.0, 10.0]
    assert jobs["retries"].tolist() == [0, 0, 0]
    assert summary["failure_kills"] == 0


def test_a_job_as_long_as_the_up_time_finishes() -> None:
    # A 10 s job on a node up 10 s then down 1 s, with a second job queued behind it: the
    # first completes at 10 s; the second starts then and is killed by the failure at the
    # same instant (it started after the completion, before the failure), restarts at 11 s
    # when the node is back, and completes at 21 s, before the failure at 21 s.
    data = scenario(jobs=[(0.0, 10.0), (0.0, 10.0)])
    deterministic_failures(data, up_s=10.0, down_s=1.0)
    jobs, summary = run(data)
    assert jobs["end_s"].tolist() == [10.0, 21.0]
    assert jobs["start_s"].tolist() == [0.0, 11.0]
    assert jobs["retries"].tolist() == [0, 1]
    assert summary["failure_kills"] == 1


def test_a_completion_places_a_job_whose_patience_ends_at_that_instant() -> None:
    # One node; job 0 runs 0-10 s; job 1 arrives at 0 s with 10 s of patience. At 10 s the
    # completion comes first and places job 1 (decisions between events), so its timeout
    # at 10 s finds it running: it starts at 10 s and completes at 15 s.
    data = scenario(jobs=[(0.0, 10.0), (0.0, 5.0)])
    data["workload"]["classes"][1]["timeout_s"] = 10.0
    jobs, summary = run(data)
    assert jobs["start_s"].tolist() == [0.0, 10.0]
    assert jobs["end_s"].tolist() == [10.0, 15.0]
    assert summary["jobs_failed"] == 0


def test_a_timeout_comes_before_a_random_recovery_at_the_same_instant() -> None:
    # The node fails at 5 s and is back at 8 s (up 5 s, down 3 s). Job 0 (4 s) runs 0-4 s;
    # job 1 arrives at 6 s with 2 s of patience: its timeout at 8 s comes before the
    # recovery at 8 s, so it fails unserved.
    data = scenario(jobs=[(0.0, 4.0), (6.0, 1.0)])
    data["workload"]["classes"][1]["timeout_s"] = 2.0
    data["stop"] = {"time_s": 9.0}
    deterministic_failures(data, up_s=5.0, down_s=3.0)
    jobs, summary = run(data)
    assert jobs["failed"].tolist() == [False, True]
    assert summary["jobs_failed"] == 1


def test_a_random_recovery_comes_before_an_arrival_at_the_same_instant() -> None:
    # The node fails at 5 s and is back at 8 s; a job arriving at 8 s starts at once.
    data = scenario(jobs=[(8.0, 1.0)])
    data["stop"] = {"time_s": 20.0}
    deterministic_failures(data, up_s=5.0, down_s=3.0)
    jobs, _ = run(data)
    assert jobs["start_s"].tolist() == [8.0]
    assert jobs["end_s"].tolist() == [9.0]


def test_a_random_failure_comes_before_a_timeline_recover_at_the_same_instant() -> None:
    # Up 5 s, down 100 s. A timeline `recover` at 5 s comes after the random failure at 5 s
    # (heap events before the timeline), so it brings the node straight back: a job
    # arriving at 6 s starts at 6 s.
    data = scenario(jobs=[(6.0, 1.0)], events=[{"at_s": 5, "recover": {"node": 0}}])
    deterministic_failures(data, up_s=5.0, down_s=100.0)
    jobs, _ = run(data)
    assert jobs["start_s"].tolist() == [6.0]


def test_a_timeline_event_comes_before_an_arrival_at_the_same_instant() -> None:
    # A timeline `fail` at 4 s: the job arriving at 4 s sees the node down and waits for
    # the `recover` at 9 s.
    data = scenario(
        jobs=[(4.0, 1.0)],
        events=[{"at_s": 4, "fail": {"node": 0}}, {"at_s": 9, "recover": {"node": 0}}],
    )
    jobs, _ = run(data)
    assert jobs["start_s"].tolist() == [9.0]


def test_a_timeline_fail_takes_over_a_node_a_random_failure_took_down() -> None:
    # Up 5 s, down 10 s: a random failure at 5 s, its repair due at 15 s. The timeline fails
    # the (already down) node at 8 s and recovers it at 40 s: it stays down until 40 s, so
    # the job arriving at 6 s starts at 40 s (and, up 5 s again, finishes at 41 s).
    data = scenario(
        jobs=[(6.0, 1.0)],
        events=[{"at_s": 8, "fail": {"node": 0}}, {"at_s": 40, "recover": {"node": 0}}],
    )
    deterministic_failures(data, up_s=5.0, down_s=10.0)
    jobs, summary = run(data)
    assert jobs["start_s"].tolist() == [40.0]
    assert jobs["end_s"].tolist() == [41.0]
    # The measured window opens at the first arrival (6 s), after the random failure; the
    # timeline's fail of a node already down is not a second failure.
    assert summary["node_failures"] == 0


def test_jobs_killed_together_queue_again_in_arrival_order() -> None:
    # Node 0 has two cores, node 1 one core and is down (timeline) from 0 s. Jobs 0 and 1
    # (100 s each) arrive at 0 s and 1 s and run on node 0. At 5 s node 0 fails, then node 1
    # recovers: of the two re-queued jobs the earlier arrival, job 0, is first and gets
    # node 1 at 5 s; job 1 waits for node 0's recovery at 50 s.
    data = scenario(
        jobs=[(0.0, 100.0), (1.0, 100.0)],
        nodes=0,
        events=[
            {"at_s": 0, "fail": {"node": 1}},
            {"at_s": 5, "fail": {"node": 0}},
            {"at_s": 5, "recover": {"node": 1}},
            {"at_s": 50, "recover": {"node": 0}},
        ],
    )
    data["cluster"]["node_types"].append({"name": "big", "cpu": 2, "price_per_hour": 3600.0})
    data["cluster"]["nodes"] = [{"type": "big", "count": 1}, {"type": "n", "count": 1}]
    jobs, _ = run(data)
    assert jobs["start_s"].tolist() == [5.0, 50.0]
    assert jobs["end_s"].tolist() == [105.0, 150.0]


def test_a_drain_by_type_takes_up_nodes_not_down_ones() -> None:
    # Two nodes; node 0 fails at 1 s (timeline). A drain of one node of the type at 2 s
    # takes node 1 (up, idle: released at once), not the down node 0. The job arriving at
    # 3 s waits for node 0's recovery at 10 s.
    data = scenario(
        jobs=[(3.0, 1.0)],
        nodes=2,
        events=[
            {"at_s": 1, "fail": {"node": 0}},
            {"at_s": 2, "drain": {"type": "n", "count": 1}},
            {"at_s": 10, "recover": {"node": 0}},
        ],
    )
    jobs, _ = run(data)
    assert jobs["start_s"].tolist() == [10.0]


def test_set_rate_on_a_batch_class_is_refused() -> None:
    data = scenario(events=[{"at_s": 1, "set_rate": {"class": "j0", "rate_per_s": 2.0}}])
    with pytest.raises(ScenarioError, match=r"events\.0\.set_rate\.class: class 'j0' is a batch"):
        spec_from_dict(data)


def poisson_with_rates(first: float, later: float) -> dict[str, Any]:
    """One 28-core node; a Poisson class of 1-core, 1 s jobs at `first` jobs/s, then at
    `later` jobs/s from 100 s on (the timeline's set_rate)."""
    return {
        "name": "phases",
        "stop": {"time_s": 200.0},
        "cluster": {
            "node_types": [{"name": "n", "cpu": 28}],
            "nodes": [{"type": "n", "count": 1}],
        },
        "workload": {
            "classes": [
                {
                    "name": "web",
                    "arrival": {"kind": "poisson", "rate_per_s": first},
                    "size": {"kind": "exponential", "mean_s": 1.0},
                }
            ]
        },
        "events": [{"at_s": 100, "set_rate": {"class": "web", "rate_per_s": later}}],
    }


def test_the_stability_check_covers_every_rate_phase() -> None:
    # 40 jobs/s of 1 core-s on 28 cores before 100 s is unstable even though the rate
    # falls to 3/s afterwards (the check used to read only the last rate).
    with pytest.raises(ScenarioError, match="unstable load on the nodes before the timeline's"):
        spec_from_dict(poisson_with_rates(40.0, 3.0))
    with pytest.raises(ScenarioError, match=r"unstable load on the nodes from 100 s on"):
        spec_from_dict(poisson_with_rates(3.0, 40.0))
    spec_from_dict(poisson_with_rates(20.0, 3.0))  # stable in both phases


def test_retries_and_waste_count_the_jobs_past_the_warm_up_only() -> None:
    # Jobs 0 and 1 (10 s) run one after the other on one node; a timeline fail at 5 s and
    # recover at 6 s kills job 0. With job 0 in the warm-up, its retry and its 5 core-s of
    # waste are not in the summary (as failure_kills and lost_core_s were not), but the
    # per-job table keeps them.
    data = scenario(
        jobs=[(0.0, 10.0), (1.0, 10.0)],
        events=[{"at_s": 5, "fail": {"node": 0}}, {"at_s": 6, "recover": {"node": 0}}],
    )
    data["stop"] = {"jobs": 2, "warmup_jobs": 1}
    jobs, summary = run(data)
    assert jobs["retries"].tolist() == [1, 0]
    assert jobs["wasted_core_s"].tolist() == [5.0, 0.0]
    assert summary["retries"] == 0 and summary["wasted_core_s"] == 0.0
    assert summary["failure_kills"] == 0 and summary["lost_core_s"] == 0.0
    data["stop"] = {"jobs": 2}
    _, whole = run(data)
    assert whole["retries"] == 1 and whole["wasted_core_s"] == 5.0
