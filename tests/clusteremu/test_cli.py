"""The command line: run, compare, validate, list, and the public summary keys."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
    assert main(["compare", "mm-c", "--policy", "placer=worst-fit"]) == 2
    assert "unknown placer 'worst-fit'" in capsys.readouterr().err


def test_list_names_scenarios_and_policies(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in ("mm-c", "ps-amdahl", "first-fit", "random-fit", "equi", "fcfs-one-core", "static"):
        assert name in out


def test_list_describes_every_shipped_scenario_and_names_every_policy(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import yaml

    from cluster.policies import registry
    from cluster.policies.gpu_share import SCORERS as GPU_PLACERS
    from scenarios.loader import shipped_scenarios

    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for path in shipped_scenarios():
        description = " ".join(yaml.safe_load(path.read_text())["description"].split())
        assert f"  {path.stem:<24} {description}" in lines, path.stem
    for kind in registry.KINDS:
        assert f"  {kind + 's:':<14} {', '.join(registry.names(kind))}" in lines
    gpu = lines.index(next(x for x in lines if x.startswith("GPU placers")))
    assert lines[gpu + 1].split(None, 1)[1] == ", ".join(GPU_PLACERS)


def _subcommands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[Any]:
    """(command words, parser) of every sub-command, verbs under a command included."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from _subcommands(sub, (*path, name))


def test_every_subcommand_help_opens_with_a_description(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from clusteremu.cli import build_parser

    found = list(_subcommands(build_parser()))
    names = [" ".join(words) for words, _ in found]
    assert {"run", "compare", "list", "tune", "gpu-frag", "provision train"} <= set(names)
    for words, sub in found:
        assert main([*words, "--help"]) == 0
        text = capsys.readouterr().out
        description = (sub.description or "").strip()
        assert len(description) > 10, words  # a sentence, not a stub
        usage, _, rest = text.partition("\n\n")
        assert usage.startswith(f"usage: clusteremu {' '.join(words)}")
        assert rest.startswith(description.split("\n")[0]), words


def test_run_policy_sets_the_scheduler_policy_as_compare_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    short = ["--set", "stop.time_s=3000", "--set", "stop.warmup_s=100", "--json"]

    def summary(*argv: str) -> dict[str, Any]:
        assert main(["run", "hetero-placement", *short, *argv]) == 0
        return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]

    chosen = summary("--policy", "placer=random-fit")
    assert chosen == summary("--set", "scheduler.placer.name=random-fit")
    assert chosen != summary()  # the scenario's own first-fit
    assert main(["run", "hetero-placement", *short[:4], "--policy", "placer=random-fit"]) == 0
    assert capsys.readouterr().out.startswith(
        "hetero-placement: 1 replication(s), seed 3, placer random-fit\n"
    )


@pytest.mark.parametrize(
    ("policies", "message"),
    [
        (
            ["placer=randomfit"],
            "unknown placer 'randomfit' (did you mean random-fit or gpu-random-fit?)",
        ),
        (["placer=random-fit", "placer=first-fit"], "placer is given twice"),
        (["random-fit"], "expected kind=name"),
        (["placer=random-fit:seed"], "expected parameters as name:key=value"),
    ],
)
def test_run_refuses_a_bad_policy(
    policies: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "mm-c"] + [a for p in policies for a in ("--policy", p)]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def _batch_scenario(tmp_path: Path) -> Path:
    """Four jobs arriving together: a zero-length measurement window (as pennyworth-*)."""
    import yaml

    from tests.builders import batch_scenario

    path = tmp_path / "batch.yaml"
    path.write_text(yaml.safe_dump(batch_scenario()))
    return path


def test_metrics_without_meaning_print_n_a_not_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(_batch_scenario(tmp_path))
    assert main(["run", path]) == 0
    shown = dict(line.split() for line in capsys.readouterr().out.splitlines()[1:])
    assert shown["mean_response_time_s"] == "1.5"
    for key in ("mean_jobs_in_system", "holding_cost_rate", "utilization"):
        assert shown[key] == "n/a", key
    assert main(["run", path, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["utilization"] is None and summary["throughput_per_s"] is None
    # compare: one replication has no interval; the metric of a zero-length window is n/a
    argv = ["compare", path, "--policy", "placer=first-fit", "--policy", "placer=random-fit"]
    assert main([*argv, "--metric", "utilization"]) == 0
    table = capsys.readouterr().out
    assert "nan" not in table.lower()
    for row in table.splitlines()[1:]:
        assert row.split()[1:3] == ["n/a", "n/a"], row
    assert main([*argv, "--metric", "mean_response_time_s", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["summary"]["mean_jobs_in_system"] for r in rows] == [None, None]


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
