"""The `mdp` allocator: conformance suite, table lookup with EQUI inside a class, and clear
errors for bad scenario parameters (the MDP paper, section 2.2)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from clusteremu.cluster import layout as L
from clusteremu.cluster.engine import Engine
from clusteremu.cluster.policies.base import Allocator, PolicyError, PoolView
from clusteremu.cluster.policies.mdp.allocator import MdpAllocator
from clusteremu.cluster.policies.mdp.solver import equi_table
from clusteremu.cluster.policies.registry import create
from clusteremu.cluster.testing import AllocatorConformance
from clusteremu.scenarios.errors import ScenarioError
from clusteremu.scenarios.loader import spec_from_dict
from tests.cluster.policies.mdp.conftest import mdp_scenario, three_class_scenario


class TestMdpOptimal(AllocatorConformance):
    def make_allocator(self) -> Allocator:
        return MdpAllocator(truncation=10, actions=20)

    def pool_scenario(self) -> dict[str, Any]:
        return mdp_scenario(2, jobs=1000, seed=5)

    def check_allocation(self, view: PoolView, cores: np.ndarray) -> None:
        # EQUI within a class; the whole pool is used.
        for c in (0, 1):
            mine = cores[view.class_index == c]
            if mine.size:
                assert np.ptp(mine) <= 1e-12
        assert cores.sum() == pytest.approx(view.cores)


class TestMdpEqui(AllocatorConformance):
    def make_allocator(self) -> Allocator:
        return MdpAllocator(policy="equi", truncation=5)

    def pool_scenario(self) -> dict[str, Any]:
        return mdp_scenario(1, jobs=3000, seed=6)

    def check_allocation(self, view: PoolView, cores: np.ndarray) -> None:
        # a = x1 / (x1 + x2) (clamped at B = 5 only in rare states): every job the same share.
        x1, x2 = int((view.class_index == 0).sum()), int((view.class_index == 1).sum())
        if x1 <= 5 and x2 <= 5:
            np.testing.assert_allclose(cores, view.cores / cores.size)


class TestMdpEquiThreeClasses(AllocatorConformance):
    """The suite's own three-class pool (power, Amdahl, linear speed-ups): EQUI shares."""

    def make_allocator(self) -> Allocator:
        return MdpAllocator(policy="equi", truncation=6)

    def check_allocation(self, view: PoolView, cores: np.ndarray) -> None:
        counts = [int((view.class_index == c).sum()) for c in range(3)]
        if max(counts) <= 6:
            np.testing.assert_allclose(cores, view.cores / cores.size)


class TestMdpOptimalThreeClasses(AllocatorConformance):
    def make_allocator(self) -> Allocator:
        return MdpAllocator(truncation=6, actions=6)

    def pool_scenario(self) -> dict[str, Any]:
        return three_class_scenario(jobs=2000, seed=7)


def test_table_lookup_and_clamping_beyond_b() -> None:
    spec = spec_from_dict(mdp_scenario(2))
    table = np.full((3, 3), 0.25)
    table[0, :], table[1:, 0] = 0.0, 1.0
    alloc = MdpAllocator(table=table)
    alloc.setup(spec, np.random.default_rng(0))
    cls = np.array([0, 1, 1, 0, 0, 1, 1])  # x1 = 3 > B = 2, x2 = 4
    z = np.zeros(cls.size)
    view = PoolView(0.0, "cores", 10.0, np.arange(cls.size), cls, z, z, z, z, z)
    cores = alloc.allocate(view).cores
    np.testing.assert_allclose(cores[cls == 0], 0.25 * 10 / 3)
    np.testing.assert_allclose(cores[cls == 1], 0.75 * 10 / 4)


def test_set_table_reaches_a_running_engine() -> None:
    spec = spec_from_dict(mdp_scenario(2, jobs=4000, seed=2))
    alloc = MdpAllocator(table=equi_table(20))
    engine = Engine(spec, allocator=alloc)
    new = np.full((21, 21), 0.9)
    new[0, :], new[1:, 0] = 0.0, 1.0
    checked = 0
    for t in np.arange(5.0, 1500.0, 5.0):
        engine.step(until_s=t)
        alloc.set_table(new)
        engine.request_allocation(0)
        engine.step(until_s=t)  # decisions only: the next event lies beyond t
        running = engine.jobs_i[L.JI.STATE] == L.JobState.RUNNING
        cls = engine.jobs_i[L.JI.CLS]
        x1, x2 = int(np.sum(running & (cls == 0))), int(np.sum(running & (cls == 1)))
        if x1 and x2 and x1 <= 20 and x2 <= 20:
            cores = engine.jobs_f[L.JF.CORES]
            np.testing.assert_allclose(cores[running & (cls == 0)], 0.9 * 10 / x1)
            np.testing.assert_allclose(cores[running & (cls == 1)], 0.1 * 10 / x2)
            checked += 1
        alloc.set_table(equi_table(20))
    assert checked > 0


@pytest.mark.parametrize(
    ("params", "field", "expected"),
    [
        ({"theta": [0.5, 1.5]}, "theta[1]", "(0, 1]"),
        ({"theta": [0.0, 0.5]}, "theta[0]", "(0, 1]"),
        ({"policy": "best"}, "policy", "one of"),
        ({"truncation": 0}, "truncation", "B >= 1"),
        ({"table": [[0.5, 2.0], [0.1, 0.2]]}, "table", "[0, 1]"),
        ({"learn": {"algorithm": "2"}}, "learn.algorithm", "1a"),
        ({"learn": {"initial_theta": [0.5, 1.1]}}, "learn.initial_theta[1]", "(0, 1]"),
        (
            {"learn": {"change_points": [{"time_s": 5, "theta": {"class2": 0}}]}},
            "learn.change_points.0.theta.class2",
            "(0, 1]",
        ),
    ],
)
def test_bad_parameters_are_scenario_errors(
    params: dict[str, Any], field: str, expected: str
) -> None:
    with pytest.raises(ScenarioError) as info:
        spec_from_dict(mdp_scenario(2, **params))
    text = str(info.value)
    assert "scheduler.allocator.params" in text and field in text and expected in text


def test_registered_by_name() -> None:
    assert isinstance(create("allocator", "mdp"), MdpAllocator)


def test_a_scenario_the_mdp_cannot_model_is_a_clear_policy_error() -> None:
    data = mdp_scenario(2)
    data["workload"]["classes"][0]["size"] = {"kind": "deterministic", "value_s": 0.6}
    spec = spec_from_dict(data)
    with pytest.raises(PolicyError, match="workload.classes.0.size: expected an exponential"):
        Engine(spec)
    # EQUI across classes needs no model.
    Engine(spec, allocator=MdpAllocator(policy="equi")).run()
