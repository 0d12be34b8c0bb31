"""Node and job lifecycles through the engine's API: renting with start-up delays and money,
GPU sharing in milli-GPU, kills with re-queue and waste, and the engine's ownership of its
state (nobody else writes it)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from clusteremu.cluster.distributions import Deterministic, Exponential
from clusteremu.cluster.engine import Engine
from clusteremu.cluster.layout import IS, JF, JI, JobState, NodeStatus
from clusteremu.cluster.model import JobClass, NodeType, Request, SimulationSpec, StopRule
from clusteremu.cluster.policies.base import (
    Placement,
    PlacementView,
    Placer,
    PolicyError,
    Release,
    Rent,
    Scaler,
    ScaleView,
)
from clusteremu.cluster.speedup import LinearSpeedup
from clusteremu.cluster.workload import TraceArrivals, poisson_arrivals

ROOT = Path(__file__).resolve().parents[2]


class QueueScaler(Scaler):
    """Toy autoscaler: rent a VM for every job beyond `k` that no booting or idle VM will
    take; release every idle VM while the queue is empty."""

    name = "toy-queue-scaler"

    def __init__(self, k: int = 0) -> None:
        self.k = k
        self.calls = 0

    def scale(self, view: ScaleView) -> list[Rent | Release]:
        self.calls += 1
        booting = int(np.sum(view.node_status == NodeStatus.BOOTING))
        idle_up = (view.node_status == NodeStatus.UP) & (view.running_jobs == 0)
        pending = booting + int(idle_up.sum())
        waiting = view.queue.size
        if waiting > self.k + pending:
            return [Rent("vm", count=waiting - self.k - pending)]
        if waiting == 0:
            return [Release(int(k)) for k in np.flatnonzero(idle_up)]
        return []


def vm_spec(arrivals: tuple[float, ...], size_s: float = 100.0) -> SimulationSpec:
    vm = NodeType(
        "vm", cpu=1, memory_gb=2, price_per_hour=3.6, startup_cost=0.5, startup_delay_s=10.0
    )
    cls = JobClass(
        "q", TraceArrivals(arrivals), Deterministic(size_s), LinearSpeedup(), request=Request(1.0)
    )
    return SimulationSpec(
        name="rent",
        seed=1,
        stop=StopRule(jobs=len(arrivals)),
        node_types=(vm,),
        nodes=(),
        pools=(),
        classes=(cls,),
    )


def test_toy_scaler_rents_waits_for_startup_and_pays_by_hand() -> None:
    """Jobs at 0, 0, 0 and 50 s, 100 s each, VMs ready 10 s after renting at $0.5 +
    $0.001/s: three VMs rented at 0 run 10-110 s, a fourth rented at 50 runs 60-160 s.
    Start-up 4 x 0.5 = $2; operating 4 x 100 s x $0.001 = $0.4."""
    scaler = QueueScaler(k=0)
    result = Engine(vm_spec((0.0, 0.0, 0.0, 50.0)), scaler=scaler).run()
    table = result.jobs
    np.testing.assert_allclose(table["start_s"].to_numpy(), [10.0, 10.0, 10.0, 60.0])
    np.testing.assert_allclose(table["end_s"].to_numpy(), [110.0, 110.0, 110.0, 160.0])
    assert table["node"].to_pylist() == ["vm-0", "vm-1", "vm-2", "vm-3"]
    s = result.summary
    assert s["nodes_rented"] == 4
    assert s["startup_usd"] == pytest.approx(2.0)
    assert s["operating_usd"] == pytest.approx(0.4)
    assert s["cost_usd"] == pytest.approx(2.4)
    assert s["mean_response_time_s"] == pytest.approx(110.0)
    assert s["mean_wait_s"] == pytest.approx(10.0)
    assert scaler.calls > 0


def test_k_bounds_the_queue_before_renting() -> None:
    """With k = 2 one VM is rented for three waiting jobs; it serves them one by one."""
    result = Engine(vm_spec((0.0, 0.0, 0.0)), scaler=QueueScaler(k=2)).run()
    assert result.summary["nodes_rented"] == 1
    np.testing.assert_allclose(result.jobs["start_s"].to_numpy(), [10.0, 110.0, 210.0])
    assert result.summary["operating_usd"] == pytest.approx(0.3)


class HoldPlacer(Placer):
    """Places nothing: the test starts jobs itself through the engine's API."""

    name = "hold"

    def place(self, view: PlacementView) -> list[Placement]:
        return []


def test_release_refuses_a_busy_node_and_rent_grows_rows() -> None:
    engine = Engine(vm_spec((0.0,)), scaler=QueueScaler(k=5), placer=HoldPlacer())
    ks = [engine.rent("vm") for _ in range(9)]  # beyond the pre-allocated rows
    assert ks == list(range(9))
    assert engine.nodes_used == 9
    engine.step(until_s=10.0)
    assert engine.nodes_i[1, 0] == NodeStatus.UP
    engine.start(0, 3)
    assert engine.jobs_i[JI.NODE, 0] == 3
    with pytest.raises(ValueError, match="still runs"):
        engine.release(3)
    engine.release(4)
    with pytest.raises(ValueError, match="already released"):
        engine.release(4)
    with pytest.raises(ValueError, match="unknown node type"):
        engine.rent("nope")


def test_a_scaler_error_names_the_scaler() -> None:
    class Bad(Scaler):
        name = "bad"

        def scale(self, view: ScaleView) -> list[Rent | Release]:
            return [Release(99)]

    with pytest.raises(PolicyError, match="'bad'.*node 99"):
        Engine(vm_spec((0.0,)), scaler=Bad()).run()


def gpu_spec(requests: tuple[float, ...], gpus: int = 2) -> SimulationSpec:
    node = NodeType("g", cpu=16, memory_gb=64, gpu=gpus)
    classes = tuple(
        JobClass(
            f"c{i}",
            TraceArrivals((0.0,)),
            Deterministic(100.0),
            LinearSpeedup(),
            request=Request(1.0, 1.0, gpu),
        )
        for i, gpu in enumerate(requests)
    )
    return SimulationSpec(
        name="gpu",
        seed=1,
        stop=StopRule(jobs=len(requests)),
        node_types=(node,),
        nodes=("g",),
        pools=(),
        classes=classes,
    )


@pytest.mark.parametrize("python", [False, True])
def test_two_half_gpu_pods_share_a_gpu_and_a_whole_one_needs_a_free_gpu(python: bool) -> None:
    """On one node with two GPUs: 0.5 + 0.5 share GPU 0, 1.0 takes GPU 1, the second 1.0
    finds no wholly free GPU and waits for the first 100 s jobs to end."""
    spec = gpu_spec((0.5, 0.5, 1.0, 1.0))
    result = Engine(spec, force_python_policies=python).run()
    np.testing.assert_allclose(result.jobs["start_s"].to_numpy(), [0.0, 0.0, 0.0, 100.0])


def test_a_half_pod_cannot_use_two_quarter_free_gpus() -> None:
    """0.75 on each GPU leaves 250 milli free on both: 500 milli free in total, but no
    single GPU has 500, so a 0.5 pod waits."""
    result = Engine(gpu_spec((0.75, 0.75, 0.5))).run()
    np.testing.assert_allclose(result.jobs["start_s"].to_numpy(), [0.0, 0.0, 100.0])


def test_whole_gpu_scenarios_behave_as_before() -> None:
    """Whole-GPU requests: a 2-GPU job and two 1-GPU jobs on a 2-GPU node."""
    result = Engine(gpu_spec((2.0, 1.0, 1.0))).run()
    np.testing.assert_allclose(result.jobs["start_s"].to_numpy(), [0.0, 100.0, 100.0])


def test_explicit_gpus_are_checked() -> None:
    engine = Engine(gpu_spec((0.5, 0.5), gpus=2), placer=HoldPlacer())
    engine.step(until_s=0.0)
    with pytest.raises(PolicyError, match="GPU 5"):
        engine.start(0, 0, gpus=[5])
    with pytest.raises(PolicyError, match="1 distinct GPU"):
        engine.start(0, 0, gpus=[0, 1])
    engine.start(0, 0, gpus=[1])
    engine.start(1, 0, gpus=[1])  # shares GPU 1
    assert engine.state.gpu_free[0, :2].tolist() == [1000.0, 0.0]


def test_fractional_gpu_requests_above_one_are_refused() -> None:
    with pytest.raises(ValueError, match="whole number of GPUs"):
        Engine(gpu_spec((1.5,)))


def mm1_spec(jobs: int = 200) -> SimulationSpec:
    node = NodeType("core", cpu=2, memory_gb=4)
    cls = JobClass("a", poisson_arrivals(0.5), Exponential(1.0), LinearSpeedup())
    return SimulationSpec(
        name="kill",
        seed=3,
        stop=StopRule(jobs=jobs),
        node_types=(node,),
        nodes=("core",),
        pools=(),
        classes=(cls,),
    )


def running_job(engine: Engine) -> int:
    while True:
        engine.step(max_events=1)
        running = np.flatnonzero(engine.jobs_i[JI.STATE] == JobState.RUNNING)
        if running.size:
            return int(running[0])


def test_kill_requeues_with_a_new_request_counts_waste_and_retries() -> None:
    engine = Engine(mm1_spec())
    j = running_job(engine)
    began = float(engine.jobs_f[JF.START, j])
    engine.step(until_s=engine.now + 1e-9)
    later = engine.now
    engine.kill(j, requeue=True, request=(2.0, 1.0, 0.0))
    assert engine.jobs_i[JI.STATE, j] == JobState.QUEUED
    assert engine.jobs_i[JI.RETRIES, j] == 1
    assert engine.jobs_f[JF.REQ_CPU, j] == 2.0
    waste = float(engine.jobs_f[JF.WASTE_CORE_S, j])
    assert waste == pytest.approx(1.0 * (later - began))
    result = engine.run()
    row = result.jobs.slice(j, 1).to_pylist()[0]
    assert row["retries"] == 1 and not row["failed"]
    assert row["start_s"] >= later and math.isfinite(row["end_s"])
    assert row["wasted_core_s"] == pytest.approx(waste)
    assert result.summary["retries"] == 1
    assert result.summary["wasted_core_s"] == pytest.approx(waste)
    # The killed attempt's completion event is stale and never ends the job early.
    assert row["end_s"] - row["start_s"] == pytest.approx(engine.jobs.size[j] / 2.0, rel=1e-9)


def test_kill_without_requeue_fails_the_job_in_the_window() -> None:
    engine = Engine(mm1_spec())
    j = running_job(engine)
    engine.kill(j, requeue=False)
    result = engine.run()
    assert result.summary["jobs_failed"] == 1
    assert result.summary["per_class"]["a"]["jobs_failed"] == 1
    assert result.jobs["failed"].to_pylist()[j] is True
    with pytest.raises(ValueError, match="not running"):
        engine.kill(j)


def test_engine_arrays_are_read_only_outside_the_engine() -> None:
    engine = Engine(mm1_spec(10))
    for array in (engine.jobs_f, engine.jobs_i, engine.nodes_f, engine.state.fstate):
        with pytest.raises(ValueError, match="read-only"):
            array.flat[0] = 1
    run = engine.snapshot()
    with pytest.raises(ValueError, match="read-only"):
        run.state.istate[0] = 1


def test_a_snapshot_never_changes_as_the_engine_moves_on() -> None:
    engine = Engine(mm1_spec(200))
    engine.step(max_events=100)
    run = engine.snapshot()
    events, now, done = int(run.state.istate[IS.EVENTS]), run.now_s, run.state.jobs_f.copy()
    engine.run()
    assert int(run.state.istate[IS.EVENTS]) == events and run.now_s == now
    assert np.array_equal(run.state.jobs_f, done, equal_nan=True)
    assert int(engine.state.istate[IS.EVENTS]) > events


#: Attribute writes into engine state arrays (`x.jobs_f[...] = ...`, `+=`, ...); names a
#: policy's own state may share (`gpu_free`, `queue`) are left to the read-only check.
STATE_WRITE = re.compile(
    r"\.(jobs_f|jobs_i|nodes_f|nodes_i|pools_f|pools_i|classes_f|classes_i|"
    r"istate|fstate|heap_t|heap_j|heap_k|n_class|area_class|run_by_type|fault_draws|timeline|"
    r"fit_index|fit_bits)"
    r"\[[^\]]*\]\s*(=|\+=|-=|\*=|/=)(?!=)"
)
#: The engine (the parts of `cluster/engine/`) and its compiled transitions (the kernel's
#: modules): the only writers of state.
OWNERS = {
    "cluster/engine/builder.py",
    "cluster/engine/compaction.py",
    "cluster/engine/facade.py",
    "cluster/engine/fault_feed.py",
    "cluster/engine/feeding.py",
    "cluster/engine/operations.py",
    "cluster/engine/policy_bridge.py",
    "cluster/engine/store.py",
    "cluster/fit_index.py",
    "cluster/kernel.py",
    "cluster/kernel_faults.py",
    "cluster/kernel_heap.py",
    "cluster/kernel_jobs.py",
    "cluster/kernel_placement.py",
    "cluster/state.py",
}


def test_no_code_outside_the_engine_writes_its_arrays() -> None:
    offenders = []
    for folder in ("cluster", "scenarios", "actors", "tuners", "clusteremu"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in OWNERS:
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if STATE_WRITE.search(line):
                    offenders.append(f"{rel}:{n}: {line.strip()}")
    assert not offenders, "engine state written outside the engine:\n" + "\n".join(offenders)


def test_a_state_is_built_from_named_arrays_the_rest_empty() -> None:
    from clusteremu.cluster.state import state_from

    s = state_from(jobs_f=np.zeros((3, 2)), istate=np.zeros(4, dtype=np.int64))
    assert s.jobs_f.shape == (3, 2) and s.decisions.shape == (3, 0) and s.rng.dtype == np.uint64
    with pytest.raises(ValueError, match="unknown state arrays"):
        state_from(job_f=np.zeros((3, 2)))
    with pytest.raises(ValueError, match="jobs_i is float64"):
        state_from(jobs_i=np.zeros((3, 2)))
