"""What a trace reader is given: its files (a count of them, or one of each kind by name)
and its format options (``--option KEY=VALUE``), checked into `TraceError`s.

`parse_options` reads every reader's options with one parser per option: `number_above`
(a finite number above a bound) and `choice` (one of a few words) are the common ones.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from clusteremu.cluster.traces.table import TraceError

#: An option's default value and its parser (text -> value; ValueError: why not).
Option = tuple[Any, Callable[[str], Any]]


def parse_options(
    fmt: str,
    options: Mapping[str, str] | None,
    spec: Mapping[str, Option],
    name_as_field: bool = True,
) -> dict[str, Any]:
    """The options of format `fmt` by name -> value (`spec`: name -> (default, parser)).
    An unknown name or a value its parser refuses is a `TraceError` naming `fmt`, and the
    option as its field (`name_as_field`) or in its message."""
    given = dict(options or {})
    for name in given:
        if name not in spec:
            allowed = ", ".join(spec) if spec else "none (this format takes none)"
            raise TraceError(
                fmt,
                f"unknown option {name!r}: expected one of {allowed}",
                None,
                name if name_as_field else "",
            )
    values: dict[str, Any] = {}
    for name, (default, parse) in spec.items():
        if name not in given:
            values[name] = default
            continue
        raw = given[name]
        try:
            values[name] = parse(str(raw))
        except ValueError as exc:
            if name_as_field:
                raise TraceError(fmt, f"{raw!r}: {exc}", None, name) from None
            raise TraceError(fmt, f"option {name}={raw!r}: {exc}") from None
    return values


def number_above(low: float) -> Callable[[str], float]:
    """A parser of a finite number > `low`."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > low):
            raise ValueError(f"expected a number > {low:g}")
        return value

    return parse


def choice(*allowed: str) -> Callable[[str], str]:
    """A parser of one of the words `allowed`."""

    def parse(text: str) -> str:
        if text not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}")
        return text

    return parse


def expect_paths(
    fmt: str, paths: Sequence[Path | str], files: str, most: int | None = None
) -> list[Path]:
    """The paths as `Path`s; `TraceError` when there are none or more than `most`."""
    out = [Path(p) for p in paths]
    if not out or (most is not None and len(out) > most):
        raise TraceError(fmt, f"expected {files}, got {len(out)} files")
    return out


def pick_files(
    paths: Sequence[Path | str], kinds: Mapping[str, str], required: Sequence[str], files: str
) -> dict[str, Path]:
    """The files by kind: a file's kind is the first of `kinds` (kind -> text) whose text
    its name contains. Raises `TraceError` for an unrecognised or repeated file, and for a
    required kind missing (`files`: what to pass)."""
    found: dict[str, Path] = {}
    for raw in paths:
        p = Path(raw)
        kind = next((k for k, text in kinds.items() if text in p.name.lower()), None)
        if kind is None:
            raise TraceError(
                p,
                f"not a file of this format (its name should contain one of "
                f"{', '.join(kinds.values())}); expected {files}",
            )
        if kind in found:
            raise TraceError(p, f"a second {kinds[kind]} file (the first: {found[kind]})")
        found[kind] = p
    for kind in required:
        if kind not in found:
            given = ", ".join(str(p) for p in paths) or "none"
            raise TraceError(
                kinds[kind], f"the {kinds[kind]} file is missing (given: {given}); expected {files}"
            )
    return found
