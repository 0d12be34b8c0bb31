"""Hostile input to the newer features (issue 41): GPU fields that the engine refuses, seeds
beyond 2^63, output paths no file can be written to, timeline joins and node failures that
would exhaust memory or run for ever. Each is refused before any work: exit status 2, one
`error:` line naming the field or option, no traceback (tests/clusteremu/badinput.py).

The memory budget is pinned to 16 GB so that the outcome does not depend on the machine.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from clusteremu.cli import main
from clusteremu.scenarios import limits
from clusteremu.scenarios.loader import SHIPPED_DIR, load_scenario, read_yaml, validate
from tests.clusteremu.badinput import refused

BUDGET = 16e9


@pytest.fixture(autouse=True)
def pinned_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "memory_budget_bytes", lambda: int(BUDGET))


def test_gpu_fields_the_engine_refuses_are_refused_at_load() -> None:
    for command in ("validate", "run"):
        refused(
            [command, "gpu-share", "--set", "workload.classes.0.request.gpu=1.5"],
            "gpu",
            "fractional request above 1",
            "workload.classes.0.request.gpu: a GPU request above 1 must be a whole number",
        )
        refused(
            [command, "gpu-share", "--set", "cluster.node_types.0.gpu=100000000"],
            "gpu",
            "too many GPUs per node",
            "cluster.node_types.0.gpu: node type 't4x4': at most 62 GPUs per node",
        )


def test_seeds_beyond_2_63_are_refused() -> None:
    for argv in (["run"], ["validate"], ["compare", "--policy", "placer=first-fit"]):
        refused(
            [argv[0], "mm-c", *argv[1:], "--seed", str(10**23)],
            "seed",
            "huge",
            "seed: expected less than or equal to 9223372036854775807",
        )
    refused(["run", "mm-c", "--set", "seed=-1"], "seed", "negative", "seed: expected greater")
    assert load_scenario("mm-c", [f"seed={2**63 - 1}"]).seed == 2**63 - 1


@pytest.mark.parametrize(
    "argv",
    [
        ["dashboard", "--out", "/proc/x.json"],
        ["dashboard", "--out", "/proc"],
        ["train-rl", "--out", "/proc/a.zip"],
        ["learn", "mdp-example-1", "--out", "/proc/learned"],
        ["run", "mm-c", "--out", "/proc/self/a-run"],
    ],
)
def test_unusable_output_paths_are_refused_before_any_work(
    argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from clusteremu import cli

    def no_work(*args: object, **kwargs: object) -> None:
        raise AssertionError("the command started its work")

    monkeypatch.setattr(cli, "load_plugins", no_work)  # the next step after the checks
    refused(
        argv,
        "out",
        "unwritable",
        f"--out '{argv[argv.index('--out') + 1]}': cannot write there, /proc",
    )


def test_a_writable_output_folder_is_left_as_it_was(tmp_path: Path) -> None:
    """The check makes a file and removes it: nothing is left behind."""
    out = tmp_path / "dash.json"
    assert main(["dashboard", "--out", str(out)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dash.json"]


JOIN = """
name: joins
seed: 1
stop: {time_s: 4000}
cluster:
  node_types:
    - {name: server, cpu: 4, memory_gb: 16, startup_delay_s: 60}
  nodes:
    - {type: server, count: 20}
workload:
  classes:
    - name: batch
      arrival: {kind: poisson, rate_per_s: 1.6}
      size: {kind: exponential, mean_s: 40}
      request: {cpu: 1, memory_gb: 2}
events:
  - {at_s: 2000, join: {type: server, count: 4}}
"""


def scenario(tmp_path: Path, text: str, name: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return str(path)


def test_nodes_joined_by_the_timeline_are_counted(tmp_path: Path) -> None:
    path = scenario(tmp_path, JOIN, "joins.yaml")
    assert main(["validate", path]) == 0
    line = refused(
        ["run", path, "--set", "events.0.join.count=1000000"],
        "size",
        "timeline join",
        "events.0.join.count: needs about",
    )
    assert "1,000,000 nodes joined by the timeline" in line
    # Thirty joins of 10^6 nodes: each event is within its limit, together they are not.
    joins = "".join("\n  - {at_s: 100, join: {type: server, count: 1000000}}" for _ in range(30))
    text = JOIN.replace("\n  - {at_s: 2000, join: {type: server, count: 4}}", joins)
    line = refused(["validate", scenario(tmp_path, text, "many.yaml")], "size", "timeline joins")
    assert "30,000,000 nodes joined by the timeline" in line


FAILURES = """
name: failing
seed: 1
stop: {jobs: 2000}
cluster:
  node_types:
    - name: server
      cpu: 4
      memory_gb: 16
      failures: {mtbf_s: 7200, mttr_s: 300}
  nodes:
    - {type: server, count: 20}
workload:
  classes:
    - name: batch
      arrival: {kind: poisson, rate_per_s: 1.6}
      size: {kind: exponential, mean_s: 40}
      request: {cpu: 1, memory_gb: 2}
"""


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        (["mtbf_s=1e-9", "mttr_s=1e-9"], "failures.mtbf_s"),
        (["mtbf_s=1e-6", "mttr_s=1e-6"], "failures.mtbf_s"),
        (["mtbf_s=1e-4", "mttr_s=1e-9"], "failures.mttr_s"),
    ],
)
def test_node_failures_that_would_run_for_ever_are_refused(
    tmp_path: Path, overrides: list[str], field: str
) -> None:
    path = scenario(tmp_path, FAILURES, "failing.yaml")
    sets = [a for o in overrides for a in ("--set", f"cluster.node_types.0.failures.{o}")]
    line = refused(["run", path, *sets], "size", "failure rate", f"cluster.node_types.0.{field}")
    assert "node failures and recoveries" in line and "events a run may plan for" in line


def test_a_lognormal_up_time_with_a_tiny_mean_is_refused(tmp_path: Path) -> None:
    text = FAILURES.replace(
        "failures: {mtbf_s: 7200, mttr_s: 300}",
        "failures:\n        up: {kind: lognormal, mu: -20, sigma: 0.5}\n"
        "        down: {kind: lognormal, mu: -20, sigma: 0.5, max_s: 1}",
    )
    path = scenario(tmp_path, text, "lognormal.yaml")
    refused(["validate", path], "size", "failure rate", "cluster.node_types.0.failures.up")


def test_ordinary_failure_rates_and_a_time_horizon_pass(tmp_path: Path) -> None:
    path = scenario(tmp_path, FAILURES, "failing.yaml")
    assert main(["validate", path]) == 0
    # Failing often but down for long: few events (up 1 ns, down 300 s).
    assert main(["validate", path, "--set", "cluster.node_types.0.failures.mtbf_s=1e-9"]) == 0
    assert main(["validate", "faults-rack"]) == 0
    model = validate(read_yaml(SHIPPED_DIR / "faults-rack.yaml"), "faults-rack")
    found = limits.failure_events(model)
    assert found is not None and 10 < found[0] < 100  # 24 nodes x 4000 s / 7500 s x 2
