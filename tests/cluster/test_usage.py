"""Requests vs real usage in the engine: out-of-memory kills, lift-and-retry, retry limits,
CPU stretching, reserved/used accounting, dropping waiting jobs (`clusteremu.cluster.usage`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.jobs import Jobs
from clusteremu.cluster.layout import JI, JobState
from clusteremu.cluster.policies.base import LiftRule, OomKill, PolicyError
from clusteremu.cluster.policies.fifo import Static
from clusteremu.cluster.usage import Usage
from clusteremu.scenarios.errors import ScenarioError
from clusteremu.scenarios.loader import spec_from_dict


def one_job(
    usage: dict[str, Any] | None = None,
    request: dict[str, Any] | None = None,
    provisioner: dict[str, Any] | None = None,
    cpu_rule: str | None = None,
    count: int = 1,
    cores: float = 8,
) -> dict[str, Any]:
    """`count` jobs of 100 s (deterministic, speed 1, linear speed-up) at t=0 on one node."""
    cls: dict[str, Any] = {
        "name": "a",
        "arrival": {"kind": "batch", "count": count, "at_s": 0.0},
        "size": {"kind": "deterministic", "value_s": 100.0},
        "request": request or {"cpu": 1, "memory_gb": 4},
    }
    if usage is not None:
        cls["usage"] = usage
    data: dict[str, Any] = {
        "name": "usage",
        "seed": 1,
        "stop": {"jobs": count},
        "cluster": {
            "node_types": [{"name": "n", "cpu": cores, "memory_gb": 64}],
            "nodes": [{"type": "n", "count": 1}],
        },
        "workload": {"classes": [cls]},
    }
    if cpu_rule is not None:
        data["workload"]["usage"] = {"cpu_rule": cpu_rule}
    if provisioner is not None:
        data["scheduler"] = {"provisioner": provisioner}
    return data


def deterministic(value: float) -> dict[str, Any]:
    return {"kind": "deterministic", "value_s": value}


def test_memory_above_request_is_killed_at_its_peak_and_retried_with_a_lifted_request() -> None:
    spec = spec_from_dict(one_job({"memory_gb": deterministic(6.0), "peak_at": 0.5}))
    run = Engine(spec).run()
    row = run.jobs.to_pylist()[0]
    # Killed at 0 + 0.5 x 100 s; 50 core-seconds lost; re-queued with 2 x 4 GB; runs 100 s.
    assert row["oom_kills"] == 1 and row["retries"] == 1
    assert row["wasted_core_s"] == pytest.approx(50.0)
    assert row["request_memory_gb"] == pytest.approx(8.0)
    assert row["start_s"] == pytest.approx(50.0) and row["end_s"] == pytest.approx(150.0)
    assert row["usage_memory_gb"] == pytest.approx(6.0)
    # Reserved: 4 GB x 50 s + 8 GB x 100 s; used: 4 GB (the limit it hit) x 50 + 6 x 100.
    assert row["reserved_memory_gb_s"] == pytest.approx(4 * 50 + 8 * 100)
    assert row["used_memory_gb_s"] == pytest.approx(4 * 50 + 6 * 100)
    s = run.summary
    assert s["oom_kills"] == 1 and s["retries"] == 1 and s["failed_jobs"] == 0
    assert s["reserved_memory_gb_h"] == pytest.approx((4 * 50 + 8 * 100) / 3600)
    assert s["reserved_cpu_core_h"] == pytest.approx(150 / 3600)
    assert s["jobs_completed"] == 1


def test_retry_limit_zero_fails_the_job_at_its_first_peak() -> None:
    spec = spec_from_dict(
        one_job(
            {"memory_gb": deterministic(6.0), "peak_at": 0.25},
            provisioner={"name": "static", "params": {"retry_limit": 0}},
        )
    )
    run = Engine(spec).run()
    row = run.jobs.to_pylist()[0]
    assert row["failed"] and row["oom_kills"] == 1 and row["retries"] == 0
    assert row["end_s"] is None or np.isnan(row["end_s"])
    assert run.summary["failed_jobs"] == 1 and run.summary["jobs_completed"] == 0
    assert row["wasted_core_s"] == pytest.approx(25.0)


def test_retries_stop_at_the_limit() -> None:
    # 4 -> 8 -> 16 GB never reaches 40 GB: two retries, then it fails at its third peak.
    spec = spec_from_dict(
        one_job(
            {"memory_gb": deterministic(40.0), "peak_at": 1.0},
            provisioner={"name": "static", "params": {"retry_limit": 2}},
        )
    )
    run = Engine(spec).run()
    row = run.jobs.to_pylist()[0]
    assert (row["oom_kills"], row["retries"], row["failed"]) == (3, 2, True)
    assert row["wasted_core_s"] == pytest.approx(300.0)


def test_memory_within_request_completes_untouched() -> None:
    spec = spec_from_dict(one_job({"memory_gb": deterministic(3.0), "peak_at": 0.5}))
    row = Engine(spec).run().jobs.to_pylist()[0]
    assert row["oom_kills"] == 0 and row["end_s"] == pytest.approx(100.0)
    assert row["used_memory_gb_s"] == pytest.approx(300.0)


@pytest.mark.parametrize(("rule", "end"), [("proportional", 50.0), ("none", 25.0)])
def test_cpu_under_provisioning_stretches_the_run_time(rule: str, end: float) -> None:
    # 100 core-seconds keeping 4 cores busy: 25 s with them; granted 2, twice as long under
    # the proportional rule (size / min(granted, used) with a linear speed-up).
    spec = spec_from_dict(
        one_job({"cpu": deterministic(4.0)}, request={"cpu": 2, "memory_gb": 1}, cpu_rule=rule)
    )
    row = Engine(spec).run().jobs.to_pylist()[0]
    assert row["end_s"] == pytest.approx(end)
    assert row["usage_cpu"] == pytest.approx(4.0)
    # It can use no more than the 2 cores it holds.
    assert row["used_cpu_core_s"] == pytest.approx(2 * end)


def test_cpu_over_provisioning_does_not_speed_up() -> None:
    # 100 core-seconds keeping half a core busy take 200 s, even granted 4 cores.
    spec = spec_from_dict(one_job({"cpu": deterministic(0.5)}, request={"cpu": 4}))
    row = Engine(spec).run().jobs.to_pylist()[0]
    assert row["end_s"] == pytest.approx(200.0)
    assert row["used_cpu_core_s"] == pytest.approx(100.0)
    assert row["reserved_cpu_core_s"] == pytest.approx(800.0)


class Shrinking(Static):
    name = "shrinking"

    def lift(self, kill: OomKill) -> tuple[float, float]:
        return kill.request_cpu, kill.request_memory_gb


def test_a_lift_that_does_not_grow_the_request_is_a_policy_error() -> None:
    spec = spec_from_dict(one_job({"memory_gb": deterministic(6.0)}))
    with pytest.raises(PolicyError, match="must grow the memory request"):
        Engine(spec, provisioner=Shrinking()).run()


class Vpa(Static):
    """The VPA out-of-memory rule: max(used + 100 MiB, 1.2 x used)."""

    name = "vpa-lift"
    seen: list[OomKill]

    def __init__(self) -> None:
        super().__init__()
        self.seen = []

    def lift(self, kill: OomKill) -> tuple[float, float]:
        self.seen.append(kill)
        used = kill.used_memory_gb
        return kill.request_cpu, max(used + 100 / 1024, 1.2 * used)


def test_the_provisioner_sees_each_kill_and_its_lift_applies() -> None:
    spec = spec_from_dict(one_job({"memory_gb": deterministic(5.0), "peak_at": 0.5}))
    policy = Vpa()
    row = Engine(spec, provisioner=policy).run().jobs.to_pylist()[0]
    # 4 -> 4.8 (killed again at 50 + 50) -> 5.76 GB: two kills, then done at 200 s.
    assert [k.request_memory_gb for k in policy.seen] == pytest.approx([4.0, 4.8])
    assert [k.time_s for k in policy.seen] == pytest.approx([50.0, 100.0])
    assert [k.retries for k in policy.seen] == [0, 1]
    assert row["request_memory_gb"] == pytest.approx(5.76)
    assert row["end_s"] == pytest.approx(200.0)


def test_usage_draws_are_seeded_and_do_not_move_other_streams() -> None:
    base = one_job(count=50)
    with_usage = one_job(
        {"memory_gb": {"kind": "exponential", "mean_s": 4.0}, "peak_at": 0.5}, count=50
    )
    a = Engine(spec_from_dict(with_usage)).run().jobs
    b = Engine(spec_from_dict(with_usage)).run().jobs
    assert a.equals(b)
    plain = Engine(spec_from_dict(base)).jobs
    assert np.array_equal(Engine(spec_from_dict(with_usage)).jobs.size, plain.size)


def test_jobs_given_directly_carry_usage_features_and_requests() -> None:
    spec = spec_from_dict(one_job(count=2))
    jobs = Jobs(
        np.zeros(2),
        np.zeros(2, dtype=np.int64),
        np.array([100.0, 100.0]),
        usage=Usage(np.full(2, np.nan), np.array([1.0, 9.0]), np.array([1.0, 0.5])),
        features={"products": np.array([3.0, 7.0])},
        request=(np.array([1.0, 2.0]), np.array([2.0, 8.0]), np.zeros(2)),
    )
    rows = Engine(spec, jobs=jobs).run().jobs.to_pylist()
    assert [r["request_cpu"] for r in rows] == [1.0, 2.0]
    # Job 1 asked for 8 GB and peaks at 9 GB halfway: killed at 50 s, lifted to 16 GB.
    assert [r["oom_kills"] for r in rows] == [0, 1]
    assert rows[1]["request_memory_gb"] == pytest.approx(16.0)
    assert jobs.select(np.array([1])).features["products"].tolist() == [7.0]


def test_drop_takes_a_waiting_job_out_of_the_queue() -> None:
    spec = spec_from_dict(one_job(count=3, request={"cpu": 8}, cores=8))
    engine = Engine(spec, force_python_policies=True)
    engine.step(until_s=0.0)
    waiting = [j for j in range(3) if engine.jobs_i[JI.STATE, j] == JobState.QUEUED]
    assert waiting == [1, 2]
    engine.drop(2)
    with pytest.raises(ValueError, match="not waiting"):
        engine.drop(2)
    run = engine.run()
    rows = run.jobs.to_pylist()
    assert [r["failed"] for r in rows] == [False, False, True]
    assert rows[1]["end_s"] == pytest.approx(25.0)  # 100 core-s on 8 cores, after job 0
    assert run.summary["jobs_dropped"] == 1


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d["workload"]["classes"][0].update(usage={"peak_at": 1.5}), "peak_at"),
        (
            lambda d: d["workload"].update(usage={"model": "nope"}),
            "workload.usage.model",
        ),
        (
            lambda d: d["workload"].update(usage={"params": {"x": 1}}),
            "workload.usage.params",
        ),
        (
            lambda d: d.update(
                scheduler={"provisioner": {"name": "static", "params": {"retry_limit": -1}}}
            ),
            "scheduler.provisioner.params",
        ),
        (
            lambda d: d["workload"]["classes"][0].update(
                usage={"memory_gb": {"kind": "exponential", "mean_s": -1}}
            ),
            "usage.memory_gb",
        ),
    ],
)
def test_bad_usage_input_names_the_field(change: Any, field: str) -> None:
    data = one_job()
    change(data)
    with pytest.raises(ScenarioError, match=field.replace(".", r"\.")):
        spec_from_dict(data, source="usage.yaml")


class Binned(Static):
    """Next bin edge (4, 10, 24 GB for class 0), capped at 20 GB: a compiled LiftRule."""

    name = "binned"

    def lift_rule(self) -> LiftRule:
        return LiftRule(1.0, 1e-9, edges=((4.0, 10.0, 24.0),), cap_gb=(20.0,))


class BinnedInPython(Binned):
    """The same rule, applied through the Python call-back."""

    name = "binned-python"

    def lift(self, kill: OomKill) -> tuple[float, float] | None:
        mem = LiftRule(1.0, 1e-9, edges=((4.0, 10.0, 24.0),), cap_gb=(20.0,)).next_request(
            kill.class_index, kill.request_memory_gb
        )
        return None if mem is None else (kill.request_cpu, mem)

    def compiled_lift(self) -> None:
        return None


@pytest.mark.parametrize("policy", [Binned, BinnedInPython])
def test_a_binned_lift_rule_moves_to_the_next_edge_and_stops_at_its_cap(policy: type) -> None:
    # 4 GB hits a 30 GB peak: 10, then 20 (24 capped at 20), then the cap: fails.
    spec = spec_from_dict(one_job({"memory_gb": deterministic(30.0), "peak_at": 0.5}))
    row = Engine(spec, provisioner=policy()).run().jobs.to_pylist()[0]
    assert (row["oom_kills"], row["retries"], row["failed"]) == (3, 2, True)
    assert row["request_memory_gb"] == pytest.approx(20.0)
    assert row["wasted_core_s"] == pytest.approx(150.0)


def test_compiled_and_python_lifts_give_identical_runs() -> None:
    data = one_job(
        {"memory_gb": {"kind": "lognormal", "mu": 1.2, "sigma": 0.6}, "peak_at": 0.7},
        request={"cpu": 1, "memory_gb": 4},
        count=3000,
    )
    data["workload"]["classes"][0]["arrival"] = {"kind": "poisson", "rate_per_s": 0.07}
    spec = spec_from_dict(data)
    compiled = Engine(spec, provisioner=Binned()).run()
    python = Engine(spec, provisioner=BinnedInPython()).run()
    assert compiled.summary["oom_kills"] > 100 and compiled.summary["failed_jobs"] > 0
    # pandas' equals treats NaN (failed jobs' end) as equal to NaN.
    assert compiled.jobs.to_pandas().equals(python.jobs.to_pandas())


def test_many_out_of_memory_kills_before_later_arrivals_find_queue_room() -> None:
    # Regression: re-queued jobs took the queue entries of jobs still to arrive.
    data = one_job(
        {"memory_gb": {"kind": "lognormal", "mu": 1.3863, "sigma": 0.6}, "peak_at": 0.7},
        request={"cpu": 2, "memory_gb": 8},
        count=5000,
    )
    data["workload"]["classes"][0]["arrival"] = {"kind": "poisson", "rate_per_s": 3.6}
    data["workload"]["classes"][0]["size"] = {"kind": "exponential", "mean_s": 2.0}
    run = Engine(spec_from_dict(data)).run()
    assert run.summary["oom_kills"] > 100
    assert run.summary["jobs_completed"] + run.summary["failed_jobs"] == 5000


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"multiplier": 1.0, "add_gb": 0.0}, "never grow"),
        ({"multiplier": 0.5}, "multiplier must be >= 1"),
        ({"edges": ((4.0, 2.0),)}, "strictly ascending"),
    ],
)
def test_a_lift_rule_that_cannot_grow_is_refused(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        LiftRule(**kwargs)


def outgrows_its_node(rentable_gb: float | None = None) -> dict[str, Any]:
    """One 8 GB node; a 4 GB job peaking at 20 GB a quarter into its 100 s (killed at 25 s
    and 50 s: 4 -> 8 -> 16 GB), then a 1 GB job arriving at 200 s. With `rentable_gb`, a
    rentable node type of that memory the run may rent (no scaler rents it here)."""
    data = one_job(
        {"memory_gb": deterministic(20.0), "peak_at": 0.25},
        provisioner={"name": "static", "params": {"retry_limit": 5}},
    )
    data["cluster"]["node_types"][0]["memory_gb"] = 8
    data["workload"]["classes"].append(
        {
            "name": "small",
            "arrival": {"kind": "batch", "count": 1, "at_s": 200.0},
            "size": deterministic(10.0),
            "request": {"cpu": 1, "memory_gb": 1},
        }
    )
    data["stop"] = {"jobs": 2}
    if rentable_gb is not None:
        data["cluster"]["node_types"].append(
            {
                "name": "big",
                "cpu": 8,
                "memory_gb": rentable_gb,
                "rentable": True,
                "price_per_hour": 1.0,
            }
        )
    return data


class DoublingInPython(Static):
    """Static's doubling, through the Python call-back (`lift`)."""

    name = "doubling-python"

    def lift(self, kill: OomKill) -> tuple[float, float]:
        return kill.request_cpu, 2.0 * kill.request_memory_gb

    def compiled_lift(self) -> None:
        return None


@pytest.mark.parametrize("provisioner", [None, DoublingInPython, BinnedInPython])
@pytest.mark.parametrize("python_placer", [False, True])
def test_a_lifted_request_no_node_can_hold_fails_the_job_instead_of_waiting(
    provisioner: type | None, python_placer: bool
) -> None:
    # Static doubling has no cap: 16 GB fits no 8 GB node. The job must fail (it used to
    # wait forever and block the queue: the 1 GB job behind it never ran).
    spec = spec_from_dict(outgrows_its_node())
    policy = provisioner() if provisioner is not None else None
    run = Engine(spec, provisioner=policy, force_python_policies=python_placer).run()
    big, small = run.jobs.to_pylist()
    assert big["failed"] and big["request_memory_gb"] > 8.0
    assert small["end_s"] == pytest.approx(210.0) and not small["failed"]
    s = run.summary
    assert (s["jobs_failed"], s["failed_jobs"], s["failed_no_fit"]) == (1, 1, 1)
    assert (s["jobs_unfinished"], s["jobs_completed"]) == (0, 1)


def test_the_static_doubling_fails_at_the_lift_past_the_largest_node() -> None:
    run = Engine(spec_from_dict(outgrows_its_node())).run()
    big = run.jobs.to_pylist()[0]
    # Killed at 25 s (4 GB) and at 50 s (8 GB); 16 GB fits no node: failed at 50 s.
    assert (big["oom_kills"], big["retries"], big["request_memory_gb"]) == (2, 1, 16.0)
    assert big["wasted_core_s"] == pytest.approx(50.0)


def test_a_lifted_request_a_rentable_type_could_hold_still_waits() -> None:
    # A 32 GB type may be rented: the job waits for it (no scaler here rents one).
    run = Engine(spec_from_dict(outgrows_its_node(rentable_gb=32.0))).run()
    big = run.jobs.to_pylist()[0]
    assert not big["failed"] and big["request_memory_gb"] == pytest.approx(16.0)
    assert run.summary["failed_no_fit"] == 0 and run.summary["jobs_unfinished"] == 2


def test_attempts_running_at_a_time_stop_count_up_to_the_stop() -> None:
    # Killed at 50 s (4 GB, peak 6 GB at half its 100 s), re-queued with 8 GB and running
    # when the run stops at 80 s: its 30 s so far count, as they do in core_seconds.
    data = one_job({"memory_gb": deterministic(6.0), "peak_at": 0.5})
    data["stop"] = {"time_s": 80.0}
    run = Engine(spec_from_dict(data)).run()
    row = run.jobs.to_pylist()[0]
    assert row["start_s"] == pytest.approx(50.0) and row["core_seconds"] == pytest.approx(30.0)
    assert row["reserved_memory_gb_s"] == pytest.approx(4 * 50 + 8 * 30)
    assert row["used_memory_gb_s"] == pytest.approx(4 * 50 + 6 * 30)
    assert row["reserved_cpu_core_s"] == pytest.approx(80.0)
    assert row["used_cpu_core_s"] == pytest.approx(80.0)
    s = run.summary
    assert s["reserved_memory_gb_h"] == pytest.approx((4 * 50 + 8 * 30) / 3600)
    assert s["used_memory_gb_h"] == pytest.approx((4 * 50 + 6 * 30) / 3600)
    assert s["reserved_cpu_core_h"] == pytest.approx(80 / 3600)
    assert s["used_cpu_core_h"] == pytest.approx(80 / 3600)


def test_a_running_attempt_uses_at_most_what_it_holds_up_to_the_stop() -> None:
    # 2 cores and 4 GB requested, 1 core and 3 GB used; stopped at 40 s of its 100 s.
    data = one_job(
        {"memory_gb": deterministic(3.0), "cpu": deterministic(1.0)},
        request={"cpu": 2, "memory_gb": 4},
    )
    data["stop"] = {"time_s": 40.0}
    row = Engine(spec_from_dict(data)).run().jobs.to_pylist()[0]
    assert row["core_seconds"] == pytest.approx(80.0)
    assert (row["reserved_cpu_core_s"], row["used_cpu_core_s"]) == pytest.approx((80.0, 40.0))
    assert (row["reserved_memory_gb_s"], row["used_memory_gb_s"]) == pytest.approx((160.0, 120.0))


@pytest.mark.parametrize("params", [{"lift": "double"}, {"lift_factor": 3.0}])
def test_static_takes_no_lift_parameter(params: dict[str, Any]) -> None:
    # docs/provisioner.md: static doubles with no cap; only the learning provisioners take
    # `lift` (capped at the static allocation, which static's own request is).
    data = one_job(provisioner={"name": "static", "params": params})
    with pytest.raises(ScenarioError, match=r"scheduler\.provisioner\.params"):
        spec_from_dict(data)


def test_static_doubles_without_a_cap_while_a_node_holds_the_request() -> None:
    # 4 -> 8 -> 16 -> 32 GB on a 64 GB node (retry limit 3): no cap below the node's memory.
    spec = spec_from_dict(one_job({"memory_gb": deterministic(50.0), "peak_at": 0.5}))
    row = Engine(spec).run().jobs.to_pylist()[0]
    assert (row["oom_kills"], row["retries"], row["failed"]) == (4, 3, True)
    assert row["request_memory_gb"] == pytest.approx(32.0)


def test_a_lifted_request_a_node_type_joining_later_could_hold_waits_for_it() -> None:
    # A 32 GB type no one rents, but the timeline adds one such node at 300 s: the lifted
    # 16 GB request waits for it instead of failing, and runs once it is up (lifted once
    # more there to 32 GB, since the peak is 20 GB).
    data = outgrows_its_node()
    data["cluster"]["node_types"].append(
        {"name": "big", "cpu": 8, "memory_gb": 32.0, "price_per_hour": 1.0}
    )
    data["events"] = [{"at_s": 300.0, "join": {"type": "big", "count": 1}}]
    run = Engine(spec_from_dict(data)).run()
    big = run.jobs.to_pylist()[0]
    assert not big["failed"] and big["request_memory_gb"] == pytest.approx(32.0)
    assert big["start_s"] >= 300.0 and big["end_s"] > big["start_s"]
    assert run.summary["failed_no_fit"] == 0 and run.summary["jobs_failed"] == 0
