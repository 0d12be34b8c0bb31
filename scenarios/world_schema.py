"""Scenario schema of the world model and of the metrics a scenario selects.

The world a job runs in (docs/scenarios.md, "The world model"): a catalogue of container
images and data items (`world:`), which images, data and model each workload class needs
(`workload.classes[*].containers`, `data_in_mb`, ...), and each node type's bandwidths and
pre-pulled cache (`cluster.node_types[*].registry_mbps`, ...). `metrics:` selects summary
metrics beyond the standard ones (the Learning to Score paper's eq. 2 `score`, see
docs/scoring.md). Units: MB (10^6 bytes) for sizes, Mbit/s for bandwidths, seconds for
bounds. The engine turns them into state (`clusteremu.cluster.world`); `clusteremu.scenarios.world`
checks the
names and builds the model.
"""

from __future__ import annotations

from functools import cache
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    model_validator,
)

#: The largest size (MB) accepted for an image, a data item, a model or a transfer.
MAX_MB = 1e12

MegaBytes = Annotated[float, Field(ge=0, le=MAX_MB, allow_inf_nan=False)]
#: A bandwidth in Mbit/s: positive; absent (null) = unlimited (transfers take no time).
Bandwidth = Annotated[float, Field(gt=0, allow_inf_nan=False)]
#: Allowed values of one label: a value or a list of values.
LabelValues = str | list[str]


def _numeric(tp: Any) -> str | None:
    """'number' when annotation `tp` takes only numbers (float, int; optionally None),
    'numbers' when it is a list or tuple of them, else None."""
    origin = get_origin(tp)
    if origin is Annotated:
        return _numeric(get_args(tp)[0])
    if tp in (float, int):
        return "number"
    if origin in (Union, UnionType):
        kinds = {_numeric(a) for a in get_args(tp) if a is not type(None)}
        return kinds.pop() if len(kinds) == 1 else None
    if origin in (list, tuple):
        items = [a for a in get_args(tp) if a is not Ellipsis]
        if items and all(_numeric(a) == "number" for a in items):
            return "numbers"
    return None


@cache
def _numeric_fields(model: type[BaseModel]) -> dict[str, str]:
    fields = {name: _numeric(f.annotation) for name, f in model.model_fields.items()}
    return {name: kind for name, kind in fields.items() if kind is not None}


def _not_number(value: Any) -> bool:
    """A string or a bool where a number is expected (pydantic would convert them)."""
    return isinstance(value, str | bool)


class NumberFieldError(ValueError):
    """Field `field` of a model holds text or a bool where a number is expected; the
    loader reports it at the field (`field: expected`)."""

    def __init__(self, field: str, expected: str) -> None:
        self.field = field
        self.expected = expected
        super().__init__(f"{field}: {expected}")


class StrictNumbers(BaseModel):
    """A model whose number fields take numbers only: `"8"` and `true` are refused (YAML
    reads `"8"` as text and `true` as a bool; pydantic would turn them into 8 and 1)."""

    @model_validator(mode="before")
    @classmethod
    def _numbers_only(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for name, kind in _numeric_fields(cls).items():
            value = data.get(name)
            items = value if kind == "numbers" and isinstance(value, list | tuple) else ()
            bad = value if kind == "number" and _not_number(value) else None
            bad = next((v for v in items if _not_number(v)), bad)
            if bad is not None:
                raise NumberFieldError(
                    name,
                    f"expected {'a number' if kind == 'number' else 'numbers'}, "
                    f"got {type(bad).__name__} {bad!r:.60}",
                )
        return data


class _Strict(StrictNumbers):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ImageModel(_Strict):
    """A container image of the catalogue."""

    name: str = Field(min_length=1)
    size_mb: MegaBytes | dict[str, MegaBytes] = Field(
        description="MB per architecture (node type label `arch`); a number = the same size "
        "on every architecture; an architecture missing = the image has no build for it"
    )
    requires: dict[str, LabelValues] = Field(
        default_factory=dict,
        description="node labels the image needs: label -> allowed value(s)",
    )

    @model_validator(mode="after")
    def _some_build(self) -> ImageModel:
        if isinstance(self.size_mb, dict) and not self.size_mb:
            raise ValueError("size_mb: expected {architecture: MB} with at least one entry")
        return self


class DataItemModel(_Strict):
    """A data set fetched once per node, then cached."""

    name: str = Field(min_length=1)
    size_mb: MegaBytes
    source: Literal["storage", "registry"] = Field(
        default="storage", description="which of the node type's bandwidths the fetch uses"
    )


class WorldModel(_Strict):
    """The scenario's image and data-item catalogue and the transfers' goodput."""

    goodput: float = Field(
        default=1.0, gt=0, le=1, description="fraction of a link's bandwidth a transfer gets"
    )
    images: list[ImageModel] = Field(default_factory=list)
    data_items: list[DataItemModel] = Field(default_factory=list)


class ContainerModel(_Strict):
    """One container of a job: ranked images (a node runs the first that can run there)."""

    name: str = ""
    images: list[str] = Field(min_length=1, description="names of world.images, ranked")


def _pair(name: str, pair: tuple[float, float] | None) -> None:
    if pair is not None and not pair[0] < pair[1]:
        raise ValueError(f"{name}: expected [lo, hi] seconds with lo < hi, got {list(pair)}")


Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class ScoreBoundsModel(_Strict):
    """Eq. 2 normalisation bounds of one class, seconds."""

    exec_s: tuple[Seconds, Seconds] | None = Field(
        default=None, description="default [0, 2 x the largest mean run time]"
    )
    wait_s: tuple[Seconds, Seconds] | None = Field(
        default=None, description="default [0, the class timeout] (60 s without one)"
    )

    @model_validator(mode="after")
    def _ordered(self) -> ScoreBoundsModel:
        _pair("exec_s", self.exec_s)
        _pair("wait_s", self.wait_s)
        return self


class ScoreMetricModel(_Strict):
    """The Learning to Score paper's score (eq. 2): per workload class (function) bounds."""

    bounds: dict[str, ScoreBoundsModel] = Field(default_factory=dict)


class MetricsModel(_Strict):
    """Summary metrics the scenario selects beyond the standard ones."""

    score: ScoreMetricModel | None = None


__all__ = [
    "MAX_MB",
    "Bandwidth",
    "ContainerModel",
    "DataItemModel",
    "ImageModel",
    "LabelValues",
    "MegaBytes",
    "MetricsModel",
    "ScoreBoundsModel",
    "ScoreMetricModel",
    "WorldModel",
]
