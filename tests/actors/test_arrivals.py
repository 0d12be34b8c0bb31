"""The arrival stream hands out windows as job ids; the ids select exactly the jobs a
batch with their data would carry (windowed mode sends ids, actors draw the data)."""

from __future__ import annotations

import numpy as np
import pytest

from clusteremu.actors.arrivals import ArrivalIds, ArrivalStream, replication_jobs
from clusteremu.cluster import layout as L
from clusteremu.cluster.engine import Engine
from clusteremu.scenarios.loader import load_scenario

pytest.importorskip("ray")


def test_split_ids_select_the_batch_of_each_destination() -> None:
    spec = load_scenario("hetero-placement", ["stop.time_s=60", "stop.warmup_s=5"])
    by_ids, by_data = ArrivalStream(spec, 0), ArrivalStream(spec, 0)
    jobs = replication_jobs(spec, 0)
    group = np.array([0, 1], dtype=np.int64)  # class 0 -> destination 0, class 1 -> 1
    seen = 0
    for until in (0.5, 7.0, 7.0, 30.0, 1e9):
        parts = by_ids.split_ids(until, group, 2)
        batch = by_data.next_batch(until)
        assert isinstance(parts, tuple) and len(parts) == 2
        for g, part in enumerate(parts):
            expected = batch.take(group[batch.class_index] == g)
            got = part.batch(jobs)
            np.testing.assert_array_equal(got.ids, expected.ids)
            np.testing.assert_array_equal(got.arrival_s, expected.arrival_s)
            np.testing.assert_array_equal(got.class_index, expected.class_index)
            np.testing.assert_array_equal(got.size, expected.size)
            assert part.count == expected.count
        whole = ArrivalIds(parts[0].lo, parts[0].hi)
        np.testing.assert_array_equal(whole.batch(jobs).ids, batch.ids)
        seen += batch.count
    assert seen == jobs.arrival_s.size > 0
    assert by_ids.exhausted()


def test_every_actor_draws_the_engines_jobs() -> None:
    """Common random numbers: the stream an actor draws is the single-process engine's."""
    spec = load_scenario("mm-c", ["stop.jobs=500", "stop.warmup_jobs=10"])
    jobs = replication_jobs(spec, 0)
    engine = Engine(spec, 0)
    np.testing.assert_array_equal(jobs.arrival_s, engine.jobs_f[L.JF.ARRIVAL])
    assert not np.array_equal(jobs.arrival_s, replication_jobs(spec, 1).arrival_s)
