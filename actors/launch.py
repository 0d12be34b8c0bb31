"""`run_on_ray`: run a scenario on Ray actors (`clusteremu run SCENARIO --ray`).

Without `--address` a private Ray instance is started for the run and bound to the
loopback address: Ray's own local-only mode (`RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`, the
default on macOS and Windows) makes the node's IP 127.0.0.1, so the GCS, the raylet, the
workers, the dashboard agent (and its metrics port), the runtime-env agent and the
autoscaler monitor all listen on 127.0.0.1 only; the dashboard binds to `--dashboard-host`
(127.0.0.1 by default). `--address HOST:PORT` / `--address auto` joins a running cluster
(`ray up ray-config.yaml`, `ray start`); an address where no GCS answers within
`CONNECT_TIMEOUT_S` is bad input. When Ray is already initialised in this process (a test,
a notebook) that instance is used.

Results have the shape of `cluster.runner.run_spec`'s: the per-job table of every
replication, concatenated, and the combined summary.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import math
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import ray

from actors.actor_set import ActorSet
from actors.coordinator import RayRunOptions, run_replication
from cluster.metrics import combine
from cluster.model import SimulationSpec
from cluster.runner import ScenarioResult

log = logging.getLogger(__name__)


def parse_shard_resources(values: list[str] | None) -> tuple[dict[str, float], ...]:
    """`["machine-a=1", "machine-b=1,ssd=0.5"]` -> one resource mapping per shard (the CLI's
    repeated `--shard-resources`). Raises ValueError naming the bad entry."""
    out: list[dict[str, float]] = []
    for value in values or []:
        resources: dict[str, float] = {}
        for item in value.split(","):
            name, sep, amount = item.strip().partition("=")
            try:
                number = float(amount)
            except ValueError:
                number = math.nan
            if not sep or not name.strip() or not (number > 0 and math.isfinite(number)):
                raise ValueError(
                    f"--shard-resources {value!r}: expected NAME=AMOUNT[,NAME=AMOUNT] with "
                    f"AMOUNT a positive number, got {item.strip()!r}"
                )
            resources[name.strip()] = number
        out.append(resources)
    return tuple(out)


def options_from_args(args: argparse.Namespace | RayRunOptions | None) -> RayRunOptions:
    """The run options from the CLI's parsed arguments (or options given directly)."""
    if isinstance(args, RayRunOptions):
        return args
    if args is None:
        return RayRunOptions()
    try:
        shards = getattr(args, "shards", None)
        window = getattr(args, "window", None)
        realtime = getattr(args, "realtime", None)
        shard_cpus = getattr(args, "shard_cpus", None)
        return RayRunOptions(
            shards=1 if shards is None else int(shards),
            window_s=0.0 if window is None else float(window),
            realtime=0.0 if realtime is None else float(realtime),
            shard_resources=parse_shard_resources(getattr(args, "shard_resources", None)),
            shard_cpus=0.0 if shard_cpus is None else float(shard_cpus),
        )
    except ValueError as exc:
        from clusteremu.cli import UsageError

        raise UsageError(f"--shards/--window/--realtime/--shard-*: {exc}") from None


LOOPBACK = "127.0.0.1"
# Ray's switch between "a node of a cluster" (the node's IP is the machine's address and
# servers listen on every interface) and "local only" (the node's IP is 127.0.0.1 and every
# server listens there). Ray reads it when it is imported and passes it to the processes it
# starts; see `ray._private.services.get_node_ip_address`.
LOCAL_ONLY_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
CONNECT_TIMEOUT_S = 10.0


def init_kwargs(
    address: str | None, dashboard_host: str = LOOPBACK, num_cpus: int | None = None
) -> dict[str, Any]:
    """Keyword arguments for `ray.init`: join `address`, or start a local instance whose
    dashboard listens on `dashboard_host` only."""
    if address:
        return {"address": address, "log_to_driver": False}
    kwargs: dict[str, Any] = {
        "include_dashboard": True,
        "dashboard_host": dashboard_host,
        "log_to_driver": False,
    }
    if num_cpus is not None:
        kwargs["num_cpus"] = num_cpus
    return kwargs


@contextmanager
def loopback_only() -> Iterator[None]:
    """While a local Ray instance starts: Ray in local-only mode, so the node's IP is
    127.0.0.1 and every process it starts listens there.

    The processes `ray.init` starts (GCS, raylet, dashboard, monitor, and through the
    raylet the agents and workers) inherit the variable. The driver read it when it
    imported Ray, so its copy of the flag is switched for the start as well (restored
    afterwards); `ensure_ray` then checks that the node really is on loopback.
    """
    from ray._private import ray_constants

    old_env = os.environ.get(LOCAL_ONLY_ENV)
    old_flag = ray_constants.ENABLE_RAY_CLUSTER
    os.environ[LOCAL_ONLY_ENV] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = old_flag
        if old_env is None:
            os.environ.pop(LOCAL_ONLY_ENV, None)
        else:
            os.environ[LOCAL_ONLY_ENV] = old_env


def node_addresses() -> list[str]:
    """The IP addresses of the Ray nodes this driver is connected to."""
    return sorted({str(node["NodeManagerAddress"]) for node in ray.nodes() if node["Alive"]})


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
HTTP2_EMPTY_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # length 0, type SETTINGS


def check_reachable(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Raise ConnectionError unless a gRPC server (Ray's GCS) answers at `address`
    (HOST:PORT) within `timeout_s`: the TCP connection must open and the server must answer
    the HTTP/2 connection preface with its SETTINGS frame, as every gRPC server does before
    any call (so token authentication plays no part). Ray itself retries a GCS that does
    not answer for many minutes without a word. `auto` and `ray://` addresses are left to
    Ray, which fails fast on them; with `RAY_USE_TLS` set only the TCP connection is
    checked."""
    if address == "auto" or "://" in address:
        return
    host, sep, port_text = address.rpartition(":")
    host = host.strip("[]")
    try:
        port = int(port_text)
    except ValueError:
        port = -1
    if not sep or not host or not 0 < port < 65536:
        raise ConnectionError(f"expected HOST:PORT or 'auto', got {address!r}")
    deadline = f"gave up after at most {timeout_s:g} s"
    connected = False
    header = b""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as conn:
            connected = True
            if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
                return
            conn.sendall(HTTP2_PREFACE + HTTP2_EMPTY_SETTINGS)
            while len(header) < 9:
                chunk = conn.recv(9 - len(header))
                if not chunk:
                    break
                header += chunk
    except OSError as exc:
        if not connected:
            reason = "timed out" if isinstance(exc, TimeoutError) else exc.strerror or str(exc)
            raise ConnectionError(
                f"nothing answers at {host}:{port} ({reason}; {deadline})"
            ) from None
    if len(header) < 9 or header[3] != 0x04:
        raise ConnectionError(
            f"{host}:{port} accepts connections but does not speak gRPC, so it is not a "
            f"Ray GCS (the head's port, 6379 by default; {deadline})"
        )


_reaper: subprocess.Popen[bytes] | None = None


def _child_pids() -> list[int]:
    import psutil  # comes with ray[default] (Ray puts its copy on sys.path)

    return [child.pid for child in psutil.Process().children()]


def start_reaper(ray_pids: list[int]) -> None:
    """Start `actors/reaper.py` for the local instance whose processes `ray.init` just
    started (`ray_pids`, children of this process): when this process exits, is killed,
    or shuts Ray down, whatever is left of the instance is terminated within seconds
    instead of the minute Ray's agents take on their own."""
    global _reaper
    import psutil

    if _reaper is not None and _reaper.poll() is None and _reaper.stdin is not None:
        _reaper.stdin.close()  # the previous instance's watchdog: its driver is done with it
    env = dict(os.environ)
    psutil_dir = os.path.dirname(os.path.dirname(os.path.abspath(psutil.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (psutil_dir, env.get("PYTHONPATH")) if p)
    _reaper = subprocess.Popen(
        [sys.executable, os.path.join(os.path.dirname(__file__), "reaper.py")]
        + [str(os.getpid()), *map(str, ray_pids)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )


def ensure_ray(
    address: str | None, dashboard_host: str = LOOPBACK, num_cpus: int | None = None
) -> bool:
    """Initialise Ray unless it already is; return True when this call started it.

    Without `address` a private instance starts bound to loopback (see `loopback_only`);
    with one, an unreachable cluster is a `UsageError` after at most `CONNECT_TIMEOUT_S`.
    """
    if ray.is_initialized():
        return False
    from clusteremu.cli import UsageError

    try:
        if address:
            check_reachable(address)
            ctx = ray.init(**init_kwargs(address, dashboard_host, num_cpus))
        else:
            before = set(_child_pids())
            with loopback_only():
                ctx = ray.init(**init_kwargs(address, dashboard_host, num_cpus))
            start_reaper([pid for pid in _child_pids() if pid not in before])
    except ConnectionError as exc:
        raise UsageError(f"--address {address}: no Ray cluster to join ({exc})") from None
    if not address:
        exposed = [ip for ip in node_addresses() if not is_loopback(ip)]
        if exposed:
            ray.shutdown()
            raise RuntimeError(
                f"the local Ray instance came up on {', '.join(exposed)}, not on loopback; "
                f"this Ray version ignores {LOCAL_ONLY_ENV}=0"
            )
    url = getattr(ctx, "dashboard_url", None)
    if url:
        log.info("Ray dashboard at http://%s", url)
    return True


def run_name(spec: SimulationSpec) -> str:
    """A readable, unique run name: `<scenario>-<8 hex digits>`."""
    return f"{spec.name}-{uuid.uuid4().hex[:8]}"


def run_on_ray(
    spec: SimulationSpec, args: argparse.Namespace | RayRunOptions | None = None
) -> ScenarioResult:
    """Run every replication of `spec` on actors; same result shape as `run_spec`."""
    options = options_from_args(args)
    address = getattr(args, "address", None) if isinstance(args, argparse.Namespace) else None
    host = (
        getattr(args, "dashboard_host", None) if isinstance(args, argparse.Namespace) else None
    ) or "127.0.0.1"
    started = ensure_ray(address, host)
    name = options.run_name or run_name(spec)
    log.info(
        "run %s: mode %s, %d shard(s), pid %d", name, options.mode, options.shards, os.getpid()
    )
    actors = ActorSet(spec, options, name)
    try:
        tables, summaries = [], []
        for r in range(spec.replications):
            # The replications share the run's actors (named after the run) and its gauges.
            result = run_replication(spec, r, options, name, actors)
            tables.append(result.jobs)
            summaries.append(result.summary)
        summary = combine(summaries)
        summary["ray"] = {
            "mode": options.mode,
            "shards": options.shards,
            "window_s": options.effective_window_s if options.mode != "exact" else 0.0,
            "run": name,
        }
        return ScenarioResult(pa.concat_tables(tables), summary, summaries)
    finally:
        actors.close()
        if started:
            ray.shutdown()
