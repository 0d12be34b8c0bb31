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

from cluster.engine import Engine
from cluster.layout import GPU_MILLI, NodeStatus
from cluster.policies import compiled
from cluster.policies.base import Placement, PlacementView, Placer
from cluster.policies.fifo import FirstFit, RandomFit
from cluster.testing import equal_tables
from scenarios.loader import load_scenario


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
