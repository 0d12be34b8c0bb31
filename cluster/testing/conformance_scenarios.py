"""The scenarios the conformance suites run, and the spec edits their tests make.

`small_pool_scenario`, `small_placement_scenario`, `gpu_scenario` and `small_scale_scenario`
are scenario dicts (as in a YAML file) that a suite runs unless the policy's test class
overrides its `*_scenario()` method; `as_spec` turns such a dict into a `SimulationSpec`.
The `with_*` functions return a spec with worker slots, patience timeouts, a start-up
delay, timeline events (docs/faults.md) or random node failures added.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from clusteremu.cluster.model import NodeFailures, SimulationSpec, TimelineEvent

Scenario = dict[str, Any] | SimulationSpec


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


def gpu_scenario(jobs: int = 600, seed: int = 5) -> dict[str, Any]:
    """Two-GPU nodes shared by half-GPU, whole-GPU and two-GPU jobs (and CPU-only ones)."""

    def cls(name: str, rate: float, gpu: float) -> dict[str, Any]:
        return {
            "name": name,
            "arrival": {"kind": "poisson", "rate_per_s": rate},
            "size": {"kind": "exponential", "mean_s": 2.0},
            "request": {"cpu": 1, "memory_gb": 2, "gpu": gpu},
        }

    return {
        "name": "conformance-gpu",
        "seed": seed,
        "stop": {"jobs": jobs, "warmup_jobs": jobs // 10},
        "cluster": {
            "node_types": [
                {"name": "gpu2", "cpu": 16, "memory_gb": 64, "gpu": 2},
                {"name": "cpu", "cpu": 4, "memory_gb": 16},
            ],
            "nodes": [{"type": "gpu2", "count": 3}, {"type": "cpu", "count": 1}],
        },
        "workload": {
            "classes": [
                cls("half", 1.2, 0.5),
                cls("quarter", 0.6, 0.25),
                cls("whole", 0.4, 1.0),
                cls("pair", 0.15, 2.0),
                cls("none", 0.8, 0.0),
            ]
        },
    }


def small_scale_scenario(jobs: int = 400, seed: int = 5) -> dict[str, Any]:
    """One static node and a rentable VM type with a start-up delay and a price."""
    return {
        "name": "conformance-scale",
        "seed": seed,
        "stop": {"jobs": jobs, "warmup_jobs": jobs // 10},
        "cluster": {
            "node_types": [
                {"name": "base", "cpu": 2, "memory_gb": 8},
                {
                    "name": "vm",
                    "cpu": 2,
                    "memory_gb": 8,
                    "price_per_hour": 0.36,
                    "startup_cost": 0.01,
                    "startup_delay_s": 5.0,
                },
            ],
            "nodes": [{"type": "base", "count": 1}],
        },
        "workload": {
            "classes": [
                {
                    "name": "a",
                    "arrival": {"kind": "poisson", "rate_per_s": 1.5},
                    "size": {"kind": "exponential", "mean_s": 1.0},
                    "request": {"cpu": 1, "memory_gb": 1},
                }
            ]
        },
    }


def as_spec(scenario: Scenario) -> SimulationSpec:
    """A scenario dict (validated by the scenario loader) or a SimulationSpec as is."""
    if isinstance(scenario, SimulationSpec):
        return scenario
    from clusteremu.scenarios.loader import spec_from_dict  # the scenario layer, only for dicts

    return spec_from_dict(scenario)


def with_worker_slots(spec: SimulationSpec, slots: int) -> SimulationSpec:
    """The spec with at most `slots` jobs at once on any node."""
    types = tuple(
        dataclasses.replace(t, max_jobs=min(t.max_jobs, float(slots))) for t in spec.node_types
    )
    return dataclasses.replace(spec, node_types=types)


def with_timeouts(spec: SimulationSpec, timeout_s: float) -> SimulationSpec:
    """The spec with every placed class's patience at most `timeout_s` seconds."""
    classes = tuple(
        c if c.pool is not None else dataclasses.replace(c, timeout_s=min(c.timeout_s, timeout_s))
        for c in spec.classes
    )
    return dataclasses.replace(spec, classes=classes)


def with_startup_delay(spec: SimulationSpec, delay_s: float) -> SimulationSpec:
    """The spec with every node type taking `delay_s` seconds to start when rented (the
    scenario's own nodes are up from the start regardless)."""
    types = tuple(dataclasses.replace(t, startup_delay_s=delay_s) for t in spec.node_types)
    return dataclasses.replace(spec, node_types=types)


def with_timeline(spec: SimulationSpec, *events: TimelineEvent) -> SimulationSpec:
    """The spec with these timeline events (docs/faults.md)."""
    return dataclasses.replace(spec, events=tuple(sorted(events, key=lambda e: e.at_s)))


def with_failures(spec: SimulationSpec, mtbf_s: float, mttr_s: float) -> SimulationSpec:
    """The spec with every node type failing at random (exponential up and down times)."""
    from clusteremu.cluster.distributions import Exponential

    failures = NodeFailures(Exponential(mtbf_s), Exponential(mttr_s))
    types = tuple(dataclasses.replace(t, failures=failures) for t in spec.node_types)
    return dataclasses.replace(spec, node_types=types)
