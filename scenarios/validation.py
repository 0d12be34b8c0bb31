"""Validate raw scenario data: the pydantic schema, then the cross-references.

`validate(data, source)` translates old fields first (each policy's `migrate` hook:
`scenarios/migration.py`; the world model's old node labels: `scenarios/world.py`), then
checks the data against `schema.ScenarioModel` (every problem listed, with the field path and
what was expected), the size limits (`scenarios/limits.py`), the cluster generator, and what
the model names: node types, pools, classes, registered policies and the timeline's nodes,
types and classes. Every failure raises `ScenarioError` naming the file.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import ValidationError

from clusteremu.cluster.policies import registry
from clusteremu.scenarios import limits, schema, world
from clusteremu.scenarios.errors import ScenarioError, shorten
from clusteremu.scenarios.migration import migrate_policies
from clusteremu.scenarios.world_schema import NumberFieldError

#: Discriminator values that pydantic inserts into error locations; not field names.
_TAGS = set(schema.DISTRIBUTION_KINDS + schema.ARRIVAL_KINDS + schema.SPEEDUP_KINDS)

#: The most problems listed in one error (the rest are counted).
MAX_PROBLEMS = 12


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


def validate(data: dict[str, Any], source: str, streamed: bool = False) -> schema.ScenarioModel:
    """Validate raw YAML data; raise ScenarioError listing every problem (`streamed`: the
    memory estimate of a run that streams its results, `limits.check_scenario`)."""
    data = migrate_policies(data, source)  # each named policy's old parameters
    data = world.migrate(data, source)  # the world model's old node labels
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
    limits.check_scenario(model, source, streamed=streamed)  # before anything is built
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
