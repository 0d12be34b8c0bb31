"""`clusteremu learn`: JSON output, files written, bad input exits 2 naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from clusteremu.cli import main


def test_learn_json_and_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    code = main(
        [
            "learn",
            "mdp-example-2",
            "--algorithm",
            "1b",
            "--iterations",
            "5",
            "--out",
            str(out),
            "--json",
        ]
    )
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    assert set(printed) == {"theta", "mean_jobs_in_system"}
    assert set(printed["theta"]) == {"class1", "class2"}
    assert all(0.0 < v <= 1.0 for v in printed["theta"].values())
    assert printed["mean_jobs_in_system"] >= 0.68206 - 1e-5  # the optimum is a lower bound
    table = pq.read_table(out / "estimates.parquet")
    assert table.num_rows == 5
    assert {"iteration", "theta1_hat", "theta2_se", "mean_jobs_learned"} <= set(table.column_names)
    assert (out / "estimates.png").stat().st_size > 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["algorithm"] == "1b" and summary["departures"] == 5 * 50 + 15


def test_learn_overrides_and_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "learn",
            "mdp-example-3",
            "--iterations",
            "3",
            "--seed",
            "4",
            "--set",
            "scheduler.allocator.params.learn.departures.first=60",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    text = capsys.readouterr().out
    assert "Algorithm 1b, 3 iterations, 180 departures" in text


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (
            ["--set", "workload.classes.0.speedup.parallel_fraction=0"],
            "workload.classes.0.speedup.parallel_fraction: expected a parallel fraction in (0, 1]",
        ),
        (
            ["--set", "scheduler.allocator.params.learn.initial_theta=[0.5, 2]"],
            "learn.initial_theta[1]: expected a parallel fraction in (0, 1], got 2.0",
        ),
        (["--set", "workload.classes.1.arrival.rate_per_s=40"], "unstable load"),
        (
            [
                "--set",
                "workload.classes.0.size.kind=deterministic",
                "--set",
                "workload.classes.0.size.value_s=0.6",
            ],
            "workload.classes.0.size",
        ),
        (["--iterations", "0"], "--iterations"),
    ],
)
def test_bad_input_exits_2(
    args: list[str], needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["learn", "mdp-example-2", "--out", str(tmp_path), *args])
    assert code == 2
    assert needle in capsys.readouterr().err
