"""Conformance suites every policy's tests inherit (after Optuna's sampler test suites).

Subclass `AllocatorConformance` and define `make_allocator()` (and optionally
`pool_scenario()`), or `PlacerConformance` with `make_placer()` (and `placement_scenario()`).
Each suite checks: capacity never exceeded and no negative allocation, decisions name real
jobs and nodes, determinism for a seed, the view is not mutated, an empty pool / queue is
handled, the policy is picklable, and (for policies with a compiled path) that the compiled
and Python decision paths give identical per-job tables.
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

import numpy as np
import pytest

from cluster.engine import Engine
from cluster.metrics import RunResult
from cluster.model import SimulationSpec
from cluster.policies.base import (
    Allocation,
    Allocator,
    Placement,
    PlacementView,
    Placer,
    PoolView,
)
from scenarios.loader import spec_from_dict

ALLOC_EPS = 1e-9


def small_pool_scenario(jobs: int = 3000, seed: int = 5) -> dict[str, Any]:
    """Three classes with different speed-ups, costs and sizes sharing an 8-core pool."""
    return {
        "name": "conformance-pool",
        "seed": seed,
        "stop": {"jobs": jobs, "warmup_jobs": jobs // 10},
        "cluster": {"pools": [{"name": "cores", "cores": 8}]},
        "workload": {
            "classes": [
                {
                    "name": "a",
                    "arrival": {"kind": "poisson", "rate_per_s": 2.0},
                    "size": {"kind": "exponential", "mean_s": 1.0},
                    "speedup": {"kind": "power", "exponent": 0.5},
                    "holding_cost": 2.0,
                    "pool": "cores",
                },
                {
                    "name": "b",
                    "arrival": {"kind": "poisson", "rate_per_s": 1.0},
                    "size": {
                        "kind": "hyperexponential",
                        "probabilities": [0.5, 0.5],
                        "means_s": [1.0, 3.0],
                    },
                    "speedup": {"kind": "amdahl", "parallel_fraction": 0.8},
                    "pool": "cores",
                },
                {
                    "name": "c",
                    "arrival": {"kind": "poisson", "rate_per_s": 1.0},
                    "size": {"kind": "exponential", "mean_s": 0.5},
                    "speedup": {"kind": "linear"},
                    "pool": "cores",
                },
            ]
        },
    }


def small_placement_scenario(jobs: int = 3000, seed: int = 5) -> dict[str, Any]:
    """Two node types and two classes with different multi-resource requests."""
    return {
        "name": "conformance-placement",
        "seed": seed,
        "stop": {"jobs": jobs, "warmup_jobs": jobs // 10},
        "cluster": {
            "node_types": [
                {"name": "small", "cpu": 2, "memory_gb": 4},
                {"name": "big", "cpu": 8, "memory_gb": 32, "gpu": 1, "speed": 2.0},
            ],
            "nodes": [{"type": "small", "count": 4}, {"type": "big", "count": 2}],
        },
        "workload": {
            "classes": [
                {
                    "name": "one",
                    "arrival": {"kind": "poisson", "rate_per_s": 3.0},
                    "size": {"kind": "exponential", "mean_s": 1.0},
                    "request": {"cpu": 1, "memory_gb": 1},
                },
                {
                    "name": "four",
                    "arrival": {"kind": "poisson", "rate_per_s": 0.5},
                    "size": {"kind": "exponential", "mean_s": 2.0},
                    "request": {"cpu": 4, "memory_gb": 8, "gpu": 1},
                },
            ]
        },
    }


def equal_tables(a: RunResult, b: RunResult) -> bool:
    """Column-by-column equality of two per-job tables (NaN equals NaN)."""
    if a.jobs.column_names != b.jobs.column_names or a.jobs.num_rows != b.jobs.num_rows:
        return False
    for name in a.jobs.column_names:
        x = a.jobs[name].to_numpy(zero_copy_only=False)
        y = b.jobs[name].to_numpy(zero_copy_only=False)
        if x.dtype.kind == "f":
            if not np.array_equal(x, y, equal_nan=True):
                return False
        elif not a.jobs[name].equals(b.jobs[name]):
            return False
    return True


class _Recorder:
    """Wraps a policy's Python decision function to check every view and decision."""

    def __init__(self) -> None:
        self.calls = 0
        self.nonempty_calls = 0


class AllocatorConformance:
    """Inherit and define `make_allocator()`; optionally override `pool_scenario()`."""

    def make_allocator(self) -> Allocator:
        raise NotImplementedError

    def pool_scenario(self) -> dict[str, Any]:
        return small_pool_scenario()

    def _spec(self) -> SimulationSpec:
        return spec_from_dict(self.pool_scenario())

    def _checked_run(self) -> tuple[RunResult, _Recorder]:
        allocator = self.make_allocator()
        record = _Recorder()
        original = allocator.allocate

        def checked(view: PoolView) -> Allocation:
            before = copy.deepcopy(view)
            decision = original(view)
            record.calls += 1
            record.nonempty_calls += int(view.job_ids.size > 0)
            cores = np.asarray(decision.cores, dtype=np.float64)
            assert cores.shape == view.job_ids.shape, "one core count per job in the view"
            assert np.all(np.isfinite(cores)) and np.all(cores >= 0), "no negative allocation"
            assert cores.sum() <= view.cores * (1 + ALLOC_EPS) + ALLOC_EPS, "capacity exceeded"
            for field in ("job_ids", "class_index", "remaining", "size", "arrival_s"):
                assert np.array_equal(getattr(view, field), getattr(before, field)), (
                    f"the policy mutated view.{field}"
                )
            self.check_allocation(view, cores)
            return decision

        allocator.allocate = checked  # type: ignore[method-assign]
        result = Engine(self._spec(), allocator=allocator, force_python_policies=True).run()
        return result, record

    def check_allocation(self, view: PoolView, cores: np.ndarray) -> None:
        """Policy-specific invariants on every decision; override to add your own."""

    def test_capacity_and_views(self) -> None:
        result, record = self._checked_run()
        assert record.nonempty_calls > 0
        assert result.summary["jobs_completed"] > 0
        assert result.summary["jobs_unfinished"] == 0

    def test_deterministic_for_a_seed(self) -> None:
        spec = self._spec()
        a = Engine(spec, allocator=self.make_allocator()).run()
        b = Engine(spec, allocator=self.make_allocator()).run()
        assert equal_tables(a, b)

    def test_compiled_and_python_paths_agree(self) -> None:
        allocator = self.make_allocator()
        if allocator.kernel_code == 0:
            pytest.skip("no compiled path")
        spec = self._spec()
        fast = Engine(spec, allocator=self.make_allocator()).run()
        slow = Engine(spec, allocator=self.make_allocator(), force_python_policies=True).run()
        np.testing.assert_allclose(
            fast.jobs["end_s"].to_numpy(), slow.jobs["end_s"].to_numpy(), rtol=1e-9, atol=1e-9
        )

    def test_empty_pool(self) -> None:
        allocator = self.make_allocator()
        allocator.setup(self._spec(), np.random.default_rng(0))
        empty = np.zeros(0)
        view = PoolView(
            0.0,
            "cores",
            8.0,
            np.zeros(0, dtype=np.int64),
            np.zeros(0, dtype=np.int64),
            empty,
            empty,
            empty,
            empty,
            empty,
        )
        decision = allocator.allocate(view)
        assert np.asarray(decision.cores).size == 0

    def test_picklable(self) -> None:
        allocator = self.make_allocator()
        allocator.setup(self._spec(), np.random.default_rng(0))
        clone = pickle.loads(pickle.dumps(allocator))
        assert type(clone) is type(allocator)


class PlacerConformance:
    """Inherit and define `make_placer()`; optionally override `placement_scenario()`."""

    def make_placer(self) -> Placer:
        raise NotImplementedError

    def placement_scenario(self) -> dict[str, Any]:
        return small_placement_scenario()

    def _spec(self) -> SimulationSpec:
        return spec_from_dict(self.placement_scenario())

    def test_decisions_are_legal(self) -> None:
        placer = self.make_placer()
        original = placer.place
        calls = {"n": 0}

        def checked(view: PlacementView) -> list[Placement]:
            before = copy.deepcopy(view)
            decisions = original(view)
            calls["n"] += 1
            free = np.stack([view.free_cpu, view.free_memory_gb, view.free_gpu]).copy()
            waiting = {int(j): i for i, j in enumerate(view.queue)}
            for d in decisions:
                assert d.job in waiting, "decision names a job that is not waiting"
                assert 0 <= d.node < view.free_cpu.size, "decision names a node that does not exist"
                i = waiting.pop(d.job)
                need = np.array(
                    [view.request_cpu[i], view.request_memory_gb[i], view.request_gpu[i]]
                )
                free[:, d.node] -= need
                assert np.all(free[:, d.node] >= -ALLOC_EPS), "node capacity exceeded"
            for field in ("queue", "free_cpu", "free_memory_gb", "free_gpu"):
                assert np.array_equal(getattr(view, field), getattr(before, field)), (
                    f"the policy mutated view.{field}"
                )
            return decisions

        placer.place = checked  # type: ignore[method-assign]
        result = Engine(self._spec(), placer=placer, force_python_policies=True).run()
        assert calls["n"] > 0
        assert result.summary["jobs_completed"] > 0

    def test_deterministic_for_a_seed(self) -> None:
        spec = self._spec()
        a = Engine(spec, placer=self.make_placer()).run()
        b = Engine(spec, placer=self.make_placer()).run()
        assert equal_tables(a, b)

    def test_compiled_and_python_paths_agree(self) -> None:
        if self.make_placer().kernel_code == 0:
            pytest.skip("no compiled path")
        spec = self._spec()
        fast = Engine(spec, placer=self.make_placer()).run()
        slow = Engine(spec, placer=self.make_placer(), force_python_policies=True).run()
        assert equal_tables(fast, slow)

    def test_empty_queue(self) -> None:
        placer = self.make_placer()
        spec = self._spec()
        placer.setup(spec, np.random.default_rng(0))
        engine = Engine(spec, placer=self.make_placer())
        view = engine.placement_view()
        assert view.queue.size == 0
        assert list(placer.place(view)) == []

    def test_picklable(self) -> None:
        placer = self.make_placer()
        placer.setup(self._spec(), np.random.default_rng(0))
        clone = pickle.loads(pickle.dumps(placer))
        assert type(clone) is type(placer)
