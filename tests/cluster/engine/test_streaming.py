"""`stream_refusal`: whether a run can stream its results, told from its scenario and its
policies before any job is drawn, is what the engine itself refuses, scenario by scenario."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.engine.compaction import CompactionRefused
from clusteremu.cluster.engine.sinks import StreamSink
from clusteremu.cluster.engine.streaming import stream_refusal
from clusteremu.scenarios.loader import load_scenario, shipped_scenarios


@pytest.mark.parametrize("path", shipped_scenarios(), ids=lambda p: p.stem)
def test_told_before_the_run_as_the_engine_refuses(path: Path) -> None:
    spec = load_scenario(path)
    why = stream_refusal(spec)
    if why is None:
        Engine(spec, sink=StreamSink())
    else:
        with pytest.raises(CompactionRefused) as refused:
            Engine(spec, sink=StreamSink())
        # The same first reason: Python policies, else the metrics.
        assert ("in Python" in why) == ("in Python" in str(refused.value)), path.stem


def test_a_python_policy_given_for_a_point_is_seen() -> None:
    spec = load_scenario("mm-c", ["scheduler.placer.name=scoring"])
    assert "the placer decides in Python" in (stream_refusal(spec) or "")
