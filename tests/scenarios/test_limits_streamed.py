"""The memory estimate of a run that streams its results (scenarios/limits.py,
`streamed=True`, issue 39): it counts the live jobs' rows, not every job's, where the
scenario allows streaming; what cannot stream, or cannot fit even streamed, is refused as
before, naming the field."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
import yaml

from clusteremu.cluster import job_chunks, row_groups, runner
from clusteremu.cluster.engine import sinks
from clusteremu.cluster.engine.streaming import stream_refusal
from clusteremu.cluster.jobs import replication_seed
from clusteremu.scenarios import limits, schema
from clusteremu.scenarios.errors import ScenarioError
from clusteremu.scenarios.loader import (
    SHIPPED_DIR,
    apply_overrides,
    load_scenario,
    shipped_scenarios,
)
from clusteremu.scenarios.migration import migrate_policies

MM_C: dict[str, Any] = yaml.safe_load((SHIPPED_DIR / "mm-c.yaml").read_text())
BUDGET = 16e9


@pytest.fixture(autouse=True)
def large_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """A temporary folder with 1 PB free (the response times of 10^9 jobs take 8 GB)."""
    monkeypatch.setattr(limits, "temp_disk_bytes", lambda: 10**15)


def mm_c(jobs: int = 10**8, nodes: int = 10**6, **extra: Any) -> schema.ScenarioModel:
    """mm-c with `jobs` jobs on `nodes` nodes (default: about 42 GB held whole, under 2 GB
    streamed), `job_class` fields of its class and other top-level fields changed."""
    data = copy.deepcopy(MM_C)
    data["stop"] = {"jobs": jobs}
    data["cluster"]["nodes"][0]["count"] = nodes
    data["workload"]["classes"][0].update(extra.pop("job_class", {}))
    data.update(extra)
    return schema.ScenarioModel.model_validate(data)


def refusal(model: schema.ScenarioModel, streamed: bool) -> tuple[str, str] | None:
    try:
        limits.check_scenario(model, "s.yaml", budget=BUDGET, streamed=streamed)
    except limits.MemoryNeedError as exc:
        assert len(exc.problems) == 1
        return exc.problems[0]
    return None


def test_a_streamed_run_needs_only_its_live_jobs() -> None:
    model = mm_c()
    problem = refusal(model, streamed=False)
    assert problem is not None and problem[0] == "stop.jobs" and "of memory" in problem[1]
    assert refusal(model, streamed=True) is None
    streamed = limits.total_bytes(limits.scenario_needs(model, streamed=True))
    assert streamed < 4e9  # the bound for 10^9 jobs on 10^6 nodes
    more = limits.total_bytes(limits.scenario_needs(mm_c(jobs=10**9), streamed=True))
    assert more == streamed  # constant in the jobs
    assert refusal(mm_c(jobs=10**9), streamed=True) is None


def test_replications_of_a_streamed_run_hold_a_bounded_table() -> None:
    model = mm_c(jobs=10**7, replications=1000)
    plain = refusal(model, streamed=False)
    assert plain is not None and plain[0] == "replications"
    assert refusal(model, streamed=True) is None


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        ({"slo": {"kind": "avg", "target_s": 10, "penalty_per_s": 1}}, "an SLO"),
        ({"workload": {**MM_C["workload"], "usage": {"model": "independent"}}}, "usage"),
        ({"job_class": {"data_in_mb": 10.0}}, "a world model"),
    ],
)
def test_what_cannot_stream_is_refused_as_before(extra: dict[str, Any], why: str) -> None:
    model = mm_c(**copy.deepcopy(extra))
    plain = refusal(model, streamed=False)
    streamed = refusal(model, streamed=True)
    assert plain is not None and streamed is not None
    assert streamed[0] == plain[0] == "stop.jobs"
    assert streamed[1].startswith(plain[1])
    assert "a run that streams its results would hold only the live jobs, but " in streamed[1]
    assert why in streamed[1]


def test_what_cannot_fit_even_streamed_names_its_field() -> None:
    # Too many nodes: the nodes' field, whatever the jobs.
    problem = refusal(mm_c(nodes=10**9), streamed=True)
    assert problem is not None and problem[0] == "cluster.nodes.0.count"
    assert "even when the run streams its results" in problem[1]
    # Sizes of a lognormal are drawn before the run: every job's row counts.
    lognormal = {"size": {"kind": "lognormal", "mu": 0.0, "sigma": 1.0}}
    problem = refusal(mm_c(job_class=lognormal), streamed=True)
    assert problem is not None and problem[0] == "stop.jobs"
    assert "100,000,000 jobs drawn before the run" in problem[1]
    assert refusal(mm_c(jobs=10**7, job_class=lognormal), streamed=True) is None


def test_the_estimate_uses_the_engine_constants() -> None:
    assert limits.STREAM_KEEP_ROWS == sinks.KEEP_ROWS == row_groups.HOLD_ROWS
    assert limits.STREAM_COMPACT_EVERY == runner.COMPACT_EVERY
    assert limits.STREAM_CHUNK_JOBS == job_chunks.CHUNK_JOBS
    assert limits.STREAM_MEMORY_VALUES == sinks.MEMORY_VALUES


@pytest.mark.parametrize(
    "overrides",
    [
        [],
        ["workload.classes.0.size={kind: lognormal, mu: -0.5, sigma: 0.1}"],
        ["workload.classes.0.size={kind: deterministic, value_s: 1}"],
        [
            "workload.classes.0.arrival={kind: renewal, interarrival: "
            "{kind: deterministic, value_s: 0.2}}"
        ],
        [
            "workload.classes.0.arrival={kind: renewal, interarrival: "
            "{kind: hyperexponential, probabilities: [0.5, 0.5], means_s: [0.1, 0.2]}}"
        ],
        ["workload.classes.0.runtime_by_node_type={core: {kind: exponential, mean_s: 1}}"],
    ],
)
def test_jobs_drawn_as_the_run_goes_as_the_engine_draws_them(overrides: list[str]) -> None:
    data = copy.deepcopy(MM_C)
    spec = load_scenario("mm-c", overrides)
    model = schema.ScenarioModel.model_validate(apply_overrides(data, overrides, "mm-c"))
    chunks = job_chunks.drawn_chunks(spec, replication_seed(spec, 0))
    assert limits.drawn_as_it_goes(model) == (chunks is not None)


def test_two_classes_are_drawn_before_the_run() -> None:
    spec = load_scenario("hetero-placement")
    assert job_chunks.drawn_chunks(spec, replication_seed(spec, 0)) is None
    data = yaml.safe_load((SHIPPED_DIR / "hetero-placement.yaml").read_text())
    assert not limits.drawn_as_it_goes(schema.ScenarioModel.model_validate(data))


@pytest.mark.parametrize("path", shipped_scenarios(), ids=lambda p: p.stem)
def test_what_the_scenario_forbids_the_run_refuses_too(path: Any) -> None:
    """The scenario's part of the check (`stream_blockers`) never lets through what the
    run's (`stream_refusal`, which also sees the policies) refuses for its metrics."""
    data = migrate_policies(yaml.safe_load(path.read_text()), path.name)
    blockers = limits.stream_blockers(schema.ScenarioModel.model_validate(data))
    why = stream_refusal(load_scenario(path))
    if blockers is not None:
        assert why is not None
    if why is not None and "in Python" not in why:
        assert blockers is not None, path.stem


def test_a_memory_refusal_is_a_scenario_error() -> None:
    with pytest.raises(ScenarioError):
        limits.check_scenario(mm_c(), "s.yaml", budget=BUDGET)
    assert np.isfinite(limits.total_bytes(limits.scenario_needs(mm_c(), streamed=True)))


def test_the_temporary_disk_bounds_a_streamed_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Memory no longer bounds the jobs of a streamed run; the response times kept for
    the percentiles (8 bytes a job) on the temporary disk do."""
    monkeypatch.setattr(limits, "temp_disk_bytes", lambda: 10**10)  # 10 GB free
    assert refusal(mm_c(jobs=10**9), streamed=True) is None  # 8 GB, within 80%
    with pytest.raises(ScenarioError, match=r"stop\.jobs: needs about 16 GB of temporary disk"):
        limits.check_scenario(mm_c(jobs=2 * 10**9), "s.yaml", budget=BUDGET, streamed=True)
    endless = mm_c(stop={"time_s": 1e300})
    with pytest.raises(ScenarioError, match=r"stop\.time_s: needs more than 1e30 bytes"):
        limits.check_scenario(endless, "s.yaml", budget=BUDGET, streamed=True)
