"""`ScalerConformance`: the conformance suite a scaler's tests inherit.

Define `make_scaler()`; optionally `scale_scenario()`. Whole runs check every decision
(`rules.check_scaling`), that the view is not mutated and that capacity holds, with and
without failing nodes; hand-made views hold empty queues and clusters and down and
draining nodes; the suite also checks determinism for a seed, that the compiled and the
Python path agree, and pickling.
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Sequence

import numpy as np
import pytest

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.layout import NI, NodeStatus
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies.base import Release, Rent, Scaler, ScaleView
from clusteremu.cluster.testing.conformance_scenarios import (
    Scenario,
    as_spec,
    small_scale_scenario,
    with_failures,
)
from clusteremu.cluster.testing.rules import check_scaling, equal_tables, run_capacity_violations


class ScalerConformance:
    """Inherit and define `make_scaler()`; optionally override `scale_scenario()`."""

    def make_scaler(self) -> Scaler:
        raise NotImplementedError

    def scale_scenario(self) -> Scenario:
        return small_scale_scenario()

    def _spec(self) -> SimulationSpec:
        return as_spec(self.scale_scenario())

    def _python(self) -> bool:
        return type(self.make_scaler()).scale is not Scaler.scale

    def checked_scaler(self) -> tuple[Scaler, dict[str, int]]:
        scaler = self.make_scaler()
        original = scaler.scale
        calls = {"calls": 0, "rents": 0, "releases": 0}

        def scale(view: ScaleView) -> list[Rent | Release]:
            before = {
                f.name: np.array(getattr(view, f.name), copy=True)
                for f in dataclasses.fields(ScaleView)
                if f.name not in ("time_s", "node_type_names")
            }
            decisions = original(view)
            problems = check_scaling(view, decisions)
            problems += [
                f"the policy mutated view.{name}"
                for name, old in before.items()
                if not np.array_equal(np.asarray(getattr(view, name)), old)
            ]
            assert not problems, f"at t={view.time_s:g} s: " + "; ".join(problems)
            calls["calls"] += 1
            calls["rents"] += sum(int(d.count) for d in decisions if isinstance(d, Rent))
            calls["releases"] += sum(isinstance(d, Release) for d in decisions)
            return decisions

        scaler.scale = scale  # type: ignore[method-assign]
        return scaler, calls

    def test_decisions_are_legal_and_capacity_holds(self) -> None:
        if not self._python():
            pytest.skip("no Python decision function")
        scaler, calls = self.checked_scaler()
        engine = Engine(self._spec(), scaler=scaler, force_python_policies=True)
        result = engine.run()
        assert calls["calls"] > 0
        assert not run_capacity_violations(engine)
        s = result.summary
        assert s["jobs_unfinished"] == 0
        assert s["nodes_rented"] == engine.nodes_used - len(engine.spec.nodes)
        assert s["cost_usd"] >= 0 and s["startup_usd"] >= 0 and s["operating_usd"] >= 0
        released = engine.nodes_i[NI.STATUS, : engine.nodes_used] == NodeStatus.RELEASED
        assert int(released.sum()) == calls["releases"]

    def test_deterministic_for_a_seed(self) -> None:
        spec = self._spec()
        a = Engine(spec, scaler=self.make_scaler()).run()
        b = Engine(spec, scaler=self.make_scaler()).run()
        assert equal_tables(a, b)
        assert a.summary["cost_usd"] == b.summary["cost_usd"]

    def test_compiled_and_python_paths_agree(self) -> None:
        """A scaler with a compiled function (`compiled`) and a Python `scale` rents and
        releases the same nodes at the same times on both paths, failures included."""
        if self.make_scaler().compiled is None or not self._python():
            pytest.skip("not both a compiled and a Python decision function")
        for spec in (self._spec(), with_failures(self._spec(), 60.0, 10.0)):
            fast = Engine(spec, scaler=self.make_scaler()).run()
            slow = Engine(spec, scaler=self.make_scaler(), force_python_policies=True).run()
            assert equal_tables(fast, slow)
            for key in ("nodes_rented", "cost_usd"):
                assert fast.summary[key] == slow.summary[key], key

    def _view(self, queue: int, nodes: Sequence[int]) -> ScaleView:
        """A hand-made view: `queue` one-core jobs of class 0 waiting, and a node row of
        every status in `nodes` (type 0, idle)."""
        spec = self._spec()
        n = len(nodes)
        return ScaleView(
            time_s=0.0,
            queue=np.arange(queue, dtype=np.int64),
            class_index=np.zeros(queue, dtype=np.int64),
            request_cpu=np.ones(queue),
            node_type=np.zeros(n, dtype=np.int64),
            node_status=np.asarray(nodes, dtype=np.int64),
            running_jobs=np.zeros(n, dtype=np.int64),
            free_cpu=np.full(n, spec.node_types[0].cpu, dtype=np.float64),
            node_type_names=tuple(t.name for t in spec.node_types),
        )

    def _set_up(self) -> Scaler:
        scaler = self.make_scaler()
        scaler.setup(self._spec(), np.random.default_rng(0))
        return scaler

    def test_empty_queue_and_empty_cluster(self) -> None:
        if not self._python():
            pytest.skip("no Python decision function")
        cases = [
            self._view(0, []),
            self._view(5, []),
            self._view(0, [NodeStatus.UP, NodeStatus.BOOTING, NodeStatus.RELEASED]),
        ]
        for view in cases:
            decisions = self._set_up().scale(view)
            problems = check_scaling(view, decisions)
            assert not problems, "; ".join(problems)

    def test_down_and_draining_nodes_in_a_view(self) -> None:
        """Views with down and draining nodes (after failures and drains): legal decisions."""
        if not self._python():
            pytest.skip("no Python decision function")
        for view in (
            self._view(4, [NodeStatus.DOWN]),
            self._view(2, [NodeStatus.DOWN, NodeStatus.DRAINING, NodeStatus.UP]),
            self._view(0, [NodeStatus.DRAINING, NodeStatus.DOWN, NodeStatus.BOOTING]),
        ):
            decisions = self._set_up().scale(view)
            problems = check_scaling(view, decisions)
            assert not problems, "; ".join(problems)

    def test_failing_nodes(self) -> None:
        """Every node type fails at random (up 60 s, down 10 s on average): the scaler is
        asked after failures and recoveries, its decisions stay legal, capacity holds and
        every job is served."""
        if not self._python():
            pytest.skip("no Python decision function")
        scaler, calls = self.checked_scaler()
        engine = Engine(
            with_failures(self._spec(), 60.0, 10.0), scaler=scaler, force_python_policies=True
        )
        result = engine.run()
        assert result.summary["node_failures"] > 0
        assert calls["calls"] > 0
        assert not run_capacity_violations(engine)
        assert result.summary["jobs_unfinished"] == 0

    def test_picklable(self) -> None:
        scaler = self._set_up()
        clone = pickle.loads(pickle.dumps(scaler))
        assert type(clone) is type(scaler)
        if self._python():
            view = self._view(3, [NodeStatus.UP])
            assert clone.scale(view) == scaler.scale(view)
