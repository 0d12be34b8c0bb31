"""Policy parameters are checked against each policy constructor's signature and type
hints before the policy is built; an error names the parameter."""

from __future__ import annotations

import pytest

from clusteremu.cluster.policies import registry


@pytest.mark.parametrize(
    ("kind", "name", "params", "field", "message"),
    [
        ("allocator", "fw-cam", {"delta": "big"}, "delta", "expected float, got 'big'"),
        ("allocator", "fw-cam", {"detla": 0.1}, "detla", "did you mean 'delta'?"),
        ("placer", "pennyworth-rules", {"slack": [1]}, "slack", "expected float"),
        ("placer", "fixed-pool", {"vms": 2.5}, "vms", "expected int, got 2.5"),
        ("placer", "scoring", {"compiled": 1}, "compiled", "expected bool, got 1"),
        ("provisioner", "static", {"retry_limit": "3"}, "retry_limit", "expected int"),
    ],
)
def test_policy_parameters_are_checked_against_the_constructor(
    kind: str, name: str, params: dict[str, object], field: str, message: str
) -> None:
    with pytest.raises(registry.ParamError) as info:
        registry.create(kind, name, **params)  # type: ignore[arg-type]
    assert info.value.field == field and message in str(info.value), str(info.value)
    assert str(info.value).startswith(f"{kind} {name!r}: params.{field}: ")


def test_a_scenario_names_the_bad_parameter() -> None:
    from clusteremu.scenarios.errors import ScenarioError
    from clusteremu.scenarios.loader import load_scenario

    with pytest.raises(ScenarioError, match=r"scheduler\.allocator\.params\.delta: expected float"):
        load_scenario(
            "ps-amdahl",
            ["scheduler.allocator.name=fw-cam", "scheduler.allocator.params={delta: x}"],
        )
