"""When the engine asks a Python placer, and what its view holds then (issue 27).

The loop does not ask a placer when provably nothing can be placed (`kernel.may_place`):
runs must be identical, job by job, to runs whose placer is asked every time
(`ask_when_nothing_fits`), for placers that backfill, spread and are strict FCFS, on
heterogeneous nodes, GPUs, node failures, drains and joins, over several seeds.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.layout import GPU_MILLI, NodeStatus
from clusteremu.cluster.policies import compiled
from clusteremu.cluster.policies.base import Placement, PlacementView, Placer, PolicyError
from clusteremu.cluster.policies.fifo import FirstFit, RandomFit
from clusteremu.cluster.testing import equal_tables
from clusteremu.scenarios.loader import load_scenario


class _Fitting(Placer):
    """Each waiting job in order to a node with room (the engine's own rule, GPUs too):
    `strict` stops at the first job that fits nowhere, otherwise later jobs backfill;
    `spread` picks the node with the most free cores, otherwise the first. Checks at every
    call that the view's `active` is the nodes' status now."""

    name = "test-fitting"
    strict: ClassVar[bool] = False
    spread: ClassVar[bool] = False

    def __init__(self) -> None:
        self.calls = 0

    def place(self, view: PlacementView) -> list[Placement]:
        self.calls += 1
        assert view.active.tolist() == [s == NodeStatus.UP for s in view.node_status.tolist()]
        free = [a.copy() for a in (view.free_cpu, view.free_memory_gb, view.free_slots)] + [
            view.gpu_free_milli.copy()
        ]
        ok = np.zeros(view.free_cpu.size, dtype=np.bool_)
        for i in range(view.queue.size):  # fitting_nodes: the engine's rule at the call's start
            request = (view.request_cpu[i], view.request_memory_gb[i], view.request_gpu[i])
            compiled.fit_mask(view.active, *free, *request, ok)
            assert view.fitting_nodes(i) == np.flatnonzero(ok).tolist()
            assert PlacementView.fitting_nodes(view, i) == view.fitting_nodes(i)  # hand-made
            mask = view.fit_mask(i)  # the same rule as a mask, an array of the caller's
            assert mask.dtype == np.bool_ and mask.flags.writeable
            assert np.array_equal(mask, ok)
            assert np.array_equal(PlacementView.fit_mask(view, i), ok)  # hand-made
        out = []
        for i, job in enumerate(view.queue.tolist()):
            c = float(view.request_cpu[i])
            m = float(view.request_memory_gb[i])
            g = float(view.request_gpu[i])
            if not compiled.fit_mask(view.active, *free, c, m, g, ok):
                if self.strict:
                    break
                continue
            k = int(np.argmax(np.where(ok, free[0], -np.inf))) if self.spread else int(ok.argmax())
            out.append(Placement(job, k))
            free[0][k] -= c
            free[1][k] -= m
            free[2][k] -= 1.0
            if g > 0:
                mask = compiled.choose_gpus(free[3], k, g)
                milli = np.floor(g * GPU_MILLI + 0.5) if g < 1 else GPU_MILLI
                for b in range(free[3].shape[1]):
                    if mask >> b & 1:
                        free[3][k, b] -= milli
        return out


class Backfill(_Fitting):
    name = "test-backfill"


class Spread(_Fitting):
    name = "test-spread"
    spread = True


class StrictSpread(_Fitting):
    name = "test-strict-spread"
    spread = True
    strict = True
    strict_fcfs = True


def _always(cls: type[Placer]) -> type[Placer]:
    """`cls`, asked even when nothing fits."""
    return type(f"{cls.__name__}Always", (cls,), {"ask_when_nothing_fits": True})


SCENARIOS = {
    # Failures at random, a rack outage and recovery, nodes joining and draining.
    "faults-rack": [],
    # Three node types (one with GPUs), two classes with different requests.
    "hetero-placement": [
        "stop.time_s=600",
        "stop.warmup_s=0",
        "workload.classes.0.arrival.rate_per_s=10",
        "workload.classes.1.arrival.rate_per_s=0.65",
    ],
}


def _run(name: str, seed: int, placer: Placer, python: bool = False) -> Any:
    spec = load_scenario(name, [*SCENARIOS[name], f"seed={seed}"])
    return Engine(spec, placer=placer, force_python_policies=python).run()


@pytest.mark.parametrize("name", sorted(SCENARIOS))
@pytest.mark.parametrize("placer", [Backfill, Spread, StrictSpread], ids=lambda c: c.name)
def test_not_asking_when_nothing_fits_changes_no_job(name: str, placer: type[_Fitting]) -> None:
    fewer = 0
    for seed in (1, 2, 3):
        lean, asked = placer(), _always(placer)()
        a, b = _run(name, seed, lean), _run(name, seed, asked)
        assert equal_tables(a, b), (name, seed)
        assert a.summary["jobs_completed"] == b.summary["jobs_completed"] > 0
        assert lean.calls <= asked.calls, (name, seed)  # type: ignore[attr-defined]
        fewer += asked.calls - lean.calls  # type: ignore[attr-defined]
    if name == "faults-rack":  # a queue builds up while the rack is down
        assert fewer > 0


@pytest.mark.parametrize("placer", [FirstFit, RandomFit], ids=lambda c: c.name)
def test_builtin_python_paths_still_match_the_compiled_ones(placer: type[Placer]) -> None:
    for seed in (1, 2):
        compiled_run = _run("faults-rack", seed, placer())
        for cls in (placer, _always(placer)):
            assert equal_tables(_run("faults-rack", seed, cls(), python=True), compiled_run)


def test_a_placer_that_places_nothing_is_not_asked_again_until_something_changes() -> None:
    class Hold(Placer):
        name = "test-hold"
        calls = 0

        def place(self, view: PlacementView) -> list[Placement]:
            Hold.calls += 1
            return []

    spec = load_scenario("mm-c", ["stop.jobs=300", "stop.warmup_jobs=0"])
    result = Engine(spec, placer=Hold()).run()
    assert result.summary["jobs_completed"] == 0
    # Once per arrival at most (the only changes: jobs join; nothing frees a node).
    assert 0 < Hold.calls <= result.jobs.num_rows


class _Raises(Placer):
    """Raises `error` at its `at`-th call, from inside the compiled loop's call back."""

    name = "test-raises"

    def __init__(self, error: BaseException, at: int = 5) -> None:
        self.error, self.at, self.calls = error, at, 0

    def place(self, view: PlacementView) -> list[Placement]:
        self.calls += 1
        if self.calls == self.at:
            raise self.error
        return [Placement(int(view.queue[0]), view.fitting_nodes(0)[0])]


@pytest.mark.parametrize("error", [ValueError("my bug"), KeyboardInterrupt()])
def test_what_a_placer_raises_reaches_the_caller_unchanged(error: BaseException) -> None:
    """The loop calls a Python placer through C: what it raises (an interrupt too) comes
    out of `run` as itself, and the engine stops where it was."""
    spec = load_scenario("mm-c", ["stop.jobs=500", "stop.warmup_jobs=0"])
    engine = Engine(spec, placer=_Raises(error))
    with pytest.raises(type(error)) as raised:
        engine.run()
    assert raised.value is error
    assert engine.placer.calls == 5  # type: ignore[attr-defined]
    assert engine.jobs_done < 500


def test_fitting_nodes_names_the_waiting_job_it_reads() -> None:
    spec = load_scenario("mm-c", ["stop.jobs=50", "stop.warmup_jobs=0"])
    engine = Engine(spec, placer=Backfill())
    engine.step(until_s=1.0)
    view = engine.placement_view()
    with pytest.raises(IndexError, match="waiting job"):
        view.fitting_nodes(view.queue.size)
    with pytest.raises(IndexError, match="waiting job"):
        view.fit_mask(view.queue.size)


class _Duplicates(Placer):
    """Places the head twice (more placements than there are waiting jobs)."""

    name = "test-duplicates"

    def place(self, view: PlacementView) -> list[Placement]:
        head = Placement(int(view.queue[0]), view.fitting_nodes(0)[0])
        return [head] * (view.queue.size + 1)


def test_more_placements_than_waiting_jobs_are_refused_by_name() -> None:
    spec = load_scenario("mm-c", ["stop.jobs=50", "stop.warmup_jobs=0"])
    with pytest.raises(PolicyError, match="test-duplicates.*not waiting"):
        Engine(spec, placer=_Duplicates()).run()


@pytest.mark.parametrize("placer", [Backfill, None])
def test_an_engine_is_freed_when_its_last_reference_goes(placer: type[Placer] | None) -> None:
    """The loop's callback into a Python placer lives for one `step` only: were the engine
    to hold it, engine and callback would form a cycle and a run's arrays would outlive it
    until the garbage collector ran (a run of 10^6 jobs then paid for fresh memory)."""
    import gc
    import weakref

    spec = load_scenario("mm-c", ["stop.jobs=200", "stop.warmup_jobs=0"])
    engine = Engine(spec, placer=placer() if placer else None)
    engine.run()
    gone = weakref.ref(engine)
    gc.disable()
    try:
        del engine
        assert gone() is None
    finally:
        gc.enable()


class _BadNumbers(Placer):
    """Places the first waiting job at a node given as `node` (NaN, a float, a bool)."""

    name = "test-bad-numbers"

    def __init__(self, node: object) -> None:
        self.node = node

    def place(self, view: PlacementView) -> list[Placement]:
        return [Placement(int(view.queue[0]), self.node), Placement(int(view.queue[0]), 0)]  # type: ignore[arg-type]


@pytest.mark.parametrize("node", [float("nan"), 2.7, True, np.float64(1.0)])
def test_a_placement_that_is_not_a_pair_of_integers_is_an_illegal_decision(node: object) -> None:
    """NaN, a float (which used to be truncated: 2.7 became node 2) or a bool as a node is
    the placer's illegal decision, named, not a numpy error from inside the engine."""
    spec = load_scenario("mm-c", ["stop.jobs=20", "stop.warmup_jobs=0"])
    with pytest.raises(PolicyError, match="must be integers"):
        Engine(spec, placer=_BadNumbers(node), force_python_policies=True).run()
