"""A shard without Ray: fed window by window (its job arrays growing by doubling) it runs
exactly the single-process engine on its slice; its parts merge into the kernel's result."""

from __future__ import annotations

import numpy as np
import pytest

from clusteremu.actors.arrivals import ArrivalStream
from clusteremu.actors.node_shard import NodeShard
from clusteremu.actors.results import merge_result
from clusteremu.cluster.runner import run_spec
from clusteremu.scenarios.loader import load_scenario
from tests.actors.helpers import assert_same_jobs

pytest.importorskip("ray")


@pytest.mark.parametrize(
    ("name", "overrides", "step_s"),
    [
        ("hetero-placement", ["stop.time_s=600", "stop.warmup_s=10"], 7.0),
        ("mm-c", ["stop.jobs=3000", "stop.warmup_jobs=100"], 0.5),
    ],
)
def test_one_shard_fed_in_windows_equals_the_kernel(
    name: str, overrides: list[str], step_s: float
) -> None:
    spec = load_scenario(name, overrides)
    stream = ArrivalStream(spec, 0)
    shard = NodeShard(spec, 0, 0, np.arange(len(spec.nodes)), "all", snapshot=True)
    horizon = spec.stop.horizon_s
    t = 0.0
    while not stream.exhausted():
        t = min(t + step_s, horizon)
        state = shard.window(t, stream.next_batch(t))
        assert state.free is not None and state.free.shape == (3, len(spec.nodes))
    shard.window(horizon)
    assert shard.engine.state.jobs_f.shape[1] >= shard.engine.jobs_fed == stream.info()[0]
    result = merge_result(spec, 0, stream.jobs, stream.window, [shard.finish()])
    reference = run_spec(spec)
    assert_same_jobs(reference.jobs, result.jobs)
    for key in ("jobs_completed", "mean_response_time_s", "jobs_failed", "decisions"):
        assert result.summary[key] == reference.summary[key], key
    for key in ("mean_jobs_in_system", "utilization", "cost_usd", "throughput_per_s"):
        assert result.summary[key] == pytest.approx(reference.summary[key], rel=1e-9), key
