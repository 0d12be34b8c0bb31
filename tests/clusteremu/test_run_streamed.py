"""`clusteremu run` streams its results where it can (issue 39): `--stream` writes the
per-job table as the run goes, an interrupted streamed run leaves `--out` as it was (no
partial table), and a run that only streaming can hold is accepted, or refused before it
starts, naming the field and why it cannot stream."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from clusteremu.cli import _load_run, build_parser, main
from clusteremu.scenarios import limits

SHORT = ["--set", "stop.jobs=4000", "--set", "stop.warmup_jobs=400"]
#: An off-terminal progress line (`clusteremu.progress`): `mm-c: 42%, 3 s`.
PROGRESS = re.compile(r"^mm-c: (?P<pct>\d+)%")
BIG = ["--set", "stop.jobs=100000000", "--set", "cluster.nodes.0.count=1000000"]
BIG += ["--set", "workload.classes.0.arrival.rate_per_s=800000"]


@pytest.fixture
def small_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine whose memory budget is 16 GB (10^8 jobs held whole need about 42 GB),
    with a large temporary disk."""
    monkeypatch.setattr(limits, "memory_budget_bytes", lambda: int(16e9))
    monkeypatch.setattr(limits, "temp_disk_bytes", lambda: 10**15)


def test_stream_writes_the_table_of_a_plain_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "mm-c", *SHORT, "--json", "--out", str(tmp_path / "p")]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main(["run", "mm-c", *SHORT, "--json", "--stream", "--out", str(tmp_path / "s")]) == 0
    streamed = json.loads(capsys.readouterr().out)
    assert streamed == plain
    a, b = (pq.read_table(tmp_path / d / "jobs.parquet").sort_by("job") for d in "ps")
    assert a.num_rows == b.num_rows == 4000 and a["response_time_s"].equals(b["response_time_s"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["pennyworth-avg", "--stream"], "--stream: pennyworth-avg cannot stream its results: "),
        (["mm-c", "--stream", "--ray"], "--stream: applies only to runs in this process"),
    ],
)
def test_stream_refused(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", *argv]) == 2
    assert message in capsys.readouterr().err


def test_a_run_only_streaming_can_hold_is_accepted_before_it_runs(
    small_machine: None, capsys: pytest.CaptureFixture[str]
) -> None:
    args = build_parser().parse_args(["run", "mm-c", *BIG])
    spec, plain = _load_run(args)
    assert spec.stop.jobs == 10**8
    assert plain is not None and plain.problems[0][0] == "stop.jobs"
    assert main(["validate", "mm-c", *BIG]) == 0  # what `run` accepts, `validate` does
    assert "valid" in capsys.readouterr().out
    assert main(["validate", "mm-c", *BIG, "--set", "scheduler.placer.name=scoring"]) == 2
    assert "this one cannot: the placer decides in Python" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "field", "why"),
    [
        (
            ["--policy", "placer=scoring"],
            "stop.jobs",
            "this one cannot: the placer decides in Python",
        ),
        (["--ray"], "stop.jobs", "16 GB"),
        (["--set", "cluster.nodes.0.count=100000000"], "cluster.nodes.0.count", "even when"),
        (
            ["--set", "slo={kind: avg, target_s: 10, penalty_per_s: 1}"],
            "stop.jobs",
            "would hold only the live jobs, but streamed results cannot give the metrics of an SLO",
        ),
    ],
)
def test_a_run_that_cannot_fit_is_refused_before_it_runs(
    small_machine: None,
    extra: list[str],
    field: str,
    why: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "mm-c", *BIG, *extra]) == 2
    err = capsys.readouterr().err
    assert f"{field}: needs about" in err and why in err, err


@pytest.mark.timeout(600)
def test_a_streamed_run_killed_midway_leaves_no_table(tmp_path: Path) -> None:
    """SIGTERM once the table's rows are streaming to its temporary file (seen after a
    progress line, read as the process prints it): exit 143, `--out` never appears."""
    out = tmp_path / "d"
    cmd = [sys.executable, "-m", "clusteremu", "run", "mm-c", "--stream", "--out", str(out)]
    cmd += ["--set", "stop.jobs=3000000", "--set", "stop.warmup_jobs=0"]
    env = dict(os.environ, CLUSTEREMU_PROGRESS_S="0")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None
    streaming, seen = False, []
    try:
        for line in proc.stderr:  # blocks until the process prints its next line
            seen.append(line)
            match = PROGRESS.match(line)
            if match and int(match["pct"]) < 90 and list(out.glob("*/.jobs.parquet.*.tmp")):
                streaming = True
                break
        assert streaming, "".join(seen)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err
    assert "terminated (SIGTERM); no results were written" in err and "Traceback" not in err
    assert not out.exists()
