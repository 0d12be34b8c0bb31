"""The faas cloud/edge family: device mixes, execution times, images, the generator hook,
the shipped scenario and the summary keys of `clusteremu run --json`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from clusteremu.cluster.distributions import BoundedLognormal
from clusteremu.cluster.engine import Engine
from clusteremu.scenarios import faas
from clusteremu.scenarios.errors import ScenarioError
from clusteremu.scenarios.loader import load_scenario, spec_from_dict

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("method", ["exact", "sample"])
@pytest.mark.parametrize("setup", sorted(faas.SETUPS))
def test_generators_reproduce_the_device_mix_at_5000_nodes(setup: str, method: str) -> None:
    nodes = faas.generate_nodes(setup, 5000, seed=7, method=method)
    assert len(nodes) == 5000
    want = faas.setup_proportions(setup)
    for device, p in want.items():
        got = nodes.count(device) / 5000
        assert abs(got - p) <= 0.02, (setup, device, got, p)


def test_exact_counts_match_the_recipes_at_their_own_size() -> None:
    for setup, counts in faas.SETUPS.items():
        assert faas.device_counts(setup, sum(counts.values())) == counts


def test_generators_are_seeded() -> None:
    a = faas.generate_nodes("edge_gpu", 300, seed=1, method="sample")
    assert a == faas.generate_nodes("edge_gpu", 300, seed=1, method="sample")
    assert a != faas.generate_nodes("edge_gpu", 300, seed=2, method="sample")
    with pytest.raises(ValueError, match="unknown cluster setup 'moon'"):
        faas.generate_nodes("moon", 10)


def test_execution_time_distributions_have_the_table_means() -> None:
    u = (np.arange(100_000) + 0.5) / 100_000
    for image, row in faas.EXEC_MEAN_S.items():
        for device, mean in row.items():
            mu, sigma, lo, hi = faas.exec_distribution(image, device)
            d = BoundedLognormal(mu, sigma, lo, hi)
            assert d.mean == pytest.approx(mean, rel=1e-5)
            x = d.quantile(u)
            assert x.min() >= lo and x.max() <= hi
            assert x.mean() == pytest.approx(mean, rel=1e-3)
    # A bound known from faas-sim is kept.
    assert faas.exec_distribution("resnet-training-gpu", "nano")[2:] == (475.0, 3759.0)


def test_ranked_images_choose_per_device() -> None:
    assert faas.image_on_device("resnet50-inference", "xeongpu") == "resnet-inference-gpu"
    assert faas.image_on_device("resnet50-inference", "rpi3") == "resnet-inference-cpu"
    assert faas.image_on_device("mobilenet-inference", "coral") == "mobilenet-inference-tpu"
    assert faas.image_on_device("mobilenet-inference", "nuc") == "mobilenet-inference-tflite"
    assert faas.image_on_device("resnet50-training", "nuc") == "resnet-training-cpu"
    assert faas.image_on_device("resnet50-training", "xeoncpu") is None
    assert set(faas.runtime_by_node_type("resnet50-training")) == {
        "xeongpu",
        "nx",
        "tx2",
        "nano",
        "nuc",
    }


def test_the_generator_block_expands_into_node_types_and_nodes() -> None:
    spec = spec_from_dict(faas.scenario_dict("edge_tpu", nodes=200, time_s=10.0))
    assert len(spec.nodes) == 200
    assert {t.name for t in spec.node_types} == set(faas.DEVICES)
    coral = spec.node_type("coral")
    assert coral.labels["accelerator"] == "tpu" and coral.max_jobs == faas.WORKER_SLOTS
    rpi3 = spec.node_type("rpi3")
    assert rpi3.registry_mbps == rpi3.storage_mbps == 250.0
    assert spec.node_type("xeoncpu").registry_mbps == 1000.0
    counts = faas.device_counts("edge_tpu", 200)
    assert all(spec.nodes.count(d) == c for d, c in counts.items())


@pytest.mark.parametrize(
    ("generator", "message"),
    [
        ({"name": "moon", "nodes": 10}, "unknown cluster setup 'moon'"),
        ({"name": "edge_sbc", "nodes": 10, "params": {"topology": "mesh"}}, "topology"),
        ({"name": "edge_sbc", "nodes": 10, "params": {"colour": "red"}}, "unknown keys"),
    ],
)
def test_bad_generator_blocks_name_the_field(generator: dict, message: str) -> None:
    data = faas.scenario_dict("edge_sbc", nodes=10, time_s=10.0)
    data["cluster"]["generator"] = generator
    with pytest.raises(ScenarioError, match="cluster.generator") as err:
        spec_from_dict(data)
    assert message in str(err.value)


def test_shipped_scenario_is_the_acceptance_setup() -> None:
    spec = load_scenario("faas-hybrid-balanced")
    assert len(spec.nodes) == 1000 and spec.stop.time_s == 600.0
    rates = {c.name: c.arrival.rate_per_s for c in spec.classes}
    assert rates == {
        "resnet50-inference": 50.0,
        "speech-inference": 50.0,
        "mobilenet-inference": 50.0,
        "resnet50-training": 0.1,
        "resnet50-preprocessing": 1.0,
    }
    assert spec.scheduler.placer.name == "scoring"


def test_cli_run_json_reports_score_and_per_function(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "clusteremu.cli",
        "run",
        "faas-hybrid-balanced",
        "--json",
        "--set",
        "cluster.generator.nodes=60",
        "--set",
        "stop.time_s=30",
        "--set",
        "workload.classes.0.arrival.rate_per_s=5",
        "--set",
        "workload.classes.1.arrival.rate_per_s=5",
        "--set",
        "workload.classes.2.arrival.rate_per_s=5",
    ]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert 0.0 <= summary["score"] <= 1.0
    for name in faas.FUNCTIONS:
        stats = summary["per_function"][name]
        assert {"mean_exec_s", "mean_wait_s", "success_ratio"} <= set(stats)


def test_runs_draw_each_device_execution_time_with_the_table_mean() -> None:
    spec = spec_from_dict(
        faas.scenario_dict("hybrid_balanced", nodes=300, rate_per_s=20, time_s=200, seed=4)
    )
    table = Engine(spec).run().jobs
    device = np.array([str(x).rsplit("-", 1)[0] for x in table["node"].to_pylist()])
    cls = np.array(table["class"].to_pylist(), dtype=object)
    done = ~np.isnan(table["end_s"].to_numpy()) & ~table["failed"].to_numpy(zero_copy_only=False)
    run_s = table["end_s"].to_numpy() - table["start_s"].to_numpy() - table["setup_s"].to_numpy()
    checked = 0
    for function in faas.FUNCTIONS:
        for name in faas.DEVICE_NAMES:
            sel = done & (cls == function) & (device == name)
            if sel.sum() < 100:
                continue
            mean = faas.EXEC_MEAN_S[faas.image_on_device(function, name) or ""][name]
            # Coefficient of variation of these bounded lognormals is below 0.35: 4 s.e.
            assert abs(run_s[sel].mean() / mean - 1) < 4 * 0.35 / np.sqrt(sel.sum())
            checked += 1
    assert checked >= 8


def test_the_shipped_file_is_the_generator_output_in_the_new_form() -> None:
    """`python -m clusteremu.scenarios.faas` wrote the shipped file; it uses the world fields (no
    deprecated placer parameters, so loading it warns about nothing)."""
    import warnings

    path = Path(faas.__file__).with_name("faas-hybrid-balanced.yaml")
    assert path.read_text() == faas.shipped_yaml()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        spec = load_scenario("faas-hybrid-balanced")
    assert spec.scheduler.placer.params == {}
    assert spec.world.goodput == faas.GOODPUT and spec.metrics.score is not None
    assert {c.name: c.containers[0].images for c in spec.classes}["resnet50-training"] == (
        "resnet-training-gpu",
        "resnet-training-cpu",
    )
