"""Compaction (`clusteremu.cluster.engine.compaction`): rows of jobs that have left taken
out of the state every few hundred jobs change no job of any run, and no summary."""

from __future__ import annotations

import json
from typing import Any

import pytest

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.engine.compaction import RENUMBERED
from clusteremu.cluster.engine.sinks import KeepSink
from clusteremu.cluster.state import ARRAYS
from clusteremu.cluster.testing.rules import equal_tables
from clusteremu.scenarios.loader import load_scenario

#: Every shipped scenario whose policies are compiled, cut short.
SHORT = ["stop.jobs=6000", "stop.warmup_jobs=600"]
COMPILED = {
    "appendix-h": SHORT,
    "faults-mm2": SHORT,
    "faults-rack": [],
    "hetero-placement": ["stop.time_s=1500", "stop.warmup_s=100"],
    "mdp-changepoint": SHORT,
    "mdp-example-1": SHORT,
    "mdp-example-2": SHORT,
    "mdp-example-3": SHORT,
    "mdp-example-4": SHORT,
    "mean-field-table": SHORT,
    "ml-workflow": [],
    "mm-c": SHORT,
    "ps-amdahl": SHORT,
}
#: Shipped scenarios with a Python policy: refused (it would see renumbered jobs).
PYTHON = {
    "faas-hybrid-balanced": "placer",
    "faults-edge": "placer",
    "gpu-share": "placer",
    "pennyworth-avg": "placer, scaler",
}


def same(a: Any, b: Any) -> bool:
    """Equal summaries, to the last digit (NaN equals NaN)."""
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def _compare(name: str, overrides: list[str], every: int) -> Engine:
    spec = load_scenario(name, overrides)
    plain = Engine(spec).run()
    engine = Engine(spec, sink=KeepSink(), compact_every=every)
    compacted = engine.run()
    assert equal_tables(plain, compacted), name
    assert compacted.jobs["job"].to_pylist() == plain.jobs["job"].to_pylist()
    assert same(plain.summary, compacted.summary), name
    return engine


@pytest.mark.parametrize("name", sorted(COMPILED))
def test_compaction_changes_no_job_of_a_shipped_scenario(name: str) -> None:
    engine = _compare(name, COMPILED[name], every=300)
    assert engine.sink is not None and len(engine.sink.parts) >= 2  # type: ignore[attr-defined]


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("every", [1, 97])
def test_compaction_at_random_points(seed: int, every: int) -> None:
    # Patience timeouts (timers on the heap) and two classes on three node types.
    _compare(
        "hetero-placement",
        [f"seed={seed}", "stop.time_s=600", "stop.warmup_s=50", "workload.classes.0.timeout_s=30"],
        every,
    )


def test_the_live_rows_are_all_the_state_holds() -> None:
    spec = load_scenario("mm-c", ["stop.jobs=20000", "stop.warmup_jobs=100"])
    engine = Engine(spec, sink=KeepSink(), compact_every=500)
    engine.step(until_s=100.0)
    engine.compact()
    held = engine.jobs_fed
    assert held == 20000 - engine.jobs_done  # every job that has not left, no other
    assert engine.jobs_done > 0
    assert engine.ids.ids[:held].tolist() == sorted(engine.ids.ids[:held].tolist())


@pytest.mark.parametrize("name", sorted(PYTHON))
def test_python_policies_refuse_compaction(name: str) -> None:
    spec = load_scenario(name)
    with pytest.raises(ValueError, match=f"the {PYTHON[name]} decides? in Python"):
        Engine(spec, sink=KeepSink())


def test_every_array_holding_job_numbers_is_renumbered() -> None:
    declared = {k for k, v in ARRAYS.items() if v.job_ids and v.job_ids != "scratch"}
    assert declared == set(RENUMBERED)


def test_a_bad_compaction_period_is_refused() -> None:
    with pytest.raises(ValueError, match="compact_every must be at least 1"):
        Engine(load_scenario("mm-c", SHORT), sink=KeepSink(), compact_every=0)
