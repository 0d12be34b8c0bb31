"""One progress convention for every long command (`clusteremu.progress`): a bar on a
terminal; off a terminal a line every few seconds (the first only after that long, so
short commands print nothing) and a last `done` line; nothing at all when disabled.
The subprocess tests run commands with stderr on a pipe (no terminal) and read the lines
as they are printed: no sleeps, no timing assumptions beyond "a line at every change" with
CLUSTEREMU_PROGRESS_S=0."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from clusteremu import progress as progress_module
from clusteremu.cli import main
from clusteremu.progress import EVERY_ENV, Progress, compile_note, every_s

#: An off-terminal progress line: `LABEL: 42%`, optionally `(3/7 unit, note)`, `, 12 s`.
#: A small node and pod list in the trace's format (the real trace is not needed here).
GPU_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gpu"
LINE = re.compile(r"^(?P<label>.+): (?P<pct>\d+)%(?: \((?P<extra>[^)]*)\))?, \d+ s$")
DONE = re.compile(r"^(?P<label>.+): done in \d+ s$")
#: The line said before a run whose event loop numba has not compiled yet (a cold cache).
COMPILING = re.compile(
    r"^(?P<label>.+): compiling the event loop \(first run only; cached in .+\)…$"
)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _progress(**kw: object) -> tuple[Progress, io.StringIO, Clock]:
    stream, clock = io.StringIO(), Clock()
    shown = Progress("work", stream=stream, terminal=False, interval_s=5.0, clock=clock, **kw)  # type: ignore[arg-type]
    return shown, stream, clock


def test_off_a_terminal_a_line_every_interval_and_a_last_one() -> None:
    shown, stream, clock = _progress(total=8, unit="items")
    shown.update(done=1)
    clock.now += 4.9
    shown.update(done=2)
    assert stream.getvalue() == ""  # under the interval: a short command prints nothing
    clock.now += 0.2
    shown.update(done=3)
    assert stream.getvalue() == "work: 38% (3/8 items), 5 s\n"
    clock.now += 1.0
    shown.update(done=4)  # within the interval of the last line
    clock.now += 5.0
    shown.update(done=4, note="loss 0.25")
    shown.close()
    assert stream.getvalue().splitlines() == [
        "work: 38% (3/8 items), 5 s",
        "work: 50% (4/8 items, loss 0.25), 11 s",
        "work: done in 11 s",
    ]


def test_fractions_repeats_interrupts_and_disabled() -> None:
    shown, stream, clock = _progress()
    clock.now += 6
    shown(0.5)
    clock.now += 6
    shown(0.5)  # nothing new to say: no line
    clock.now += 6
    shown.close(finished=False)  # interrupted: the command says so itself
    assert stream.getvalue().splitlines() == ["work: 50%, 6 s"]

    quiet, stream, clock = _progress(enabled=False)
    clock.now += 60
    quiet(0.7)
    quiet.close()
    short, stream2, _ = _progress()
    short(1.0)
    short.close()
    assert stream.getvalue() == stream2.getvalue() == ""  # disabled; short: no done line


def test_on_a_terminal_a_bar_after_a_second_not_lines() -> None:
    stream, clock = io.StringIO(), Clock()
    with Progress("work", stream=stream, terminal=True, total=4, clock=clock) as shown:
        shown.update(done=1)
        assert stream.getvalue() == ""  # a bar only after a second
        clock.now += 1.5
        shown.update(done=2)
        assert shown.bar is not None and shown.bar.n == 500
        bar = stream.getvalue()
    assert shown.bar is None
    assert "work:  50%|" in bar and "2/4" in bar and "\n" not in bar  # redrawn in place


def test_interval_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for raw, expected in (("2.5", 2.5), ("0", 0.0), ("-1", 5.0), ("soon", 5.0), ("nan", 5.0)):
        monkeypatch.setenv(EVERY_ENV, raw)
        assert every_s() == expected
    monkeypatch.delenv(EVERY_ENV)
    assert every_s() == 5.0


def _progress_lines(argv: list[str], label: str) -> tuple[list[str], str]:
    """Run `clusteremu ARGV` with stderr on a pipe; check each progress line as it is
    printed; return them and stdout."""
    env = {**os.environ, EVERY_ENV: "0"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "clusteremu", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stderr is not None and proc.stdout is not None
    lines = []
    for line in proc.stderr:  # as they come
        line = line.rstrip("\n")
        if line.startswith(f"{label}:") and not COMPILING.match(line):
            match = LINE.match(line) or DONE.match(line)
            assert match and match["label"] == label, line
            lines.append(line)
    stdout = proc.stdout.read()
    assert proc.wait() == 0, stdout
    return lines, stdout


def test_run_off_a_terminal_prints_progress_lines() -> None:
    lines, _ = _progress_lines(["run", "mm-c", "--set", "stop.jobs=30000"], "mm-c")
    assert len(lines) >= 2 and DONE.match(lines[-1])
    percents = [int(LINE.match(x)["pct"]) for x in lines[:-1]]  # type: ignore[index]
    assert percents == sorted(percents) and percents[-1] == 100


def test_gpu_frag_off_a_terminal_prints_progress_lines(tmp_path: Path) -> None:
    argv = ["gpu-frag", "--policy", "fgd,best-fit", "--seeds", "42-43", "--out", str(tmp_path)]
    argv += ["--nodes", str(GPU_FIXTURES / "nodes.csv"), "--pods", str(GPU_FIXTURES / "pods.csv")]
    lines, stdout = _progress_lines(argv, "gpu-frag")
    assert [LINE.match(x)["extra"] for x in lines[:-1]] == [  # type: ignore[index]
        f"{i}/4 replays" for i in range(1, 5)
    ]
    assert DONE.match(lines[-1])
    files = [tmp_path / f"gpu-frag.{x}" for x in ("parquet", "json", "png")]
    assert stdout.splitlines()[-1] == f"wrote {files[0]}, {files[1]} and {files[2]}"
    assert all(f.stat().st_size > 0 for f in files)


def test_a_progress_pickles_for_ray_tune() -> None:
    """Ray Tune pickles the searcher and its callbacks: a copy writes to its own stderr."""
    import pickle

    shown, stream, clock = _progress(total=2)
    clock.now += 10
    shown.update(done=1)
    copy = pickle.loads(pickle.dumps(shown))
    assert copy.stream is sys.stderr and copy.bar is None and copy.done == 1


def test_say_prints_at_once_and_stdout_is_flushed_first(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    shown, stream, clock = _progress()
    shown.say("compiling")  # not held back by the interval
    assert stream.getvalue() == "work: compiling\n"
    flushed: list[bool] = []
    monkeypatch.setattr(
        sys, "stdout", type("Out", (), {"flush": lambda self: flushed.append(True)})()
    )
    clock.now += 6
    shown(0.5)
    assert flushed and stream.getvalue().splitlines()[-1] == "work: 50%, 6 s"
    quiet, stream, _ = _progress(enabled=False)
    quiet.say("compiling")
    assert stream.getvalue() == ""


def test_compile_note_only_when_the_event_loop_is_not_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress_module, "numba_cache_dir", lambda: tmp_path)
    assert COMPILING.match(f"run: {compile_note()}") and str(tmp_path) in compile_note()
    cached = tmp_path / "cluster" / "kernel.run_kernel_nodes-1141.py311.nbi"
    cached.parent.mkdir()
    cached.write_bytes(b"")
    assert compile_note() == ""


def test_run_json_shows_progress_on_stderr_after_the_compile_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Under --json, stdout is the JSON alone and progress still goes to stderr (a long
    run used to say nothing); a first run says it compiles before anything else."""
    monkeypatch.setenv(EVERY_ENV, "0")
    monkeypatch.setattr(progress_module, "numba_cache_dir", lambda: tmp_path)  # looks cold
    argv = ["run", "mm-c", "--json", "--set", "stop.jobs=3000", "--set", "stop.warmup_jobs=300"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["scenario"] == "mm-c"
    lines = captured.err.splitlines()
    assert COMPILING.match(lines[0]) and COMPILING.match(lines[0])["label"] == "mm-c"  # type: ignore[index]
    assert len(lines) >= 3 and all(LINE.match(x) for x in lines[1:-1]) and DONE.match(lines[-1])
