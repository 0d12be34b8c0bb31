"""The summary's metrics are one table (`clusteremu.cluster.summary_metrics`): every number
a run's summary holds is in it (or is the run's identity), the metrics every run has are
in every run's summary, and the combined summary of several replications reduces each
metric as its entry says."""

from __future__ import annotations

import pytest

from clusteremu import load_scenario, run_spec
from clusteremu.cluster import summary_metrics as sm

#: Keys of a summary that are not metrics: the run's identity, and nested tables.
NOT_METRICS = {"scenario", "seed", "replication", "replications", "per_class", "per_function"}
RUNS = [
    ("mm-c", ["stop.jobs=2000", "stop.warmup_jobs=100"]),
    ("faults-rack", []),
    ("pennyworth-avg", []),
    ("ml-workflow", ["stop.jobs=60"]),
    ("faas-hybrid-balanced", ["stop.time_s=20"]),
]


def test_the_table_is_well_formed() -> None:
    assert len(sm.BY_NAME) == len(sm.METRICS)
    ranks: dict[str, set[int]] = {}
    for m in sm.METRICS:
        assert m.reduce in sm.REDUCTIONS and m.chart in ("core", "family", None), m
        if m.headline is not None:
            group, rank = m.headline
            assert group in sm.HEADLINE_GROUPS and rank not in ranks.setdefault(group, set())
            ranks[group].add(rank)


@pytest.mark.parametrize(("name", "overrides"), RUNS, ids=[r[0] for r in RUNS])
def test_every_metric_of_a_summary_is_in_the_table(name: str, overrides: list[str]) -> None:
    summary = run_spec(load_scenario(name, overrides)).summary
    unknown = sorted(set(summary) - set(sm.BY_NAME) - NOT_METRICS)
    assert not unknown, f"add them to cluster/summary_metrics.py: {unknown}"
    missing = [k for k in sm.names(chart="core") if k not in summary]
    assert not missing, missing


def test_replications_combine_as_the_table_says() -> None:
    spec = load_scenario("mm-c", ["stop.jobs=3000", "stop.warmup_jobs=100", "replications=3"])
    result = run_spec(spec)
    combined, parts = result.summary, result.replications
    for key in sm.names("sum"):
        assert combined[key] == sum(p[key] for p in parts), key
    for key in sm.names("mean") + sm.names("time"):
        assert combined[key] == pytest.approx(sum(p[key] for p in parts) / 3), key
    assert set(combined["ci95"]) >= set(sm.names("mean"))
    assert not set(combined["ci95"]) & set(sm.names("time") + sm.names("sum"))
