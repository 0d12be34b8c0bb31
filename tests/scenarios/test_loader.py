"""The scenario loader: overrides, cross-checks, and one clear error for every bad input."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusteremu.cli import main
from clusteremu.scenarios.errors import ScenarioError
from clusteremu.scenarios.loader import (
    SHIPPED_DIR,
    load_scenario,
    shipped_scenarios,
    spec_from_dict,
)

MM_C = yaml.safe_load((SHIPPED_DIR / "mm-c.yaml").read_text())


def _write(tmp_path: Path, data: Any, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


def _mutated(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(MM_C)
    for dotted, value in changes.items():
        node: Any = data
        *head, last = dotted.split("__")
        for part in head:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    return data


#: Validating sets every policy up as a run would; the predictive provisioner's set-up is a
#: hyper-parameter search (20 trials, ~10 s): 2 trials check the same file and policy.
VALIDATE_SET = {"ml-workflow": ["--set", "scheduler.provisioner.params.trials=2"]}


@pytest.mark.parametrize("path", shipped_scenarios(), ids=lambda p: p.stem)
def test_every_shipped_scenario_is_valid(path: Path) -> None:
    assert main(["validate", str(path), *VALIDATE_SET.get(path.stem, [])]) == 0


BAD_INPUTS = {
    "missing file": (None, "file not found"),
    "yaml syntax": ("name: x\nstop: {jobs: 10\n", "YAML syntax error at line"),
    "unknown field": (
        _mutated(stop={"jobs": 100, "warmup_job": 5}),
        "stop.warmup_job: unknown field",
    ),
    "wrong type": (
        _mutated(workload__classes__0__arrival={"kind": "poisson", "rate_per_s": "fast"}),
        "workload.classes.0.arrival.rate_per_s: expected a number, got str 'fast'",
    ),
    "negative rate": (
        _mutated(workload__classes__0__arrival={"kind": "poisson", "rate_per_s": -1}),
        "workload.classes.0.arrival.rate_per_s: expected greater than 0, got -1",
    ),
    "unstable load": (
        _mutated(workload__classes__0__arrival={"kind": "poisson", "rate_per_s": 12}),
        "workload.classes: unstable load on the nodes",
    ),
    "unknown kind": (
        _mutated(workload__classes__0__size={"kind": "weibull", "mean_s": 1}),
        "workload.classes.0.size: expected `kind` to be one of",
    ),
    "unknown policy": (
        _mutated(scheduler={"placer": {"name": "worst-fit"}}),
        "scheduler.placer.name: expected a registered placer",
    ),
    "not concave": (
        _mutated(
            workload__classes__0__speedup={"kind": "table", "points": [[1, 1], [2, 1.1], [4, 3.5]]}
        ),
        None,
    ),
    "node type typo": (
        _mutated(
            cluster={
                "node_types": MM_C["cluster"]["node_types"],
                "nodes": [{"type": "cor", "count": 10}],
            }
        ),
        "cluster.nodes.0.type: expected one of the node types",
    ),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS), ids=list(BAD_INPUTS))
def test_bad_input_exits_2_with_one_paragraph(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, expected = BAD_INPUTS[case]
    path = tmp_path / "missing.yaml" if data is None else _write(tmp_path, data)
    if case == "not concave":
        # The hull makes any table concave; a super-linear start is what gets rejected.
        path = _write(
            tmp_path,
            _mutated(workload__classes__0__speedup={"kind": "table", "points": [[1, 1], [2, 2.5]]}),
        )
        expected = "workload.classes.0.speedup: table slope above one core exceeds 1"
    status = main(["run", str(path), "--json"])
    captured = capsys.readouterr()
    assert status == 2
    assert captured.out == ""
    message = captured.err.strip()
    assert "Traceback" not in message
    assert "\n" not in message, "one paragraph"
    assert str(path) in message
    assert expected in message


def test_overrides_set_nested_fields_and_list_items() -> None:
    spec = load_scenario(
        "mm-c", ["workload.classes.0.arrival.rate_per_s=9", "seed=3", "cluster.nodes.0.count=12"]
    )
    assert spec.classes[0].arrival.rate_per_s == pytest.approx(9.0)
    assert spec.seed == 3
    assert len(spec.nodes) == 12


def test_bad_override_names_the_field() -> None:
    with pytest.raises(ScenarioError, match=r"workload.classes.5: expected a list index below 1"):
        load_scenario("mm-c", ["workload.classes.5.holding_cost=2"])
    with pytest.raises(ScenarioError, match="--set: override 'seed' must look like"):
        load_scenario("mm-c", ["seed"])


def test_holding_cost_must_be_positive() -> None:
    with pytest.raises(
        ScenarioError, match=r"workload.classes.0.holding_cost: expected greater than 0, got 0"
    ):
        spec_from_dict(_mutated(workload__classes__0__holding_cost=0))


def test_scenario_files_are_data_not_code(tmp_path: Path) -> None:
    path = _write(tmp_path, "name: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(
        ScenarioError, match="YAML error at line 1.*could not determine a constructor"
    ):
        load_scenario(path)


# --- random mutations never escape as anything but ScenarioError ---------------------------

_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-10, 10**6),
    st.floats(allow_nan=True),
    st.text(max_size=8),
    st.lists(st.integers(-3, 3), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


_BASES = {p.stem: yaml.safe_load(p.read_text()) for p in shipped_scenarios()}


def _mutations_of(base: str) -> st.SearchStrategy[tuple[str, list[Any]]]:
    edits = st.tuples(st.sampled_from(_paths(_BASES[base])), _VALUES, st.booleans())
    return st.tuples(st.just(base), st.lists(edits, min_size=1, max_size=4))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(_BASES)).flatmap(_mutations_of))
def test_random_mutations_raise_only_scenario_errors(case: tuple[str, list[Any]]) -> None:
    base, mutations = case
    data = copy.deepcopy(_BASES[base])
    data["stop"] = {"jobs": 50} if "jobs" in data["stop"] else {"time_s": 50.0}
    for path, value, delete in mutations:
        node: Any = data
        try:
            for part in path[:-1]:
                node = node[part]
            if delete and isinstance(node, dict):
                node.pop(path[-1], None)
            else:
                node[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue
    try:
        spec_from_dict(data)
    except ScenarioError as exc:
        assert exc.problems and str(exc).startswith("<scenario>: invalid scenario.")
