"""Node failures and the timeline (docs/faults.md): hand-computed micro-scenarios with exact
end times for every event kind, random failures from each node's own streams, the summary
keys, and the engine's invariants under faults (one loop, runs in pieces, both placer
paths)."""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import pytest

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.layout import IS, NF, NodeStatus
from clusteremu.cluster.policies.base import (
    Placement,
    PlacementView,
    Placer,
    Release,
    Rent,
    Scaler,
    ScaleView,
)
from clusteremu.scenarios.loader import spec_from_dict


def scenario(
    jobs: list[tuple[float, float]] | None = None,
    nodes: int = 1,
    events: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One-core nodes of type `n` and a trace of (arrival s, size core-s) jobs."""
    jobs = jobs if jobs is not None else [(0.0, 10.0)]
    data: dict[str, Any] = {
        "name": "faults",
        "stop": {"jobs": len(jobs)},
        "cluster": {
            "node_types": [{"name": "n", "cpu": 1, "price_per_hour": 3600.0}],
            "nodes": [{"type": "n", "count": nodes}],
        },
        "workload": {
            "classes": [
                {
                    "name": f"j{i}",
                    "arrival": {"kind": "batch", "count": 1, "at_s": at},
                    "size": {"kind": "deterministic", "value_s": size},
                }
                for i, (at, size) in enumerate(jobs)
            ]
        },
        "events": events or [],
    }
    for key, value in extra.items():
        data[key] = value
    return data


def run(data: dict[str, Any], **engine: Any) -> tuple[Any, Any]:
    result = Engine(spec_from_dict(copy.deepcopy(data)), **engine).run()
    return result.jobs.to_pandas().sort_values("arrival_s", kind="stable"), result.summary


def test_acceptance_fail_at_4_recover_at_7_ends_at_17_with_one_retry() -> None:
    data = scenario(events=[{"at_s": 4, "fail": {"node": 0}}, {"at_s": 7, "recover": {"node": 0}}])
    jobs, summary = run(data)
    assert jobs["end_s"].tolist() == [17.0]
    assert jobs["start_s"].tolist() == [7.0]
    assert jobs["retries"].tolist() == [1]
    assert jobs["failure_kills"].tolist() == [1]
    assert jobs["wasted_core_s"].tolist() == [4.0]
    # The node bills while down ($1 per second from 0 to the end, 17 s).
    assert summary["cost_usd"] == pytest.approx(17.0)


def test_fail_with_on_node_failure_fail_ends_the_job_at_the_failure() -> None:
    data = scenario(events=[{"at_s": 4, "fail": {"node": 0}}], on_node_failure="fail")
    jobs, summary = run(data)
    assert jobs["failed"].tolist() == [True]
    assert summary["failure_kills"] == 1 and summary["node_failures"] == 1


def test_a_down_node_takes_no_placement_and_the_other_node_does() -> None:
    # Node 0 fails at 1 while idle; the job arriving at 2 goes to node 1 (first fit skips
    # the down node), and node 0 is back at 5 for the job arriving at 6.
    data = scenario(
        jobs=[(2.0, 10.0), (6.0, 1.0)],
        nodes=2,
        events=[{"at_s": 1, "fail": {"node": 0}}, {"at_s": 5, "recover": {"node": 0}}],
    )
    jobs, _ = run(data)
    assert jobs["node"].tolist() == ["n-1", "n-0"]
    assert jobs["end_s"].tolist() == [12.0, 7.0]


def test_fail_and_recover_by_type_and_count() -> None:
    # Two of three nodes fail at 2 (the first two in node order; the timeline goes before
    # arrivals at one time); of the three jobs at 2 one goes to node 2 and two wait for
    # `recover {type, count: 1}` at 4 (node 0) and 6.
    data = scenario(
        jobs=[(2.0, 5.0), (2.0, 5.0), (2.0, 5.0)],
        nodes=3,
        events=[
            {"at_s": 2, "fail": {"type": "n", "count": 2}},
            {"at_s": 4, "recover": {"type": "n", "count": 1}},
            {"at_s": 6, "recover": {"type": "n", "count": 1}},
        ],
    )
    jobs, summary = run(data)
    assert sorted(jobs["end_s"].tolist()) == [7.0, 9.0, 11.0]
    assert summary["node_failures"] == 2
    assert summary["failure_kills"] == 0


def test_drain_lets_running_jobs_finish_then_releases_the_node() -> None:
    # Node 0 runs a 10 s job from 0; drained at 2 it takes no new job (the job at 3 goes
    # to node 1) and leaves at 10, when its job ends: its bill stops there.
    data = scenario(
        jobs=[(0.0, 10.0), (3.0, 20.0)], nodes=2, events=[{"at_s": 2, "drain": {"node": 0}}]
    )
    engine = Engine(spec_from_dict(data))
    result = engine.run()
    jobs = result.jobs.to_pandas()
    assert jobs["node"].tolist() == ["n-0", "n-1"]
    assert jobs["end_s"].tolist() == [10.0, 23.0]
    assert engine.nodes_i[1, 0] == NodeStatus.RELEASED
    assert engine.nodes_f[NF.RELEASED_AT, 0] == 10.0
    assert result.summary["cost_usd"] == pytest.approx(10.0 + 23.0)


def test_undrain_calls_a_drain_off_before_the_node_runs_empty() -> None:
    # Node 0 runs a 10 s job from 0, node 1 a 20 s job from 1; node 0 is drained at 2 and
    # undrained at 4: the job arriving at 5 starts on node 0 when its job ends (10, ends
    # 13) instead of waiting for node 1 (21) while node 0 leaves at 10; node 0 stays.
    jobs = [(0.0, 10.0), (1.0, 20.0), (5.0, 3.0)]
    for undrain in ({"node": 0}, {"type": "n", "count": 1}):
        events = [{"at_s": 2, "drain": {"node": 0}}, {"at_s": 4, "undrain": undrain}]
        engine = Engine(spec_from_dict(scenario(jobs=jobs, nodes=2, events=events)))
        table = engine.run().jobs.to_pandas()
        assert table["node"].tolist() == ["n-0", "n-1", "n-0"], undrain
        assert table["end_s"].tolist() == [10.0, 21.0, 13.0], undrain
        assert engine.nodes_i[1, 0] == NodeStatus.UP
        assert engine.nodes_f[NF.RELEASED_AT, 0] == math.inf
    # without the undrain: node 0 leaves at 10 and the third job waits for node 1
    events = [{"at_s": 2, "drain": {"node": 0}}]
    table = Engine(spec_from_dict(scenario(jobs=jobs, nodes=2, events=events))).run().jobs
    assert table.to_pandas()["end_s"].tolist() == [10.0, 21.0, 24.0]


def test_join_adds_nodes_up_after_the_start_up_delay() -> None:
    # One node busy until 10; the second job waits; two nodes join at 3 and are up at 5.
    data = scenario(
        jobs=[(0.0, 10.0), (0.0, 4.0)], events=[{"at_s": 3, "join": {"type": "n", "count": 2}}]
    )
    data["cluster"]["node_types"][0]["startup_delay_s"] = 2.0
    jobs, summary = run(data)
    assert jobs["end_s"].tolist() == [10.0, 9.0]
    assert jobs["node"].tolist()[1] == "n-1"
    assert summary["nodes_rented"] == 2


def test_set_speedup_applies_to_jobs_started_after_it() -> None:
    # Two-core jobs on a two-core node under Amdahl p = 0 (no speed-up): the job at 0 runs
    # 10 s; after set_speedup to p = 1 at 12, the job at 12 runs 10 / 2 = 5 s.
    data = scenario(
        jobs=[(0.0, 10.0), (12.0, 10.0)],
        events=[
            {
                "at_s": 12,
                "set_speedup": {
                    "class": "j1",
                    "speedup": {"kind": "amdahl", "parallel_fraction": 1.0},
                },
            }
        ],
    )
    data["cluster"]["node_types"][0]["cpu"] = 2
    for c in data["workload"]["classes"]:
        c["request"] = {"cpu": 2}
        c["speedup"] = {"kind": "amdahl", "parallel_fraction": 0.0}
    jobs, _ = run(data)
    assert jobs["end_s"].tolist() == [10.0, 17.0]


def rate_scenario(events: list[dict[str, Any]]) -> dict[str, Any]:
    data = scenario(events=events)
    data["stop"] = {"time_s": 200.0}
    data["workload"]["classes"] = [
        {
            "name": "a",
            "arrival": {"kind": "poisson", "rate_per_s": 1.0},
            "size": {"kind": "deterministic", "value_s": 0.01},
        }
    ]
    return data


def test_set_rate_keeps_the_arrivals_before_it_and_changes_the_rate_after() -> None:
    plain, _ = run(rate_scenario([]))
    faster, _ = run(rate_scenario([{"at_s": 100, "set_rate": {"class": "a", "rate_per_s": 10.0}}]))
    stopped, _ = run(rate_scenario([{"at_s": 100, "set_rate": {"class": "a", "rate_per_s": 0.0}}]))
    before = plain["arrival_s"][plain["arrival_s"] < 100].to_numpy()
    for other in (faster, stopped):
        np.testing.assert_array_equal(
            other["arrival_s"][other["arrival_s"] < 100].to_numpy(), before
        )
    assert (stopped["arrival_s"] >= 100).sum() == 0
    late = int((faster["arrival_s"] >= 100).sum())
    assert abs(late - 1000) < 4 * math.sqrt(1000)  # Poisson(10/s x 100 s)


def test_random_failures_with_deterministic_up_and_down_times() -> None:
    # Up 5 s, down 1 s, from time 0: the node fails at 5, 11, 17, ... A 4 s job arriving at
    # 3 is killed at 5, restarts at 6 and ends at 10; a 3 s job arriving at 12 ends at 15.
    data = scenario(jobs=[(3.0, 4.0), (12.0, 3.0)])
    data["stop"] = {"time_s": 20.0}
    data["cluster"]["node_types"][0]["failures"] = {
        "up": {"kind": "deterministic", "value_s": 5},
        "down": {"kind": "deterministic", "value_s": 1},
    }
    jobs, summary = run(data)
    assert jobs["end_s"].tolist() == [10.0, 15.0]
    assert jobs["retries"].tolist() == [1, 0]
    # Failures at 5, 11 and 17, down 3 of 20 s; one kill losing 2 core-seconds.
    assert summary["node_failures"] == 3
    assert summary["failure_kills"] == 1
    assert summary["lost_core_s"] == pytest.approx(2.0)
    assert summary["availability"] == pytest.approx(17.0 / 20.0)


def test_failure_draws_are_refilled_and_match_one_long_draw() -> None:
    # More failures than one block of draws: the run refills from the node's stream.
    data = scenario(jobs=[(0.0, 1.0)])
    data["stop"] = {"time_s": 10_000.0}
    data["cluster"]["node_types"][0]["failures"] = {"mtbf_s": 10.0, "mttr_s": 1.0}
    _, summary = run(data)
    assert 800 < summary["node_failures"] < 1000  # about 10,000 / 11
    assert summary["availability"] == pytest.approx(10 / 11, abs=0.02)


def two_type_spec(b_fails: bool) -> Any:
    data = scenario(jobs=[(0.0, 1.0)], nodes=2)
    data["cluster"]["node_types"].append({"name": "b", "cpu": 1})
    data["cluster"]["nodes"].append({"type": "b", "count": 2})
    data["cluster"]["node_types"][0]["failures"] = {"mtbf_s": 10.0, "mttr_s": 1.0}
    if b_fails:
        data["cluster"]["node_types"][1]["failures"] = {"mtbf_s": 5.0, "mttr_s": 1.0}
    data["stop"] = {"time_s": 100.0}
    data["workload"]["classes"][0]["arrival"] = {"kind": "poisson", "rate_per_s": 0.5}
    data["workload"]["classes"][0]["size"] = {"kind": "exponential", "mean_s": 1.0}
    return spec_from_dict(data)


def test_each_node_draws_from_its_own_streams() -> None:
    without, with_b = Engine(two_type_spec(False)), Engine(two_type_spec(True))
    # Type n's nodes draw the same up and down times whether type b fails or not ...
    np.testing.assert_array_equal(without.state.fault_draws[:2], with_b.state.fault_draws[:2])
    # ... two nodes of a type draw different times, and the jobs are the same.
    assert not np.array_equal(with_b.state.fault_draws[0], with_b.state.fault_draws[1])
    assert not np.array_equal(with_b.state.fault_draws[2], with_b.state.fault_draws[3])
    np.testing.assert_array_equal(without.jobs.arrival_s, with_b.jobs.arrival_s)
    np.testing.assert_array_equal(without.jobs.size, with_b.jobs.size)


def busy_failing_spec(**extra: Any) -> Any:
    """M/M/3 at load 0.9 whose nodes fail often: many kills and stale heap entries."""
    data = scenario(nodes=3, **extra)
    data["stop"] = {"jobs": 20_000, "warmup_jobs": 100}
    data["workload"]["classes"] = [
        {
            "name": "a",
            "arrival": {"kind": "poisson", "rate_per_s": 2.4},
            "size": {"kind": "exponential", "mean_s": 1.0},
        }
    ]
    data["cluster"]["node_types"][0]["failures"] = {"mtbf_s": 3.0, "mttr_s": 0.5}
    data["events"] = [
        {"at_s": 100, "fail": {"type": "n", "count": 2}},
        {"at_s": 150, "recover": {"type": "n", "count": 2}},
        {"at_s": 300, "join": {"type": "n", "count": 1}},
        {"at_s": 400, "drain": {"node": 1}},
    ]
    return spec_from_dict(data)


def test_a_run_in_pieces_equals_the_run_in_one_go_under_faults() -> None:
    whole = Engine(busy_failing_spec()).run()
    engine = Engine(busy_failing_spec())
    t = 0.0
    while engine.step(until_s=t, max_events=997) != 0:
        t += 13.0
    pieces = engine.result()
    assert whole.summary["failure_kills"] > 1000
    assert whole.jobs.equals(pieces.jobs)
    assert engine.state.istate[IS.HEAP_OVERFLOW] == 0


def test_python_placer_path_equals_the_compiled_one_under_faults() -> None:
    compiled = Engine(busy_failing_spec()).run()
    python = Engine(busy_failing_spec(), force_python_policies=True).run()
    assert compiled.jobs.equals(python.jobs)
    assert compiled.summary["node_failures"] == python.summary["node_failures"]


def test_redraw_gives_killed_jobs_fresh_sizes_and_same_keeps_them() -> None:
    """Under `redraw` the table keeps each job's original `size` and lists, in
    `sizes_drawn`, one fresh size per failure kill (the last is the one it completed);
    under `same` there is nothing to list."""
    same = Engine(busy_failing_spec(restart_work="same")).run().jobs.to_pandas()
    redraw = Engine(busy_failing_spec()).run().jobs.to_pandas()  # the default
    drawn = Engine(busy_failing_spec()).jobs.size
    np.testing.assert_array_equal(same["size"].to_numpy(), drawn)
    assert "sizes_drawn" not in same
    np.testing.assert_array_equal(redraw["size"].to_numpy(), drawn)
    kills = redraw["failure_kills"].to_numpy()
    assert (kills > 0).sum() > 100
    counts = redraw["sizes_drawn"].map(len).to_numpy()
    np.testing.assert_array_equal(counts, kills)
    fresh = [d[-1] for d, k in zip(redraw["sizes_drawn"], kills, strict=True) if k > 0]
    assert np.all(np.asarray(fresh) != drawn[kills > 0])


def test_no_faults_no_fault_keys() -> None:
    _, summary = run(scenario())
    assert "node_failures" not in summary


BAD_EVENTS = {
    "unknown node": (
        {"at_s": 1, "fail": {"node": 5}},
        "events.1.fail.node: expected a node index below 2",
    ),
    "unknown type": (
        {"at_s": 1, "join": {"type": "gpu", "count": 1}},
        "events.1.join.type: expected one of the node types ['n']",
    ),
    "unknown class": (
        {"at_s": 1, "set_rate": {"class": "b", "rate_per_s": 2}},
        "events.1.set_rate.class: expected one of the classes",
    ),
    "past the stop": (
        {"at_s": 500, "recover": {"node": 0}},
        "events.1.at_s: expected a time at or before stop.time_s = 100 s",
    ),
    "negative count": (
        {"at_s": 1, "drain": {"type": "n", "count": -1}},
        "events.1.drain.count: expected greater than or equal to 1",
    ),
    "two actions": (
        {"at_s": 1, "fail": {"node": 0}, "drain": {"node": 0}},
        "events.1: expected exactly one action",
    ),
    "node and type": (
        {"at_s": 1, "fail": {"node": 0, "type": "n"}},
        "events.1.fail: give exactly one of node or type",
    ),
    "unknown action": ({"at_s": 1, "explode": {"node": 0}}, "events.1.explode: unknown field"),
    "other speed-up kind": (
        {"at_s": 1, "set_speedup": {"class": "a", "speedup": {"kind": "power", "exponent": 0.5}}},
        "events.1.set_speedup.speedup.kind: expected linear",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_EVENTS))
def test_a_bad_timeline_event_is_refused_naming_its_index_and_field(
    case: str, tmp_path: Any
) -> None:
    import yaml

    from tests.clusteremu.badinput import refused

    event, expect = BAD_EVENTS[case]
    data = rate_scenario([{"at_s": 0, "fail": {"node": 1}}, event])
    data["stop"] = {"time_s": 100.0}
    data["cluster"]["nodes"][0]["count"] = 2
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    refused(["run", str(path), "--out", str(tmp_path / "out")], "run", "timeline event", expect)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("failures", "expect"),
    [
        ({"mtbf_s": 10}, "failures: give exactly one of mttr_s or down"),
        ({"mtbf_s": 10, "up": {"kind": "exponential", "mean_s": 1}, "mttr_s": 1}, "mtbf_s or up"),
        ({"mtbf_s": -1, "mttr_s": 1}, "failures.mtbf_s: expected greater than 0"),
        (
            {"up": {"kind": "empirical", "values_s": [0, 1]}, "mttr_s": 1},
            "up: expected times > 0",
        ),
    ],
)
def test_a_bad_failure_model_is_refused(
    failures: dict[str, Any], expect: str, tmp_path: Any
) -> None:
    import yaml

    from tests.clusteremu.badinput import refused

    data = rate_scenario([])
    data["cluster"]["node_types"][0]["failures"] = failures
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    refused(["validate", str(path)], "validate", "failure model", expect)


class ReplaceFailed(Scaler):
    """Rents one node of the failed node's type for every node seen down the first time."""

    name = "test-replace-failed"

    def __init__(self) -> None:
        self.replaced: set[int] = set()

    def scale(self, view: ScaleView) -> list[Rent | Release]:
        down = [int(k) for k in np.flatnonzero(view.node_status == NodeStatus.DOWN)]
        new = [k for k in down if k not in self.replaced]
        self.replaced.update(new)
        return [Rent(view.node_type_names[int(view.node_type[k])]) for k in new]


def test_a_scaler_sees_the_failure_and_rents_a_replacement() -> None:
    # The only node fails at 4 for good; the scaler rents a replacement (up after 1 s), where
    # the killed 10 s job runs again from 5 to 15.
    data = scenario(events=[{"at_s": 4, "fail": {"node": 0}}])
    data["cluster"]["node_types"][0].update(startup_delay_s=1.0, rentable=True)
    engine = Engine(spec_from_dict(data), scaler=ReplaceFailed())
    jobs = engine.run().jobs.to_pandas()
    assert jobs["end_s"].tolist() == [15.0]
    assert jobs["node"].tolist() == ["n-1"]
    assert engine.nodes_i[1, 0] == NodeStatus.DOWN


def test_a_placer_sees_each_node_status() -> None:
    seen: list[list[int]] = []

    class Recording(Placer):
        name = "test-recording"

        def place(self, view: PlacementView) -> list[Placement]:
            seen.append(view.node_status.tolist())
            up = np.flatnonzero(view.active & (view.free_slots >= 1) & (view.free_cpu >= 1))
            return [Placement(int(j), int(k)) for j, k in zip(view.queue, up, strict=False)]

    data = scenario(
        jobs=[(0.0, 1.0), (5.0, 1.0)], nodes=2, events=[{"at_s": 2, "fail": {"node": 0}}]
    )
    Engine(spec_from_dict(data), placer=Recording()).run()
    assert seen == [[NodeStatus.UP, NodeStatus.UP], [NodeStatus.DOWN, NodeStatus.UP]]


def test_the_timeline_samples_nodes_queue_and_failures() -> None:
    from clusteremu.cluster.timeline import sample_timeline

    # One node down from 4 to 7 s; a 10 s job at 0 and a 1 s job at 5 (waits until 17).
    data = scenario(
        jobs=[(0.0, 10.0), (5.0, 1.0)],
        events=[{"at_s": 4, "fail": {"node": 0}}, {"at_s": 7, "recover": {"node": 0}}],
    )
    whole = Engine(spec_from_dict(data)).run()
    result, timeline = sample_timeline(Engine(spec_from_dict(data)), every_s=2.0)
    assert whole.jobs.equals(result.jobs)  # sampling changes nothing
    assert timeline.time_s.tolist() == [0, 2, 4, 6, 8, 10, 12, 14, 16, 18]
    assert timeline.nodes_up.tolist() == [1, 1, 0, 0, 1, 1, 1, 1, 1, 1]
    assert timeline.nodes_down.tolist() == [0, 0, 1, 1, 0, 0, 0, 0, 0, 0]
    assert timeline.jobs_waiting.tolist() == [0, 0, 1, 2, 1, 1, 1, 1, 1, 0]
    assert timeline.node_failures.tolist() == [0, 0, 1, 1, 1, 1, 1, 1, 1, 1]


def test_set_speedup_changes_a_running_malleable_job_at_once() -> None:
    # A pool of 2 cores, one job of 10 core-s under Amdahl p = 0: rate 1 until 4 s, then
    # p = 1 makes 2 cores worth 2: the 6 left take 3 s, so it ends at 7.
    data = scenario(
        events=[
            {
                "at_s": 4,
                "set_speedup": {
                    "class": "j0",
                    "speedup": {"kind": "amdahl", "parallel_fraction": 1.0},
                },
            }
        ]
    )
    data["cluster"] = {"pools": [{"name": "p", "cores": 2}]}
    data["workload"]["classes"][0].update(
        pool="p", speedup={"kind": "amdahl", "parallel_fraction": 0.0}
    )
    jobs, _ = run(data)
    assert jobs["end_s"].tolist() == [pytest.approx(7.0)]


def test_the_failure_model_is_a_field_sweeps_and_overrides_can_set() -> None:
    from clusteremu import load_scenario

    spec = load_scenario("faults-rack", ["cluster.node_types.0.failures.mtbf_s=1800"])
    failures = spec.node_types[0].failures
    assert failures is not None and failures.up.mean == 1800.0 and failures.down.mean == 300.0
