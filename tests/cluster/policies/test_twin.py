"""A compiled placer's Python twin sees the whole view (issue 41): `FcfsPlacer.choose_node`
gets the view with the call's earlier placements taken off, and the Python view answers to
the compiled view's field names."""

from __future__ import annotations

import numpy as np

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.policies.base import Placement, PlacementView, Placer
from clusteremu.cluster.policies.compiled_table import compiled_placer, fits
from clusteremu.cluster.policies.fifo import FcfsPlacer, FirstFit
from clusteremu.cluster.testing import PlacerConformance, small_placement_scenario
from clusteremu.cluster.testing.conformance import as_spec


@compiled_placer
def place_tightest_memory(job, now_s, view):  # type: ignore[no-untyped-def]
    """Best fit on memory among the nodes that fit (ties: fewer free cores, then the
    first in node order); -1 if none."""
    best = -1
    for k in range(view.free_mem.shape[0]):
        if fits(view, job, k) and (
            best < 0
            or view.free_mem[k] < view.free_mem[best]
            or (view.free_mem[k] == view.free_mem[best] and view.free_cpu[k] < view.free_cpu[best])
        ):
            best = k
    return best


class TightestMemory(FcfsPlacer):
    """The docs' twin example (docs/adding_a_policy.md, 'The Python twin')."""

    name = "test-tightest-memory"
    compiled = place_tightest_memory

    def choose_node(self, view: PlacementView, i: int, fits, count):  # type: ignore[no-untyped-def]
        best = -1
        for k in np.flatnonzero(fits).tolist():
            if (
                best < 0
                or view.free_mem[k] < view.free_mem[best]
                or (
                    view.free_mem[k] == view.free_mem[best]
                    and view.free_cpu[k] < view.free_cpu[best]
                )
            ):
                best = k
        return best


class TestTightestMemory(PlacerConformance):
    """A twin that decides on memory passes the suite on both paths."""

    def make_placer(self) -> TightestMemory:
        return TightestMemory()


def a_view() -> PlacementView:
    class Suite(PlacerConformance):
        def make_placer(self) -> Placer:
            return FirstFit()

    return Suite().base_view([0, 0, 1])  # two one-core jobs and a four-core one


def test_the_python_view_answers_to_the_compiled_names() -> None:
    view = a_view()
    assert view.free_mem is view.free_memory_gb
    assert view.capacity_mem is view.capacity_memory_gb
    assert view.gpu_free is view.gpu_free_milli
    assert view.request_mem is view.request_memory_gb
    assert view.job_class is view.class_index


def test_the_engine_view_answers_to_them_too() -> None:
    seen: list[bool] = []

    class Looks(FirstFit):
        name = "looks"  # type: ignore[assignment]

        def place(self, view: PlacementView) -> list[Placement]:
            seen.append(
                view.free_mem is view.free_memory_gb and view.gpu_free is view.gpu_free_milli
            )
            return super().place(view)

    Engine(
        as_spec(small_placement_scenario(jobs=50)), placer=Looks(), force_python_policies=True
    ).run()
    assert seen and all(seen)


def test_choose_node_sees_the_call_s_earlier_placements() -> None:
    """Each head's view has the earlier heads' requests taken off; the caller's view is
    left as it was."""
    seen: list[tuple[int, float, float, float, int]] = []

    class Record(FcfsPlacer):
        name = "record"

        def choose_node(self, view, i, fits, count):  # type: ignore[no-untyped-def]
            k = int(np.argmax(fits))
            seen.append(
                (i, float(view.free_cpu[k]), float(view.free_mem[k]), float(view.free_slots[k]), k)
            )
            return k

    view = a_view()
    before = {name: np.array(getattr(view, name)) for name in ("free_cpu", "free_memory_gb")}
    decisions = Record().place(view)
    assert [d.job for d in decisions] == [0, 1, 2]
    (i0, cpu0, mem0, slots0, k0), (i1, cpu1, mem1, slots1, k1) = seen[:2]
    assert (i0, i1) == (0, 1)
    if k0 == k1:
        assert cpu1 == cpu0 - view.request_cpu[0]
        assert mem1 == mem0 - view.request_memory_gb[0]
    for name, old in before.items():
        assert np.array_equal(getattr(view, name), old)


def test_choose_still_serves_a_short_twin() -> None:
    class MostFree(FcfsPlacer):
        name = "short-most-free"

        def choose(self, fits, count, free_cpu):  # type: ignore[no-untyped-def]
            return int(fits.nonzero()[0][free_cpu[fits].argmax()])

    view = a_view()
    decisions = MostFree().place(view)
    assert len(decisions) == 3
    assert decisions[0].node == int(np.argmax(view.free_cpu))
