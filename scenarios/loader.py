"""Load, override, validate and build scenarios.

`load_scenario(path, overrides)` reads YAML with `yaml.safe_load` (data, never code),
applies `--set path.to.field=value` overrides, validates with the pydantic schema and
cross-checks references (node types, pools, policy names, speed-ups, stability). Every
failure raises `ScenarioError` naming the file, the field path and what was expected.
`build_spec(model, base_dir)` turns a valid model into the engine's `SimulationSpec`.
"""

from __future__ import annotations

import copy
import difflib
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from clusteremu.cluster import distributions as dist
from clusteremu.cluster import readback
from clusteremu.cluster import speedup as sp
from clusteremu.cluster import workload as wl
from clusteremu.cluster.distributions import Deterministic
from clusteremu.cluster.jobs import Jobs
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
from clusteremu.cluster.policies.base import PolicyError
from clusteremu.cluster.policies.points import PairError, paired, scheduler_points
from clusteremu.cluster.slo import slo_from_mapping
from clusteremu.cluster.traces.feed import TableClassStream
from clusteremu.cluster.usage import draw_usage, usage_models
from clusteremu.scenarios import limits, schema, world
from clusteremu.scenarios.errors import ScenarioError, clip, shorten
from clusteremu.scenarios.trace_table import read_table_classes
from clusteremu.scenarios.world_schema import NumberFieldError
from pydantic import ValidationError

#: Discriminator values that pydantic inserts into error locations; not field names.
_TAGS = set(schema.DISTRIBUTION_KINDS + schema.ARRIVAL_KINDS + schema.SPEEDUP_KINDS)

#: The most problems listed in one error (the rest are counted).
MAX_PROBLEMS = 12
#: The largest scenario file read (bytes): scenarios are small; `/dev/zero` is not one.
MAX_INPUT_BYTES = 16 * 2**20
#: The deepest nesting of mappings and lists accepted in YAML (scenarios need about 8).
MAX_YAML_DEPTH = 64
#: The most YAML values accepted once aliases are expanded (an alias bomb is refused).
MAX_YAML_VALUES = 2_000_000
#: The most values (scalars, lists, mappings) a scenario file may write out: PyYAML reads
#: some 10,000 to 30,000 a second, so more would take minutes (checked while parsing).
MAX_YAML_NODES = 100_000

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


def canonical_name(name: str | Path) -> str:
    """One name per scenario file: a shipped scenario's stem (`mm-c`, whether given as
    `mm-c`, `mm-c.yaml` or a path to the shipped file), else the absolute, resolved path."""
    path = resolve_path(name).resolve()
    if path.parent == SHIPPED_DIR and path.suffix == ".yaml":
        return path.stem
    return str(path)


def nearest_shipped(name: str | Path) -> list[str]:
    """The shipped scenario names closest to `name` (a misspelling), best first."""
    stem = Path(name).name.removesuffix(".yaml").removesuffix(".yml")
    names = [p.stem for p in shipped_scenarios()]
    return difflib.get_close_matches(stem, names, n=3, cutoff=0.6)


def _not_found(path: Path) -> str:
    close = nearest_shipped(path)
    if close:
        return f"file not found (did you mean the shipped scenario {' or '.join(close)}?)"
    if len(path.parts) == 1 and path.suffix == "":
        names = ", ".join(p.stem for p in shipped_scenarios())
        return f"file not found, and no shipped scenario has that name (shipped: {names})"
    return "file not found"


class _ScenarioYamlLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that refuses duplicate keys and nesting deeper than MAX_YAML_DEPTH.

    (Aliases are counted after composing, in `_check_expansion`.)
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        self._nodes += 1
        try:
            if self._nodes > MAX_YAML_NODES:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"more than {MAX_YAML_NODES:,} values written out (parsing them takes "
                    "minutes); expected a scenario, with long lists in a trace file",
                    self.peek_event().start_mark,
                )
            if self._depth > MAX_YAML_DEPTH:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"nesting deeper than {MAX_YAML_DEPTH} levels",
                    self.peek_event().start_mark,
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            first_line: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    seen = first_line.get(key)
                except TypeError:  # an unhashable key: SafeConstructor reports it
                    continue
                if seen is not None:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"duplicate key {shorten(key)} (first at line {seen}); "
                        "a repeated key would silently replace the first",
                        key_node.start_mark,
                    )
                first_line[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


# YAML 1.1 (PyYAML) reads `1e6` and `1.0e308` as text: read them as the numbers they are
# (YAML 1.2 does), so that number fields can refuse text ("8" quoted stays text).
_ScenarioYamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _check_expansion(root: Any) -> None:
    """Refuse a YAML graph that expands (through aliases) into too many values, too deep,
    or into itself: the expanded size of every node, each counted once."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    visiting: set[int] = set()

    def walk(node: Any) -> None:
        key = id(node)
        if key in size:
            return
        if key in visiting:
            raise yaml.composer.ComposerError(
                None, None, "an alias refers to a node that contains it", node.start_mark
            )
        visiting.add(key)
        children: list[Any] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [item for pair in node.value for item in pair]
        for child in children:
            walk(child)
        visiting.discard(key)
        size[key] = 1 + sum(size[id(c)] for c in children)
        depth[key] = 1 + max((depth[id(c)] for c in children), default=0)
        if size[key] > MAX_YAML_VALUES:
            raise yaml.composer.ComposerError(
                None,
                None,
                f"the document expands (through aliases) to more than {MAX_YAML_VALUES:,} values",
                node.start_mark,
            )
        if depth[key] > MAX_YAML_DEPTH:
            raise yaml.composer.ComposerError(
                None,
                None,
                f"nesting deeper than {MAX_YAML_DEPTH} levels once aliases are expanded",
                node.start_mark,
            )

    walk(root)


def safe_yaml(text: str) -> Any:
    """Parse YAML data (never code) with duplicate keys, deep nesting and alias bombs refused.

    Raises `yaml.YAMLError` (with a mark naming the line) for every problem.
    """
    loader = _ScenarioYamlLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node)
        return loader.construct_document(node)
    except RecursionError:  # a guard: the depth check should come first
        raise yaml.YAMLError(f"nesting deeper than {MAX_YAML_DEPTH} levels") from None
    finally:
        loader.dispose()


def yaml_problem(exc: yaml.YAMLError) -> str:
    """'YAML [syntax] error at line 3, column 5: <problem>' (shortened, no file lines)."""
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or (str(exc) if not mark else "syntax error")
    if len(problem) > 200:
        problem = problem[:199] + "…"
    syntax = isinstance(exc, yaml.scanner.ScannerError | yaml.parser.ParserError)
    return f"YAML {'syntax ' if syntax else ''}error{where}: {problem}"


def read_yaml(path: Path) -> dict[str, Any]:
    """The mapping in scenario file `path`: a regular file (a FIFO or a device is refused
    without opening it) of at most MAX_INPUT_BYTES, nested at most MAX_YAML_DEPTH deep."""
    source = str(path)
    if not path.exists() and not path.is_symlink():
        raise ScenarioError(source, [("", _not_found(path))])
    try:
        raw = readback.read_capped(path, MAX_INPUT_BYTES, "a scenario YAML file")
    except readback.ReadBackError as exc:
        raise ScenarioError(source, [("", exc.problem)]) from None
    if len(raw) > MAX_INPUT_BYTES:
        raise ScenarioError(
            source,
            [("", f"larger than {MAX_INPUT_BYTES // 2**20} MiB; expected a scenario YAML file")],
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ScenarioError(
            source, [("", "not UTF-8 text; expected a scenario YAML file")]
        ) from None
    if "\x00" in text:
        raise ScenarioError(source, [("", "contains NUL bytes; expected a scenario YAML file")])
    try:
        data = safe_yaml(text)
    except yaml.YAMLError as exc:
        raise ScenarioError(source, [("", yaml_problem(exc))]) from None
    if not isinstance(data, dict):
        raise ScenarioError(
            source, [("", f"expected a mapping at the top level, got {type(data).__name__}")]
        )
    return data


def parse_override(text: str) -> tuple[list[str], Any]:
    """`a.b.0.c=value` -> (['a', 'b', '0', 'c'], value parsed as YAML)."""
    if "=" not in text:
        raise ValueError(f"override {shorten(text)} must look like path.to.field=value")
    key, raw = text.split("=", 1)
    parts = key.strip().split(".")
    if not any(parts):
        raise ValueError(f"override {shorten(text)} has an empty field path")
    if not all(parts):
        raise ValueError(
            f"override {shorten(text)}: expected a field path like a.b.0.c, with no empty "
            "part between dots"
        )
    if len(raw) > MAX_INPUT_BYTES:
        raise ValueError(f"override {shorten(text)}: value longer than {MAX_INPUT_BYTES} bytes")
    try:
        value = safe_yaml(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        if isinstance(exc, yaml.composer.ComposerError | yaml.constructor.ConstructorError):
            raise ValueError(f"override {shorten(text)}: {yaml_problem(exc)}") from None
        value = raw  # not YAML: the plain string
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
            where = clip(".".join(parts[: depth + 1]), 120)
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
        text = str(item)
        parts.append(text if len(text) <= 40 else text[:39] + "…")
    return ".".join(parts)


def _kinds_at(loc: tuple[Any, ...]) -> tuple[str, ...]:
    """The `kind` values allowed at a location (which discriminated union it is)."""
    names = [str(item) for item in loc if not isinstance(item, int)]
    if "speedup" in names[-1:]:
        return schema.SPEEDUP_KINDS
    if "arrival" in names[-1:]:
        return schema.ARRIVAL_KINDS
    return schema.DISTRIBUTION_KINDS


def _format_error(err: Any) -> tuple[str, str]:
    msg = str(err.get("msg", "invalid value"))
    for prefix in ("Value error, ", "Assertion failed, "):
        msg = msg.removeprefix(prefix)
    kind = err.get("type", "")
    given = err.get("input")
    loc = tuple(err.get("loc", ()))
    cause = (err.get("ctx") or {}).get("error")
    if isinstance(cause, NumberFieldError):  # raised for the model: name the field
        loc, msg = (*loc, cause.field), cause.expected
    elif kind == "extra_forbidden":
        msg = "unknown field (check the spelling; see docs/scenarios.md)"
    elif kind == "missing":
        msg = "required field is missing"
    elif kind == "union_tag_not_found":
        msg = f"`kind` is missing; expected one of {', '.join(_kinds_at(loc))}"
    elif kind == "union_tag_invalid":
        tag = err.get("ctx", {}).get("tag")
        msg = f"expected `kind` to be one of {', '.join(_kinds_at(loc))}, got {shorten(tag)}"
    elif msg.startswith("Input") and not isinstance(given, dict | list) and given is not None:
        wanted = msg.removeprefix("Input should be ").removeprefix("Input ")
        msg = f"expected {wanted[0].lower() + wanted[1:]}, got {shorten(given)}"
    if len(msg) > 300:
        msg = msg[:299] + "…"
    return _format_loc(loc), msg


def validate(data: dict[str, Any], source: str) -> schema.ScenarioModel:
    """Validate raw YAML data; raise ScenarioError listing every problem."""
    data = world.migrate(data, source)  # old scoring-placer world fields -> scenario fields
    try:
        model = schema.ScenarioModel.model_validate(data)
    except ValidationError as exc:
        problems = [_format_error(e) for e in exc.errors()]
        if len(problems) > MAX_PROBLEMS:
            more = len(problems) - MAX_PROBLEMS
            problems = [*problems[:MAX_PROBLEMS], ("", f"and {more} more problem(s)")]
        raise ScenarioError(source, problems) from None
    except RecursionError:  # a guard: read_yaml and the overrides cap the depth first
        raise ScenarioError(source, [("", "nested too deeply")]) from None
    limits.check_scenario(model, source)  # before anything is expanded or built
    if model.cluster.generator is not None:
        from clusteremu.scenarios.faas import apply_cluster_generator

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
        dupes = sorted(n for n, k in Counter(names).items() if k > 1)
        if dupes:
            problems.append((label, f"names must be unique, repeated: {shorten(dupes, 200)}"))
    known_types = set(type_names)  # sets: a scenario may name many types (linear checks)
    for i, group in enumerate(cluster.nodes):
        if group.type not in known_types:
            problems.append(
                (
                    f"cluster.nodes.{i}.type",
                    f"expected one of the node types {shorten(type_names, 200)}, "
                    f"got {shorten(group.type)}",
                )
            )
    has_nodes = any(g.count > 0 for g in cluster.nodes) or any(
        t.rentable for t in cluster.node_types
    )
    for i, nt in enumerate(cluster.node_types):
        if nt.rentable and nt.price_per_hour <= 0:
            problems.append(
                (
                    f"cluster.node_types.{i}.price_per_hour",
                    f"rentable type {shorten(nt.name)} needs a price > 0 (dollars per hour)",
                )
            )
    for i, jc in enumerate(model.workload.classes):
        where = f"workload.classes.{i}"
        if jc.pool is not None and jc.pool not in pool_names:
            problems.append(
                (
                    f"{where}.pool",
                    f"expected one of the pools {shorten(pool_names, 200)}, got {shorten(jc.pool)}",
                )
            )
        for t in jc.runtime_by_node_type:
            if t not in known_types:
                problems.append(
                    (
                        f"{where}.runtime_by_node_type.{shorten(t)}",
                        f"expected one of the node types {shorten(type_names, 200)}",
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
    ref_type = model.slo.reference_type if model.slo is not None else None
    if ref_type is not None and ref_type not in known_types:
        problems.append(
            (
                "slo.reference_type",
                f"expected one of the node types {shorten(type_names, 200)}, "
                f"got {shorten(ref_type)}",
            )
        )
    for kind in registry.KINDS:
        ref = getattr(model.scheduler, kind)
        if ref.name not in registry.names(kind):
            problems.append(
                (
                    f"scheduler.{kind}.name",
                    f"expected a registered {kind} ({', '.join(registry.names(kind))}), "
                    f"got {shorten(ref.name)}",
                )
            )
    problems += _timeline_problems(model)
    if problems:
        raise ScenarioError(source, problems)


def _timeline_problems(model: schema.ScenarioModel) -> list[tuple[str, str]]:
    """What the timeline names that the scenario lacks: an unknown node, node type or
    class, a time past the stop, a speed-up of another kind than the class's."""
    problems: list[tuple[str, str]] = []
    types = [t.name for t in model.cluster.node_types]
    classes = {c.name: c for c in model.workload.classes}
    n_nodes = sum(g.count for g in model.cluster.nodes)
    stop = model.stop.time_s
    for e, ev in enumerate(model.events):
        action = ev.action
        where = f"events.{e}"
        if stop is not None and ev.at_s > stop:
            problems.append(
                (f"{where}.at_s", f"expected a time at or before stop.time_s = {stop:g} s")
            )
        body = getattr(ev, action)
        node = getattr(body, "node", None)
        if node is not None and node >= n_nodes:
            problems.append(
                (
                    f"{where}.{action}.node",
                    f"expected a node index below {n_nodes} (the scenario's nodes), got {node}",
                )
            )
        node_type = getattr(body, "type", None)
        if node_type is not None and node_type not in types:
            problems.append(
                (
                    f"{where}.{action}.type",
                    f"expected one of the node types {shorten(types, 200)}, "
                    f"got {shorten(node_type)}",
                )
            )
        cls = getattr(body, "class_", None)
        if cls is not None and cls not in classes:
            problems.append(
                (
                    f"{where}.{action}.class",
                    f"expected one of the classes {shorten(list(classes), 200)}, "
                    f"got {shorten(cls)}",
                )
            )
        elif cls is not None and action == "set_speedup":
            have = classes[cls].speedup.kind
            if body.speedup.kind != have:
                problems.append(
                    (
                        f"{where}.set_speedup.speedup.kind",
                        f"expected {have} (class {shorten(cls)}'s speed-up kind; "
                        "set_speedup changes its parameters)",
                    )
                )
        elif cls is not None and isinstance(
            classes[cls].arrival, schema.TraceArrival | schema.TableArrival
        ):
            problems.append(
                (
                    f"{where}.set_rate.class",
                    f"class {shorten(cls)} replays a trace; set_rate applies to generated arrivals",
                )
            )
        elif cls is not None and isinstance(classes[cls].arrival, schema.BatchArrival):
            problems.append(
                (
                    f"{where}.set_rate.class",
                    f"class {shorten(cls)} is a batch (all its jobs at one instant); set_rate "
                    "applies to classes with a rate (poisson or renewal arrivals)",
                )
            )
    return problems


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
    if isinstance(m, schema.RigidSpeedupModel):
        return sp.RigidSpeedup()
    if isinstance(m, schema.TableSpeedupModel):
        return sp.TableSpeedup(tuple(p[0] for p in m.points), tuple(p[1] for p in m.points))
    raise TypeError(m)


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
    _check_gpus(model, spec, source)
    spec = world.attach_world(spec, model, source)  # images, data, caches, metrics
    check_feasible(spec, source)
    check_job_supply(spec, source)
    _check_policy_params(spec, source)
    _check_usage(spec, source)
    return spec


def _check_gpus(model: schema.ScenarioModel, spec: SimulationSpec, source: str) -> None:
    """The engine's GPU rules, checked at load (not as a traceback when the run starts):
    whole GPUs per node type, at most a node row's (`gpu_count`), and requests that are a
    share of one GPU or whole GPUs (`check_gpu_request`)."""
    from clusteremu.cluster.state import check_gpu_request, gpu_count

    problems: list[tuple[str, str]] = []
    where = {t.name: i for i, t in enumerate(model.cluster.node_types)}
    for t in spec.node_types:
        try:
            gpu_count(t)
        except ValueError as exc:
            i = where.get(t.name)
            field = "cluster.node_types" if i is None else f"cluster.node_types.{i}.gpu"
            problems.append((field, str(exc)))
    for i, c in enumerate(spec.classes):
        try:
            check_gpu_request("request.gpu", c.request.gpu)
        except ValueError as exc:
            problems.append((f"workload.classes.{i}.request.gpu", str(exc).split(": ", 1)[1]))
    if problems:
        raise ScenarioError(source, problems)


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
FILE_PARAMS = ("tree",)


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


def _check_usage(spec: SimulationSpec, source: str) -> None:
    """Run the usage model on no jobs, so that bad `params` fail before any work."""
    if spec.usage is None:
        return
    empty = Jobs(np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0))
    try:
        draw_usage(spec, empty, np.random.default_rng(0))
    except ValueError as exc:
        raise ScenarioError(source, [("workload.usage.params", clip(str(exc)))]) from None


def _check_policy_params(spec: SimulationSpec, source: str) -> None:
    for point in scheduler_points(spec.scheduler):
        if not point.primary:  # a pair's other point: its object is the primary's
            continue
        kind, ref = point.kind, point.ref
        try:
            policy = registry.create(kind, ref.name, **ref.params)
        except registry.ParamError as exc:
            where = f"scheduler.{kind}.params.{exc.field}"
            raise ScenarioError(source, [(where, clip(exc.problem))]) from None
        except ValueError as exc:
            raise ScenarioError(source, [(f"scheduler.{kind}.params", clip(str(exc)))]) from None
        problems = policy.check_spec(spec)
        if problems:
            raise ScenarioError(source, problems)


def check_policies(spec: SimulationSpec, source: str) -> None:
    """Build and set up every policy of `spec` as a run would, without running it.

    A scenario the policies cannot serve (an MDP allocator with one class, parameters a
    policy does not take) raises ScenarioError naming `scheduler.<kind>`: what `validate`
    accepts, `run` accepts too. Set-up may be as costly as the policy's (an MDP solve).
    """
    from clusteremu.cluster.policies.mdp.model import MdpModelError

    rng = np.random.default_rng(0)
    try:
        points = scheduler_points(spec.scheduler)
    except PairError as exc:
        raise ScenarioError(source, [(exc.field, clip(exc.problem))]) from None
    except registry.UnknownPolicyError as exc:
        raise ScenarioError(source, [(f"scheduler.{exc.kind}.name", str(exc))]) from None
    for point in points:
        if not point.primary:  # a pair's other point: its object is the primary's
            continue
        kind, ref = point.kind, point.ref
        where = f"scheduler.{kind}"
        try:
            policy = registry.create(kind, ref.name, **ref.params)
            policy.setup(spec, rng)
        except registry.UnknownPolicyError as exc:
            raise ScenarioError(source, [(f"{where}.name", str(exc))]) from None
        except PolicyError as exc:
            problem = exc.problem if isinstance(exc.problem, str) else str(exc)
            raise ScenarioError(source, [(where, clip(problem))]) from None
        except MdpModelError as exc:
            raise ScenarioError(source, [(f"{where}.params.{exc.field}", exc.expected)]) from None
        except registry.ParamError as exc:
            raise ScenarioError(
                source, [(f"{where}.params.{exc.field}", clip(exc.problem))]
            ) from None
        except (ValueError, TypeError) as exc:
            raise ScenarioError(source, [(f"{where}.params", clip(str(exc)))]) from None


def check_job_supply(spec: SimulationSpec, source: str) -> None:
    """Refuse a run that cannot measure a job: finite classes only (batches, traces) that
    bring fewer jobs than `stop.jobs`, or none inside the `stop.time_s` window."""
    if not spec.classes or not all(jc.arrival.is_finite() for jc in spec.classes):
        return
    stop = spec.stop
    horizon = math.inf if stop.time_s is None else float(stop.time_s)
    start = 0.0 if stop.time_s is None else stop.warmup_s
    total = inside = 0
    for jc in spec.classes:
        a = jc.arrival
        if isinstance(a, wl.BatchArrivals):
            total += a.count
            inside += a.count if start <= a.at_s <= horizon else 0
        elif isinstance(a, TableClassStream):  # counted when the table was checked
            total += a.count
            inside += int(a.source.window_rows.get(a.name, 0))
        elif isinstance(a, wl.TraceArrivals | wl.TableArrivals):
            times = np.asarray(a.times_s, dtype=np.float64)
            total += times.size
            inside += int(np.count_nonzero((times >= start) & (times <= horizon)))
        else:
            return  # a finite process this check does not know
    if stop.jobs is not None and total < stop.jobs:
        raise ScenarioError(
            source,
            [
                (
                    "stop.jobs",
                    f"the classes' batches and traces bring {total:,} jobs, fewer than "
                    f"stop.jobs = {stop.jobs:,}; expected stop.jobs <= {total:,} "
                    "(or an open arrival process)",
                )
            ],
        )
    if stop.time_s is not None and inside == 0:
        raise ScenarioError(
            source,
            [
                (
                    "stop.time_s",
                    f"no batch or trace job arrives between warmup_s = {stop.warmup_s:g} s and "
                    f"time_s = {horizon:g} s; expected a window that holds arrivals",
                )
            ],
        )


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
            for t in set(spec.nodes) | {nt.name for nt in spec.node_types if nt.rentable}
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
    # Stability of open arrival streams: offered busy cores must stay below capacity, in
    # every phase of the timeline's `set_rate` events.
    for start_s, rates in _rate_phases(spec):
        phase = _phase_words(spec, start_s)
        for pool in spec.pools:
            load = sum(
                rate * jc.size.mean / pool.speed
                for jc, rate in zip(spec.classes, rates, strict=True)
                if jc.pool == pool.name
            )
            if load >= pool.cores:
                problems.append(
                    (
                        "workload.classes",
                        f"unstable load on pool {pool.name!r}{phase}: the classes bring "
                        f"{load:.4g} core-seconds of work per second at best (one core per "
                        f"job) but the pool has {pool.cores:g} cores; expected a load below 1",
                    )
                )
        placed = [
            (jc, rate)
            for jc, rate in zip(spec.classes, rates, strict=True)
            if jc.pool is None and rate > 0
        ]
        if placed and spec.nodes:
            best_speed = max(spec.node_type(t).speed for t in set(spec.nodes))
            demand = 0.0
            for jc, rate in placed:
                cores = jc.request.cpu if jc.request.cpu > 0 else 1.0  # as the engine does
                speed = float(jc.speedup.value(cores)) * best_speed
                demand += rate * jc.size.mean / speed * jc.request.cpu
            capacity = sum(spec.node_type(t).cpu for t in spec.nodes)
            if demand >= capacity and not math.isclose(capacity, 0.0):
                problems.append(
                    (
                        "workload.classes",
                        f"unstable load on the nodes{phase}: jobs occupy {demand:.4g} cores "
                        f"on average at the fastest node speed, the nodes have "
                        f"{capacity:g}; expected a load below 1",
                    )
                )
        if problems:
            raise ScenarioError(source, problems)


def _rate_phases(spec: SimulationSpec) -> list[tuple[float, list[float]]]:
    """Each phase of the timeline's `set_rate` events (its start, s) with every class's
    arrival rate in it (jobs/s; 0 for a class without one): one phase without them."""
    starts = sorted({0.0} | {e.at_s for e in spec.events if e.action == "set_rate"})
    phases = []
    for start_s in starts:
        rates = []
        for jc in spec.classes:
            arrival = jc.arrival
            if isinstance(arrival, wl.RateChanges):
                rate = arrival.base.rate_per_s or 0.0
                for at_s, changed in arrival.changes:
                    if at_s <= start_s:
                        rate = changed
            else:
                rate = arrival.rate_per_s or 0.0
            rates.append(float(rate))
        phases.append((start_s, rates))
    return phases


def _phase_words(spec: SimulationSpec, start_s: float) -> str:
    """' from 2500 s on (after the timeline's set_rate)', or '' with one phase."""
    if not any(e.action == "set_rate" for e in spec.events):
        return ""
    if start_s == 0.0:
        return " before the timeline's first set_rate"
    return f" from {start_s:g} s on (the timeline's set_rate)"
