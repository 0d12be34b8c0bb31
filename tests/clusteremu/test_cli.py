"""The command line: run, compare, validate, list, and the public summary keys."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from clusteremu.cli import main

SHORT = ["--set", "stop.jobs=3000", "--set", "stop.warmup_jobs=300"]
SUMMARY_KEYS = {
    "jobs_completed",
    "mean_response_time_s",
    "p50_response_time_s",
    "p95_response_time_s",
    "p99_response_time_s",
    "mean_jobs_in_system",
    "holding_cost_rate",
    "utilization",
    "cost_usd",
    "per_class",
}


def test_run_json_prints_only_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "mm-c", "--json", *SHORT]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert set(summary) >= SUMMARY_KEYS
    assert SUMMARY_KEYS - {"per_class"} <= set(summary["per_class"]["a"]) | {
        "utilization",
        "cost_usd",
    }
    assert summary["jobs_completed"] == 2700


def test_run_out_writes_table_and_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "ps-amdahl", "--out", str(tmp_path), "--replications", "3", *SHORT]) == 0
    table = pq.read_table(tmp_path / "jobs.parquet")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert table.num_rows == 3 * 3000
    assert {
        "class",
        "arrival_s",
        "start_s",
        "end_s",
        "node",
        "pool",
        "core_seconds",
        "cost_usd",
        "retries",
    } <= set(table.column_names)
    assert summary["replications"] == 3
    assert set(summary["ci95"]) >= {"mean_response_time_s", "mean_jobs_in_system"}
    assert not list(tmp_path.glob(".*.tmp")), "no temporary files left behind"
    assert "mean_response_time_s" in capsys.readouterr().out


def test_compare_writes_chart_and_uses_common_seeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(
        [
            "compare",
            "ps-amdahl",
            "--policy",
            "allocator=equi",
            "--policy",
            "allocator=fcfs-one-core",
            "--replications",
            "2",
            "--out",
            str(tmp_path),
            *SHORT,
        ]
    )
    assert status == 0
    out = capsys.readouterr().out
    assert "allocator=equi" in out and "allocator=fcfs-one-core" in out
    png = tmp_path / "compare.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = json.loads((tmp_path / "compare.json").read_text())
    assert rows[0]["summary"]["mean_response_time_s"] < rows[1]["summary"]["mean_response_time_s"]


def test_compare_rejects_unknown_policy(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "mm-c", "--policy", "placer=best-fit"]) == 2
    assert "unknown placer 'best-fit'" in capsys.readouterr().err


def test_list_names_scenarios_and_policies(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in ("mm-c", "ps-amdahl", "first-fit", "random-fit", "equi", "fcfs-one-core", "static"):
        assert name in out


def test_console_script_runs_as_a_module() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "clusteremu", "run", "mm-c", "--json", *SHORT],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["scenario"] == "mm-c"
    assert done.stderr == ""
