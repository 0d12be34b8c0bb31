"""The scoring placer's `replicas` option (faas-sim's min / max nodes per function and scale
factor): functions run only on their replicas, which grow by the scale factor up to max."""

from __future__ import annotations

from collections import defaultdict

import pytest

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.policies.scoring.placer import check_replicas
from clusteremu.scenarios import faas
from clusteremu.scenarios.errors import ScenarioError
from clusteremu.scenarios.loader import spec_from_dict


def nodes_per_class(replicas: dict | None, nodes: int = 30, rate: float = 4.0) -> dict:
    data = faas.scenario_dict(
        "cloud_cpu",
        nodes=nodes,
        rate_per_s=rate,
        time_s=60,
        seed=5,
        functions=["resnet50-inference", "mobilenet-inference"],
        replicas=replicas,
    )
    table = Engine(spec_from_dict(data)).run().jobs
    used: dict = defaultdict(set)
    for cls, node in zip(table["class"].to_pylist(), table["node"].to_pylist(), strict=True):
        if node is not None:
            used[cls].add(node)
    return used


def test_one_replica_keeps_every_request_of_a_function_on_one_node() -> None:
    used = nodes_per_class({"min": 1, "max": 1})
    assert all(len(nodes) == 1 for nodes in used.values()) and len(used) == 2


def test_replicas_grow_by_the_scale_factor_up_to_max() -> None:
    free = nodes_per_class(None, rate=12.0)
    capped = nodes_per_class({"min": 2, "max": 4, "scale_factor": 2}, rate=12.0)
    assert max(len(n) for n in free.values()) > 4  # without replicas requests spread out
    assert all(2 <= len(n) <= 4 for n in capped.values())


def test_bad_replicas_options_are_refused() -> None:
    assert check_replicas({"max": 3}) == {"min": 0, "max": 3, "scale_factor": 1}
    for bad, match in (
        ({"min": 3, "max": 2}, "replicas.max: expected at least min"),
        ({"scale_factor": 0}, "replicas.scale_factor: expected an integer >= 1"),
        ({"min": 1.5}, "replicas.min"),
        ({"mx": 2}, "replicas.mx: unknown key"),
    ):
        with pytest.raises(ValueError, match=match):
            check_replicas(bad)
    data = faas.scenario_dict("cloud_cpu", nodes=40, rate_per_s=1.0, time_s=5, replicas={"min": -1})
    with pytest.raises(ScenarioError, match="replicas.min"):
        spec_from_dict(data)
