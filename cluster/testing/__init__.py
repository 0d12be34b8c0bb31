"""Test suites shipped with clusteremu, for your own policies (as `optuna.testing` does).

Subclass a conformance suite in your test module and say how to build your policy; pytest
collects the inherited tests::

    from clusteremu.cluster.testing import PlacerConformance

    class TestMyPlacer(PlacerConformance):
        def make_placer(self):
            return MyPlacer()

The suites need pytest (and numpy, pyarrow), nothing else from the test tree.
"""

from __future__ import annotations

from clusteremu.cluster.testing.conformance import (
    AllocatorConformance,
    PlacerConformance,
    ScalerConformance,
    check_allocation,
    check_placements,
    check_scaling,
    equal_tables,
    gpu_scenario,
    run_capacity_violations,
    small_placement_scenario,
    small_pool_scenario,
    small_scale_scenario,
)

__all__ = [
    "AllocatorConformance",
    "PlacerConformance",
    "ScalerConformance",
    "check_allocation",
    "check_placements",
    "check_scaling",
    "equal_tables",
    "gpu_scenario",
    "run_capacity_violations",
    "small_placement_scenario",
    "small_pool_scenario",
    "small_scale_scenario",
]
