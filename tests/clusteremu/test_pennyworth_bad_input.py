"""Pennyworth's bad inputs through the command line (issue 12, "Acceptance"): a tampered or
truncated tree file, an SLO with a negative penalty, a rentable type without a price and
a batch with a task that has no run time on any type each end `clusteremu run` and
`clusteremu solve` with exit status 2 and one clear error line, and nothing is written."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from clusteremu.cluster.policies.pennyworth.astar import solve
from clusteremu.cluster.policies.pennyworth.features import examples_of_plan
from clusteremu.cluster.policies.pennyworth.problem import problem_from_spec
from clusteremu.cluster.policies.pennyworth.tree import RadTree
from clusteremu.scenarios.loader import SHIPPED_DIR, load_scenario, read_yaml
from clusteremu.tuners.pennyworth import with_counts
from tests.clusteremu.badinput import refused


def _tree_file(folder: Path) -> Path:
    """A small tree fitted on A* plans of the shipped pennyworth-max tasks."""
    spec = load_scenario("pennyworth-max")
    base = problem_from_spec(spec, spec.slo)
    xs, ys = [], []
    rng = np.random.default_rng(0)
    for _ in range(12):
        n = len(base.task_names)
        counts = np.bincount(rng.integers(0, n, 4), minlength=n)
        p = with_counts(base, counts.tolist())
        x, y = examples_of_plan(p, solve(p).plan)
        xs.append(x)
        ys.append(y)
    tree = RadTree.fit(
        np.vstack(xs), np.concatenate(ys), base.task_names, base.type_names, base.profiles or {}
    )
    path = folder / "tree.json"
    tree.save(path)
    return path


def _scenario(folder: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    data = read_yaml(SHIPPED_DIR / "pennyworth-max.yaml")
    data["scheduler"] = {"placer": {"name": "pennyworth", "tree": "tree.json"}}
    change(data)
    path = folder / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _tampered(tree: Path) -> None:
    data = json.loads(tree.read_text())
    thresholds = data["tree"]["nodes"]["threshold"]
    thresholds[0] = thresholds[0] + 1.0
    tree.write_text(json.dumps(data))


def _truncated(tree: Path) -> None:
    text = tree.read_text()
    tree.write_text(text[: len(text) // 2])


def _negative_penalty(data: dict[str, Any]) -> None:
    data["slo"]["penalty_per_s"] = -0.01


def _no_price(data: dict[str, Any]) -> None:
    del data["cluster"]["node_types"][1]["price_per_hour"]


def _no_run_time(data: dict[str, Any]) -> None:
    data["workload"]["classes"][2]["runtime_by_node_type"] = {}


@pytest.mark.parametrize(
    ("what", "break_tree", "change", "message"),
    [
        ("tampered tree", _tampered, None, "sha256"),
        ("truncated tree", _truncated, None, "truncated"),
        ("negative penalty", None, _negative_penalty, "penalty_per_s"),
        ("rentable type without a price", None, _no_price, "price"),
        ("task with no run time", None, _no_run_time, "run time"),
    ],
)
def test_bad_pennyworth_input_exits_2_and_writes_nothing(
    tmp_path: Path,
    what: str,
    break_tree: Callable[[Path], None] | None,
    change: Callable[[dict[str, Any]], None] | None,
    message: str,
) -> None:
    tree = _tree_file(tmp_path)
    if break_tree is not None:
        break_tree(tree)
    scenario = _scenario(tmp_path, change or (lambda data: None))
    before = sorted(tmp_path.rglob("*"))
    out = tmp_path / "out"
    line = refused(["run", str(scenario), "--out", str(out)], "pennyworth", what, message)
    assert str(scenario.name) in line or "tree.json" in line, line
    if break_tree is None:
        refused(["solve", str(scenario), "--json"], "pennyworth", what, message)
    assert sorted(tmp_path.rglob("*")) == before, f"{what}: something was written"
