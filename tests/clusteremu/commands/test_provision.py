"""`clusteremu provision train|compare`: files, JSON shape, and bad input (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from clusteremu.cli import main

pytest.importorskip("sklearn")

SMALL = ["--set", "stop.jobs=1620"]  # 60 runs of 27 tasks


def test_train_then_compare_with_the_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "model"
    code = main(
        [
            "provision",
            "train",
            "ml-workflow",
            "--runs",
            "300",
            "--trials",
            "3",
            "--out",
            str(out),
            "--json",
        ]
    )
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["rows"] == 300 * 27
    assert set(printed["heavy"]) == {"parallel-1", "memory-1"}
    profile = pq.read_table(out / "profile.parquet")
    assert profile.num_rows == 300 * 27 and "memory_usage_max" in profile.column_names
    for task in ("parallel-1", "memory-1"):  # the protocol report per heavy task
        report = json.loads((out / f"held-out-{task}.json").read_text())
        assert report["report"]["format"] == "clusteremu.protocol-report"
        assert report["report"]["learned_something"]["ablation"] == "majority-bin"
        assert len(report["models"]) == 8
        assert "held out, scored once" in (out / f"held-out-{task}.md").read_text()
    cmp_out = tmp_path / "cmp"
    code = main(
        [
            "provision",
            "compare",
            "ml-workflow",
            *SMALL,
            "--model",
            str(out / "sizing.json"),
            "--provisioners",
            "grouped,predictive,smallest-bin,oracle",
            "--profiling-runs",
            "100",
            "--out",
            str(cmp_out),
            "--json",
        ]
    )
    assert code == 0
    rows = {r["provisioner"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert set(rows) == {"static", "grouped", "predictive", "smallest-bin", "oracle"}
    assert rows["oracle"]["oom_kills"] == 0 and rows["oracle"]["wasted_core_s"] == 0
    assert rows["smallest-bin"]["oom_kills"] > rows["predictive"]["oom_kills"]
    assert rows["smallest-bin"]["mean_run_makespan_s"] > rows["oracle"]["mean_run_makespan_s"]
    assert rows["static"]["memory_saving"] == 0.0
    assert rows["predictive"]["memory_saving"] > rows["grouped"]["memory_saving"] > 0
    assert rows["predictive"]["failed_jobs"] == 0
    for name in ("provision-compare.json", "provision-compare.parquet", "provision-compare.png"):
        assert (cmp_out / name).stat().st_size > 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["provision", "compare", "ml-workflow", "--provisioners", "magic"], "unknown"),
        (["provision", "train", "mm-c", "--out", "{tmp}/x"], "no workload.usage"),
        (["provision", "train", "ml-workflow", "--runs", "3", "--out", "{tmp}/x"], "--runs"),
        (["provision", "compare", "ml-workflow", "--model", "{tmp}/bad.json"], "not valid JSON"),
        (["provision", "train", "ml-workflow", "--bins", "2,5", "--out", "{tmp}/x"], "--bins"),
        (["provision", "train", "ml-workflow", "--bins", "3,3", "--out", "{tmp}/x"], "--bins"),
        (
            ["provision", "compare", "ml-workflow", "--provisioners", "grouped", "--model", "m"],
            "--model: only the predictive, most-likely-bin, smallest-bin, oracle",
        ),
        (
            ["run", "ml-workflow", "--set", "scheduler.provisioner.params.retry_limit=-1"],
            "retry_limit",
        ),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    (tmp_path / "bad.json").write_text('{"format": "clusteremu-sizing", "ver')
    code = main([a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_compare_out_says_what_it_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cmp"
    argv = ["provision", "compare", "ml-workflow", *SMALL, "--provisioners", "static"]
    assert main([*argv, "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    files = [out / f"provision-compare.{x}" for x in ("json", "parquet", "png")]
    assert lines[-1] == f"wrote {files[0]}, {files[1]} and {files[2]}"
    assert all(f.stat().st_size > 0 for f in files)
