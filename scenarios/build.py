"""Build the engine's `SimulationSpec` from a validated scenario model.

`build_spec(model, base_dir, source)` turns the schema's model (`scenarios/schema.py`) into
engine data: node types (failures, taints), nodes and pools, job classes (size
distributions, speed-ups, arrivals with the timeline's `set_rate` changes, traces read from
files relative to `base_dir`), the scheduler (pairs filled, file parameters resolved), the
usage model, SLO and timeline (times in s); then it attaches the world model
(`scenarios/world.py`) and runs the load-time checks (`scenarios/feasibility.py`,
`scenarios/policy_checks.py`). Every problem raises `ScenarioError` naming the file and the
field.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from clusteremu.cluster import distributions as dist
from clusteremu.cluster import readback
from clusteremu.cluster import speedup as sp
from clusteremu.cluster import workload as wl
from clusteremu.cluster.distributions import Deterministic
from clusteremu.cluster.model import (
    ClassUsage,
    JobClass,
    NodeFailures,
    NodeType,
    PolicyRef,
    Pool,
    Request,
    SchedulerSpec,
    SimulationSpec,
    StopRule,
    TimelineEvent,
    UsageSpec,
)
from clusteremu.cluster.policies import registry
from clusteremu.cluster.policies.points import PairError, paired
from clusteremu.cluster.slo import slo_from_mapping
from clusteremu.cluster.usage import usage_models
from clusteremu.scenarios import limits, schema, world
from clusteremu.scenarios.errors import ScenarioError, clip, shorten
from clusteremu.scenarios.feasibility import check_feasible, check_gpus, check_job_supply
from clusteremu.scenarios.policy_checks import check_policy_params, check_usage
from clusteremu.scenarios.trace_table import read_table_classes


def _distribution(m: Any) -> dist.Distribution:
    if isinstance(m, schema.ExponentialDist):
        return dist.Exponential(m.mean_s)
    if isinstance(m, schema.HyperExponentialDist):
        return dist.HyperExponential(tuple(m.probabilities), tuple(m.means_s))
    if isinstance(m, schema.LognormalDist):
        return dist.BoundedLognormal(m.mu, m.sigma, m.min_s, m.max_s)
    if isinstance(m, schema.DeterministicDist):
        return dist.Deterministic(m.value_s)
    if isinstance(m, schema.EmpiricalDist):
        return dist.Empirical(tuple(m.values_s))
    raise TypeError(m)


def _speedup(m: Any) -> sp.Speedup:
    if isinstance(m, schema.LinearSpeedupModel):
        return sp.LinearSpeedup()
    if isinstance(m, schema.AmdahlSpeedupModel):
        return sp.AmdahlSpeedup(m.parallel_fraction)
    if isinstance(m, schema.PowerSpeedupModel):
        return sp.PowerSpeedup(m.exponent)
    if isinstance(m, schema.SmoothRooftopSpeedupModel):
        return sp.SmoothRooftopSpeedup(m.max_cores, m.sharpness)
    if isinstance(m, schema.RooftopSpeedupModel):
        return sp.RooftopSpeedup(m.max_cores)
    if isinstance(m, schema.RigidSpeedupModel):
        return sp.RigidSpeedup()
    if isinstance(m, schema.TableSpeedupModel):
        return sp.TableSpeedup(tuple(p[0] for p in m.points), tuple(p[1] for p in m.points))
    raise TypeError(m)


def _node_failures(m: schema.FailuresModel | None) -> NodeFailures | None:
    if m is None:
        return None
    up = dist.Exponential(m.mtbf_s) if m.mtbf_s is not None else _distribution(m.up)
    down = dist.Exponential(m.mttr_s) if m.mttr_s is not None else _distribution(m.down)
    return NodeFailures(up, down)


def _timeline(model: schema.ScenarioModel) -> tuple[TimelineEvent, ...]:
    """The timeline as engine data, sorted by time (ties keep the file's order)."""
    out = []
    for ev in model.events:
        action = ev.action
        body = getattr(ev, action)
        params: tuple[float, ...] = ()
        if action == "set_speedup":
            params = tuple(float(x) for x in _speedup(body.speedup).kernel_params())
        out.append(
            TimelineEvent(
                at_s=ev.at_s,
                action=action,
                node=getattr(body, "node", None),
                node_type=getattr(body, "type", None),
                count=int(getattr(body, "count", 1)),
                cls=getattr(body, "class_", None),
                rate_per_s=float(getattr(body, "rate_per_s", 0.0)),
                params=params,
            )
        )
    return tuple(sorted(out, key=lambda t: t.at_s))


def _with_rate_changes(
    arrival: wl.ArrivalProcess, name: str, events: tuple[TimelineEvent, ...]
) -> wl.ArrivalProcess:
    """A class's arrivals with its timeline `set_rate` events applied."""
    changes = tuple(
        (e.at_s, e.rate_per_s) for e in events if e.action == "set_rate" and e.cls == name
    )
    return wl.RateChanges(arrival, changes) if changes else arrival


def _read_trace(
    m: schema.TraceArrival, base_dir: Path, where: str, source: str
) -> wl.TraceArrivals:
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    path = Path(m.path) if Path(m.path).is_absolute() else base_dir / m.path
    shown = shorten(str(path), 200)
    kind = "Parquet" if path.suffix == ".parquet" else "CSV"
    if not path.exists():
        raise ScenarioError(source, [(f"{where}.path", f"trace file {shown} not found")])
    try:  # a FIFO or a device is refused without opening it
        file_bytes = readback.regular_file_size(path, f"a {kind} trace")
    except readback.ReadBackError as exc:
        raise ScenarioError(source, [(f"{where}.path", f"trace {shown} {exc.problem}")]) from None
    refusal = limits.count_refusal(
        file_bytes, limits.TRACE_BYTES_FACTOR, f"bytes of trace file {shown}"
    )
    if refusal is not None:
        raise ScenarioError(source, [(f"{where}.path", refusal)])
    try:
        table = pq.read_table(path) if kind == "Parquet" else pacsv.read_csv(path)
    except Exception as exc:  # pyarrow raises several types for unreadable files
        # Its message may quote lines of the file (any file the path names): not shown.
        raise ScenarioError(
            source,
            [
                (
                    f"{where}.path",
                    f"cannot read trace {shown} as a {kind} file with a header row "
                    f"({type(exc).__name__})",
                )
            ],
        ) from None
    for col, field in ((m.column, "column"), (m.size_column, "size_column")):
        if col is not None and col not in table.column_names:
            raise ScenarioError(
                source,
                [
                    (
                        f"{where}.{field}",
                        f"expected a column of {shorten(table.column_names, 200)}, "
                        f"got {shorten(col)}",
                    )
                ],
            )
    try:
        raw = np.asarray(table[m.column].to_numpy(), dtype=np.float64)
        order = np.argsort(raw, kind="stable")
        times = raw[order] * m.time_scale
    except (TypeError, ValueError):
        raise ScenarioError(
            source, [(f"{where}.column", "expected numeric arrival times")]
        ) from None
    if times.size and (not np.all(np.isfinite(times)) or times[0] < 0):
        raise ScenarioError(
            source, [(f"{where}.column", "expected finite, non-negative arrival times")]
        )
    sizes = None
    if m.size_column:  # per-job sizes, in the trace's time unit like the arrivals
        try:
            sizes = np.asarray(table[m.size_column].to_numpy(), dtype=np.float64)[order]
        except (TypeError, ValueError):
            raise ScenarioError(
                source, [(f"{where}.size_column", "expected numeric sizes")]
            ) from None
        sizes = sizes * m.time_scale
        if not (np.all(np.isfinite(sizes)) and np.all(sizes > 0)):
            raise ScenarioError(
                source, [(f"{where}.size_column", "expected finite, positive sizes")]
            )
    return wl.TraceArrivals(tuple(times.tolist()), None if sizes is None else tuple(sizes.tolist()))


def build_spec(model: schema.ScenarioModel, base_dir: Path, source: str) -> SimulationSpec:
    """Turn a validated model into the engine's SimulationSpec (checks speed-ups, stability)."""
    cluster = model.cluster
    node_types = tuple(
        NodeType(
            t.name,
            t.cpu,
            t.memory_gb,
            t.gpu,
            t.speed,
            dict(t.labels),
            t.price_per_hour,
            t.startup_cost,
            t.startup_delay_s,
            math.inf if t.max_jobs is None else float(t.max_jobs),
            rentable=t.rentable,
            failures=_node_failures(t.failures),
            taints=tuple((x.key, x.value, x.effect) for x in t.taints),
            unschedulable=t.unschedulable,
        )
        for t in cluster.node_types
    )
    nodes = tuple(g.type for g in cluster.nodes for _ in range(g.count))
    pools = tuple(Pool(p.name, p.cores, p.speed, p.price_per_hour) for p in cluster.pools)
    default_pool = pools[0].name if len(pools) == 1 and not nodes else None
    classes: list[JobClass] = []
    table_classes = read_table_classes(model, base_dir, source)
    events = _timeline(model)
    max_cores = max([p.cores for p in pools] + [t.cpu for t in node_types] + [2.0])
    for i, m in enumerate(model.workload.classes):
        where = f"workload.classes.{i}"
        try:
            speedup = _speedup(m.speedup)
            sp.check_speedup(speedup, max_cores)
        except sp.SpeedupError as exc:
            raise ScenarioError(source, [(f"{where}.speedup", str(exc))]) from None
        arrival: wl.ArrivalProcess
        a = m.arrival
        if isinstance(a, schema.PoissonArrival):
            if a.rate_per_s is not None:
                arrival = wl.poisson_arrivals(a.rate_per_s)
            else:  # mean-field scaling: per core of the class's pool, else of all nodes
                pool_cores = {p.name: p.cores for p in pools}
                cores = pool_cores.get(
                    m.pool or default_pool or "",
                    sum(t.cpu for t in node_types for n in nodes if n == t.name),
                )
                arrival = wl.poisson_arrivals(float(a.rate_per_s_per_core or 0.0) * cores)
        elif isinstance(a, schema.BatchArrival):
            arrival = wl.BatchArrivals(a.count, a.at_s)
        elif isinstance(a, schema.RenewalArrival):
            arrival = wl.RenewalArrivals(_distribution(a.interarrival))
        elif isinstance(a, schema.TableArrival):
            arrival = table_classes[m.name]
        else:
            arrival = _read_trace(a, base_dir, f"{where}.arrival", source)
        r = m.request
        arrival = _with_rate_changes(arrival, m.name, events)
        classes.append(
            JobClass(
                m.name,
                arrival,
                # A table class's sizes are its rows' run times (the placeholder is unused).
                Deterministic(1.0) if m.size is None else _distribution(m.size),
                speedup,
                m.holding_cost,
                Request(r.cpu, r.memory_gb, r.gpu),
                m.pool or default_pool,
                math.inf if m.timeout_s is None else m.timeout_s,
                {t: _distribution(d) for t, d in m.runtime_by_node_type.items()},
                usage=_class_usage(m.usage),
                node_affinity=tuple(
                    tuple((e.key, e.operator, tuple(e.values)) for e in term)
                    for term in m.node_affinity
                ),
                tolerations=tuple((t.key, t.operator, t.value, t.effect) for t in m.tolerations),
            )
        )
    s = model.stop
    sched = model.scheduler
    spec = SimulationSpec(
        name=model.name,
        seed=model.seed,
        stop=StopRule(s.jobs, s.warmup_jobs, s.time_s, s.warmup_s),
        node_types=node_types,
        nodes=nodes,
        pools=pools,
        classes=tuple(classes),
        scheduler=_paired(
            SchedulerSpec(
                *(
                    PolicyRef(ref.name, _resolve_files(dict(ref.params), base_dir))
                    for ref in (sched.placer, sched.allocator, sched.provisioner, sched.scaler)
                )
            ),
            source,
        ),
        replications=model.replications,
        usage=_usage_spec(model, source),
        slo=None
        if model.slo is None
        else slo_from_mapping(model.slo.model_dump(exclude_none=True)),
        events=events,
        on_node_failure=model.on_node_failure,
        restart_work=model.restart_work,
    )
    check_gpus(model, spec, source)
    spec = world.attach_world(spec, model, source)  # images, data, caches, metrics
    check_feasible(spec, source)
    check_job_supply(spec, source)
    check_policy_params(spec, source)
    check_usage(spec, source)
    return spec


def _paired(sched: SchedulerSpec, source: str) -> SchedulerSpec:
    """The scheduler with each pair's points filled (a Pennyworth planner named as the
    placer is the scaler too: `clusteremu.cluster.policies.points`); ScenarioError names the
    field."""
    try:
        return paired(sched)
    except PairError as exc:
        raise ScenarioError(source, [(exc.field, clip(exc.problem))]) from None


#: Policy parameters that name a file: a relative path is relative to the scenario's folder
#: (as trace paths are).
FILE_PARAMS = ("tree", "margins_from")


def _resolve_files(params: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    for key in FILE_PARAMS:
        value = params.get(key)
        if isinstance(value, str) and value and not Path(value).is_absolute():
            params[key] = str(base_dir / value)
    return params


def _class_usage(m: schema.ClassUsageModel | None) -> ClassUsage | None:
    if m is None:
        return None
    return ClassUsage(
        None if m.memory_gb is None else _distribution(m.memory_gb),
        None if m.cpu is None else _distribution(m.cpu),
        m.peak_at,
    )


def _usage_spec(model: schema.ScenarioModel, source: str) -> UsageSpec | None:
    """The workload's usage block; a class `usage` alone means the independent model."""
    u = model.workload.usage
    with_usage = [i for i, c in enumerate(model.workload.classes) if c.usage is not None]
    if u is None:
        return UsageSpec() if with_usage else None
    if u.model != "independent" and with_usage:
        raise ScenarioError(
            source,
            [
                (
                    f"workload.classes.{with_usage[0]}.usage",
                    f"class usage blocks are read by the 'independent' usage model only; "
                    f"workload.usage.model is {shorten(u.model)}",
                )
            ],
        )
    registry.names("provisioner")  # loads the policy modules, which register usage models
    if u.model not in usage_models():
        raise ScenarioError(
            source,
            [
                (
                    "workload.usage.model",
                    f"expected a registered usage model ({', '.join(usage_models())}), "
                    f"got {shorten(u.model)}",
                )
            ],
        )
    return UsageSpec(u.model, dict(u.params), u.cpu_rule)
