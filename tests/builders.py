"""Builders for test scenarios: small dicts a test tweaks instead of long literals.

>>> scenario = pool_scenario(cores=4).arrivals(3.0).jobs(1000).build()
>>> scenario["cluster"]["pools"][0]["cores"]
4
"""

from __future__ import annotations

import copy
from typing import Any


class ScenarioBuilder:
    """A fluent builder over a scenario dict (one class unless `add_class` is called)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = copy.deepcopy(data)

    def jobs(self, count: int, warmup: int = 0) -> ScenarioBuilder:
        self.data["stop"] = {"jobs": count, "warmup_jobs": warmup}
        return self

    def horizon(self, time_s: float, warmup_s: float = 0.0) -> ScenarioBuilder:
        self.data["stop"] = {"time_s": time_s, "warmup_s": warmup_s}
        return self

    def arrivals(self, rate_per_s: float, index: int = 0) -> ScenarioBuilder:
        self.data["workload"]["classes"][index]["arrival"] = {
            "kind": "poisson",
            "rate_per_s": rate_per_s,
        }
        return self

    def seed(self, seed: int) -> ScenarioBuilder:
        self.data["seed"] = seed
        return self

    def set_class(self, index: int = 0, **fields: Any) -> ScenarioBuilder:
        self.data["workload"]["classes"][index].update(fields)
        return self

    def add_class(self, **fields: Any) -> ScenarioBuilder:
        base = copy.deepcopy(self.data["workload"]["classes"][0])
        base.update(fields)
        self.data["workload"]["classes"].append(base)
        return self

    def scheduler(self, **policies: str) -> ScenarioBuilder:
        self.data["scheduler"] = {k: {"name": v} for k, v in policies.items()}
        return self

    def build(self) -> dict[str, Any]:
        return copy.deepcopy(self.data)


def node_scenario(nodes: int = 4, cpu: float = 1.0) -> ScenarioBuilder:
    return ScenarioBuilder(
        {
            "name": "test-nodes",
            "seed": 1,
            "stop": {"jobs": 2000},
            "cluster": {
                "node_types": [{"name": "n", "cpu": cpu, "memory_gb": 4}],
                "nodes": [{"type": "n", "count": nodes}],
            },
            "workload": {
                "classes": [
                    {
                        "name": "a",
                        "arrival": {"kind": "poisson", "rate_per_s": 2.0},
                        "size": {"kind": "exponential", "mean_s": 1.0},
                    }
                ]
            },
        }
    )


def pool_scenario(cores: float = 8) -> ScenarioBuilder:
    return ScenarioBuilder(
        {
            "name": "test-pool",
            "seed": 1,
            "stop": {"jobs": 2000},
            "cluster": {"pools": [{"name": "cores", "cores": cores}]},
            "workload": {
                "classes": [
                    {
                        "name": "a",
                        "arrival": {"kind": "poisson", "rate_per_s": 2.0},
                        "size": {"kind": "exponential", "mean_s": 1.0},
                        "pool": "cores",
                    }
                ]
            },
        }
    )


def batch_scenario() -> dict[str, Any]:
    """Four one-second jobs arriving together on two nodes: a zero-length measurement
    window, as in the Pennyworth scenarios."""
    return (
        node_scenario(nodes=2)
        .jobs(4)
        .set_class(
            arrival={"kind": "batch", "count": 4}, size={"kind": "deterministic", "value_s": 1.0}
        )
        .build()
    )
