"""Random streams are keyed by (class name, purpose), never by position: adding, removing
or reordering a class changes no other class's arrivals, sizes or run-time draws; the
policies' streams are keyed by extension point and seeded from the replication.

Before the rewrite (cd23f70) the streams were spawned by position (`3 * n_classes`), so
these tests failed there.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies.base import Allocator, Placer, Provisioner
from clusteremu.cluster.policies.fifo import Equi, FirstFit, Static
from clusteremu.scenarios.loader import spec_from_dict


def two_class_scenario() -> dict[str, Any]:
    return {
        "name": "streams",
        "seed": 21,
        "stop": {"time_s": 500.0},
        "cluster": {
            "node_types": [
                {"name": "small", "cpu": 4, "memory_gb": 16},
                {"name": "big", "cpu": 16, "memory_gb": 64},
            ],
            "nodes": [{"type": "small", "count": 4}, {"type": "big", "count": 2}],
        },
        "workload": {
            "classes": [
                {
                    "name": "a",
                    "arrival": {"kind": "poisson", "rate_per_s": 1.0},
                    "size": {"kind": "exponential", "mean_s": 1.0},
                    "runtime_by_node_type": {
                        "small": {"kind": "exponential", "mean_s": 2.0},
                        "big": {"kind": "exponential", "mean_s": 1.0},
                    },
                },
                {
                    "name": "b",
                    "arrival": {"kind": "poisson", "rate_per_s": 0.5},
                    "size": {"kind": "lognormal", "mu": 0.2, "sigma": 1.0},
                    "runtime_by_node_type": {"big": {"kind": "exponential", "mean_s": 3.0}},
                },
            ]
        },
    }


def columns_by_class(spec: SimulationSpec) -> dict[str, dict[str, np.ndarray]]:
    """Per class name: its jobs' arrival times, sizes and run-time uniforms."""
    jobs = Engine(spec).jobs
    assert jobs.runtime_u is not None
    out: dict[str, dict[str, np.ndarray]] = {}
    for c, jc in enumerate(spec.classes):
        mine = jobs.class_index == c
        out[jc.name] = {
            "arrival_s": jobs.arrival_s[mine],
            "size": jobs.size[mine],
            "runtime_u": jobs.runtime_u[mine],
        }
    return out


def test_adding_and_reordering_classes_keeps_every_other_class_s_draws() -> None:
    base = two_class_scenario()
    before = columns_by_class(spec_from_dict(base))
    changed = copy.deepcopy(base)
    extra = {
        "name": "c",
        "arrival": {"kind": "poisson", "rate_per_s": 2.0},
        "size": {"kind": "exponential", "mean_s": 0.5},
        "runtime_by_node_type": {"small": {"kind": "exponential", "mean_s": 0.5}},
    }
    a, b = changed["workload"]["classes"]
    changed["workload"]["classes"] = [b, extra, a]  # reordered, with a class in between
    after = columns_by_class(spec_from_dict(changed))
    assert set(after) == {"a", "b", "c"}
    for name in ("a", "b"):
        for column, values in before[name].items():
            assert values.size > 100
            np.testing.assert_array_equal(after[name][column], values, err_msg=f"{name}.{column}")


def test_removing_a_class_keeps_the_other_class_s_draws() -> None:
    base = two_class_scenario()
    before = columns_by_class(spec_from_dict(base))
    only_b = copy.deepcopy(base)
    only_b["workload"]["classes"] = only_b["workload"]["classes"][1:]
    after = columns_by_class(spec_from_dict(only_b))
    for column, values in before["b"].items():
        np.testing.assert_array_equal(after["b"][column], values, err_msg=f"b.{column}")


def test_renaming_a_class_changes_its_draws() -> None:
    """The key is the name: a class renamed is another class, with other draws."""
    base = two_class_scenario()
    renamed = copy.deepcopy(base)
    renamed["workload"]["classes"][0]["name"] = "a2"
    before = columns_by_class(spec_from_dict(base))["a"]["size"]
    after = columns_by_class(spec_from_dict(renamed))["a2"]["size"]
    n = min(before.size, after.size)
    assert not np.array_equal(before[:n], after[:n])


class Recording:
    """Mixin: remember the first draw of the stream `setup` receives."""

    draw: float

    def setup(self, spec: SimulationSpec, rng: np.random.Generator) -> None:
        self.draw = float(rng.random())


class RecordingPlacer(Recording, FirstFit):
    pass


class RecordingAllocator(Recording, Equi):
    pass


class RecordingProvisioner(Recording, Static):
    pass


def policy_draws(seed: int, replication: int = 0) -> tuple[float, float, float]:
    spec = spec_from_dict({**two_class_scenario(), "seed": seed, "replications": 2})
    placer: Placer = RecordingPlacer()
    allocator: Allocator = RecordingAllocator()
    provisioner: Provisioner = RecordingProvisioner()
    Engine(spec, replication, placer=placer, allocator=allocator, provisioner=provisioner)
    return placer.draw, allocator.draw, provisioner.draw  # type: ignore[attr-defined]


def test_each_extension_point_gets_its_own_seeded_stream() -> None:
    first = policy_draws(5)
    assert policy_draws(5) == first  # same seed, same streams
    assert len(set(first)) == 3  # keyed by purpose: three different streams
    other_seed = policy_draws(6)
    other_replication = policy_draws(5, replication=1)
    for i in range(3):
        assert other_seed[i] != first[i]
        assert other_replication[i] != first[i]


@pytest.mark.parametrize("seed", [1, 2])
def test_policy_streams_do_not_depend_on_the_classes(seed: int) -> None:
    """Adding a class leaves the policies' streams alone (they are keyed by purpose)."""
    base = {**two_class_scenario(), "seed": seed}
    more = copy.deepcopy(base)
    more["workload"]["classes"].append({**more["workload"]["classes"][0], "name": "z"})
    draws = []
    for data in (base, more):
        placer = RecordingPlacer()
        Engine(spec_from_dict(data), placer=placer)
        draws.append(placer.draw)
    assert draws[0] == draws[1]
