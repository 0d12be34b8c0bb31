"""`AllocatorConformance`: the conformance suite an allocator's tests inherit.

Define `make_allocator()`; optionally `pool_scenario()` and `check_allocation(view, cores)`
for the policy's own invariants. A whole run checks every decision (`rules.check_allocation`)
and that the view is not mutated; the suite also checks determinism for a seed, that the
compiled and the Python path agree, an empty pool and pickling.
"""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.metrics import RunResult
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies.base import Allocation, Allocator, PoolView
from clusteremu.cluster.testing.conformance_scenarios import (
    Scenario,
    as_spec,
    small_pool_scenario,
)
from clusteremu.cluster.testing.rules import check_allocation, equal_tables


class AllocatorConformance:
    """Inherit and define `make_allocator()`; optionally override `pool_scenario()` and
    `check_allocation(view, cores)` (policy-specific invariants on every decision)."""

    def make_allocator(self) -> Allocator:
        raise NotImplementedError

    def pool_scenario(self) -> Scenario:
        return small_pool_scenario()

    def _spec(self) -> SimulationSpec:
        return as_spec(self.pool_scenario())

    def check_allocation(self, view: PoolView, cores: np.ndarray) -> None:
        """Policy-specific invariants on every decision; override to add your own."""

    def _checked_run(self) -> tuple[RunResult, dict[str, int]]:
        allocator = self.make_allocator()
        original = allocator.allocate
        record = {"calls": 0, "nonempty_calls": 0}

        def checked(view: PoolView) -> Allocation:
            before = {
                f.name: np.array(getattr(view, f.name), copy=True)
                for f in dataclasses.fields(PoolView)
            }
            decision = original(view)
            record["calls"] += 1
            record["nonempty_calls"] += int(view.job_ids.size > 0)
            problems = check_allocation(view, decision)
            problems += [
                f"the policy mutated view.{name}"
                for name, old in before.items()
                if not np.array_equal(np.asarray(getattr(view, name)), old)
            ]
            assert not problems, f"at t={view.time_s:g} s: " + "; ".join(problems)
            self.check_allocation(view, np.asarray(decision.cores, dtype=np.float64))
            return decision

        allocator.allocate = checked  # type: ignore[method-assign]
        result = Engine(self._spec(), allocator=allocator, force_python_policies=True).run()
        return result, record

    def test_capacity_and_views(self) -> None:
        result, record = self._checked_run()
        assert record["nonempty_calls"] > 0
        assert result.summary["jobs_completed"] > 0
        assert result.summary["jobs_unfinished"] == 0

    def test_deterministic_for_a_seed(self) -> None:
        spec = self._spec()
        a = Engine(spec, allocator=self.make_allocator()).run()
        b = Engine(spec, allocator=self.make_allocator()).run()
        assert equal_tables(a, b)

    def test_compiled_and_python_paths_agree(self) -> None:
        allocator = self.make_allocator()
        if allocator.compiled is None:
            pytest.skip("no compiled path")
        spec = self._spec()
        fast = Engine(spec, allocator=self.make_allocator()).run()
        slow = Engine(spec, allocator=self.make_allocator(), force_python_policies=True).run()
        np.testing.assert_allclose(
            fast.jobs["end_s"].to_numpy(), slow.jobs["end_s"].to_numpy(), rtol=1e-9, atol=1e-9
        )

    def test_empty_pool(self) -> None:
        allocator = self.make_allocator()
        spec = self._spec()
        allocator.setup(spec, np.random.default_rng(0))
        empty = np.zeros(0)
        ids = np.zeros(0, dtype=np.int64)
        pool = spec.pools[0]
        view = PoolView(0.0, pool.name, pool.cores, ids, ids, empty, empty, empty, empty, empty)
        decision = allocator.allocate(view)
        assert not check_allocation(view, decision)
        assert np.asarray(decision.cores).size == 0

    def test_picklable(self) -> None:
        allocator = self.make_allocator()
        allocator.setup(self._spec(), np.random.default_rng(0))
        clone = pickle.loads(pickle.dumps(allocator))
        assert type(clone) is type(allocator)
