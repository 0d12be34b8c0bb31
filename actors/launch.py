"""`run_on_ray`: run a scenario on Ray actors (`clusteremu run SCENARIO --ray`).

Without `--address` a local Ray instance is started for the run, its dashboard bound to
`--dashboard-host` (127.0.0.1 by default, so nothing is exposed beyond this machine);
`--address auto` joins a running cluster (`ray up ray-config.yaml`, `ray start`). When Ray
is already initialised in this process (a test, a notebook) that instance is used.

Results have the shape of `cluster.runner.run_spec`'s: the per-job table of every
replication, concatenated, and the combined summary.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import uuid
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


def init_kwargs(
    address: str | None, dashboard_host: str = "127.0.0.1", num_cpus: int | None = None
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


def ensure_ray(
    address: str | None, dashboard_host: str = "127.0.0.1", num_cpus: int | None = None
) -> bool:
    """Initialise Ray unless it already is; return True when this call started it."""
    if ray.is_initialized():
        return False
    try:
        ctx = ray.init(**init_kwargs(address, dashboard_host, num_cpus))
    except ConnectionError as exc:
        from clusteremu.cli import UsageError

        raise UsageError(f"--address {address}: no Ray cluster to join ({exc})") from None
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
