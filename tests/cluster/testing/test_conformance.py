"""The shipped conformance suites: a toy scaler and the static scaler pass them, and their
rules catch what they are meant to catch (a suite that cannot fail checks nothing)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.layout import NodeStatus
from clusteremu.cluster.policies.base import (
    Allocation,
    Placement,
    PlacementView,
    Placer,
    PoolView,
    Release,
    Rent,
    Scaler,
    ScaleView,
)
from clusteremu.cluster.policies.fifo import FirstFit, StaticScaler
from clusteremu.cluster.testing import (
    PlacerConformance,
    ScalerConformance,
    check_allocation,
    check_placements,
    check_scaling,
    gpu_scenario,
    run_capacity_violations,
    small_scale_scenario,
)
from clusteremu.cluster.testing.conformance import as_spec


class QueueScaler(Scaler):
    """Rent a VM for every waiting job beyond `k` that no booting or idle VM will take;
    release idle rented VMs while nothing waits."""

    name = "toy-queue-scaler"

    def __init__(self, k: int = 1) -> None:
        self.k = k

    def scale(self, view: ScaleView) -> list[Rent | Release]:
        booting = int(np.sum(view.node_status == NodeStatus.BOOTING))
        idle = (view.node_status == NodeStatus.UP) & (view.running_jobs == 0)
        waiting = view.queue.size
        if waiting > self.k + booting + int(idle.sum()):
            return [Rent("vm", count=waiting - self.k - booting - int(idle.sum()))]
        if waiting == 0:
            vm = view.node_type_names.index("vm")
            return [Release(int(k)) for k in np.flatnonzero(idle & (view.node_type == vm))]
        return []


class TestQueueScaler(ScalerConformance):
    def make_scaler(self) -> Scaler:
        return QueueScaler(k=1)

    def test_it_rents_and_releases(self) -> None:
        """The scenario makes the toy scaler use both of its decisions."""
        engine = Engine(self._spec(), scaler=self.make_scaler())
        summary = engine.run().summary
        assert summary["nodes_rented"] > 0
        assert summary["startup_usd"] > 0
        used = engine.nodes_used
        assert np.any(engine.nodes_i[1, :used] == NodeStatus.RELEASED)


class TestStaticScaler(ScalerConformance):
    def make_scaler(self) -> Scaler:
        return StaticScaler()


# --- the rules catch bad decisions -----------------------------------------------------------


def gpu_view() -> PlacementView:
    """Three GPU nodes and a CPU node of `gpu_scenario`, a queue of one job per class."""

    class Suite(PlacerConformance):
        def make_placer(self) -> Placer:
            return FirstFit()

        def placement_scenario(self) -> dict[str, object]:
            return gpu_scenario()

    return Suite().base_view([0, 1, 2, 3, 4])  # half, quarter, whole, pair, none


def test_legal_placements_pass() -> None:
    view = gpu_view()
    decisions = [Placement(0, 0), Placement(1, 0), Placement(2, 0), Placement(4, 3)]
    assert check_placements(view, decisions) == []
    assert check_placements(view, FirstFit().place(view)) == []


@pytest.mark.parametrize(
    ("change", "decisions", "problem"),
    [
        ({}, [Placement(99, 0)], "not waiting"),
        ({}, [Placement(0, 0), Placement(0, 1)], "not waiting"),
        ({}, [Placement(0, 17)], "does not exist"),
        ({"active": np.array([False, True, True, True])}, [Placement(0, 0)], "not active"),
        ({"free_slots": np.array([0.0, 1.0, 1.0, 1.0])}, [Placement(0, 0)], "worker slot"),
        (
            {"free_slots": np.array([1.0, 1.0, 1.0, 1.0])},
            [Placement(0, 1), Placement(1, 1)],
            "slot",
        ),
        ({"free_cpu": np.array([0.5, 16.0, 16.0, 4.0])}, [Placement(0, 0)], "cores"),
        ({}, [Placement(2, 3)], "GPU"),  # a whole GPU on the CPU node
        ({}, [Placement(3, 0), Placement(2, 0)], "GPU"),  # both GPUs taken by the pair
        (
            {"gpu_free_milli": np.array([[500.0, 500.0], [0, 0], [0, 0], [0, 0]])},
            [Placement(2, 0)],
            "1000 milli",  # two half-free GPUs are not one whole GPU
        ),
        ({}, [Placement(0, 0, gpus=(5,))], "GPU"),
        ({}, [Placement(0, 0, setup_s=-1.0)], "setup_s"),
        ({}, [(0, 0)], "not a Placement"),
    ],
)
def test_illegal_placements_are_caught(
    change: dict[str, np.ndarray], decisions: list[Placement], problem: str
) -> None:
    view = dataclasses.replace(gpu_view(), **change)
    problems = check_placements(view, decisions)
    assert problems and any(problem in p for p in problems), problems


def test_two_half_gpu_jobs_share_one_gpu_a_whole_one_needs_a_free_gpu() -> None:
    view = gpu_view()
    one_gpu = dataclasses.replace(
        view, gpu_free_milli=np.array([[1000.0, 0.0], [0, 0], [0, 0], [0, 0]])
    )
    halves = dataclasses.replace(one_gpu, request_gpu=np.array([0.5, 0.5, 1.0, 2.0, 0.0]))
    assert check_placements(halves, [Placement(0, 0), Placement(1, 0)]) == []
    assert check_placements(halves, [Placement(0, 0), Placement(2, 0)]) != []


class MutatingPlacer(FirstFit):
    def place(self, view: PlacementView) -> list[Placement]:
        view.free_cpu[:] = 0.0  # type: ignore[index]
        return []


class SlotBlindPlacer(Placer):
    """Puts every waiting job on node 0, whatever its slots."""

    name = "slot-blind"

    def place(self, view: PlacementView) -> list[Placement]:
        return [Placement(int(j), 0) for j in view.queue]


def test_the_suite_fails_a_placer_that_mutates_its_view_or_ignores_slots() -> None:
    class Mutating(PlacerConformance):
        def make_placer(self) -> Placer:
            return MutatingPlacer()

    with pytest.raises((AssertionError, ValueError)):
        Mutating().test_empty_cluster()

    class SlotBlind(PlacerConformance):
        def make_placer(self) -> Placer:
            return SlotBlindPlacer()

    with pytest.raises(AssertionError, match="worker slot|not active"):
        SlotBlind().test_only_active_nodes_with_a_slot_are_named()


def test_run_capacity_is_checked_after_a_run() -> None:
    engine = Engine(as_spec(gpu_scenario(jobs=200)))
    engine.run()
    assert run_capacity_violations(engine) == []


def test_illegal_scaling_is_caught() -> None:
    view = ScaleView(
        time_s=0.0,
        queue=np.zeros(0, dtype=np.int64),
        class_index=np.zeros(0, dtype=np.int64),
        request_cpu=np.zeros(0),
        node_type=np.zeros(3, dtype=np.int64),
        node_status=np.array([NodeStatus.UP, NodeStatus.RELEASED, NodeStatus.UP]),
        running_jobs=np.array([2, 0, 0]),
        free_cpu=np.zeros(3),
        node_type_names=("base", "vm"),
    )
    assert check_scaling(view, [Rent("vm"), Rent(0, count=2), Release(2)]) == []
    for decisions, problem in (
        ([Release(0)], "still runs"),
        ([Release(1)], "already released"),
        ([Release(2), Release(2)], "already released"),
        ([Release(7)], "does not exist"),
        ([Rent("gpu")], "unknown node type"),
        ([Rent("vm", count=0)], "positive"),
        ([object()], "not a Rent or Release"),
    ):
        problems = check_scaling(view, decisions)
        assert any(problem in p for p in problems), (decisions, problems)


def test_illegal_allocations_are_caught() -> None:
    ids = np.arange(3, dtype=np.int64)
    x = np.ones(3)
    view = PoolView(0.0, "cores", 4.0, ids, ids * 0, x, x, x, x, x)
    assert check_allocation(view, Allocation(np.array([1.0, 1.0, 2.0]))) == []
    assert check_allocation(view, Allocation(np.array([2.0, 2.0, 2.0])))
    assert check_allocation(view, Allocation(np.array([1.0, -1.0, 0.0])))
    assert check_allocation(view, Allocation(np.array([1.0, 1.0])))
    assert check_allocation(view, [1.0, 1.0, 1.0])


def test_the_default_scale_scenario_is_valid() -> None:
    spec = as_spec(small_scale_scenario())
    assert [t.name for t in spec.node_types] == ["base", "vm"]
