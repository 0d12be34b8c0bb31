"""Regression tests for the bugs of issue 10 item 9; each failed on the engine before the
rewrite (commit cd23f70):

- the Python first-fit / random-fit path ignored worker slots (`max_jobs`);
- a queue head whose patience ran out did not trigger a placement;
- an unknown `kernel_code` was accepted silently (a run that decides nothing);
- the provisioner always got seed 0;
- `jobs_failed` counted warm-up jobs while `jobs_completed` did not;
- `PolicyError`, `UnknownPolicyError` and `ScenarioError` did not survive pickling.

The stream-key test (adding and reordering classes) is in `test_streams.py`.
"""

from __future__ import annotations

import pickle
from collections import defaultdict
from typing import Any

import numpy as np
import pytest

from clusteremu.cluster.distributions import Deterministic
from clusteremu.cluster.engine import Engine
from clusteremu.cluster.metrics import RunResult
from clusteremu.cluster.model import JobClass, NodeType, Request, SimulationSpec, StopRule
from clusteremu.cluster.policies.base import PolicyError, Provisioner
from clusteremu.cluster.policies.fifo import FirstFit, Static
from clusteremu.cluster.policies.registry import UnknownPolicyError, create
from clusteremu.cluster.speedup import LinearSpeedup
from clusteremu.cluster.workload import TraceArrivals
from clusteremu.scenarios.errors import ScenarioError
from clusteremu.scenarios.loader import spec_from_dict


def equal_tables(a: RunResult, b: RunResult) -> bool:
    """Column-by-column equality of two per-job tables (NaN equals NaN)."""
    if a.jobs.column_names != b.jobs.column_names:
        return False
    for name in a.jobs.column_names:
        x = a.jobs[name].to_numpy(zero_copy_only=False)
        y = b.jobs[name].to_numpy(zero_copy_only=False)
        same = np.array_equal(x, y, equal_nan=True) if x.dtype.kind == "f" else (x == y).all()
        if not same:
            return False
    return True


# --- worker slots on the Python path --------------------------------------------------


def slots_scenario(placer: str) -> dict[str, Any]:
    """One-core jobs on 8-core nodes with 2 worker slots each: slots bind, cores never."""
    return {
        "name": "slots",
        "seed": 3,
        "stop": {"jobs": 600, "warmup_jobs": 0},
        "cluster": {
            "node_types": [
                {"name": "w", "cpu": 8, "memory_gb": 32, "max_jobs": 2},
                {"name": "x", "cpu": 4, "memory_gb": 32, "max_jobs": 1},
            ],
            "nodes": [{"type": "w", "count": 2}, {"type": "x", "count": 1}],
        },
        "workload": {
            "classes": [
                {
                    "name": "a",
                    "arrival": {"kind": "poisson", "rate_per_s": 2.0},
                    "size": {"kind": "exponential", "mean_s": 1.0},
                    "request": {"cpu": 1, "memory_gb": 1},
                }
            ]
        },
        "scheduler": {"placer": {"name": placer}},
    }


def most_jobs_at_once(result: RunResult) -> dict[str, int]:
    """Per node name, the most jobs that ever ran on it at once (from start/end times)."""
    events: dict[str, list[tuple[float, int]]] = defaultdict(list)
    table = result.jobs
    for node, start, end in zip(
        table["node"].to_pylist(),
        table["start_s"].to_numpy(zero_copy_only=False),
        table["end_s"].to_numpy(zero_copy_only=False),
        strict=True,
    ):
        if node is None:
            continue
        events[node] += [(float(start), 1), (float(end), -1)]
    most: dict[str, int] = {}
    for node, evs in events.items():
        running = peak = 0
        for _, step in sorted(evs, key=lambda e: (e[0], e[1])):  # ends before starts
            running += step
            peak = max(peak, running)
        most[node] = peak
    return most


@pytest.mark.parametrize("placer", ["first-fit", "random-fit"])
def test_python_path_honours_worker_slots_like_the_compiled_path(placer: str) -> None:
    spec = spec_from_dict(slots_scenario(placer))
    compiled_run = Engine(spec).run()
    python_run = Engine(spec, force_python_policies=True).run()
    slots = {"w-0": 2, "w-1": 2, "x-2": 1}
    for result in (compiled_run, python_run):
        assert result.summary["jobs_completed"] == 600
        peaks = most_jobs_at_once(result)
        assert set(peaks) <= set(slots)
        for node, peak in peaks.items():
            assert peak <= slots[node], f"node {node} ran {peak} jobs at once"
        assert max(peaks.values()) == 2  # the slots were reached, so they were tested
    assert equal_tables(compiled_run, python_run)


# --- expiry triggers placement ------------------------------------------------------------


def expiry_spec() -> SimulationSpec:
    """One 2-core node. t=0: a 1-core job runs 0-100 s. t=1: a 2-core job with 5 s of
    patience waits at the head and leaves at t=6. t=2: a 1-core job waits behind it; it
    must start at 6 s (when the head leaves), not at 100 s (the next completion)."""
    node = NodeType("n", cpu=2, memory_gb=4)
    small = JobClass(
        "small",
        TraceArrivals((0.0, 2.0)),
        Deterministic(100.0),
        LinearSpeedup(),
        request=Request(1),
    )
    big = JobClass(
        "big",
        TraceArrivals((1.0,)),
        Deterministic(100.0),
        LinearSpeedup(),
        request=Request(2),
        timeout_s=5.0,
    )
    return SimulationSpec(
        name="expiry",
        seed=1,
        stop=StopRule(jobs=3),
        node_types=(node,),
        nodes=("n",),
        pools=(),
        classes=(small, big),
    )


@pytest.mark.parametrize("python", [False, True])
def test_a_head_that_times_out_lets_the_next_job_start_at_once(python: bool) -> None:
    result = Engine(expiry_spec(), force_python_policies=python).run()
    table = result.jobs
    assert table["class"].to_pylist() == ["small", "big", "small"]
    assert table["failed"].to_pylist() == [False, True, False]
    np.testing.assert_allclose(table["start_s"].to_numpy()[2], 6.0)
    np.testing.assert_allclose(table["end_s"].to_numpy()[2], 106.0)


# --- unknown compiled functions ----------------------------------------------------------


def test_an_unregistered_compiled_function_is_refused_naming_the_policy() -> None:
    def seven(job: int, now_s: float, view: object) -> int:
        return 7

    class Seven(FirstFit):
        name = "seven"  # type: ignore[assignment]
        compiled = seven

    spec = spec_from_dict(slots_scenario("first-fit"))
    with pytest.raises(PolicyError, match="'seven'.*not a registered compiled placer"):
        Engine(spec, placer=Seven())


def test_a_compiled_allocator_named_as_a_placer_is_refused() -> None:
    from clusteremu.cluster.policies.fifo import allocate_equi

    class Mixed(FirstFit):
        name = "mixed"  # type: ignore[assignment]
        compiled = allocate_equi

    spec = spec_from_dict(slots_scenario("first-fit"))
    with pytest.raises(PolicyError, match="'mixed'.*not a registered compiled placer"):
        Engine(spec, placer=Mixed())


# --- the provisioner's stream ------------------------------------------------------------


class DrawingProvisioner(Static):
    """The static provisioner that remembers the first draw of its stream."""

    def setup(self, spec: SimulationSpec, rng: np.random.Generator) -> None:
        self.draw = float(rng.random())


def provisioner_draw(seed: int, replication: int = 0) -> float:
    spec = spec_from_dict({**slots_scenario("first-fit"), "seed": seed, "replications": 2})
    provisioner = DrawingProvisioner()
    Engine(spec, replication=replication, provisioner=provisioner)
    return provisioner.draw


def test_the_provisioner_gets_a_seeded_stream() -> None:
    assert provisioner_draw(1) == provisioner_draw(1)
    assert provisioner_draw(1) != provisioner_draw(2)
    assert provisioner_draw(1, replication=0) != provisioner_draw(1, replication=1)
    assert isinstance(create("provisioner", "static"), Provisioner)


# --- failures are counted in the measurement window ------------------------------------


def failures_spec() -> SimulationSpec:
    """One 1-core node, warm-up 3 jobs. Job 0 runs 0-10 s; job 1 (impatient, 2 s) leaves
    at 3 s, a warm-up failure; job 2 runs 10-20 s. Job 3 runs 30-40 s; job 4 (impatient)
    leaves at 33 s, a measured failure."""
    node = NodeType("n", cpu=1, memory_gb=4)
    patient = JobClass(
        "patient",
        TraceArrivals((0.0, 2.0, 30.0)),
        Deterministic(10.0),
        LinearSpeedup(),
        request=Request(1),
    )
    impatient = JobClass(
        "impatient",
        TraceArrivals((1.0, 31.0)),
        Deterministic(10.0),
        LinearSpeedup(),
        request=Request(1),
        timeout_s=2.0,
    )
    return SimulationSpec(
        name="failures",
        seed=1,
        stop=StopRule(jobs=5, warmup_jobs=3),
        node_types=(node,),
        nodes=("n",),
        pools=(),
        classes=(patient, impatient),
    )


def test_jobs_failed_counts_only_the_measurement_window() -> None:
    result = Engine(failures_spec()).run()
    assert result.jobs["failed"].to_pylist() == [False, True, False, False, True]
    s = result.summary
    assert s["jobs_completed"] == 1  # job 3; jobs 0 and 2 are warm-up
    assert s["jobs_failed"] == 1  # job 4; job 1 is warm-up
    assert s["per_class"]["impatient"]["jobs_failed"] == 1
    assert s["per_class"]["patient"]["jobs_failed"] == 0


# --- exceptions cross process boundaries ---------------------------------------------------


def round_trip(exc: BaseException) -> Any:
    return pickle.loads(pickle.dumps(exc))


def test_policy_error_pickles_with_its_fields() -> None:
    exc = PolicyError("first-fit", 12.5, "node 3 does not exist", {"job": 1, "node": 3})
    back = round_trip(exc)
    assert type(back) is PolicyError
    assert (back.policy, back.time_s, back.problem) == ("first-fit", 12.5, "node 3 does not exist")
    assert back.decision == {"job": 1, "node": 3}
    assert str(back) == str(exc)


def test_policy_error_with_an_unpicklable_decision_travels_as_text() -> None:
    exc = PolicyError("p", 1.0, "bad", lambda: None)
    back = round_trip(exc)
    assert type(back) is PolicyError
    assert isinstance(back.decision, str) and "lambda" in back.decision


def test_unknown_policy_error_pickles() -> None:
    with pytest.raises(UnknownPolicyError) as info:
        create("placer", "no-such-placer")
    back = round_trip(info.value)
    assert type(back) is UnknownPolicyError
    assert (back.kind, back.name) == ("placer", "no-such-placer")
    assert "first-fit" in back.known
    assert str(back) == str(info.value)


def test_scenario_error_pickles() -> None:
    exc = ScenarioError("s.yaml", [("stop.jobs", "expected an integer"), ("", "file empty")])
    back = round_trip(exc)
    assert type(back) is ScenarioError
    assert back.source == "s.yaml"
    assert back.problems == exc.problems
    assert str(back) == str(exc)
