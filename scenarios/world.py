"""The world model's scenario side: migration of old files, name checks, the spec's fields.

- `migrate(data, source)` translates the old node type labels that held bandwidths into the
  scenario fields that replaced them (raw YAML data, before validation), with a
  `ScenarioDeprecationWarning` naming the new fields: ``bandwidth.registry_mbps`` /
  ``bandwidth.storage_mbps`` -> the node type fields ``registry_mbps`` / ``storage_mbps``
  (Mbit/s). (A policy's old parameters, such as the scoring placer's ``pods``, ``goodput``
  and ``score_bounds`` where the world used to live, are translated by the policy's own
  `migrate` hook: `scenarios/migration.py`.)
- `attach_world(spec, model, source)` checks every name (images, data items, cached items,
  classes with score bounds) and returns the spec with its world, node types' bandwidths and
  caches, classes' needs and the selected metrics filled in.

Every problem raises `ScenarioError` naming the file and the field.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any

from clusteremu.cluster.model import (
    Container,
    DataItem,
    Image,
    MetricsSpec,
    ScoreBounds,
    ScoreMetric,
    SimulationSpec,
    WorldSpec,
)
from clusteremu.scenarios import schema
from clusteremu.scenarios.errors import ScenarioError, clip, shorten
from clusteremu.scenarios.migration import ScenarioDeprecationWarning, warn_moved

#: Old node labels that held bandwidths (Mbit/s), and the node type fields replacing them.
OLD_BANDWIDTH_LABELS = {
    "bandwidth.registry_mbps": "registry_mbps",
    "bandwidth.storage_mbps": "storage_mbps",
}


def _warn(source: str, old: str, new: str) -> None:
    warn_moved(source, old, new, "docs/scenarios.md, 'The world model'", stacklevel=3)


# --- migration of old files ----------------------------------------------------------------


def migrate(data: dict[str, Any], source: str) -> dict[str, Any]:
    """`data` with the old world fields translated (a copy when anything changes)."""
    types = _get(data, "cluster", "node_types")
    if isinstance(types, list) and any(
        isinstance(t, dict) and isinstance(t.get("labels"), dict) and _old_labels(t) for t in types
    ):
        data = copy.deepcopy(data)
        _migrate_bandwidth_labels(data, source)
    return data


def _get(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _old_labels(node_type: dict[str, Any]) -> list[str]:
    return [k for k in OLD_BANDWIDTH_LABELS if k in node_type["labels"]]


def _migrate_bandwidth_labels(data: dict[str, Any], source: str) -> None:
    problems: list[tuple[str, str]] = []
    moved = False
    for i, t in enumerate(data["cluster"]["node_types"]):
        if not isinstance(t, dict) or not isinstance(t.get("labels"), dict):
            continue
        for label in _old_labels(t):
            field = OLD_BANDWIDTH_LABELS[label]
            where = f"cluster.node_types.{i}.labels.{label}"
            raw = t["labels"][label]
            try:
                value = float(raw)
            except (TypeError, ValueError):
                problems.append((where, f"expected a bandwidth in Mbit/s, got {shorten(raw)}"))
                continue
            if not (value > 0 and math.isfinite(value)):
                problems.append((where, f"expected a positive bandwidth, got {shorten(raw)}"))
                continue
            if field in t:
                if t[field] is not None and float(t[field]) != value:
                    problems.append(
                        (where, f"disagrees with cluster.node_types.{i}.{field}; drop the label")
                    )
                continue
            t[field] = value
            moved = True
    if problems:
        raise ScenarioError(source, problems)
    if moved:
        _warn(
            source,
            "the node label bandwidth.registry_mbps / bandwidth.storage_mbps",
            "the node type fields registry_mbps / storage_mbps (Mbit/s)",
        )


# --- the spec's world ------------------------------------------------------------------------


def _values(v: str | list[str]) -> tuple[str, ...]:
    return (v,) if isinstance(v, str) else tuple(v)


def attach_world(spec: SimulationSpec, model: schema.ScenarioModel, source: str) -> SimulationSpec:
    """`spec` with the world model and metrics of `model` (names checked)."""
    from clusteremu.cluster.score_metric import default_bounds

    problems: list[tuple[str, str]] = []
    w = model.world
    names: dict[str, str] = {}
    catalogues: tuple[tuple[str, list[Any]], ...] = (
        ("world.images", list(w.images)),
        ("world.data_items", list(w.data_items)),
    )
    for label, entries in catalogues:
        for i, entry in enumerate(entries):
            if entry.name in names:
                problems.append(
                    (f"{label}.{i}.name", f"{shorten(entry.name)} is already {names[entry.name]}")
                )
            names[entry.name] = f"{label}.{i}"
    images = {img.name for img in w.images}
    data_items = {d.name for d in w.data_items}
    types = []
    for i, (t, tm) in enumerate(zip(spec.node_types, model.cluster.node_types, strict=True)):
        for q, name in enumerate(tm.cached):
            if name not in names:
                problems.append(
                    (
                        f"cluster.node_types.{i}.cached.{q}",
                        f"expected a name of world.images or world.data_items, got {shorten(name)}",
                    )
                )
        types.append(
            dataclasses.replace(
                t,
                registry_mbps=math.inf if tm.registry_mbps is None else tm.registry_mbps,
                storage_mbps=math.inf if tm.storage_mbps is None else tm.storage_mbps,
                cached=tuple(tm.cached),
            )
        )
    classes = []
    for i, (jc, m) in enumerate(zip(spec.classes, model.workload.classes, strict=True)):
        where = f"workload.classes.{i}"
        for q, container in enumerate(m.containers):
            for r, name in enumerate(container.images):
                if name not in images:
                    problems.append(
                        (
                            f"{where}.containers.{q}.images.{r}",
                            f"expected a name of world.images, got {shorten(name)}",
                        )
                    )
        for q, name in enumerate(m.data_items):
            if name not in data_items:
                problems.append(
                    (
                        f"{where}.data_items.{q}",
                        f"expected a name of world.data_items, got {shorten(name)}",
                    )
                )
        if m.model_mb > 0 and f"model:{m.name}" in names:
            problems.append((f"{where}.model_mb", f"an item is already named 'model:{m.name}'"))
        classes.append(
            dataclasses.replace(
                jc,
                containers=tuple(Container(tuple(c.images), c.name) for c in m.containers),
                data_in_mb=m.data_in_mb,
                data_out_mb=m.data_out_mb,
                model_mb=m.model_mb,
                data_items=tuple(m.data_items),
                node_selector={k: _values(v) for k, v in m.node_selector.items()},
                capabilities=dict(m.capabilities),
            )
        )
    metrics = MetricsSpec()
    if model.metrics.score is not None:
        by_name = {jc.name: jc for jc in classes}
        bounds: dict[str, ScoreBounds] = {}
        for name, b in model.metrics.score.bounds.items():
            if name not in by_name:
                problems.append(
                    (
                        f"metrics.score.bounds.{clip(name, 40)}",
                        f"expected the name of a workload class ({', '.join(by_name)})",
                    )
                )
                continue
            default = default_bounds(by_name[name])
            bounds[name] = ScoreBounds(
                tuple(b.exec_s) if b.exec_s is not None else default.exec_s,  # type: ignore[arg-type]
                tuple(b.wait_s) if b.wait_s is not None else default.wait_s,  # type: ignore[arg-type]
            )
        metrics = MetricsSpec(score=ScoreMetric(bounds))
    if problems:
        raise ScenarioError(source, problems)
    world = WorldSpec(
        images=tuple(
            Image(
                img.name,
                dict(img.size_mb) if isinstance(img.size_mb, dict) else {"*": img.size_mb},
                {k: _values(v) for k, v in img.requires.items()},
            )
            for img in w.images
        ),
        data_items=tuple(DataItem(d.name, d.size_mb, d.source) for d in w.data_items),
        goodput=w.goodput,
    )
    return dataclasses.replace(
        spec, node_types=tuple(types), classes=tuple(classes), world=world, metrics=metrics
    )


__all__ = [
    "OLD_BANDWIDTH_LABELS",
    "ScenarioDeprecationWarning",
    "attach_world",
    "migrate",
]
