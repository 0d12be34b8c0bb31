"""Results are never mixed or half-written, and the command line as a newcomer meets it
(issue 11): files written together with a manifest, the user's permissions, stale
temporary files removed, another command's folder refused, SIGINT and SIGTERM handled
alike over an older result; `--help`, `--version`, nearest scenario names.
"""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from clusteremu.cli import main
from clusteremu.cluster.io import (
    MANIFEST,
    STAGE_PREFIX,
    OutputError,
    check_output_file,
    check_output_folder,
    output_folder,
    write_json,
)
from tests.clusteremu.badinput import refused

SHORT = ["--set", "stop.jobs=2000", "--set", "stop.warmup_jobs=0"]


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def test_run_writes_files_together_with_a_manifest(
    tmp_path: Path, umask_022: None, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r"
    assert main(["run", "mm-c", "--out", str(out), *SHORT]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["jobs.parquet", "summary.json", MANIFEST]
    )
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["command"] == "run" and manifest["files"] == ["jobs.parquet", "summary.json"]
    for name in ("jobs.parquet", "summary.json", MANIFEST):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o644, name  # not 0600
    capsys.readouterr()


def test_files_follow_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o002)
    try:
        write_json({"a": 1}, tmp_path / "x.json")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "x.json").stat().st_mode) == 0o664


def test_stale_temporary_files_are_removed(tmp_path: Path) -> None:
    dead = 2**22 + 12345  # above the default pid_max: no such process
    stale_stage = tmp_path / f"{STAGE_PREFIX}{dead}-abc123"
    stale_stage.mkdir()
    (stale_stage / "jobs.parquet").write_bytes(b"half")
    stale_tmp = tmp_path / f".summary.json.{dead}.xyz_1.tmp"
    stale_tmp.write_text("{")
    live_tmp = tmp_path / f".summary.json.{os.getpid()}.abc.tmp"
    live_tmp.write_text("{")
    with output_folder(tmp_path, "run") as stage:
        write_json({}, stage / "summary.json")
    assert not stale_stage.exists() and not stale_tmp.exists()
    assert live_tmp.exists()  # another writer (this process) may still own it
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(STAGE_PREFIX)]


def test_an_error_while_writing_leaves_the_folder_as_it_was(tmp_path: Path) -> None:
    with output_folder(tmp_path, "run") as stage:
        write_json({"old": True}, stage / "summary.json")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(RuntimeError), output_folder(tmp_path, "run") as stage:
        write_json({"new": True}, stage / "summary.json")
        raise RuntimeError("cut")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_another_commands_folder_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "shared"
    assert main(["run", "mm-c", "--out", str(out), *SHORT]) == 0
    capsys.readouterr()
    refused(
        ["learn", "mdp-example-2", "--iterations", "2", "--out", str(out)],
        "learn",
        "another command's folder",
        "holds the results of `clusteremu run`",
    )
    refused(
        ["compare", "mm-c", "--policy", "placer=first-fit", "--out", str(out)],
        "compare",
        "another command's folder",
    )
    # The same command may replace its own results.
    assert main(["run", "mm-c", "--out", str(out), *SHORT, "--seed", "3"]) == 0
    assert json.loads((out / "summary.json").read_text())["seed"] == 3
    with pytest.raises(OutputError, match="holds the results of `clusteremu run`"):
        check_output_folder(out, "dashboard")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through permission bits")
def test_unwritable_out_is_refused(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        refused(["run", "mm-c", "--out", str(locked / "r"), *SHORT], "run", "bad --out", "writable")
    finally:
        locked.chmod(0o700)


def _chattr(flag: str, path: Path) -> bool:
    try:
        done = subprocess.run(["chattr", flag, str(path)], capture_output=True, check=False)
    except FileNotFoundError:
        return False
    return done.returncode == 0


def test_immutable_out_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "imm"
    folder.mkdir()
    (folder / "summary.json").write_text("{}\n")
    if not _chattr("+i", folder / "summary.json"):
        pytest.skip("chattr +i is not available here")
    try:
        refused(["run", "mm-c", "--out", str(folder), *SHORT], "run", "bad --out", "immutable")
    finally:
        _chattr("-i", folder / "summary.json")
    if not _chattr("+i", folder):
        pytest.skip("chattr +i on a folder is not available here")
    try:
        refused(["run", "mm-c", "--out", str(folder), *SHORT], "run", "bad --out", "not writable")
    finally:
        _chattr("-i", folder)


# --- interrupts ------------------------------------------------------------------------


def _consistent(out: Path) -> tuple[int, int]:
    """(rows of jobs.parquet, jobs_completed of summary.json); equal for one run."""
    rows = pq.read_metadata(out / "jobs.parquet").num_rows
    summary = json.loads((out / "summary.json").read_text())
    return rows, int(summary["jobs_completed"])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupt_over_an_older_result_leaves_one_run(tmp_path: Path, sig: int) -> None:
    """Interrupt `run --out D` while it writes over an older result: D holds one run."""
    out = tmp_path / "d"
    assert main(["run", "mm-c", "--out", str(out), *SHORT]) == 0
    assert _consistent(out) == (2000, 2000)
    cmd = [sys.executable, "-m", "clusteremu", "run", "mm-c", "--out", str(out), "--json"]
    cmd += ["--set", "stop.jobs=150000", "--set", "stop.warmup_jobs=0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # The program's own handler first: a signal before it would kill the start-up.
    assert _catches(proc, sig) or proc.poll() is not None
    deadline = time.monotonic() + 300
    staged = False
    while proc.poll() is None and time.monotonic() < deadline:
        if any(p.name.startswith(STAGE_PREFIX) for p in out.iterdir()):
            staged = True
            break
        time.sleep(0.002)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err
    if proc.returncode != 0:  # interrupted (the signal may land after the run finished)
        assert proc.returncode == 128 + sig, err
        assert ("terminated" if sig == signal.SIGTERM else "interrupted") in err
    rows, completed = _consistent(out)
    assert rows == completed and rows in (2000, 150000), (rows, completed, staged)
    assert not [p for p in out.iterdir() if p.name.startswith(".")], "staging left behind"


def _catches(proc: subprocess.Popen[str], sig: int, within_s: float = 300.0) -> bool:
    """Wait until `proc` has installed a handler for `sig` (Linux: the SigCgt mask of
    /proc/PID/status), so a signal sent next reaches the program's own clean-up rather
    than killing it while it is still starting; False if it exits or `within_s` passes.
    This synchronises on what the program does, not on a sleep of a guessed length."""
    bit = 1 << (sig - 1)
    deadline = time.monotonic() + within_s
    while proc.poll() is None and time.monotonic() < deadline:
        for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:") and int(line.split()[1], 16) & bit:
                return True
        time.sleep(0.01)  # polling interval, not synchronisation
    return False


def test_interrupt_before_writing_changes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "d"
    assert main(["run", "mm-c", "--out", str(out), *SHORT]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    cmd = [sys.executable, "-m", "clusteremu", "run", "mm-c", "--out", str(out)]
    cmd += ["--set", "stop.jobs=5000000", "--set", "stop.warmup_jobs=0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert _catches(proc, signal.SIGTERM), "the command never installed its SIGTERM handler"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert err.strip().startswith("terminated (SIGTERM); no results were written")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


# --- the command line as a newcomer meets it ----------------------------------------------


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


def test_help_lists_every_command_and_shows_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    top = _help(["--help"], capsys)
    for command in ("run", "compare", "validate", "list", "bound", "dashboard", "learn", "sweep"):
        assert f"\n  {command} " in top, command
    texts = [top]
    for command in (
        "run",
        "compare",
        "validate",
        "bound",
        "dashboard",
        "learn",
        "sweep",
        "tune",
        "train-rl",
    ):
        texts.append(_help([command, "--help"], capsys))
    for text in texts:
        # Papers go by their names, not by the project's internal ones.
        assert not re.search(r"seed 0\d\d|seed'[s]|SPEC|design\s+card", text), text
    run_help = " ".join(texts[1].split())
    assert "(default: 1)" in run_help and "(default: 127.0.0.1)" in run_help
    compare_help = " ".join(texts[2].split())
    assert "(default: mean_response_time_s)" in compare_help
    assert "(default: write no files)" in compare_help


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    out = _help(["--version"], capsys)
    assert out.startswith("clusteremu ") and out.split()[1][0].isdigit()


def test_usage_errors_are_one_line() -> None:
    refused(["run"], "run", "bad option", "required: scenario")
    refused(["frobnicate"], "top", "bad option", "invalid choice")
    refused(["run", "mm-c", "--frobnicate"], "run", "bad option", "unrecognized arguments")


@pytest.mark.parametrize(
    ("typo", "nearest"),
    [("mm-cc", "mm-c"), ("ps-amdal", "ps-amdahl"), ("mdp-exampel-1", "mdp-example-1")],
)
def test_misspelt_scenario_suggests_the_nearest(typo: str, nearest: str) -> None:
    refused(
        ["run", typo], "run", "misspelt scenario", f"did you mean the shipped scenario {nearest}"
    )


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_a_folder_that_takes_no_file_is_refused_whatever_its_permission_bits_say() -> None:
    """/proc passes `os.access(W_OK)` for root, yet no file can be made in it: the check
    makes (and removes) a file to find out, as the options' own check does."""
    with pytest.raises(OutputError, match=r"/proc is not writable"):
        check_output_folder("/proc/clusteremu-out", "run")
    with pytest.raises(OutputError, match=r"not writable"):
        check_output_file("/proc/clusteremu.json", "dashboard")
