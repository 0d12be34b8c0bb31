"""The placer suite checks the compiled path too (issue 41): a compiled placer that places
on booting or released nodes, with a correct Python twin, fails it; a compiled placer
without a twin is checked on the compiled path and the rest is skipped, saying why."""

from __future__ import annotations

import numpy as np
import pytest

from clusteremu.cluster.policies.base import PlacementView
from clusteremu.cluster.policies.compiled_table import compiled_placer, fits
from clusteremu.cluster.policies.fifo import FcfsPlacer, FirstFit
from clusteremu.cluster.testing import PlacerConformance


@compiled_placer
def place_ignoring_status(job, now_s, view):  # type: ignore[no-untyped-def]
    """First fit on free room alone: booting, released and down nodes included (wrong)."""
    for k in range(view.free_cpu.shape[0]):
        if (
            view.node_status[k] != 0  # any row handed out
            and view.free_slots[k] >= 1.0
            and view.free_cpu[k] >= view.request_cpu[job]
            and view.free_mem[k] >= view.request_mem[job]
            and view.request_gpu[job] == 0.0
        ):
            return k
        if fits(view, job, k):
            return k
    return -1


class StatusBlind(FirstFit):
    """A correct Python twin (first fit, the engine's rule) over a wrong compiled one."""

    name = "status-blind"  # type: ignore[assignment]
    compiled = place_ignoring_status


class StatusBlindSuite(PlacerConformance):
    def make_placer(self) -> StatusBlind:
        return StatusBlind()


def test_the_python_path_alone_passes() -> None:
    """What the suite ran before: the Python path of the wrong placer is right."""
    suite = StatusBlindSuite()
    suite.checked_run(suite._spec())


def test_placing_on_booting_and_released_nodes_is_caught() -> None:
    with pytest.raises(AssertionError, match="compiled path.*not up|not up.*compiled"):
        StatusBlindSuite().test_inactive_nodes_are_never_used()


def test_placing_on_down_and_draining_nodes_is_caught() -> None:
    with pytest.raises(AssertionError, match="compiled path"):
        StatusBlindSuite().test_down_and_draining_nodes_are_never_used()


@compiled_placer
def place_first(job, now_s, view):  # type: ignore[no-untyped-def]
    for k in range(view.free_cpu.shape[0]):
        if fits(view, job, k):
            return k
    return -1


class NoTwin(FcfsPlacer):
    """A compiled first fit without its Python twin."""

    name = "no-twin"
    compiled = place_first


class NoTwinSuite(PlacerConformance):
    def make_placer(self) -> NoTwin:
        return NoTwin()


def test_a_missing_twin_skips_saying_why() -> None:
    suite = NoTwinSuite()
    why = suite.missing_twin()
    assert why is not None and "Python twin" in why and "adding_a_policy.md" in why
    for test in (
        suite.test_empty_cluster,
        suite.test_compiled_and_python_paths_agree,
        suite.test_gpu_shares_in_a_view,
    ):
        with pytest.raises(pytest.skip.Exception, match="The Python twin"):
            test()


def test_a_missing_twin_still_runs_the_compiled_path() -> None:
    suite = NoTwinSuite()
    runs = suite.checked_runs(suite._spec())
    assert [path for path, _, _ in runs] == ["compiled"]
    suite.test_inactive_nodes_are_never_used()


def test_a_twin_that_decides_otherwise_is_caught() -> None:
    class LastFit(FcfsPlacer):
        name = "last-fit-twin"
        compiled = place_first

        def choose_node(self, view: PlacementView, i: int, fits, count):  # type: ignore[no-untyped-def]
            return int(np.flatnonzero(fits)[-1])

    class Suite(PlacerConformance):
        def make_placer(self) -> LastFit:
            return LastFit()

    with pytest.raises(AssertionError, match="differently"):
        Suite().test_decisions_are_legal()
