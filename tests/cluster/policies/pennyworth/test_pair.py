"""Pennyworth's planners as an explicit placer + scaler pair (issue 27, "One house")."""

from __future__ import annotations

import pytest

from cluster.engine import Engine
from cluster.runner import with_policies
from scenarios.loader import load_scenario

#: Per-job results of replication 0 of shipped scenarios, recorded before the pair was made
#: explicit (the engine then made a placer that is a `Scaler` the scaler): the node of each
#: job, its end time (s, to 1 ms) and the run's total_usd, in job order.
BEFORE = {
    ("pennyworth-max", None): (
        0.05190083627721426,
        "t2.small-2 t2.small-3 t2.small-4 t2.small-2 t2.small-2 t2.small-2 t2.large-0 "
        "t2.large-0 t2.large-0 t2.small-5 t2.small-5 t2.small-5 t2.large-0 t2.large-0 "
        "t2.large-0 t2.small-3 t2.small-3 t2.small-5 t2.large-0 t2.large-0 t2.large-0 "
        "t2.small-4 t2.small-6 t2.small-6 t2.medium-1 t2.medium-1 t2.medium-1 t2.small-8 "
        "t2.small-6 t2.small-7 t2.small-7 t2.small-7",
        [448.185, 366.922, 441.664, 544.422, 637.507, 723.386, 173.06, 229.837, 278.327,
         334.348, 476.664, 660.776, 341.176, 406.093, 466.547, 472.555, 576.9, 202.819,
         534.03, 593.421, 654.216, 619.478, 326.059, 546.968, 270.799, 402.229, 541.987,
         437.945, 721.358, 286.342, 485.594, 664.312],
    ),
    ("pennyworth-avg", "pennyworth-rules"): (
        0.04920645180655622,
        "t2.small-4 t2.small-4 t2.small-4 t2.small-0 t2.small-0 t2.small-0 t2.small-2 "
        "t2.small-2 t2.small-2 t2.small-0 t2.small-0 t2.small-0 t2.large-5 t2.large-5 "
        "t2.large-5 t2.small-0 t2.small-0 t2.small-0 t2.small-3 t2.small-3 t2.small-3 "
        "t2.small-1 t2.small-2 t2.small-2 t2.large-5 t2.large-5 t2.large-5 t2.large-5 "
        "t2.small-1 t2.small-1 t2.small-1 t2.small-1",
        [448.185, 695.107, 1016.771, 216.237, 309.322, 395.201, 788.15, 1046.225, 1266.637,
         819.528, 961.843, 1145.956, 182.849, 247.766, 308.22, 500.835, 605.179, 687.998,
         401.18, 648.642, 901.955, 1016.515, 326.059, 546.968, 381.944, 446.199, 514.525,
         584.473, 294.39, 460.732, 659.984, 838.701],
    ),
}  # fmt: skip


@pytest.mark.parametrize(("scenario", "placer"), list(BEFORE))
def test_per_job_results_are_those_recorded_before_the_pair(
    scenario: str, placer: str | None
) -> None:
    spec = load_scenario(scenario)
    if placer is not None:
        spec = with_policies(spec, placer=placer)
    run = Engine(spec).run()
    total, nodes, ends = BEFORE[(scenario, placer)]
    table = run.jobs.to_pandas()
    assert [str(n) for n in table["node"]] == nodes.split()
    assert table["end_s"].to_numpy() == pytest.approx(ends, abs=1e-3)
    assert run.summary["total_usd"] == pytest.approx(total, rel=1e-12)
