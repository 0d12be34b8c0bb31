"""Faults while writing, and re-runs into an output (issue 28): a full disk or a file
where a result folder belongs ends with exit 2 and one line naming the path, the folder
as it was; a single result file claims itself, not its folder; `dashboard` never writes
into a Ray session it did not start."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from clusteremu.cli import main
from clusteremu.cluster import io
from tests.clusteremu.badinput import refused

SHORT = ["--set", "stop.jobs=2000", "--set", "stop.warmup_jobs=0"]


def fake_disk_full(monkeypatch: pytest.MonkeyPatch) -> None:
    """FAKES a full disk: every temporary file the atomic writer creates is replaced by a
    symbolic link to /dev/full, so the writes that follow fail in the kernel with ENOSPC
    ("No space left on device") as on a full disk, without root or a small file system."""
    real = tempfile.mkstemp

    def mkstemp(*args: object, **kwargs: object) -> tuple[int, str]:
        fd, name = real(*args, **kwargs)  # type: ignore[call-overload]
        os.close(fd)
        os.unlink(name)
        os.symlink("/dev/full", name)
        return os.open(os.devnull, os.O_RDONLY), name

    monkeypatch.setattr(io.tempfile, "mkstemp", mkstemp)


@pytest.fixture
def disk_full(monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk, FAKED with /dev/full (see `fake_disk_full`)."""
    fake_disk_full(monkeypatch)


def _contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_disk_full_faked_with_dev_full_is_exit_2_and_keeps_the_older_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A full disk (FAKED with /dev/full, see `fake_disk_full`) while `run --out` writes: one
    line naming the folder, the older results untouched, no staging folder left."""
    out = tmp_path / "r"
    assert main(["run", "mm-c", "--out", str(out), *SHORT]) == 0
    capsys.readouterr()
    before = _contents(out)
    fake_disk_full(monkeypatch)
    line = refused(["run", "mm-c", "--out", str(out), *SHORT, "--json"], "run", "disk full")
    monkeypatch.undo()
    assert f"--out {out}: cannot write the results (No space left on device)" in line
    assert _contents(out) == before


def test_disk_full_faked_with_dev_full_on_a_single_file_names_it(
    tmp_path: Path, disk_full: None
) -> None:
    """The same FAKED full disk (`fake_disk_full`) for a file written on its own."""
    target = tmp_path / "d" / "dash.json"
    line = refused(["dashboard", "--out", str(target)], "dashboard", "disk full")
    assert f"--out {target}: cannot write the results (No space left on device)" in line
    assert not target.exists()


def test_tune_refuses_a_file_where_its_trials_folder_goes_before_any_work(
    tmp_path: Path,
) -> None:
    out = tmp_path / "o"
    out.mkdir()
    (out / "trials").write_text("a file\n")
    argv = ["tune", "--tuner", "random", "--domain", "tiny", "--experiments", "1"]
    refused([*argv, "--budget", "2", "--out", str(out)], "tune", "bad --out", "trials is a file")
    assert [p.name for p in out.iterdir()] == ["trials"]


def test_a_single_file_claims_itself_not_its_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "shared"
    assert main(["dashboard", "--out", str(folder / "x.json")]) == 0
    assert main(["run", "mm-c", "--out", str(folder), *SHORT]) == 0  # the folder is free
    assert main(["dashboard", "--out", str(folder / "x.json")]) == 0  # and x.json its own
    assert {p.name for p in folder.iterdir()} == {
        "x.json",
        "jobs.parquet",
        "summary.json",
        io.MANIFEST,
    }
    capsys.readouterr()
    refused(
        ["dashboard", "--out", str(folder / "summary.json")],
        "dashboard",
        "another command's file",
        "is one of the results of `clusteremu run`",
    )


def test_dashboard_never_writes_into_a_ray_session_it_did_not_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --url or --out there is nowhere of its own to write: the latest Ray
    session on the machine may be another user's."""
    session = tmp_path / "ray" / "session_latest" / "metrics" / "grafana" / "dashboards"
    session.mkdir(parents=True)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    for name in ("GRAFANA_URL", "GRAFANA_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    refused(["dashboard"], "dashboard", "nowhere to write", "give --out PATH")
    assert not list(session.iterdir())
