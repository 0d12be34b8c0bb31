"""A shard without Ray: fed window by window (growing past its first capacity) it runs
exactly the single-process engine on its slice."""

from __future__ import annotations

import numpy as np
import pytest

from actors.arrivals import ArrivalStream
from actors.node_shard import NodeShard
from actors.results import merge_result
from cluster.runner import run_spec
from scenarios.loader import load_scenario
from tests.actors.helpers import assert_same_jobs

pytest.importorskip("ray")


@pytest.mark.parametrize("share", [1.0, 0.0])
def test_one_shard_fed_in_windows_equals_the_kernel(share: float) -> None:
    spec = load_scenario("hetero-placement", ["stop.time_s=600", "stop.warmup_s=10"])
    stream = ArrivalStream(spec, 0)
    shard = NodeShard(spec, 0, 0, np.arange(len(spec.nodes)), stream.info(), "all", share=share)
    first_capacity = shard.global_ids.size
    t = 0.0
    while not stream.exhausted():
        t = min(t + 7.0, 600.0)
        shard.window(t, stream.next_batch(t))
    shard.window(600.0)
    if share == 0.0:
        assert first_capacity < stream.info()[0] <= shard.global_ids.size  # it grew
    result = merge_result(spec, 0, stream.jobs, stream.window, [shard.finish()], None)
    reference = run_spec(spec)
    assert_same_jobs(reference.jobs, result.jobs)
    assert result.summary["mean_jobs_in_system"] == pytest.approx(
        reference.summary["mean_jobs_in_system"], rel=1e-9
    )
    assert result.summary["utilization"] == pytest.approx(
        reference.summary["utilization"], rel=1e-9
    )
