"""`clusteremu run --ray`: same files and summary as without Ray; the dashboard stays on
loopback unless asked otherwise (issue 3, "CLI" and "Security")."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import ray

from clusteremu.actors.launch import (
    CONNECT_TIMEOUT_S,
    DASHBOARD_ENV,
    check_reachable,
    init_kwargs,
    options_from_args,
    parse_shard_resources,
)
from clusteremu.cli import build_parser, main
from clusteremu.cluster.errors import UsageError
from tests.actors.helpers import assert_same_jobs

pytestmark = pytest.mark.ray

ARGS = ["--set", "stop.jobs=400", "--set", "stop.warmup_jobs=20"]


def test_init_kwargs_bind_the_dashboard_to_loopback() -> None:
    assert init_kwargs(None)["dashboard_host"] == "127.0.0.1"
    assert init_kwargs(None, "0.0.0.0")["dashboard_host"] == "0.0.0.0"
    assert init_kwargs("auto") == {"address": "auto", "log_to_driver": False}


@pytest.mark.usefixtures("ray_local")
def test_run_with_ray_writes_the_same_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(
            [
                "run",
                "hetero-placement",
                "--set",
                "stop.time_s=60",
                "--set",
                "stop.warmup_s=5",
                "--out",
                str(tmp_path / "kernel"),
                "--json",
            ]
        )
        == 0
    )
    kernel = json.loads(capsys.readouterr().out)
    assert (
        main(
            [
                "run",
                "hetero-placement",
                "--set",
                "stop.time_s=60",
                "--set",
                "stop.warmup_s=5",
                "--ray",
                "--shards",
                "2",
                "--out",
                str(tmp_path / "ray"),
                "--json",
            ]
        )
        == 0
    )
    on_ray = json.loads(capsys.readouterr().out)
    assert_same_jobs(
        pq.read_table(tmp_path / "kernel" / "jobs.parquet"),
        pq.read_table(tmp_path / "ray" / "jobs.parquet"),
    )
    assert on_ray["mean_response_time_s"] == kernel["mean_response_time_s"]
    assert on_ray["ray"]["mode"] == "exact"
    assert main(["run", "mm-c", *ARGS, "--ray", "--shards", "0"]) == 2
    assert main(["run", "mm-c", *ARGS, "--ray", "--window", "-1"]) == 2
    bad = ["--ray", "--shards", "2", "--shard-resources", "machine-a"]
    assert main(["run", "mm-c", *ARGS, *bad]) == 2
    assert "--shard-resources 'machine-a': expected NAME=AMOUNT" in capsys.readouterr().err
    assert main(["run", "mm-c", *ARGS, "--ray", "--shard-cpus", "-1"]) == 2
    assert "shard CPUs must be a finite number >= 0" in capsys.readouterr().err


def test_shard_resources_from_the_command_line() -> None:
    """`--shard-resources` (repeated, cycled over shards) and `--shard-cpus` reach the run
    options; the multi-node test pins shards with the same options."""
    args = build_parser().parse_args(
        ["run", "mm-c", "--ray", "--shards", "3", "--shard-resources", "machine-a=1"]
        + ["--shard-resources", "machine-b=1, ssd=0.5", "--shard-cpus", "0.5"]
    )
    options = options_from_args(args)
    assert options.shard_resources == ({"machine-a": 1.0}, {"machine-b": 1.0, "ssd": 0.5})
    assert options.shard_cpus == 0.5
    assert options_from_args(build_parser().parse_args(["run", "mm-c"])).shard_resources == ()
    for bad in ("machine-a=0", "=1", "machine-a=x", "machine-a=inf"):
        with pytest.raises(ValueError, match="NAME=AMOUNT"):
            parse_shard_resources([bad])


def test_local_ray_started_for_the_run_uses_token_auth_and_loopback(tmp_path: Path) -> None:
    """Without --address a private Ray instance starts (Ray's default token authentication
    left on) and reports its dashboard on 127.0.0.1."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"}
    env[DASHBOARD_ENV] = "1"  # the suite turns it off elsewhere
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "clusteremu",
            "-v",
            "run",
            "mm-c",
            *ARGS,
            "--ray",
            "--window",
            "5",
            "--json",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["jobs_completed"] == 380 and summary["ray"]["mode"] == "windowed"
    dashboard = [
        line for line in done.stderr.splitlines() if "dashboard" in line.lower() and "http" in line
    ]
    assert dashboard and all("127.0.0.1" in line for line in dashboard), done.stderr


def test_an_address_where_no_cluster_answers_is_bad_input_within_seconds() -> None:
    """`--address 127.0.0.1:1` used to retry for ever without a word (issue 11): now one
    line, exit status 2, within the connect timeout, before anything else starts."""
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "clusteremu", "run", "mm-c", *ARGS, "--ray"]
        + ["--address", "127.0.0.1:1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed = time.monotonic() - began
    assert done.returncode == 2, done.stderr
    assert "--address 127.0.0.1:1: no Ray cluster to join" in done.stderr
    assert "Connection refused" in done.stderr and "Traceback" not in done.stderr
    assert elapsed < CONNECT_TIMEOUT_S + 30, elapsed  # the interpreter's start included


def test_check_reachable_gives_up_on_silent_or_missing_servers() -> None:
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        began = time.monotonic()
        with pytest.raises(ConnectionError, match="does not speak gRPC"):
            check_reachable(f"127.0.0.1:{port}", timeout_s=0.5)
        assert time.monotonic() - began < 5
    for bad in ("no-port", "host:", "host:99999", ":6379"):
        with pytest.raises(ConnectionError, match="expected HOST:PORT"):
            check_reachable(bad)


@pytest.mark.usefixtures("ray_local")
def test_check_reachable_accepts_a_real_gcs() -> None:
    check_reachable(ray.get_runtime_context().gcs_address, timeout_s=5)


def test_stopping_counts_an_exited_unreaped_process_as_gone() -> None:
    """`stop_ray` waits for the instance's processes. One that has exited but that its
    parent has not reaped (a zombie: in a container PID 1 may leave Ray's orphans so for
    seconds) must not hold it for its whole grace period (`psutil.wait_procs` did); one
    still running must."""
    import psutil  # Ray's copy (importing ray put it on sys.path)

    from clusteremu.actors.launch import _running_after

    # A parent that starts a child, waits until it has exited without reaping it, prints
    # its pid and sleeps: the child is a zombie that is not ours.
    parent_code = (
        "import os, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'pass'])\n"
        "os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE)
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        assert parent.stdout is not None
        zombie = psutil.Process(int(parent.stdout.readline()))
        assert zombie.status() == psutil.STATUS_ZOMBIE and zombie.ppid() == parent.pid
        began = time.monotonic()
        assert _running_after([zombie], 30.0) == []
        assert time.monotonic() - began < 15.0  # not the 30 s timeout
        left = _running_after([psutil.Process(running.pid)], 0.2)
        assert [p.pid for p in left] == [running.pid]
    finally:
        for process in (parent, running):
            process.kill()
            process.wait()


def test_the_dashboard_is_on_unless_the_environment_says_0(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(DASHBOARD_ENV, raising=False)
    assert init_kwargs(None)["include_dashboard"] is True
    monkeypatch.setenv(DASHBOARD_ENV, "0")
    assert init_kwargs(None)["include_dashboard"] is False
    assert "include_dashboard" not in init_kwargs("127.0.0.1:6379")  # a cluster's own
    monkeypatch.setenv(DASHBOARD_ENV, "off")
    with pytest.raises(UsageError, match="CLUSTEREMU_DASHBOARD='off': expected 1"):
        init_kwargs(None)
