"""`PlacerConformance`: the conformance suite a placer's tests inherit.

Define `make_placer()`; optionally `placement_scenario()` and `gpu_scenario()`. Whole runs
are made on each decision path the placer has (the Python path with every decision checked
as it is made, and the compiled one), with worker slots, inactive, failed and draining
nodes, patience timeouts and shared GPUs; hand-made views check empty queues and clusters,
slots and GPU shares; a compiled placer without its Python twin skips the tests that need
it, saying so (`TWIN_DOC`).
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
import pytest

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.layout import GPU_MILLI, JF, JI, NI, JobState, NodeStatus
from clusteremu.cluster.metrics import RunResult
from clusteremu.cluster.model import SimulationSpec, TimelineEvent
from clusteremu.cluster.policies import compiled_table
from clusteremu.cluster.policies.base import Placement, PlacementView, Placer, PolicyError
from clusteremu.cluster.policies.fifo import FcfsPlacer
from clusteremu.cluster.testing.conformance_scenarios import (
    Scenario,
    as_spec,
    gpu_scenario,
    small_placement_scenario,
    with_startup_delay,
    with_timeline,
    with_timeouts,
    with_worker_slots,
)
from clusteremu.cluster.testing.rules import (
    check_placements,
    equal_tables,
    mutated,
    placed_jobs,
    run_capacity_violations,
    view_arrays,
)

#: The section of the policy authors' guide on a compiled placer's Python twin.
TWIN_DOC = "docs/adding_a_policy.md, section 'The Python twin'"


class PlacerConformance:
    """Inherit and define `make_placer()`; optionally override `placement_scenario()` and
    `gpu_scenario()` (return None to skip the shared-GPU run).

    Every whole run is made on each decision path the placer has: the Python path
    (`force_python_policies=True`, every decision checked as it is made) and, for a placer
    with a compiled function (`compiled`), the compiled path (checked by the engine as it
    runs, and over the whole run after it); the two must give the same per-job table. A
    compiled placer without a Python twin (its `place` raises NotImplementedError) is
    checked on the compiled path only, and the tests that need the twin (hand-made views,
    compiled == Python) are skipped, saying so (`TWIN_DOC`)."""

    #: Patience given to every class in the timeout test, seconds.
    timeout_s: ClassVar[float] = 0.3

    def make_placer(self) -> Placer:
        raise NotImplementedError

    def placement_scenario(self) -> Scenario:
        return small_placement_scenario()

    def gpu_scenario(self) -> Scenario | None:
        return gpu_scenario()

    def _spec(self) -> SimulationSpec:
        return as_spec(self.placement_scenario())

    # -- helpers --

    def missing_twin(self) -> str | None:
        """Why the placer has no Python decision path, or None when it has one: a
        `Placer` that keeps the base class's `place`, or an `FcfsPlacer` that defines
        neither `choose_node` nor `choose` (both raise NotImplementedError)."""
        placer = self.make_placer()
        cls = type(placer)
        if cls.place is Placer.place:
            missing = "it does not define place(view)"
        elif isinstance(placer, FcfsPlacer) and all(
            getattr(cls, name) is getattr(FcfsPlacer, name)
            for name in ("place", "choose_node", "choose")
        ):
            missing = "an FcfsPlacer that defines neither choose_node nor choose"
        else:
            return None
        kind = "a compiled placer" if placer.compiled is not None else "a placer"
        return (
            f"{cls.__name__} is {kind} without a Python decision path ({missing}); "
            f"a compiled placer needs its Python twin for the suite's checks of single "
            f"decisions and of compiled == Python: see {TWIN_DOC}"
        )

    def require_twin(self) -> None:
        """Skip the test, saying why, for a compiled placer without a Python twin; fail it
        for a placer with neither path."""
        why = self.missing_twin()
        if why is None:
            return
        if self.make_placer().compiled is None:
            pytest.fail(why)
        pytest.skip(why)

    def checked_placer(self) -> tuple[Placer, dict[str, int]]:
        """A fresh placer whose every decision is checked (legal, view not mutated)."""
        placer = self.make_placer()
        original = placer.place
        calls = {"calls": 0, "placed": 0}

        def place(view: PlacementView) -> list[Placement]:
            before = view_arrays(view)
            decisions = original(view)
            problems = check_placements(view, decisions) + mutated(before, view)
            assert not problems, f"at t={view.time_s:g} s: " + "; ".join(problems)
            calls["calls"] += 1
            calls["placed"] += len(decisions)
            return decisions

        placer.place = place  # type: ignore[method-assign]
        return placer, calls

    def checked_run(
        self, spec: SimulationSpec, prepare: Callable[[Engine], object] | None = None
    ) -> tuple[Engine, RunResult, dict[str, int]]:
        """Run `spec` on the Python path with every decision checked, then check capacity
        over the whole run. `prepare(engine)` runs before the run (rent, release)."""
        placer, calls = self.checked_placer()
        engine = Engine(spec, placer=placer, force_python_policies=True)
        if prepare is not None:
            prepare(engine)
        result = engine.run()
        problems = run_capacity_violations(engine)
        assert not problems, "on the Python path: " + "; ".join(problems)
        assert calls["calls"] > 0 and calls["placed"] > 0
        return engine, result, calls

    def compiled_run(
        self, spec: SimulationSpec, prepare: Callable[[Engine], object] | None = None
    ) -> tuple[Engine, RunResult]:
        """Run `spec` on the compiled path (the engine checks every placement as it applies
        it: a refused one fails the test), then check capacity over the whole run."""
        placer = self.make_placer()
        name = getattr(compiled_table.compiled_of(placer), "__name__", "compiled")
        engine = Engine(spec, placer=placer)
        if prepare is not None:
            prepare(engine)
        try:
            result = engine.run()
        except PolicyError as exc:
            raise AssertionError(f"on the compiled path ({name}): {exc}") from exc
        problems = run_capacity_violations(engine)
        assert not problems, f"on the compiled path ({name}): " + "; ".join(problems)
        assert result.summary["jobs_completed"] > 0, f"on the compiled path ({name})"
        return engine, result

    def checked_runs(
        self, spec: SimulationSpec, prepare: Callable[[Engine], object] | None = None
    ) -> list[tuple[str, Engine, RunResult]]:
        """Run `spec` on every path the placer has, checked (`checked_run`,
        `compiled_run`): [(path, engine, result)], the Python path first; with both, their
        per-job tables must be equal."""
        runs: list[tuple[str, Engine, RunResult]] = []
        if self.missing_twin() is None:
            engine, result, _ = self.checked_run(spec, prepare)
            runs.append(("Python", engine, result))
        if self.make_placer().compiled is not None:
            runs.append(("compiled", *self.compiled_run(spec, prepare)))
        if not runs:
            pytest.fail(str(self.missing_twin()))
        if len(runs) == 2:
            assert equal_tables(runs[0][2], runs[1][2]), (
                f"the compiled and the Python path ran {spec.name!r} differently "
                f"(the twin must decide as the compiled function does: {TWIN_DOC})"
            )
        return runs

    def base_view(self, jobs: Sequence[int] = ()) -> PlacementView:
        """A plain view of the scenario's nodes, all up and empty, and a queue of one job
        per class in `jobs` (class indices) with the class's request."""
        spec = self._spec()
        engine = Engine(spec, placer=self.make_placer())
        live = engine.placement_view()
        fields: dict[str, Any] = {
            f.name: np.array(getattr(live, f.name), copy=True)
            for f in dataclasses.fields(PlacementView)
        }
        classes = np.asarray(jobs, dtype=np.int64)
        fields["time_s"] = 0.0
        fields["queue"] = np.arange(classes.size, dtype=np.int64)
        fields["class_index"] = classes
        for name, attr in (
            ("request_cpu", "cpu"),
            ("request_memory_gb", "memory_gb"),
            ("request_gpu", "gpu"),
        ):
            fields[name] = np.array(
                [getattr(spec.classes[c].request, attr) for c in classes], dtype=np.float64
            )
        return PlacementView(**fields)

    def set_up(self) -> Placer:
        placer = self.make_placer()
        placer.setup(self._spec(), np.random.default_rng(0))
        return placer

    def placed_classes(self) -> list[int]:
        return [c for c, jc in enumerate(self._spec().classes) if jc.pool is None]

    # -- whole runs --

    def test_decisions_are_legal(self) -> None:
        for path, _, result in self.checked_runs(self._spec()):
            assert result.summary["jobs_completed"] > 0, path

    def test_deterministic_for_a_seed(self) -> None:
        spec = self._spec()
        a = Engine(spec, placer=self.make_placer()).run()
        b = Engine(spec, placer=self.make_placer()).run()
        assert equal_tables(a, b)

    def test_compiled_and_python_paths_agree(self) -> None:
        if self.make_placer().compiled is None:
            pytest.skip("no compiled path")
        self.require_twin()
        spec = self._spec()
        fast = Engine(spec, placer=self.make_placer()).run()
        slow = Engine(spec, placer=self.make_placer(), force_python_policies=True).run()
        assert equal_tables(fast, slow), f"the twin decides otherwise: {TWIN_DOC}"

    def test_worker_slots(self) -> None:
        """With one or two worker slots per node, no node ever runs more jobs."""
        for slots in (1, 2):
            self.checked_runs(with_worker_slots(self._spec(), slots))

    def test_timeouts(self) -> None:
        """Jobs that leave unserved are never placed, and the queue moves on."""
        spec = with_timeouts(with_worker_slots(self._spec(), 1), self.timeout_s)
        for path, engine, result in self.checked_runs(spec):
            failed = engine.state.jobs_i[JI.STATE] == JobState.FAILED
            assert np.any(failed), f"no job timed out on the {path} path"
            assert result.summary["jobs_completed"] > 0, path

    def test_inactive_nodes_are_never_used(self) -> None:
        """Node 0 released and a node rented (booting 30 s) at t=0: no job runs on node 0,
        none on the rented node before it is ready."""
        spec = with_startup_delay(self._spec(), 30.0)
        rented: list[int] = []

        def release_and_rent(engine: Engine) -> None:
            engine.release(0)
            rented.append(engine.rent(engine.spec.nodes[-1]))
            assert engine.nodes_i[NI.STATUS, rented[-1]] == NodeStatus.BOOTING

        for path, engine, _ in self.checked_runs(spec, release_and_rent):
            s = engine.state
            ran = placed_jobs(engine) & (s.jobs_i[JI.STATE] == JobState.DONE)
            assert not np.any(s.jobs_i[JI.NODE, ran] == 0), (
                f"{path} path: a job ran on a released node"
            )
            on_rented = ran & (s.jobs_i[JI.NODE] == rented[-1])
            assert np.all(s.jobs_f[JF.START, on_rented] >= 30.0), (
                f"{path} path: a job ran on a booting node"
            )

    def test_down_and_draining_nodes_are_never_used(self) -> None:
        """Node 0 fails at t1 and recovers at t2, node 1 drains at t3 (a fifth, two and three
        fifths into the arrivals): no job starts on node 0 while it is down, no attempt on
        it spans the failure, none starts on node 1 after t3, and node 1 is released. The
        checked views show no down or draining node as active."""
        spec = self._spec()
        if len(spec.nodes) < 2:
            pytest.skip("the scenario has fewer than two nodes")
        arrival = Engine(spec, placer=self.make_placer()).jobs.arrival_s
        t1, t2, t3 = (float(arrival[arrival.size * i // 5]) for i in (1, 2, 3))
        spec = with_timeline(
            spec,
            TimelineEvent(t1, "fail", node=0),
            TimelineEvent(t2, "recover", node=0),
            TimelineEvent(t3, "drain", node=1),
        )
        for path, engine, result in self.checked_runs(spec):
            s = engine.state
            ran = placed_jobs(engine) & (s.jobs_i[JI.STATE] == JobState.DONE)
            start, end = s.jobs_f[JF.START], s.jobs_f[JF.END]
            on0 = ran & (s.jobs_i[JI.NODE] == 0)
            assert not np.any(on0 & (start >= t1) & (start < t2)), (
                f"{path} path: a job started on a down node"
            )
            assert not np.any(on0 & (start < t1) & (end > t1)), (
                f"{path} path: a job outlived its node's failure"
            )
            on1 = ran & (s.jobs_i[JI.NODE] == 1)
            assert not np.any(on1 & (start > t3)), f"{path} path: a job started on a draining node"
            assert engine.nodes_i[NI.STATUS, 1] == NodeStatus.RELEASED, path
            assert result.summary["node_failures"] == 1, path

    def test_shared_gpus(self) -> None:
        """Shared GPUs: legal per-GPU decisions over a whole run, on every path."""
        scenario = self.gpu_scenario()
        if scenario is None:
            pytest.skip("no GPU scenario for this placer")
        for path, engine, result in self.checked_runs(as_spec(scenario)):
            unfinished = result.summary["jobs_unfinished"]
            assert unfinished == 0 or engine.spec.stop.time_s is not None, path

    # -- hand-made views --

    def test_empty_queue(self) -> None:
        self.require_twin()
        placer = self.set_up()
        view = self.base_view([])
        assert list(placer.place(view)) == []
        engine = Engine(self._spec(), placer=self.make_placer())
        live = engine.placement_view()
        assert live.queue.size == 0
        assert list(placer.place(live)) == []

    def test_empty_cluster(self) -> None:
        """No node active, or every node full: nothing is placed."""
        self.require_twin()
        queue = self.placed_classes()
        view = self.base_view(queue)
        for changes in (
            {"active": np.zeros_like(view.active)},
            {"free_slots": np.zeros_like(view.free_slots)},
            {
                "free_cpu": np.zeros_like(view.free_cpu),
                "free_memory_gb": np.zeros_like(view.free_memory_gb),
                "free_gpu": np.zeros_like(view.free_gpu),
                "gpu_free_milli": np.zeros_like(view.gpu_free_milli),
            },
        ):
            full = dataclasses.replace(view, **changes)
            before = view_arrays(full)
            decisions = self.set_up().place(full)
            assert list(decisions) == [], f"placed on an empty cluster ({sorted(changes)})"
            assert not mutated(before, full)

    def test_only_active_nodes_with_a_slot_are_named(self) -> None:
        """Every node inactive but the last, then every node without a slot but the last:
        whatever is placed goes to the last node, at most one job in the second case."""
        self.require_twin()
        queue = self.placed_classes() * 3
        view = self.base_view(queue)
        n = view.active.size
        only_last = np.zeros(n, dtype=np.bool_)
        only_last[-1] = True
        for changes in (
            {"active": only_last},
            {"free_slots": np.where(only_last, 1.0, 0.0)},
        ):
            one = dataclasses.replace(view, **changes)
            decisions = self.set_up().place(one)
            problems = check_placements(one, decisions)
            assert not problems, "; ".join(problems)
            assert all(d.node == n - 1 for d in decisions)

    def test_gpu_shares_in_a_view(self) -> None:
        """Every GPU half used: a 1.0-GPU job may not be placed; a 0.5-GPU job may share."""
        self.require_twin()
        view = self.base_view(self.placed_classes()[:1])
        gpus = np.asarray(view.capacity_gpu)
        if not np.any(gpus >= 1):
            pytest.skip("the scenario has no GPUs")
        half = np.where(view.gpu_free_milli > 0, GPU_MILLI / 2, 0.0)
        base = dataclasses.replace(
            view,
            gpu_free_milli=half,
            free_gpu=half.sum(axis=1) / GPU_MILLI,
            active=np.asarray(gpus >= 1),
        )
        for gpu, may_place in ((1.0, False), (0.5, True)):
            one = dataclasses.replace(base, request_gpu=np.array([gpu]))
            decisions = self.set_up().place(one)
            problems = check_placements(one, decisions)
            assert not problems, f"{gpu} GPU: " + "; ".join(problems)
            if not may_place:
                assert list(decisions) == []

    def test_picklable(self) -> None:
        """A set-up placer pickles, and the copy decides as the original does."""
        placer = self.set_up()
        clone = pickle.loads(pickle.dumps(placer))
        assert type(clone) is type(placer)
        self.require_twin()
        view = self.base_view(self.placed_classes() * 2)
        assert list(clone.place(view)) == list(placer.place(view))
