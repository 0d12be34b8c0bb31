"""Scenario files too large to parse or run quickly, and numbers given as text (issue 28):
refused with the field named, before any work."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusteremu.scenarios import loader
from clusteremu.scenarios.errors import ScenarioError
from clusteremu.scenarios.loader import SHIPPED_DIR, load_scenario, safe_yaml, validate
from clusteremu.scenarios.schema import MAX_NODE_TYPES

MM_C: dict[str, Any] = yaml.safe_load((SHIPPED_DIR / "mm-c.yaml").read_text())


def _with_types(n: int) -> dict[str, Any]:
    data = copy.deepcopy(MM_C)
    data["cluster"]["node_types"] = [{"name": f"t{i}", "cpu": 1, "memory_gb": 4} for i in range(n)]
    data["cluster"]["nodes"] = [{"type": "t0", "count": 10}]
    return data


def test_more_node_types_than_the_cap_are_refused() -> None:
    validate(_with_types(MAX_NODE_TYPES), "x.yaml")
    with pytest.raises(
        ScenarioError, match=f"cluster.node_types: List should have at most {MAX_NODE_TYPES}"
    ):
        validate(_with_types(MAX_NODE_TYPES + 1), "x.yaml")


def test_a_file_with_more_values_than_the_cap_is_refused_while_parsing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loader, "MAX_YAML_NODES", 2_000)
    path = tmp_path / "types.yaml"
    path.write_text(yaml.safe_dump(_with_types(400)))  # about 2,800 values written out
    with pytest.raises(ScenarioError, match="more than 2,000 values written out"):
        load_scenario(path)
    path.write_text(yaml.safe_dump(_with_types(200)))
    assert len(load_scenario(path).node_types) == 200


def test_exponents_are_numbers_and_quoted_numbers_are_text() -> None:
    assert safe_yaml("a: 1e6\nb: -2.5E-3\nc: '8'\nd: 1_000\ne: 12e") == {
        "a": 1e6,
        "b": -0.0025,
        "c": "8",
        "d": 1000,
        "e": "12e",
    }
    assert yaml.safe_load("a: 1e6") == {"a": "1e6"}  # PyYAML's own loader is left alone
    assert load_scenario("mm-c", ["workload.classes.0.arrival.rate_per_s=8e0"]).classes[0]


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("workload.classes.0.arrival.rate_per_s='8'", "workload.classes.0.arrival.rate_per_s"),
        ("workload.classes.0.arrival.rate_per_s=true", "workload.classes.0.arrival.rate_per_s"),
        ("workload.classes.0.holding_cost='1'", "workload.classes.0.holding_cost"),
        ("workload.classes.0.request.memory_gb=yes", "workload.classes.0.request.memory_gb"),
        ("stop.jobs='100'", "stop.jobs"),
        ("cluster.node_types.0.cpu='1'", "cluster.node_types.0.cpu"),
    ],
)
def test_numbers_given_as_text_or_bools_name_their_field(override: str, field: str) -> None:
    with pytest.raises(ScenarioError, match=f"{field}: expected a number, got (str|bool)"):
        load_scenario("mm-c", [override])
