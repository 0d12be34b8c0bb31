"""The conformance suites now ship in the package: import them from `clusteremu.cluster.testing`.

This module re-exports them for test modules written before the move.
"""

from __future__ import annotations

from clusteremu.cluster.testing.conformance import (
    AllocatorConformance,
    PlacerConformance,
    ScalerConformance,
    equal_tables,
    small_placement_scenario,
    small_pool_scenario,
)

__all__ = [
    "AllocatorConformance",
    "PlacerConformance",
    "ScalerConformance",
    "equal_tables",
    "small_placement_scenario",
    "small_pool_scenario",
]
