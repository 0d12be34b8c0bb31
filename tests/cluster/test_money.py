"""Per-job money and SLO losses of a run (`clusteremu.cluster.money`): several batches in one
run."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from clusteremu.cluster.engine import Engine
from clusteremu.scenarios.loader import spec_from_dict


def two_batches(slo: dict[str, Any]) -> dict[str, Any]:
    """One 2-core node; a batch of two 50 s jobs at 0 s and one of two 450 s jobs at
    1,000 s: response times 50, 50 and 450, 450 s (their mean over all four: 250 s)."""

    def batch(name: str, at_s: float, run_s: float) -> dict[str, Any]:
        return {
            "name": name,
            "arrival": {"kind": "batch", "count": 2, "at_s": at_s},
            "size": {"kind": "deterministic", "value_s": run_s},
        }

    return {
        "name": "batches",
        "seed": 1,
        "stop": {"jobs": 4},
        "cluster": {
            "node_types": [{"name": "n", "cpu": 2, "memory_gb": 8, "price_per_hour": 3.6}],
            "nodes": [{"type": "n", "count": 1}],
        },
        "workload": {"classes": [batch("early", 0.0, 50.0), batch("late", 1000.0, 450.0)]},
        "slo": slo,
    }


@pytest.mark.parametrize(
    "slo",
    [
        {"kind": "avg", "target_s": 300, "penalty_per_s": 0.01},
        {"kind": "percentile", "percentile": 50, "target_s": 300, "penalty_per_s": 0.01},
    ],
)
def test_avg_and_percentile_losses_are_judged_per_batch(slo: dict[str, Any]) -> None:
    # Judged over all four jobs the mean (250 s) and the median (50 s) meet the 300 s
    # target; each batch is planned on its own, so the late batch's 450 s costs
    # 0.01 x 150 s = $1.50, split over its two jobs; the early batch costs nothing.
    run = Engine(spec_from_dict(two_batches(slo))).run()
    table = run.jobs.to_pandas()
    assert table["response_time_s"].tolist() == pytest.approx([50, 50, 450, 450])
    assert table["slo_loss_usd"].tolist() == pytest.approx([0.0, 0.0, 0.75, 0.75])
    assert run.summary["slo_loss_usd"] == pytest.approx(1.5)
    assert run.summary["total_usd"] == pytest.approx(run.summary["cost_usd"] + 1.5)


def test_each_batch_loss_is_split_over_its_own_jobs() -> None:
    # avg target 40 s: the early batch is 10 s late ($0.10 over 2 jobs), the late batch
    # 410 s late ($4.10 over 2 jobs).
    slo = {"kind": "avg", "target_s": 40, "penalty_per_s": 0.01}
    run = Engine(spec_from_dict(two_batches(slo))).run()
    loss = run.jobs.column("slo_loss_usd").to_numpy()
    assert loss == pytest.approx(np.array([0.05, 0.05, 2.05, 2.05]))
    assert run.summary["slo_loss_usd"] == pytest.approx(4.2)


def rtpt_on_the_fast_type(reference: str | None) -> dict[str, Any]:
    """Two jobs of one task queued on one 1-core node of the fast type (100 s each there,
    300 s on the slow type, which has no node): response times 100 and 200 s; rtpt with
    factor 1.5."""
    slo: dict[str, Any] = {"kind": "rtpt", "factor": 1.5, "penalty_per_s": 0.01}
    if reference is not None:
        slo["reference_type"] = reference
    return {
        "name": "rtpt-reference",
        "seed": 1,
        "stop": {"jobs": 2},
        "cluster": {
            "node_types": [
                {"name": "fast", "cpu": 1, "memory_gb": 8, "price_per_hour": 3.6},
                {"name": "slow", "cpu": 1, "memory_gb": 8, "price_per_hour": 1.0},
            ],
            "nodes": [{"type": "fast", "count": 1}],
        },
        "workload": {
            "classes": [
                {
                    "name": "q",
                    "arrival": {"kind": "batch", "count": 2, "at_s": 0.0},
                    "size": {"kind": "deterministic", "value_s": 1.0},
                    "runtime_by_node_type": {
                        "fast": {"kind": "deterministic", "value_s": 100.0},
                        "slow": {"kind": "deterministic", "value_s": 300.0},
                    },
                }
            ]
        },
        "slo": slo,
    }


def test_rtpt_bound_follows_the_reference_type_when_named() -> None:
    # Own type: bound 1.5 x 100 = 150 s, the second job is 50 s late ($0.50). Reference
    # `slow`: bound 1.5 x 300 = 450 s for both, no loss.
    own = Engine(spec_from_dict(rtpt_on_the_fast_type(None))).run()
    assert own.jobs.to_pandas()["slo_loss_usd"].tolist() == pytest.approx([0.0, 0.5])
    ref = Engine(spec_from_dict(rtpt_on_the_fast_type("slow"))).run()
    assert ref.jobs.to_pandas()["slo_loss_usd"].tolist() == pytest.approx([0.0, 0.0])
    fast = Engine(spec_from_dict(rtpt_on_the_fast_type("fast"))).run()
    assert fast.summary["slo_loss_usd"] == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"reference_type": "medium"}, "slo.reference_type"),
        ({"kind": "max", "deadline_s": 100.0, "reference_type": "slow"}, "slo"),
    ],
)
def test_a_reference_type_not_in_the_scenario_or_not_rtpt_is_refused(
    change: dict[str, Any], field: str
) -> None:
    from clusteremu.scenarios.loader import ScenarioError

    data = rtpt_on_the_fast_type("slow")
    data["slo"] = {**data["slo"], **change}
    with pytest.raises(ScenarioError, match=field.replace(".", r"\.")) as err:
        spec_from_dict(data)
    assert "reference_type" in str(err.value)
