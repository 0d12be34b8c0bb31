"""The value axis of every chart: logarithmic when the plotted values span a wide range.

On a linear axis to $62, bars of $0.04 and $0.88 are invisible; so any chart whose plotted
positive values span more than `WIDE_RATIO` (10x) gets a log axis ("symlog", linear near
zero, when zero or negative values are plotted too). Every plot helper of the package
passes the values it draws to `scale_axis` after drawing them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Literal

#: Plotted positive values whose largest is more than this many times the smallest get a
#: log axis.
WIDE_RATIO = 10.0


def _finite(values: Iterable[Any]) -> list[float]:
    out = []
    for v in values:
        try:
            x = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(x):
            out.append(x)
    return out


def is_wide(values: Iterable[Any], ratio: float = WIDE_RATIO) -> bool:
    """True when the finite positive values span more than `ratio` (max > ratio * min)."""
    positive = [v for v in _finite(values) if v > 0]
    return bool(positive) and max(positive) > ratio * min(positive)


def scale_axis(
    ax: Any, values: Iterable[Any], axis: Literal["x", "y"] = "y", ratio: float = WIDE_RATIO
) -> str:
    """Make `ax`'s value axis logarithmic when `values` (what the chart plots on it) are
    wide (`is_wide`): "log" when every finite value is positive, else "symlog" with the
    linear part up to the smallest positive value. Returns the scale set ("linear" when
    the axis is left as it is)."""
    finite = _finite(values)
    if not is_wide(finite, ratio):
        return "linear"
    setter = ax.set_yscale if axis == "y" else ax.set_xscale
    if min(finite) > 0:
        setter("log")
        return "log"
    setter("symlog", linthresh=min(v for v in finite if v > 0))
    return "symlog"
