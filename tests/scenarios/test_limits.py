"""The memory estimate (scenarios/limits.py) and the YAML hazards of the loader (issue 11):
sizes that cannot fit are refused with the estimate and the field that drives them; deep,
exploding, duplicated or oversized YAML is refused with its line; batches and traces that
cannot fill `stop.jobs` are refused; no error prints a whole value."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusteremu.scenarios import limits
from clusteremu.scenarios.errors import ScenarioError, shorten
from clusteremu.scenarios.loader import (
    MAX_YAML_DEPTH,
    SHIPPED_DIR,
    canonical_name,
    load_scenario,
    nearest_shipped,
    safe_yaml,
    validate,
)

MM_C: dict[str, Any] = yaml.safe_load((SHIPPED_DIR / "mm-c.yaml").read_text())
BUDGET = 16e9


def model_of(**changes: Any) -> Any:
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
    from clusteremu.scenarios import schema

    return schema.ScenarioModel.model_validate(data)


def refusal(model: Any) -> tuple[str, str] | None:
    try:
        limits.check_scenario(model, "s.yaml", budget=BUDGET)
    except ScenarioError as exc:
        assert len(exc.problems) == 1
        return exc.problems[0]
    return None


def test_the_shipped_scenarios_fit() -> None:
    for path in sorted(SHIPPED_DIR.glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        from clusteremu.scenarios import schema

        assert refusal(schema.ScenarioModel.model_validate(data)) is None, path.name


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"cluster__nodes__0__count": 10**9}, "cluster.nodes.0.count"),
        ({"stop": {"jobs": 10**12}}, "stop.jobs"),
        ({"replications": 10**8}, "replications"),
        ({"stop": {"time_s": 1e308}}, "stop.time_s"),
        (
            {
                "stop": {"time_s": 10.0},
                "workload__classes__0__arrival": {"kind": "batch", "count": 10**12},
            },
            "workload.classes.0.arrival.count",
        ),
        (
            {
                "stop": {"time_s": 1e6},
                "workload__classes__0__arrival": {
                    "kind": "renewal",
                    "interarrival": {"kind": "empirical", "values_s": [0.0]},
                },
            },
            "stop.time_s",
        ),
        (
            {"cluster": {"generator": {"name": "cloud_cpu", "nodes": 10**9}}},
            "cluster.generator.nodes",
        ),
    ],
)
def test_sizes_that_cannot_fit_name_their_field(changes: dict[str, Any], field: str) -> None:
    problem = refusal(model_of(**changes))
    assert problem is not None and problem[0] == field, problem
    assert "of memory" in problem[1] and "16 GB" in problem[1]


def test_an_mdp_truncation_that_cannot_fit() -> None:
    data = yaml.safe_load((SHIPPED_DIR / "mdp-example-1.yaml").read_text())
    data["scheduler"]["allocator"]["params"]["truncation"] = 100_000
    with pytest.raises(ScenarioError, match=r"params\.truncation: needs about .* states"):
        validate(data, "mdp.yaml")


@given(
    jobs=st.integers(1, 10**13),
    replications=st.integers(1, 10**9),
    nodes=st.integers(0, 10**11),
)
@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],  # no wall-clock verdict
)
def test_refused_exactly_when_the_estimate_exceeds_the_budget(
    jobs: int, replications: int, nodes: int
) -> None:
    model = model_of(stop={"jobs": jobs}, replications=replications, cluster__nodes__0__count=nodes)
    total = limits.total_bytes(limits.scenario_needs(model))
    problem = refusal(model)
    assert (problem is not None) == (total > BUDGET)
    if problem is not None:
        assert problem[0] in ("stop.jobs", "replications", "cluster.nodes.0.count")
        one = limits.total_bytes(limits.scenario_needs(model, replications=1))
        assert (problem[0] == "replications") == (one <= BUDGET)


def test_format_bytes() -> None:
    assert limits.format_bytes(3.2e9) == "3.2 GB"
    assert limits.format_bytes(512) == "512 bytes"
    assert limits.format_bytes(float("inf")).startswith("more than")


# --- YAML hazards ------------------------------------------------------------------------


def test_duplicate_keys_are_refused_with_their_lines() -> None:
    with pytest.raises(yaml.YAMLError) as info:
        safe_yaml("a: 1\nstop: {jobs: 1}\nb: 2\nstop: {jobs: 2}\n")
    assert info.value.problem_mark.line + 1 == 4  # type: ignore[attr-defined]
    assert "duplicate key 'stop' (first at line 2)" in str(info.value)
    assert safe_yaml("base: &b {x: 1}\nother:\n  <<: *b\n  x: 2\n")["other"] == {"x": 2}


@pytest.mark.parametrize("depth", [MAX_YAML_DEPTH + 1, 1000, 20_000])
def test_deep_nesting_is_refused(depth: int) -> None:
    with pytest.raises(yaml.YAMLError, match="nesting deeper than"):
        safe_yaml("[" * depth + "]" * depth)


def test_alias_bombs_and_recursive_aliases_are_refused() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    with pytest.raises(yaml.YAMLError, match="expands .* to more than"):
        safe_yaml("\n".join(lines))
    with pytest.raises(yaml.YAMLError, match="contains it"):
        safe_yaml("a: &a [1, *a]\n")
    assert safe_yaml("a: &a [1, 2]\nb: *a\n") == {"a": [1, 2], "b": [1, 2]}  # aliases are fine


def test_files_that_are_not_scenarios(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)  # refused from stat: opening it would wait for a writer
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (16 * 2**20 + 1))
    for path, expected in (
        (Path("/dev/zero"), "is a device; expected a scenario YAML file"),
        (tmp_path, "is a folder"),
        (fifo, "is a FIFO; expected a scenario YAML file"),
        (big, "larger than 16 MiB"),
    ):
        with pytest.raises(ScenarioError, match=expected):
            load_scenario(path)
    binary = tmp_path / "b.yaml"
    binary.write_bytes(b"\xff\xfe\x00name")
    with pytest.raises(ScenarioError, match="not UTF-8"):
        load_scenario(binary)


def test_shorten_never_prints_a_whole_value() -> None:
    assert len(shorten("x" * 10**6)) <= 60
    nested: Any = [1]
    for _ in range(40):
        nested = [nested] * 9  # 9^40 leaves if printed whole
    assert len(shorten(nested)) <= 60


# --- silently accepted inputs, now refused -------------------------------------------------


def test_batches_shorter_than_stop_jobs_are_refused() -> None:
    batch = "workload.classes.0.arrival={kind: batch, count: 50}"
    with pytest.raises(ScenarioError, match=r"stop\.jobs: the classes' batches and traces"):
        load_scenario("mm-c", [batch, "stop.jobs=100", "stop.warmup_jobs=0"])
    late = "workload.classes.0.arrival={kind: batch, count: 50, at_s: 100}"
    with pytest.raises(ScenarioError, match="no batch or trace job arrives"):
        load_scenario("mm-c", [late, "stop.jobs=null", "stop.warmup_jobs=0", "stop.time_s=10"])
    assert load_scenario("mm-c", [batch, "stop.jobs=50", "stop.warmup_jobs=0"]).stop.jobs == 50


def test_a_short_trace_is_refused(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s\n0.5\n1.5\n")
    arrival = f"workload.classes.0.arrival={{kind: trace, path: {trace}}}"
    with pytest.raises(ScenarioError, match="bring 2 jobs, fewer than stop.jobs = 10"):
        load_scenario("mm-c", [arrival, "stop.jobs=10", "stop.warmup_jobs=0"])


def test_huge_costs_and_overflowing_lognormals_are_refused() -> None:
    with pytest.raises(ScenarioError, match="holding_cost: expected at most 1e\\+12"):
        load_scenario("mm-c", ["workload.classes.0.holding_cost=1.0e308"])
    with pytest.raises(ScenarioError, match="size: mu = 700 and sigma = 30"):
        load_scenario("mm-c", ["workload.classes.0.size={kind: lognormal, mu: 700, sigma: 30}"])
    with pytest.raises(ScenarioError, match="puts no probability"):
        load_scenario(
            "mm-c", ["workload.classes.0.size={kind: lognormal, mu: 300, sigma: 1, max_s: 10}"]
        )


def test_scenario_names() -> None:
    assert nearest_shipped("mm-cc") == ["mm-c"]
    assert nearest_shipped("zzzzzz") == []
    assert canonical_name("mm-c") == canonical_name(SHIPPED_DIR / "mm-c.yaml") == "mm-c"
