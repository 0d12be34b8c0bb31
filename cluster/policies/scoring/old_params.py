"""The scoring placer's old parameters: the pod format, and its translation into scenarios.

The world model (images, data, models, bandwidths) and the score's bounds used to be the
scoring placer's parameters (``scheduler.placer.params``); they are scenario fields now. Old
scenarios still load: `migrate(data, migration)`, the placer's `migrate` hook
(`ScoringPlacer.migrate`, called by the scenario loader before validation), translates them
with a deprecation warning naming the new fields:
``pods`` -> ``world.images`` and ``workload.classes[*].containers``, ``data_in_mb``,
``data_out_mb`` (MB), ``model_mb`` (MB), ``node_selector``, ``capabilities``;
``goodput`` -> ``world.goodput``; ``score_bounds`` -> ``metrics.score.bounds``. An old-form
scenario also keeps selecting the ``score`` metric. `parse_pod` reads the old pod format (the
placer still accepts ``pods`` as a deprecated parameter).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

from clusteremu.cluster.policies.base import Migration, MigrationError
from clusteremu.cluster.policies.scoring.framework import ImageSpec, PodSpec

#: The scoring placer's old parameters that held the world model.
OLD_PARAMS = ("pods", "goodput", "score_bounds")
#: Pod keys and the class fields they become.
_POD_FIELDS = ("node_selector", "capabilities", "data_in_mb", "data_out_mb", "model_mb")
#: Where the new fields are described (named in the deprecation warnings).
SEE = "docs/scenarios.md, 'The world model'"
#: Keys a pod description may carry.
_POD_KEYS = {"images", "node_selector", "capabilities", "data_in_mb", "data_out_mb", "model_mb"}


def _values(where: str, v: Any) -> tuple[str, ...]:
    if isinstance(v, str):
        return (v,)
    if isinstance(v, list | tuple) and all(isinstance(x, str) for x in v):
        return tuple(v)
    raise ValueError(f"{where}: expected a label value or a list of them, got {v!r}")


def _non_negative(where: str, v: Any) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: expected a number, got {v!r}") from None
    if not (math.isfinite(x) and x >= 0):
        raise ValueError(f"{where}: expected a finite, non-negative number, got {v!r}")
    return x


def parse_pod(name: str, raw: Mapping[str, Any]) -> PodSpec:
    """A `PodSpec` from scenario data (request filled in later from the job class)."""
    where = f"pods.{name}"
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected a mapping, got {raw!r}")
    unknown = set(raw) - _POD_KEYS
    if unknown:
        raise ValueError(
            f"{where}: unknown keys {sorted(unknown)}; expected some of {sorted(_POD_KEYS)}"
        )
    images = []
    for i, img in enumerate(raw.get("images", [])):
        w = f"{where}.images.{i}"
        if not isinstance(img, Mapping) or "name" not in img or "size_mb" not in img:
            raise ValueError(
                f"{w}: expected {{name, size_mb: {{arch: MB}}, requires}}, got {img!r}"
            )
        sizes = img["size_mb"]
        if not isinstance(sizes, Mapping) or not sizes:
            raise ValueError(f"{w}.size_mb: expected {{architecture: MB}}, got {sizes!r}")
        size_mb = {str(a): _non_negative(f"{w}.size_mb.{a}", s) for a, s in sizes.items()}
        requires = {
            str(k): _values(f"{w}.requires.{k}", v)
            for k, v in dict(img.get("requires", {})).items()
        }
        images.append(ImageSpec(str(img["name"]), size_mb, requires))
    selector = {
        str(k): _values(f"{where}.node_selector.{k}", v)
        for k, v in dict(raw.get("node_selector", {})).items()
    }
    caps = {str(k): str(v) for k, v in dict(raw.get("capabilities", {})).items()}
    return PodSpec(
        name=name,
        images=tuple(images),
        node_selector=selector,
        capabilities=caps,
        data_in_mb=_non_negative(f"{where}.data_in_mb", raw.get("data_in_mb", 0.0)),
        data_out_mb=_non_negative(f"{where}.data_out_mb", raw.get("data_out_mb", 0.0)),
        model_mb=_non_negative(f"{where}.model_mb", raw.get("model_mb", 0.0)),
    )


def migrate(data: dict[str, Any], migration: Migration) -> dict[str, Any]:
    """`data` (raw scenario data naming the scoring placer) with the placer's old world
    parameters translated into scenario fields (a copy when anything changes)."""
    placer = _get(data, "scheduler", "placer")
    if (
        isinstance(placer, dict)
        and isinstance(placer.get("params"), dict)
        and any(k in placer["params"] for k in OLD_PARAMS)
    ):
        data = copy.deepcopy(data)
        _migrate(data, migration)
    return data


def _get(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _class_index(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    classes = _get(data, "workload", "classes")
    if not isinstance(classes, list):
        return {}
    return {str(c["name"]): c for c in classes if isinstance(c, dict) and "name" in c}


def _migrate(data: dict[str, Any], migration: Migration) -> None:
    """Move pods / goodput / score_bounds out of the scoring placer's params (in place)."""
    params: dict[str, Any] = data["scheduler"]["placer"]["params"]
    where = "scheduler.placer.params"
    classes = _class_index(data)
    world = data.setdefault("world", {})
    if not isinstance(world, dict):
        return  # validation reports it
    if "pods" in params:
        pods = params.pop("pods")
        if not isinstance(pods, Mapping):
            raise MigrationError(f"{where}.pods", "expected {class: pod} mapping")
        catalogue: dict[str, dict[str, Any]] = {
            str(img.get("name")): img for img in world.get("images", []) if isinstance(img, dict)
        }
        images_out = world.setdefault("images", [])
        for name, raw in pods.items():
            try:
                pod = parse_pod(str(name), raw)
            except ValueError as exc:
                raise MigrationError(where, _clip(str(exc))) from None
            if str(name) not in classes:
                raise MigrationError(
                    f"{where}.pods.{_clip(str(name), 40)}",
                    f"expected the name of a job class ({', '.join(classes)})",
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
                        raise MigrationError(
                            f"{where}.pods.{name}.images",
                            f"image {img.name!r} is described twice, differently",
                        )
                    continue
                catalogue[img.name] = entry
                images_out.append(entry)
            if pod.images:
                if cls.get("containers"):
                    raise MigrationError(
                        f"{where}.pods.{name}.images", "the class already has containers"
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
                    raise MigrationError(
                        f"{where}.pods.{name}.{field}", f"the class already sets {field}"
                    )
                cls[field] = value
        migration.moved(
            f"{where}.pods",
            "world.images and workload.classes[*].containers / data_in_mb / data_out_mb / "
            "model_mb / node_selector / capabilities",
            SEE,
        )
    if "goodput" in params:
        goodput = params.pop("goodput")
        try:
            value = float(goodput)
        except (TypeError, ValueError):
            value = math.nan
        if not 0 < value <= 1:
            raise MigrationError(
                f"{where}.goodput",
                f"expected a fraction in (0, 1], got {migration.shown(goodput)}",
            )
        world["goodput"] = value
        migration.moved(f"{where}.goodput", "world.goodput", SEE)
    # An old-form scoring scenario reported the score: keep selecting it.
    metrics = data.setdefault("metrics", {})
    if isinstance(metrics, dict) and metrics.get("score") is None:
        metrics["score"] = {}
    if "score_bounds" in params:
        bounds = params.pop("score_bounds")
        score = metrics.get("score") if isinstance(metrics, dict) else None
        if isinstance(score, dict):
            if score.get("bounds"):
                raise MigrationError(f"{where}.score_bounds", "metrics.score.bounds is given too")
            score["bounds"] = bounds
        migration.moved(f"{where}.score_bounds", "metrics.score.bounds", SEE)


def _clip(text: str, limit: int = 300) -> str:
    """A message `text` cut to `limit` characters (marked with …), as the loader's `clip`."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


__all__ = ["OLD_PARAMS", "SEE", "migrate", "parse_pod"]
