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

Results have the shape of `clusteremu.cluster.runner.run_spec`'s: the per-job table of every
replication, concatenated, and the combined summary.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import logging
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import ray

from clusteremu.actors.actor_set import ActorSet
from clusteremu.actors.coordinator import RayRunOptions, run_replication
from clusteremu.cluster.errors import UsageError
from clusteremu.cluster.metrics import combine
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.runner import ScenarioResult

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
        raise UsageError(f"--shards/--window/--realtime/--shard-*: {exc}") from None


LOOPBACK = "127.0.0.1"
#: Set to 0 to start a local Ray instance without its dashboard (1, or unset: with it).
#: Without it a start takes about 2 s and 3 s of CPU less; the test suite sets it.
DASHBOARD_ENV = "CLUSTEREMU_DASHBOARD"
# Ray's switch between "a node of a cluster" (the node's IP is the machine's address and
# servers listen on every interface) and "local only" (the node's IP is 127.0.0.1 and every
# server listens there). Ray reads it when it is imported and passes it to the processes it
# starts; see `ray._private.services.get_node_ip_address`.
LOCAL_ONLY_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
CONNECT_TIMEOUT_S = 10.0


def dashboard_wanted() -> bool:
    """Whether a local instance starts its dashboard: `DASHBOARD_ENV` is 1 or unset (yes)
    or 0 (no); any other value is a UsageError naming the variable."""
    value = os.environ.get(DASHBOARD_ENV, "1").strip()
    if value not in ("0", "1"):
        raise UsageError(f"{DASHBOARD_ENV}={value!r}: expected 1 (the dashboard) or 0 (none)")
    return value == "1"


#: Ray settings of a local instance this program starts. A worker process has 60 s by
#: default to start and register with its raylet, after which its task or actor fails;
#: on a machine busy with other work (or 10x slower than ours) starting Python with numpy
#: and Ray takes longer, so a local instance gives it 10 minutes.
LOCAL_SYSTEM_CONFIG: dict[str, Any] = {"worker_register_timeout_seconds": 600}


def init_kwargs(
    address: str | None, dashboard_host: str = LOOPBACK, num_cpus: int | None = None
) -> dict[str, Any]:
    """Keyword arguments for `ray.init`: join `address`, or start a local instance whose
    dashboard listens on `dashboard_host` only. The local instance is asked for by name
    (`address="local"`): without it `ray.init` joins whatever cluster $RAY_ADDRESS or
    the machine-wide `<ray temp dir>/ray_current_cluster` names (the last `ray start`,
    another user's, or one since gone) and then refuses `num_cpus`."""
    if address:
        return {"address": address, "log_to_driver": False}
    kwargs: dict[str, Any] = {
        "address": "local",
        "include_dashboard": dashboard_wanted(),
        "dashboard_host": dashboard_host,
        "log_to_driver": False,
        "_system_config": LOCAL_SYSTEM_CONFIG,
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
    not answer for many minutes without a word. `auto` is first resolved as Ray resolves it
    (`resolve_auto`), so a stale address is given up on within the same bound; `ray://`
    addresses are left to Ray, which fails fast on them; with `RAY_USE_TLS` set only the
    TCP connection is checked."""
    if "://" in address:
        return
    if address == "auto":
        address = resolve_auto()
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


def resolve_auto() -> str:
    """The HOST:PORT `--address auto` means, found as `ray.init` finds it ($RAY_ADDRESS,
    else the cluster last started with `ray start` on this machine, else a running GCS);
    ConnectionError when there is none. The address found may be stale (a cluster that
    was stopped without cleaning up): `check_reachable` then gives up on it."""
    from ray._private import services

    found = services.canonicalize_bootstrap_address_or_die("auto")
    log.info("--address auto: %s", found)
    return str(found)


def check_dashboard_host(host: str) -> None:
    """UsageError unless this machine can listen on `host` (Ray would retry for a minute
    and then fail with `Failed to find a valid port`): a socket is bound there on a free
    port and closed at once."""

    try:
        infos = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, where = infos[0]
        with socket.socket(family, kind, proto) as probe:
            probe.bind(where)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise UsageError(
            f"--dashboard-host {host}: this machine cannot listen there ({reason}); expected "
            "one of its own addresses, e.g. 127.0.0.1"
        ) from None


#: Resources Ray gives every node that no user asks for by name (a node's own address).
_NODE_RESOURCE_PREFIX = "node:"


def check_resources(
    demands: Sequence[dict[str, float]], nodes: Sequence[dict[str, float]], option: str
) -> None:
    """UsageError when the actors' resource `demands` (one mapping per actor, all alive at
    once) can never be scheduled on `nodes` (each alive node's total resources): an actor
    whose demand no single node holds, or demands that add up to more than the cluster
    has. Ray would otherwise keep the actors pending for ever. `option` names the options
    that set the demands."""

    def held(resources: dict[str, float]) -> str:
        return ", ".join(
            f"{k}={v:g}"
            for k, v in sorted(resources.items())
            if not k.startswith(_NODE_RESOURCE_PREFIX)
        )

    offered = "; ".join(f"node {i}: {held(n) or 'nothing'}" for i, n in enumerate(nodes))
    for demand in demands:
        wanted = {k: v for k, v in demand.items() if v > 0}
        if not any(all(node.get(k, 0.0) >= v for k, v in wanted.items()) for node in nodes):
            raise UsageError(
                f"{option}: an actor needs {held(wanted)} but no node of the Ray cluster "
                f"has that much ({offered or 'no alive node'}); ask for less, or start a "
                "node with `ray start --resources` / `--num-cpus`"
            )
    total: dict[str, float] = {}
    for demand in demands:
        for k, v in demand.items():
            total[k] = total.get(k, 0.0) + v
    short = {k: v for k, v in total.items() if v > sum(node.get(k, 0.0) for node in nodes) + 1e-9}
    if short:
        raise UsageError(
            f"{option}: the run's {len(demands)} actors together need {held(short)}, more "
            f"than the Ray cluster has ({offered}); use fewer --shards or ask for less"
        )


def check_local_demands(options: RayRunOptions) -> None:
    """Before a local Ray instance starts: UsageError when one actor asks for more CPUs
    than this machine has, or for a custom resource (a local instance offers none), so the
    refusal comes without starting Ray. The whole set is checked once the actors are
    known (`check_resources`)."""
    from ray._private.utils import get_num_cpus

    node = {"CPU": float(get_num_cpus())}
    demands = [
        {k: v for k, v in {"CPU": options.shard_cpus, **res}.items() if "memory" not in k}
        for res in (options.shard_resources or ({},))
    ]
    check_resources(demands, [node], "--shards/--shard-cpus/--shard-resources")


def alive_node_resources() -> list[dict[str, float]]:
    """Each alive node's total resources (CPU, memory, custom resources)."""
    return [
        {str(k): float(v) for k, v in node["Resources"].items()}
        for node in ray.nodes()
        if node["Alive"]
    ]


@contextmanager
def signals_kept() -> Iterator[None]:
    """While Ray starts: this process keeps its own SIGINT and SIGTERM handlers.

    `ray.init` installs a SIGTERM handler that exits with status 15, and a local head
    node one that kills its processes and exits with 1 after a C++ stack dump; both
    would bypass the command's clean-up (`clusteremu.cli.sigterm_as_interrupt`: exit
    143 with one line). Ray's installer (`ray._private.utils.set_sigterm_handler`) is
    made a no-op for the start, and the handlers found before it are put back after.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    from ray._private import utils as ray_utils

    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    installer = getattr(ray_utils, "set_sigterm_handler", None)
    if installer is not None:
        ray_utils.set_sigterm_handler = lambda handler: None
    try:
        yield
    finally:
        if installer is not None:
            ray_utils.set_sigterm_handler = installer
        for sig, handler in saved.items():
            if handler is not None:
                signal.signal(sig, handler)


_reaper: subprocess.Popen[bytes] | None = None
#: The processes `ray.init` started for the local instance of this process (pids), so
#: `stop_ray` can wait until they and their descendants are gone.
_local_pids: list[int] = []
#: Seconds `stop_ray` lets the instance's processes exit on their own after
#: `ray.shutdown()`, then after SIGTERM, before SIGKILL.
STOP_GRACE_S = 2.0
STOP_TERM_S = 1.0
#: How often `stop_ray` looks whether the instance's processes are gone, s.
STOP_POLL_S = 0.05


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
    """Initialise Ray unless it already is; return True when this call started it (then
    end it with `stop_ray`).

    Without `address` a private instance starts bound to loopback (see `loopback_only`),
    once `dashboard_host` is known to be an address this machine can listen on; with one,
    an unreachable cluster (`auto` included) is a `UsageError` after at most
    `CONNECT_TIMEOUT_S`. The process keeps its own signal handlers (`signals_kept`).
    """
    if ray.is_initialized():
        return False

    global _local_pids
    try:
        if address:
            target = resolve_auto() if address == "auto" else address
            check_reachable(target)
            with signals_kept():
                ctx = ray.init(**init_kwargs(target, dashboard_host, num_cpus))
        else:
            check_dashboard_host(dashboard_host)
            before = set(_child_pids())
            try:
                with signals_kept(), loopback_only():
                    ctx = ray.init(**init_kwargs(address, dashboard_host, num_cpus))
            finally:  # an interrupt during the start: whatever it started is stopped
                _local_pids = [pid for pid in _child_pids() if pid not in before]
            start_reaper(_local_pids)
    except ConnectionError as exc:
        raise UsageError(f"--address {address}: no Ray cluster to join ({exc})") from None
    except KeyboardInterrupt:
        stop_ray(True)
        raise
    if not address:
        exposed = [ip for ip in node_addresses() if not is_loopback(ip)]
        if exposed:
            stop_ray(True)
            raise RuntimeError(
                f"the local Ray instance came up on {', '.join(exposed)}, not on loopback; "
                f"this Ray version ignores {LOCAL_ONLY_ENV}=0"
            )
    url = getattr(ctx, "dashboard_url", None)
    if url:
        log.info("Ray dashboard at http://%s", url)
    return True


def _instance_processes() -> list[Any]:
    """The live processes of the local instance this process started, with their
    descendants (the raylet's workers and agents)."""
    import psutil

    found: dict[int, psutil.Process] = {}
    for pid in _local_pids:
        try:
            root = psutil.Process(pid)
            found[pid] = root
            found.update((c.pid, c) for c in root.children(recursive=True))
        except psutil.Error:
            continue
    reaper = _reaper.pid if _reaper is not None else None
    return [p for pid, p in found.items() if pid != reaper]


def _running_after(processes: list[Any], timeout_s: float) -> list[Any]:
    """Wait up to `timeout_s` for `processes` to exit; the ones still running then.

    A process that has exited but is not yet reaped (a zombie) counts as gone: Ray's
    processes that outlive their parent are reparented to PID 1, which in a container need
    not reap them for seconds, and `psutil.wait_procs` waits for them its whole timeout."""
    import psutil

    our_pid = os.getpid()

    def running(process: Any) -> bool:
        try:
            if process.status() != psutil.STATUS_ZOMBIE:
                return True
            if process.ppid() == our_pid:  # our own child: reap it now
                process.wait(timeout=0)
            return False
        except (psutil.NoSuchProcess, psutil.TimeoutExpired):
            return False
        except psutil.Error:
            return True

    deadline = time.monotonic() + timeout_s
    left = [p for p in processes if running(p)]
    while left and time.monotonic() < deadline:
        time.sleep(STOP_POLL_S)
        left = [p for p in left if running(p)]
    return left


def stop_ray(started: bool) -> None:
    """End what `ensure_ray` started (nothing when `started` is False): `ray.shutdown()`,
    then wait until every process of the local instance is gone -- Ray's dashboard and
    runtime-env agents can otherwise outlive the command by a minute -- sending SIGTERM
    after `STOP_GRACE_S` and SIGKILL after `STOP_TERM_S` more. SIGINT and SIGTERM are
    held meanwhile (delivered after), so a second interrupt cannot cut the clean-up."""
    global _local_pids
    if not started:
        return
    import psutil

    from clusteremu.cluster.io import signals_held

    with signals_held():
        processes = _instance_processes()
        ray.shutdown()
        left = _running_after(processes, STOP_GRACE_S)
        for process in left:
            with contextlib.suppress(psutil.Error):
                process.terminate()
        left = _running_after(left, STOP_TERM_S)
        for process in left:
            with contextlib.suppress(psutil.Error):
                process.kill()
        _running_after(left, STOP_TERM_S)
        _local_pids = []
        if _reaper is not None and _reaper.stdin is not None and not _reaper.stdin.closed:
            _reaper.stdin.close()  # nothing is left for the watchdog: let it exit
            with contextlib.suppress(subprocess.TimeoutExpired):
                _reaper.wait(timeout=STOP_GRACE_S + STOP_TERM_S)


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
    if not address and not ray.is_initialized():  # a local instance is about to start
        check_local_demands(options)
    started = ensure_ray(address, host)
    name = options.run_name or run_name(spec)
    log.info(
        "run %s: mode %s, %d shard(s), pid %d", name, options.mode, options.shards, os.getpid()
    )
    try:
        actors = ActorSet(spec, options, name)
        check_resources(
            actors.demands(options.mode == "exact"),
            alive_node_resources(),
            "--shards/--shard-cpus/--shard-resources",
        )
    except BaseException:
        stop_ray(started)
        raise
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
        stop_ray(started)
