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

    from clusteremu.cluster.policies import registry
    from clusteremu.cluster.policies.gpu_share import SCORERS as GPU_PLACERS
    from clusteremu.scenarios.loader import shipped_scenarios

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
    # stderr: progress only (a line every 5 s, and a compile note on a cold numba cache)
    assert all(line.startswith("mm-c: ") for line in done.stderr.splitlines()), done.stderr


#: mm-c cut off at 60 s near saturation: jobs are still queued and running at the end.
CUT_OFF = [
    "--set",
    "stop.jobs=null",
    "--set",
    "stop.warmup_jobs=0",
    "--set",
    "stop.time_s=60",
    "--set",
    "stop.warmup_s=5",
    "--set",
    "workload.classes.0.arrival.rate_per_s=9.5",
]


def _shown(out: str) -> dict[str, str]:
    """The headline's `key value` lines."""
    return dict(line.split() for line in out.splitlines()[1:] if len(line.split()) == 2)


def test_run_always_shows_failed_and_unfinished_jobs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "mm-c", *SHORT]) == 0
    captured = capsys.readouterr()
    shown = _shown(captured.out)
    assert shown["jobs_failed"] == "0" and shown["jobs_unfinished"] == "0"
    assert shown["unscheduled"] == "0"
    assert "warning" not in captured.err


def test_run_warns_when_a_noticeable_share_of_jobs_did_not_complete(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "mm-c", *CUT_OFF]) == 0
    captured = capsys.readouterr()
    shown = _shown(captured.out)
    unfinished = int(shown["jobs_unfinished"])
    total = int(shown["jobs_completed"]) + int(shown["jobs_failed"]) + unfinished
    assert unfinished / total >= 0.01
    warning = [line for line in captured.err.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1
    assert f"{unfinished} of {total} jobs" in warning[0]
    assert "still in the system at the end" in warning[0]
    # under --json the summary alone is on stdout; the warning still goes to stderr
    assert main(["run", "mm-c", *CUT_OFF, "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["jobs_unfinished"] == unfinished
    assert "did not complete" in captured.err


@pytest.mark.parametrize(
    ("completed", "failed", "unfinished", "warned"),
    [(990, 0, 10, True), (991, 0, 9, False), (990, 5, 5, True), (1000, 0, 0, False)],
)
def test_the_unserved_warning_starts_at_one_percent(
    completed: int, failed: int, unfinished: int, warned: bool
) -> None:
    from clusteremu.cli import unserved_warning

    summary = {"jobs_completed": completed, "jobs_failed": failed, "jobs_unfinished": unfinished}
    assert bool(unserved_warning(summary)) is warned


def _fake_ray_run(
    monkeypatch: pytest.MonkeyPatch, mode: str, window_s: float, shards: int = 2
) -> list[Any]:
    """`clusteremu.actors.launch.run_on_ray` replaced by the kernel run with the summary's `ray`
    entry
    a run of `mode` would have (no Ray started); returns the options it was called with."""
    import clusteremu.actors.launch
    from clusteremu.cluster.runner import run_spec

    calls: list[Any] = []

    def fake(spec: Any, args: Any) -> Any:
        calls.append(args)
        result = run_spec(spec)
        result.summary["ray"] = {"mode": mode, "shards": shards, "window_s": window_s, "run": "t"}
        return result

    monkeypatch.setattr(clusteremu.actors.launch, "run_on_ray", fake)
    return calls


def test_windowed_results_are_labelled_approximate_with_their_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = _fake_ray_run(monkeypatch, "windowed", 60.0)
    argv = ["run", "mm-c", *SHORT, "--ray", "--shards", "2", "--window", "60"]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert calls and out[1].startswith("approximate: windowed mode, window 60 s, 2 shard(s)")
    assert main([*argv, "--json", "--out", str(tmp_path / "w")]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["ray"]["approximate"] is True
    assert json.loads((tmp_path / "w" / "summary.json").read_text())["ray"]["approximate"]


def test_shards_in_exact_mode_are_warned_and_exact_results_not_labelled(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _fake_ray_run(monkeypatch, "exact", 0.0)
    assert main(["run", "mm-c", *SHORT, "--ray", "--shards", "2"]) == 0
    captured = capsys.readouterr()
    warned = [line for line in captured.err.splitlines() if "--shards 2" in line]
    assert len(warned) == 1 and "no effect in exact mode" in warned[0]
    assert "approximate" not in captured.out
    assert main(["run", "mm-c", *SHORT, "--ray", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["ray"]["approximate"] is False
    assert "--shards" not in captured.err


def test_validate_names_the_allocator_only_when_there_are_pools(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["validate", "mm-c"]) == 0  # nodes only: no allocator at work
    line = capsys.readouterr().out.strip()
    assert line.endswith("0 pools, placer first-fit)") and "allocator" not in line
    assert main(["validate", "ps-amdahl"]) == 0  # a pool: its allocator shares the cores
    assert "1 pools, placer first-fit, allocator equi)" in capsys.readouterr().out


def test_one_windowed_shard_is_not_labelled_approximate() -> None:
    """With one node shard the windows give the kernel's results (docs/cluster.md)."""
    from clusteremu.cli import ray_mode_note

    ray = {"mode": "windowed", "window_s": 1.0, "run": "t"}
    assert ray_mode_note({"ray": {**ray, "shards": 1}}) == ""
    assert "window 1 s, 3 shard(s)" in ray_mode_note({"ray": {**ray, "shards": 3}})
    assert ray_mode_note({"ray": {**ray, "mode": "exact", "shards": 3}}) == ""
