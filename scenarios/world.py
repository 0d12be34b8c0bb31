"""The world model's scenario side: migration of old files, name checks, the spec's fields.

- `migrate(data, source)` translates the scoring placer's old parameters, where the world
  used to live, into the scenario fields that replaced them (raw YAML data, before
  validation), with a `ScenarioDeprecationWarning` naming the new fields:
  ``scheduler.placer.params.pods`` -> ``world.images`` and ``workload.classes[*].containers``,
  ``data_in_mb``, ``data_out_mb``, ``model_mb``, ``node_selector``, ``capabilities``;
  ``params.goodput`` -> ``world.goodput``; ``params.score_bounds`` -> ``metrics.score.bounds``;
  node type labels ``bandwidth.registry_mbps`` / ``bandwidth.storage_mbps`` -> the node type
  fields ``registry_mbps`` / ``storage_mbps``.
- `attach_world(spec, model, source)` checks every name (images, data items, cached items,
  classes with score bounds) and returns the spec with its world, node types' bandwidths and
  caches, classes' needs and the selected metrics filled in.

Every problem raises `ScenarioError` naming the file and the field.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import warnings
from collections.abc import Mapping
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

#: The scoring placer's old parameters that held the world model.
OLD_PLACER_PARAMS = ("pods", "goodput", "score_bounds")
#: Old node labels that held bandwidths (Mbit/s), and the node type fields replacing them.
OLD_BANDWIDTH_LABELS = {
    "bandwidth.registry_mbps": "registry_mbps",
    "bandwidth.storage_mbps": "storage_mbps",
}
#: Pod keys and the class fields they become.
_POD_FIELDS = ("node_selector", "capabilities", "data_in_mb", "data_out_mb", "model_mb")


class ScenarioDeprecationWarning(FutureWarning):
    """A scenario uses a field that moved; it still works, translated (shown to users)."""


def _warn(source: str, old: str, new: str) -> None:
    warnings.warn(
        ScenarioDeprecationWarning(
            f"{source}: {old} is deprecated and was translated into {new}; "
            "write the new field (see docs/scenarios.md, 'The world model')"
        ),
        stacklevel=3,
    )


# --- migration of old files ----------------------------------------------------------------


def migrate(data: dict[str, Any], source: str) -> dict[str, Any]:
    """`data` with the old world fields translated (a copy when anything changes)."""
    out = data
    placer = _get(data, "scheduler", "placer")
    if (
        isinstance(placer, dict)
        and placer.get("name") == "scoring"
        and isinstance(placer.get("params"), dict)
        and any(k in placer["params"] for k in OLD_PLACER_PARAMS)
    ):
        out = copy.deepcopy(data)
        _migrate_placer(out, source)
    types = _get(out, "cluster", "node_types")
    if isinstance(types, list) and any(
        isinstance(t, dict) and isinstance(t.get("labels"), dict) and _old_labels(t) for t in types
    ):
        out = copy.deepcopy(out) if out is data else out
        _migrate_bandwidth_labels(out, source)
    return out


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


def _class_index(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    classes = _get(data, "workload", "classes")
    if not isinstance(classes, list):
        return {}
    return {str(c["name"]): c for c in classes if isinstance(c, dict) and "name" in c}


def _migrate_placer(data: dict[str, Any], source: str) -> None:
    """Move pods / goodput / score_bounds out of the scoring placer's params (in place)."""
    from clusteremu.cluster.policies.scoring.placer import parse_pod  # the old format's own parser

    params: dict[str, Any] = data["scheduler"]["placer"]["params"]
    where = "scheduler.placer.params"
    classes = _class_index(data)
    world = data.setdefault("world", {})
    if not isinstance(world, dict):
        return  # validation reports it
    if "pods" in params:
        pods = params.pop("pods")
        if not isinstance(pods, Mapping):
            raise ScenarioError(source, [(f"{where}.pods", "expected {class: pod} mapping")])
        catalogue: dict[str, dict[str, Any]] = {
            str(img.get("name")): img for img in world.get("images", []) if isinstance(img, dict)
        }
        images_out = world.setdefault("images", [])
        for name, raw in pods.items():
            try:
                pod = parse_pod(str(name), raw)
            except ValueError as exc:
                raise ScenarioError(source, [(where, clip(str(exc)))]) from None
            if str(name) not in classes:
                raise ScenarioError(
                    source,
                    [
                        (
                            f"{where}.pods.{clip(str(name), 40)}",
                            f"expected the name of a job class ({', '.join(classes)})",
                        )
                    ],
                )
            cls = classes[str(name)]
            for img in pod.images:
                entry = {
                    "name": img.name,
                    "size_mb": dict(img.size_mb),
                    "requires": {k: list(v) for k, v in img.requires.items()},
                }
                if img.name in catalogue:
                    if catalogue[img.name] != entry:
                        raise ScenarioError(
                            source,
                            [
                                (
                                    f"{where}.pods.{name}.images",
                                    f"image {img.name!r} is described twice, differently",
                                )
                            ],
                        )
                    continue
                catalogue[img.name] = entry
                images_out.append(entry)
            if pod.images:
                if cls.get("containers"):
                    raise ScenarioError(
                        source,
                        [(f"{where}.pods.{name}.images", "the class already has containers")],
                    )
                cls["containers"] = [{"images": [img.name for img in pod.images]}]
            for field in _POD_FIELDS:
                value: Any = getattr(pod, field)
                if field == "node_selector":
                    value = {k: list(v) for k, v in value.items()}
                elif field == "capabilities":
                    value = dict(value)
                if not value:
                    continue
                if field in cls and cls[field] != value:
                    raise ScenarioError(
                        source,
                        [(f"{where}.pods.{name}.{field}", f"the class already sets {field}")],
                    )
                cls[field] = value
        _warn(
            source,
            f"{where}.pods",
            "world.images and workload.classes[*].containers / data_in_mb / data_out_mb / "
            "model_mb / node_selector / capabilities",
        )
    if "goodput" in params:
        goodput = params.pop("goodput")
        try:
            value = float(goodput)
        except (TypeError, ValueError):
            value = math.nan
        if not 0 < value <= 1:
            raise ScenarioError(
                source,
                [(f"{where}.goodput", f"expected a fraction in (0, 1], got {shorten(goodput)}")],
            )
        world["goodput"] = value
        _warn(source, f"{where}.goodput", "world.goodput")
    # An old-form scoring scenario reported the score: keep selecting it.
    metrics = data.setdefault("metrics", {})
    if isinstance(metrics, dict) and metrics.get("score") is None:
        metrics["score"] = {}
    if "score_bounds" in params:
        bounds = params.pop("score_bounds")
        score = metrics.get("score") if isinstance(metrics, dict) else None
        if isinstance(score, dict):
            if score.get("bounds"):
                raise ScenarioError(
                    source, [(f"{where}.score_bounds", "metrics.score.bounds is given too")]
                )
            score["bounds"] = bounds
        _warn(source, f"{where}.score_bounds", "metrics.score.bounds")


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
    "OLD_PLACER_PARAMS",
    "ScenarioDeprecationWarning",
    "attach_world",
    "migrate",
]
