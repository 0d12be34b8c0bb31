"""Load, override, validate and build scenarios.

`load_scenario(path, overrides)` reads YAML with `yaml.safe_load` (data, never code),
applies `--set path.to.field=value` overrides, validates with the pydantic schema and
cross-checks references (node types, pools, policy names, speed-ups, stability). Every
failure raises `ScenarioError` naming the file, the field path and what was expected.
`build_spec(model, base_dir)` turns a valid model into the engine's `SimulationSpec`.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from pydantic import ValidationError

from cluster import distributions as dist
from cluster import speedup as sp
from cluster import workload as wl
from cluster.model import (
    JobClass,
    NodeType,
    PolicyRef,
    Pool,
    Request,
    SchedulerSpec,
    SimulationSpec,
    StopRule,
)
from cluster.policies import registry
from scenarios import schema
from scenarios.errors import ScenarioError

#: Discriminator values that pydantic inserts into error locations; not field names.
_TAGS = {
    "exponential",
    "hyperexponential",
    "lognormal",
    "deterministic",
    "empirical",
    "poisson",
    "batch",
    "renewal",
    "trace",
    "linear",
    "amdahl",
    "power",
    "rooftop",
    "smooth-rooftop",
    "table",
}

SHIPPED_DIR = Path(__file__).resolve().parent


def shipped_scenarios() -> list[Path]:
    """The YAML scenarios that ship with clusteremu."""
    return sorted(SHIPPED_DIR.glob("*.yaml"))


def resolve_path(name: str | Path) -> Path:
    """A scenario path as given, or the name of a shipped scenario (with or without .yaml)."""
    path = Path(name)
    if path.exists():
        return path
    for candidate in (SHIPPED_DIR / path.name, SHIPPED_DIR / f"{path.name}.yaml"):
        if candidate.exists():
            return candidate
    return path


def read_yaml(path: Path) -> dict[str, Any]:
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioError(source, [("", "file not found")]) from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        raise ScenarioError(
            source, [("", f"cannot read the file ({exc.__class__.__name__})")]
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise ScenarioError(source, [("", f"YAML syntax error{where}: {problem}")]) from None
    if not isinstance(data, dict):
        raise ScenarioError(
            source, [("", f"expected a mapping at the top level, got {type(data).__name__}")]
        )
    return data


def parse_override(text: str) -> tuple[list[str], Any]:
    """`a.b.0.c=value` -> (['a', 'b', '0', 'c'], value parsed as YAML)."""
    if "=" not in text:
        raise ValueError(f"override {text!r} must look like path.to.field=value")
    key, raw = text.split("=", 1)
    parts = [p for p in key.strip().split(".") if p]
    if not parts:
        raise ValueError(f"override {text!r} has an empty field path")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return parts, value


def apply_overrides(data: dict[str, Any], overrides: list[str], source: str) -> dict[str, Any]:
    """Return a copy of `data` with every `path=value` override applied."""
    out = copy.deepcopy(data)
    for text in overrides:
        try:
            parts, value = parse_override(text)
        except ValueError as exc:
            raise ScenarioError(source, [("--set", str(exc))]) from None
        node: Any = out
        for depth, part in enumerate(parts):
            last = depth == len(parts) - 1
            where = ".".join(parts[: depth + 1])
            if isinstance(node, list):
                if not part.isdigit() or int(part) >= len(node):
                    raise ScenarioError(
                        source, [(where, f"expected a list index below {len(node)}")]
                    )
                if last:
                    node[int(part)] = value
                else:
                    node = node[int(part)]
            elif isinstance(node, dict):
                if last:
                    node[part] = value
                else:
                    node = node.setdefault(part, {})
            else:
                raise ScenarioError(source, [(where, "cannot set a field inside a plain value")])
    return out


def _format_loc(loc: tuple[Any, ...]) -> str:
    parts: list[str] = []
    for i, item in enumerate(loc):
        # Drop discriminator tags and pydantic's internal branch names.
        if isinstance(item, str) and (item in _TAGS or item.startswith("function-")) and i > 0:
            continue
        parts.append(str(item))
    return ".".join(parts)


def _format_error(err: Any) -> tuple[str, str]:
    msg = str(err.get("msg", "invalid value"))
    for prefix in ("Value error, ", "Assertion failed, "):
        msg = msg.removeprefix(prefix)
    kind = err.get("type", "")
    given = err.get("input")
    if kind == "extra_forbidden":
        msg = "unknown field (check the spelling; see docs/scenarios.md)"
    elif kind == "missing":
        msg = "required field is missing"
    elif kind in ("union_tag_invalid", "union_tag_not_found"):
        expected = err.get("ctx", {}).get("expected_tags", "")
        msg = f"expected `kind` to be one of {expected}"
    elif not isinstance(given, dict | list) and given is not None:
        shown = repr(given)
        wanted = msg.removeprefix("Input should be ").removeprefix("Input ")
        msg = f"expected {wanted[0].lower() + wanted[1:]}, got {shown[:60]}"
    return _format_loc(tuple(err.get("loc", ()))), msg


def validate(data: dict[str, Any], source: str) -> schema.ScenarioModel:
    """Validate raw YAML data; raise ScenarioError listing every problem."""
    try:
        model = schema.ScenarioModel.model_validate(data)
    except ValidationError as exc:
        problems = [_format_error(e) for e in exc.errors()]
        raise ScenarioError(source, problems) from None
    if model.cluster.generator is not None:
        from scenarios.faas import apply_cluster_generator

        try:
            model = apply_cluster_generator(model)
        except ValueError as exc:
            raise ScenarioError(source, [("cluster.generator", str(exc))]) from None
    _check_references(model, source)
    return model


def _check_references(model: schema.ScenarioModel, source: str) -> None:
    problems: list[tuple[str, str]] = []
    cluster = model.cluster
    type_names = [t.name for t in cluster.node_types]
    pool_names = [p.name for p in cluster.pools]
    for label, names in (
        ("cluster.node_types", type_names),
        ("cluster.pools", pool_names),
        ("workload.classes", [c.name for c in model.workload.classes]),
    ):
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            problems.append((label, f"names must be unique, repeated: {', '.join(dupes)}"))
    for i, group in enumerate(cluster.nodes):
        if group.type not in type_names:
            problems.append(
                (
                    f"cluster.nodes.{i}.type",
                    f"expected one of the node types {type_names}, got {group.type!r}",
                )
            )
    has_nodes = any(g.count > 0 for g in cluster.nodes)
    for i, jc in enumerate(model.workload.classes):
        where = f"workload.classes.{i}"
        if jc.pool is not None and jc.pool not in pool_names:
            problems.append(
                (f"{where}.pool", f"expected one of the pools {pool_names}, got {jc.pool!r}")
            )
        for t in jc.runtime_by_node_type:
            if t not in type_names:
                problems.append(
                    (
                        f"{where}.runtime_by_node_type.{t}",
                        f"expected one of the node types {type_names}",
                    )
                )
        if jc.pool is None and not has_nodes and len(pool_names) != 1:
            problems.append(
                (
                    f"{where}.pool",
                    "the class targets nodes but the cluster has none; "
                    "name a pool or add cluster.nodes",
                )
            )
    for kind in registry.KINDS:
        ref = getattr(model.scheduler, kind)
        if ref.name not in registry.names(kind):
            problems.append(
                (
                    f"scheduler.{kind}.name",
                    f"expected a registered {kind} ({', '.join(registry.names(kind))}), "
                    f"got {ref.name!r}",
                )
            )
    if problems:
        raise ScenarioError(source, problems)


def load_scenario(path: str | Path, overrides: list[str] | None = None) -> SimulationSpec:
    """Read, override, validate and build a scenario file into a SimulationSpec."""
    resolved = resolve_path(path)
    source = str(resolved)
    data = apply_overrides(read_yaml(resolved), overrides or [], source)
    model = validate(data, source)
    return build_spec(model, resolved.parent, source)


def spec_from_dict(
    data: dict[str, Any], source: str = "<scenario>", base_dir: Path | None = None
) -> SimulationSpec:
    """Validate and build a scenario given as a plain dict (tests, sweeps)."""
    return build_spec(validate(data, source), base_dir or Path.cwd(), source)


# --- building the engine's model -----------------------------------------------------------


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
    if isinstance(m, schema.TableSpeedupModel):
        return sp.TableSpeedup(tuple(p[0] for p in m.points), tuple(p[1] for p in m.points))
    raise TypeError(m)


def _read_trace(
    m: schema.TraceArrival, base_dir: Path, where: str, source: str
) -> wl.TraceArrivals:
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    path = Path(m.path) if Path(m.path).is_absolute() else base_dir / m.path
    try:
        table = pq.read_table(path) if path.suffix == ".parquet" else pacsv.read_csv(path)
    except FileNotFoundError:
        raise ScenarioError(
            source, [(f"{where}.path", f"trace file {str(path)!r} not found")]
        ) from None
    except Exception as exc:  # pyarrow raises several types for unreadable files
        raise ScenarioError(
            source, [(f"{where}.path", f"cannot read trace {str(path)!r}: {exc}")]
        ) from None
    cols = [m.column] + ([m.size_column] if m.size_column else [])
    for col in cols:
        if col not in table.column_names:
            raise ScenarioError(
                source,
                [(f"{where}.column", f"expected a column of {table.column_names}, got {col!r}")],
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
        )
        for t in cluster.node_types
    )
    nodes = tuple(g.type for g in cluster.nodes for _ in range(g.count))
    pools = tuple(Pool(p.name, p.cores, p.speed, p.price_per_hour) for p in cluster.pools)
    default_pool = pools[0].name if len(pools) == 1 and not nodes else None
    classes: list[JobClass] = []
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
        else:
            arrival = _read_trace(a, base_dir, f"{where}.arrival", source)
        r = m.request
        classes.append(
            JobClass(
                m.name,
                arrival,
                _distribution(m.size),
                speedup,
                m.holding_cost,
                Request(r.cpu, r.memory_gb, r.gpu),
                m.pool or default_pool,
                math.inf if m.timeout_s is None else m.timeout_s,
                {t: _distribution(d) for t, d in m.runtime_by_node_type.items()},
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
        scheduler=SchedulerSpec(
            *(
                PolicyRef(ref.name, dict(ref.params))
                for ref in (sched.placer, sched.allocator, sched.provisioner, sched.scaler)
            )
        ),
        replications=model.replications,
    )
    check_feasible(spec, source)
    _check_policy_params(spec, source)
    return spec


def _check_policy_params(spec: SimulationSpec, source: str) -> None:
    for kind in registry.KINDS:
        ref: PolicyRef = getattr(spec.scheduler, kind)
        try:
            registry.create(kind, ref.name, **ref.params)
        except ValueError as exc:
            raise ScenarioError(source, [(f"scheduler.{kind}.params", str(exc))]) from None


def check_feasible(spec: SimulationSpec, source: str) -> None:
    """Reject jobs that fit on no node and open workloads whose load exceeds capacity."""
    problems: list[tuple[str, str]] = []
    for i, jc in enumerate(spec.classes):
        if jc.pool is not None:
            continue
        fits = any(
            spec.node_type(t).cpu >= jc.request.cpu
            and spec.node_type(t).memory_gb >= jc.request.memory_gb
            and spec.node_type(t).gpu >= jc.request.gpu
            for t in set(spec.nodes)
        )
        if not fits:
            problems.append(
                (
                    f"workload.classes.{i}.request",
                    "expected a request that fits on at least one node type",
                )
            )
    if problems:
        raise ScenarioError(source, problems)
    # Stability of open arrival streams: offered busy cores must stay below capacity.
    for pool in spec.pools:
        load = sum(
            (jc.arrival.rate_per_s or 0.0) * jc.size.mean / pool.speed
            for jc in spec.classes
            if jc.pool == pool.name
        )
        if load >= pool.cores:
            problems.append(
                (
                    "workload.classes",
                    f"unstable load on pool {pool.name!r}: the classes bring "
                    f"{load:.4g} core-seconds of work per second at best (one core per "
                    f"job) but the pool has {pool.cores:g} cores; expected a load below 1",
                )
            )
    placed = [jc for jc in spec.classes if jc.pool is None and jc.arrival.rate_per_s]
    if placed and spec.nodes:
        best_speed = max(spec.node_type(t).speed for t in set(spec.nodes))
        demand = 0.0
        for jc in placed:
            cores = jc.request.cpu if jc.request.cpu > 0 else 1.0  # as the engine does
            rate = float(jc.speedup.value(cores)) * best_speed
            demand += (jc.arrival.rate_per_s or 0.0) * jc.size.mean / rate * jc.request.cpu
        capacity = sum(spec.node_type(t).cpu for t in spec.nodes)
        if demand >= capacity and not math.isclose(capacity, 0.0):
            problems.append(
                (
                    "workload.classes",
                    f"unstable load on the nodes: jobs occupy {demand:.4g} cores on "
                    f"average at the fastest node speed, the nodes have {capacity:g}; "
                    "expected a load below 1",
                )
            )
    if problems:
        raise ScenarioError(source, problems)
