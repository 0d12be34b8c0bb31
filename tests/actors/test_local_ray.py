"""A local `clusteremu run --ray` exposes nothing beyond the machine, and a SIGKILLed driver
leaves nothing of its Ray instance behind (issue 11, "Nothing exposed beyond the machine").

One run of the real command line in a subprocess, with Ray's default token
authentication: while it runs, every listening socket of every process it started is on
loopback and none of them answers on the machine's other addresses; then the driver is
SIGKILLed and every one of those processes is gone within `GONE_WITHIN_S`."""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
import psutil  # noqa: E402  (Ray's own copy; importing ray puts it on sys.path)

pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[2]
#: Deadlines of the two waits (each loop ends as soon as its condition holds): safety nets,
#: not what decides. Measured on an idle 2-core machine: up after about 9 s, gone about 3 s
#: after the SIGKILL (the former 15 s was under 5x that); both hold on a machine 10x slower.
UP_WITHIN_S = 300.0
GONE_WITHIN_S = 120.0


def _is_loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip.split("%")[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def _listening(processes: list[psutil.Process]) -> list[tuple[str, str, int]]:
    sockets = []
    for process in processes:
        try:
            name = process.name()
            for conn in process.net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN:
                    sockets.append((name, conn.laddr.ip, conn.laddr.port))
        except psutil.Error:
            continue
    return sockets


def _listeners(ip: str, port: int) -> set[int]:
    """The processes listening where a connection to `ip`:`port` arrives."""
    return {
        conn.pid
        for conn in psutil.net_connections(kind="inet")
        if conn.status == psutil.CONN_LISTEN
        and conn.laddr.port == port
        and conn.laddr.ip in (ip, "0.0.0.0", "::", f"::ffff:{ip}")
        and conn.pid is not None
    }


def _external_addresses() -> list[str]:
    return [
        a.address
        for addresses in psutil.net_if_addrs().values()
        for a in addresses
        if a.family == socket.AF_INET and not _is_loopback(a.address)
    ]


def _alive(keys: list[tuple[int, float]]) -> list[psutil.Process]:
    alive = []
    for pid, created in keys:
        try:
            process = psutil.Process(pid)
            if process.create_time() == created and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
        except psutil.Error:
            continue
    return alive


def test_local_run_listens_on_loopback_only_and_dies_with_its_driver(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"}  # token auth on
    env["CLUSTEREMU_DASHBOARD"] = "1"  # its listeners are checked too
    stderr = tmp_path / "stderr.txt"
    with stderr.open("wb") as err:
        run = subprocess.Popen(
            [sys.executable, "-m", "clusteremu", "run", "mm-c", "--ray"]
            + ["--window", "1", "--realtime", "1", "--set", "stop.jobs=1000000"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    driver = psutil.Process(run.pid)
    keys: list[tuple[int, float]] = []
    try:
        deadline = time.monotonic() + UP_WITHIN_S
        while True:
            assert run.poll() is None, stderr.read_text()
            started = driver.children(recursive=True)
            names = " ".join(p.name() for p in started)
            # Up: the node shard works and both agents listen.
            agents_listen = {
                name for name, _, _ in _listening(started) if name.endswith("Agent")
            } == {"ray::DashboardAgent", "ray::RuntimeEnvAgent"}
            if "NodeShard" in names and agents_listen:
                break
            assert time.monotonic() < deadline, f"Ray not up after {UP_WITHIN_S} s: {names}"
            time.sleep(0.5)
        started = [driver, *driver.children(recursive=True)]
        keys = [(p.pid, p.create_time()) for p in started]
        sockets = _listening(started)
        names = {name for name, _, _ in sockets}
        assert {"gcs_server", "raylet", "ray::DashboardAgent"} <= names, sockets
        exposed = [s for s in sockets if not _is_loopback(s[1])]
        assert not exposed, f"listening beyond loopback: {exposed}"
        ours = {p.pid for p in started}
        for ip in _external_addresses():
            for _, _, port in sockets:
                try:
                    socket.create_connection((ip, port), timeout=1).close()
                except OSError:
                    continue
                # Something answers: fine if it is another program on the machine that
                # listens on that address and happens to use the same port number (another
                # Ray instance's agent on Ray's default port, say), not one of the run's
                # (the run's processes are this user's: their sockets name their pids).
                served_by = _listeners(ip, port)
                assert not served_by & ours, f"{ip}:{port} answers, served by {served_by}"

        run.send_signal(signal.SIGKILL)
        run.wait()
        killed = time.monotonic()
        while _alive(keys) and time.monotonic() - killed < GONE_WITHIN_S:
            time.sleep(0.25)
        survivors = [(p.pid, p.name()) for p in _alive(keys)]
        assert not survivors, f"alive {GONE_WITHIN_S} s after the driver's SIGKILL: {survivors}"
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        for process in _alive(keys):
            process.kill()
