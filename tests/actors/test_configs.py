"""The shipped Ray cluster-launcher configs pass Ray's own checks (what `ray up` runs)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parents[2]


def test_on_premise_config_is_valid_and_keeps_the_dashboard_local() -> None:
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = yaml.safe_load((ROOT / "ray-config.yaml").read_text())
    assert config["provider"]["type"] == "local"
    assert "available_node_types" not in config  # Ray rejects it for this provider
    prepared = prepare_config(copy.deepcopy(config))
    validate_config(prepared)
    head = " ".join(config["head_start_ray_commands"])
    assert "--dashboard-host=127.0.0.1" in head and "--resources=" in head
    assert "--resources=" in " ".join(config["worker_start_ray_commands"])
    bad = dict(config, available_node_types={"x": {"resources": {}, "node_config": {}}})
    with pytest.raises(BaseException, match="available_node_types"):
        prepare_config(bad)


def test_fake_multinode_config_has_heterogeneous_node_types() -> None:
    from ray.autoscaler._private.util import validate_config

    config = yaml.safe_load((ROOT / "monitoring" / "fake-multinode.yaml").read_text())
    validate_config(config)
    assert config["provider"]["type"] == "fake_multinode"
    types = config["available_node_types"]
    custom = [{k for k in t["resources"] if k.startswith("node-type-")} for t in types.values()]
    assert sum(bool(c) for c in custom) == 3
