"""Engine behaviour: determinism, common random numbers, resumption, stop rules, policy
errors, worker slots, patience, per-node-type run times, batch and trace arrivals, and
the Python placers' view (`running_by_class` counted only when read)."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

import clusteremu.cluster.live_view
from clusteremu.cluster.engine import Engine
from clusteremu.cluster.io import write_parquet
from clusteremu.cluster.policies.base import (
    Allocation,
    Allocator,
    Placement,
    PlacementView,
    Placer,
    PolicyError,
)
from clusteremu.cluster.policies.fifo import FirstFit
from clusteremu.cluster.runner import run_spec, with_policies
from clusteremu.cluster.testing import equal_tables
from clusteremu.scenarios.loader import load_scenario, spec_from_dict
from tests.builders import node_scenario, pool_scenario


def _hash(table: pa.Table, path: Path) -> str:
    write_parquet(table, path)
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("name", ["mm-c", "ps-amdahl", "hetero-placement"])
def test_same_seed_gives_byte_identical_parquet(name: str, tmp_path: Path) -> None:
    spec = load_scenario(name, ["replications=2"])
    first = _hash(run_spec(spec).jobs, tmp_path / "a.parquet")
    second = _hash(run_spec(spec).jobs, tmp_path / "b.parquet")
    assert first == second
    other = load_scenario(name, ["replications=2", "seed=99"])
    assert _hash(run_spec(other).jobs, tmp_path / "c.parquet") != first


def test_policies_see_identical_jobs() -> None:
    spec = load_scenario("hetero-placement", ["stop.time_s=2000", "stop.warmup_s=100"])
    a = run_spec(with_policies(spec, placer="first-fit")).jobs
    b = run_spec(with_policies(spec, placer="random-fit")).jobs
    for column in ("arrival_s", "size", "class"):
        assert a[column].equals(b[column])
    assert not a["node"].equals(b["node"])  # the policies did decide differently


def test_step_resumes_to_the_same_result() -> None:
    spec = load_scenario("hetero-placement", ["stop.time_s=3000", "stop.warmup_s=100"])
    whole = Engine(spec).run()
    engine = Engine(spec)
    for until in np.arange(0.0, 3000.0, 137.0):
        engine.step(until_s=float(until), max_events=50)
    pieces = engine.run()
    assert equal_tables(whole, pieces)
    assert whole.summary == pieces.summary


def test_time_stop_and_warmup() -> None:
    data = node_scenario(nodes=2).horizon(500.0, warmup_s=100.0).arrivals(1.0).build()
    result = Engine(spec_from_dict(data)).run()
    arrival = result.jobs["arrival_s"].to_numpy()
    measured = result.jobs["measured"].to_numpy()
    assert arrival.max() <= 500.0
    assert np.all(arrival[measured] >= 100.0)
    assert result.summary["measured_time_s"] == pytest.approx(400.0)
    assert result.summary["simulated_time_s"] == pytest.approx(500.0)


def test_batch_arrivals_and_deterministic_sizes() -> None:
    data = (
        pool_scenario(cores=4)
        .jobs(8)
        .set_class(
            arrival={"kind": "batch", "count": 8, "at_s": 5.0},
            size={"kind": "deterministic", "value_s": 2.0},
        )
        .build()
    )
    result = Engine(spec_from_dict(data)).run()
    # Eight jobs of 2 core-seconds share 4 cores under EQUI: all end at 5 + 16/4 = 9 s.
    np.testing.assert_allclose(result.jobs["end_s"].to_numpy(), 9.0)


def test_trace_arrivals(tmp_path: Path) -> None:
    pacsv.write_csv(pa.table({"arrival_s": [0.5, 1.0, 4.0]}), tmp_path / "trace.csv")
    data = (
        node_scenario(nodes=1)
        .jobs(3)
        .set_class(
            arrival={"kind": "trace", "path": str(tmp_path / "trace.csv")},
            size={"kind": "deterministic", "value_s": 1.0},
        )
        .build()
    )
    result = Engine(spec_from_dict(data)).run()
    np.testing.assert_allclose(result.jobs["start_s"].to_numpy(), [0.5, 1.5, 4.0])


def test_worker_slots_limit_jobs_per_node() -> None:
    data = (
        node_scenario(nodes=1, cpu=8)
        .jobs(4)
        .set_class(
            arrival={"kind": "batch", "count": 4}, size={"kind": "deterministic", "value_s": 1.0}
        )
        .build()
    )
    data["cluster"]["node_types"][0]["max_jobs"] = 2
    result = Engine(spec_from_dict(data)).run()
    np.testing.assert_allclose(np.sort(result.jobs["start_s"].to_numpy()), [0, 0, 1, 1])


def test_patience_timeout_fails_waiting_jobs() -> None:
    data = (
        node_scenario(nodes=1)
        .jobs(3)
        .set_class(
            arrival={"kind": "batch", "count": 3},
            size={"kind": "deterministic", "value_s": 10.0},
            timeout_s=5.0,
        )
        .build()
    )
    result = Engine(spec_from_dict(data)).run()
    assert result.jobs["failed"].to_pylist() == [False, True, True]
    assert result.summary["jobs_failed"] == 2
    assert result.summary["jobs_completed"] == 1


def test_runtime_by_node_type_uses_common_random_numbers() -> None:
    data = {
        "name": "rt",
        "seed": 4,
        "stop": {"jobs": 4000},
        "cluster": {
            "node_types": [{"name": "fast", "cpu": 1}, {"name": "slow", "cpu": 1}],
            "nodes": [{"type": "fast", "count": 3}, {"type": "slow", "count": 3}],
        },
        "workload": {
            "classes": [
                {
                    "name": "f",
                    "arrival": {"kind": "poisson", "rate_per_s": 1.0},
                    "size": {"kind": "exponential", "mean_s": 1.0},
                    "runtime_by_node_type": {
                        "fast": {"kind": "exponential", "mean_s": 0.5},
                        "slow": {"kind": "deterministic", "value_s": 3.0},
                    },
                }
            ]
        },
    }
    spec = spec_from_dict(data)
    result = Engine(spec).run()
    nodes = np.array(result.jobs["node"].to_pylist())
    run = result.jobs["end_s"].to_numpy() - result.jobs["start_s"].to_numpy()
    on_slow = np.char.startswith(nodes.astype(str), "slow")
    np.testing.assert_allclose(run[on_slow], 3.0)
    assert run[~on_slow].mean() == pytest.approx(0.5, rel=0.1)
    # The same job gets the same quantile on a fast node under either placer.
    other = Engine(with_policies(spec, placer="random-fit")).run()
    other_nodes = np.array(other.jobs["node"].to_pylist()).astype(str)
    both_fast = ~on_slow & ~np.char.startswith(other_nodes, "slow")
    other_run = other.jobs["end_s"].to_numpy() - other.jobs["start_s"].to_numpy()
    np.testing.assert_allclose(run[both_fast], other_run[both_fast])


class _Greedy(Allocator):
    name = "too-greedy"

    def allocate(self, view):  # type: ignore[no-untyped-def]
        return Allocation(np.full(view.job_ids.size, view.cores))


class _Wrong(Placer):
    name = "wrong-node"

    def place(self, view):  # type: ignore[no-untyped-def]
        return [Placement(int(view.queue[0]), 99)]


def test_policy_errors_name_policy_time_and_decision() -> None:
    spec = spec_from_dict(pool_scenario(cores=3).jobs(50).build())
    with pytest.raises(PolicyError, match="too-greedy.*allocated 6 cores in pool 'cores' of 3"):
        Engine(spec, allocator=_Greedy()).run()
    spec = spec_from_dict(node_scenario(nodes=4).jobs(50).build())
    with pytest.raises(PolicyError, match=r"wrong-node.*t=.*node 99 does not exist.*Placement"):
        Engine(spec, placer=_Wrong()).run()


def test_table_speedup_in_kernel_matches_python() -> None:
    points = [[1, 1], [2, 1.8], [4, 3.0], [8, 4.0]]
    data = (
        pool_scenario(cores=3)
        .jobs(1)
        .set_class(
            arrival={"kind": "batch", "count": 1},
            size={"kind": "deterministic", "value_s": 6.0},
            speedup={"kind": "table", "points": points},
        )
        .build()
    )
    result = Engine(spec_from_dict(data)).run()
    # s(3) on the hull = 1.8 + (3.0 - 1.8) / 2 = 2.4: 6 / 2.4 = 2.5 s.
    assert result.jobs["end_s"].to_numpy()[0] == pytest.approx(2.5)


def test_utilization_of_mm_c_equals_load() -> None:
    spec = load_scenario("mm-c", ["stop.jobs=200000"])
    summary = run_spec(spec).summary
    assert summary["utilization"] == pytest.approx(0.8, rel=0.02)
    assert summary["jobs_unfinished"] == 0


def test_costs_accrue_per_node_hour() -> None:
    data = node_scenario(nodes=4).horizon(3600.0).build()
    data["cluster"]["node_types"][0]["price_per_hour"] = 0.5
    result = Engine(spec_from_dict(data)).run()
    assert result.summary["cost_usd"] == pytest.approx(2.0)
    assert 0 < result.jobs["cost_usd"].to_numpy().sum() < 2.0
    assert math.isfinite(result.summary["mean_response_time_s"])


class _Reads(FirstFit):
    """First-fit that reads the view's `running_by_class` twice per call."""

    name = "reads-running"

    def place(self, view: PlacementView) -> list[Placement]:
        a, b = view.running_by_class, view.running_by_class
        assert a is b and not a.flags.writeable
        assert a.sum() == view.capacity_cpu.sum() - view.free_cpu.sum()  # 1-core jobs
        self.calls = getattr(self, "calls", 0) + 1
        return super().place(view)


def test_running_by_class_is_counted_only_when_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Python placer that never reads `running_by_class` never has it counted (the
    engine's counting function is never called, the view's cache stays empty); one that
    reads it gets one count per call, kept through the call."""
    counted: list[int] = []
    count = clusteremu.cluster.live_view.running_by_class

    def counting(*args: object) -> object:
        counted.append(1)
        return count(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(clusteremu.cluster.live_view, "running_by_class", counting)
    spec = spec_from_dict(node_scenario(nodes=4).jobs(300).build())
    engine = Engine(spec, placer=FirstFit(), force_python_policies=True)
    engine.run()
    view = engine.store.views["view"]  # the view the placer was called with
    assert counted == [] and view.__dict__["_running"] is None
    placer = _Reads()
    Engine(spec, placer=placer, force_python_policies=True).run()
    assert placer.calls > 100 and len(counted) == placer.calls


def test_class_requests_fill_the_same_rows_as_per_job_requests() -> None:
    """The static provisioner's per-class shortcut (`class_requests`) gives every job the
    request `requests_for` gives it, for one class (a fill) and several (a gather), and a
    subclass that sizes its jobs itself is asked per job."""
    from clusteremu.cluster.engine.builder import job_state
    from clusteremu.cluster.jobs import generate_jobs
    from clusteremu.cluster.layout import JF
    from clusteremu.cluster.policies.fifo import Static

    class Doubling(Static):
        def requests(self, spec, class_index):  # type: ignore[no-untyped-def]
            cpu, mem, gpu = super().requests(spec, class_index)
            return 2 * cpu, mem, gpu

    data = {
        "name": "two",
        "seed": 3,
        "stop": {"jobs": 500},
        "cluster": {
            "node_types": [{"name": "n", "cpu": 8, "memory_gb": 32}],
            "nodes": [{"type": "n", "count": 4}],
        },
        "workload": {
            "classes": [
                {
                    "name": name,
                    "arrival": {"kind": "poisson", "rate_per_s": 2.0},
                    "size": {"kind": "exponential", "mean_s": 1.0},
                    "request": {"cpu": cpu, "memory_gb": mem},
                }
                for name, cpu, mem in (("a", 1, 0), ("b", 2, 4))
            ]
        },
    }
    for classes in (1, 2):
        one = {**data, "workload": {"classes": data["workload"]["classes"][:classes]}}
        spec = spec_from_dict(one)
        jobs = generate_jobs(spec, np.random.SeedSequence(3))
        static = Static()
        assert static.class_requests(spec, jobs) is not None
        jobs_f, _ = job_state(spec, static, jobs)
        rows = [JF.REQ_CPU, JF.REQ_MEM, JF.REQ_GPU]
        np.testing.assert_array_equal(jobs_f[rows], np.array(static.requests_for(spec, jobs)))
        doubling = Doubling()
        assert doubling.class_requests(spec, jobs) is None
        doubled, _ = job_state(spec, doubling, jobs)
        np.testing.assert_array_equal(doubled[JF.REQ_CPU], 2 * jobs_f[JF.REQ_CPU])
