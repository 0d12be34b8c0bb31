"""Jobs drawn a chunk at a time (`clusteremu.cluster.job_chunks`): the same jobs as drawn
before the run, and the same run when a compacting engine feeds them chunk by chunk."""

from __future__ import annotations

import numpy as np
import pytest

from clusteremu.cluster import job_chunks
from clusteremu.cluster.engine import Engine
from clusteremu.cluster.engine.sinks import KeepSink, StreamSink
from clusteremu.cluster.jobs import generate_jobs, replication_seed
from clusteremu.cluster.testing.rules import equal_tables
from clusteremu.scenarios.loader import load_scenario

STOPS = {
    "jobs": ["stop.jobs=9000", "stop.warmup_jobs=900"],
    "time": ["stop.jobs=null", "stop.warmup_jobs=0", "stop.time_s=900", "stop.warmup_s=50"],
}
SIZES = {
    "exponential": [],
    "deterministic": ["workload.classes.0.size={kind: deterministic, value_s: 1.0}"],
}


@pytest.mark.parametrize("stop", sorted(STOPS))
@pytest.mark.parametrize("size", sorted(SIZES))
def test_chunks_are_the_jobs_drawn_up_front(stop: str, size: str) -> None:
    spec = load_scenario("mm-c", [*STOPS[stop], *SIZES[size]])
    whole = generate_jobs(spec, replication_seed(spec, 0))
    drawn = job_chunks.drawn_chunks(spec, replication_seed(spec, 0), chunk=1000)
    assert drawn is not None
    parts = list(drawn)
    assert len(parts) > 3
    assert np.array_equal(np.concatenate([p.arrival_s for p in parts]), whole.arrival_s)
    assert np.array_equal(np.concatenate([p.size for p in parts]), whole.size)
    assert drawn.last_arrival == whole.arrival_s[-1]


@pytest.mark.parametrize(
    ("name", "stop"),
    [("mm-c", STOPS["jobs"]), ("mm-c", STOPS["time"]), ("faults-mm2", STOPS["jobs"])],
)
def test_a_run_fed_chunk_by_chunk_is_the_same_run(
    name: str, stop: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(job_chunks, "CHUNK_JOBS", 700)
    spec = load_scenario(name, stop)
    whole = Engine(spec).run()
    engine = Engine(spec, sink=KeepSink(), compact_every=250)
    assert engine.jobs.arrival_s.size == (901 if "stop.jobs=9000" in stop else 700)
    assert equal_tables(whole, engine.run())
    streamed = Engine(spec, sink=StreamSink(keep_rows=0), compact_every=250).run()
    assert streamed.summary["jobs_completed"] == whole.summary["jobs_completed"]
    assert streamed.summary["p99_response_time_s"] == whole.summary["p99_response_time_s"]
    assert streamed.summary["measured_time_s"] == whole.summary["measured_time_s"]
    assert streamed.summary["mean_jobs_in_system"] == whole.summary["mean_jobs_in_system"]


def test_other_workloads_are_drawn_up_front() -> None:
    spec = load_scenario("hetero-placement")  # two classes
    assert job_chunks.drawn_chunks(spec, replication_seed(spec, 0)) is None
    # truncated lognormal sizes redraw rejected values in batches
    spec = load_scenario("mm-c", ["workload.classes.0.size={kind: lognormal, mu: -1, sigma: 1}"])
    assert job_chunks.drawn_chunks(spec, replication_seed(spec, 0)) is None
