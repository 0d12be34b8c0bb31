"""`Engine.add_jobs`: an engine fed window by window runs exactly as one given every job."""

from __future__ import annotations

import numpy as np
import pytest

from clusteremu.cluster.engine import Engine, Jobs, generate_jobs, replication_seeds
from clusteremu.cluster.layout import FS
from clusteremu.scenarios.loader import load_scenario


@pytest.mark.parametrize(
    "name, overrides",
    [
        ("hetero-placement", ["stop.time_s=300", "stop.warmup_s=10"]),
        ("ps-amdahl", ["stop.jobs=3000", "stop.warmup_jobs=10"]),
    ],
)
def test_fed_in_windows_equals_one_run(name: str, overrides: list[str]) -> None:
    spec = load_scenario(name, overrides)
    whole = Engine(spec).run().jobs
    jobs = generate_jobs(spec, replication_seeds(spec.seed, 1)[0])
    empty = Jobs(np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0))
    fed = Engine(spec, jobs=empty)
    window = Engine(spec, jobs=jobs).state.fstate  # same statistics window and horizon
    fed.set_window(window[FS.WIN_START], window[FS.WIN_END], window[FS.HORIZON])
    edges = np.linspace(0.0, float(jobs.arrival_s[-1]), 9)
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        sel = (jobs.arrival_s > lo) & (jobs.arrival_s <= hi) if lo > 0 else jobs.arrival_s <= hi
        ids = fed.add_jobs(Jobs(jobs.arrival_s[sel], jobs.class_index[sel], jobs.size[sel]))
        assert ids.size == sel.sum()
        fed.step(until_s=hi)
    table = fed.run().jobs
    for column in whole.column_names:
        a = whole.column(column).to_numpy(zero_copy_only=False)
        b = table.column(column).to_numpy(zero_copy_only=False)
        if a.dtype.kind == "f":
            assert np.array_equal(a, b, equal_nan=True), column
        else:
            assert list(a) == list(b), column


def test_add_jobs_refuses_jobs_from_the_past() -> None:
    spec = load_scenario("mm-c", ["stop.jobs=100", "stop.warmup_jobs=10"])
    engine = Engine(spec)
    engine.step(until_s=5.0)
    with pytest.raises(ValueError, match="arrive"):
        engine.add_jobs(Jobs(np.array([1.0]), np.zeros(1, dtype=np.int64), np.ones(1)))
