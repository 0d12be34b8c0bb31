"""`mean_run_makespan_s`: per workflow run, its last end minus its first arrival, over the
runs whose every task instance completed; kills and retries lengthen it."""

from __future__ import annotations

import numpy as np
import pytest

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.metrics import run_makespans
from clusteremu.cluster.workflow import workflow_scenario
from clusteremu.scenarios.loader import spec_from_dict


def test_run_makespans_take_last_end_minus_first_arrival_of_complete_runs() -> None:
    runs = np.array([0, 0, 1, 1, 2, 2])
    arrival = np.array([0.0, 5.0, 100.0, 100.0, 200.0, 200.0])
    end = np.array([50.0, 80.0, 130.0, np.nan, 260.0, 210.0])
    failed = np.array([False, False, False, False, False, True])
    # run 1 has an unfinished instance, run 2 a failed one: neither counts
    assert run_makespans(arrival, end, failed, runs).tolist() == [80.0]
    failed[:] = False
    assert run_makespans(arrival, end, failed, runs).tolist() == [80.0, 60.0]


def test_the_workflow_summary_reports_the_mean_run_makespan() -> None:
    spec = spec_from_dict(workflow_scenario(runs=6, seed=3))
    engine = Engine(spec)
    result = engine.run()
    jobs = result.jobs
    run = engine.jobs.features["run"]
    end = jobs.column("end_s").to_numpy(zero_copy_only=False)
    arrival = jobs.column("arrival_s").to_numpy()
    spans = [end[run == r].max() - arrival[run == r].min() for r in range(6)]
    assert result.summary["mean_run_makespan_s"] == pytest.approx(np.mean(spans))
    assert result.summary["mean_run_makespan_s"] > 0
