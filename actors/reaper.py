"""A watchdog for the private Ray instance of one run: when the run is over, nothing of it
survives.

Ray ties its GCS, raylet and dashboard to the driver (the kernel kills them when the driver
dies), and the raylet's workers follow the raylet. The dashboard agent and the runtime-env
agent do notice that the raylet is gone, but then try to report it to the GCS, which is
gone too, and wait for a 60-second timeout before exiting; so a SIGKILLed driver leaves
them behind for a minute or more, listening.

`clusteremu.actors.launch.ensure_ray` starts this script next to a local instance, as a process of
its
own session (so a Ctrl-C aimed at the driver's terminal does not reach it), with the
driver's pid and the pids of the processes `ray.init` started. It remembers every
descendant of those processes as it appears (pid and start time, so a reused pid is never
mistaken for one of them) until either its stdin, a pipe from the driver, closes (the
driver exited or was killed) or all of those processes are gone (`ray.shutdown`). Then it
gives what is left `GRACE_S` to exit on its own, sends SIGTERM, waits `TERM_S`, sends
SIGKILL, and exits. It never touches a process it did not see descend from the instance.

Standard library and psutil only (psutil comes with `ray[default]`; the driver passes its
location), so it starts in a fraction of a second.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time

import psutil

POLL_S = 0.25
GRACE_S = 2.0
TERM_S = 1.0

Key = tuple[int, float]  # (pid, create_time): a process, even after its pid is reused


def _key(process: psutil.Process) -> Key | None:
    try:
        return process.pid, process.create_time()
    except psutil.Error:
        return None


def _alive(key: Key) -> psutil.Process | None:
    try:
        process = psutil.Process(key[0])
        if process.create_time() != key[1] or process.status() == psutil.STATUS_ZOMBIE:
            return None
        return process
    except psutil.Error:
        return None


def _track(roots: list[Key], seen: dict[Key, psutil.Process]) -> None:
    for root in roots:
        process = _alive(root)
        if process is None:
            continue
        try:
            children = process.children(recursive=True)
        except psutil.Error:
            continue
        for child in children:
            key = _key(child)
            if key is not None and child.pid != os.getpid():
                seen.setdefault(key, child)


def _survivors(keys: list[Key]) -> list[psutil.Process]:
    return [p for p in (_alive(k) for k in keys) if p is not None]


def _wait(keys: list[Key], seconds: float) -> list[psutil.Process]:
    deadline = time.monotonic() + seconds
    left = _survivors(keys)
    while left and time.monotonic() < deadline:
        time.sleep(POLL_S / 2)
        left = _survivors(keys)
    return left


def reap(keys: list[Key]) -> int:
    """Let `keys` exit on their own for GRACE_S, then SIGTERM, then SIGKILL. Returns how
    many had to be signalled."""
    left = _wait(keys, GRACE_S)
    signalled = len(left)
    for process in left:
        with contextlib.suppress(psutil.Error):
            process.terminate()
    left = _wait([k for k in (_key(p) for p in left) if k is not None], TERM_S)
    for process in left:
        with contextlib.suppress(psutil.Error):
            process.kill()
    return signalled


def watch(driver_pid: int, root_pids: list[int]) -> int:
    driver_gone = threading.Event()

    def read_stdin() -> None:
        # EOF on the pipe from the driver: the driver has exited (or was killed).
        while sys.stdin.buffer.read(4096):
            pass
        driver_gone.set()

    threading.Thread(target=read_stdin, daemon=True).start()
    driver = _key(psutil.Process(driver_pid))
    roots: list[Key] = []
    for pid in root_pids:
        try:
            key = _key(psutil.Process(pid))
        except psutil.Error:
            continue
        if key is not None:
            roots.append(key)
    seen: dict[Key, psutil.Process] = {}
    while (
        not driver_gone.is_set()
        and driver is not None
        and _alive(driver) is not None
        and any(_alive(r) is not None for r in roots)
    ):
        _track(roots, seen)
        driver_gone.wait(POLL_S)
    reap(roots + list(seen))
    return 0


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    driver_pid, *root_pids = (int(a) for a in argv)
    return watch(driver_pid, root_pids)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
