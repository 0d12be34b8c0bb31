"""Policies registered by name, like kube-scheduler's plugin registry.

`register("placer", "first-fit")` decorates a class; `create("placer", "first-fit", **params)`
builds one. Duplicate names are refused. A class that decides for several extension points
with one object (a pair: Pennyworth's planners are a placer and a scaler) declares them in
its `provides`; it is registered through the first and listed under each (how a scheduler's
points are filled and checked: `cluster.policies.points`). Third-party policies register through the
`clusteremu.policies` entry-point group, loaded on first lookup; scenario files only ever
name policies, never contain code.
"""

from __future__ import annotations

import difflib
import functools
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from importlib.metadata import entry_points
from typing import Any, Literal, TypeVar

from cluster.policies.base import Allocator, Placer, Policy, Provisioner, Scaler

Kind = Literal["placer", "allocator", "provisioner", "scaler"]
KINDS: tuple[Kind, ...] = ("placer", "allocator", "provisioner", "scaler")
P = TypeVar("P", bound=type[Policy])
#: The protocol class of each extension point.
BASES: dict[Kind, type[Policy]] = {
    "placer": Placer,
    "allocator": Allocator,
    "provisioner": Provisioner,
    "scaler": Scaler,
}

log = logging.getLogger(__name__)

_REGISTRY: dict[str, dict[str, type[Policy]]] = {kind: {} for kind in KINDS}
#: Modules holding the built-in policies, imported on first lookup.
BUILTIN_MODULES = (
    "cluster.policies.fifo",
    "cluster.policies.wham",
    "cluster.policies.mdp.allocator",
    "cluster.policies.scoring.placer",
    "cluster.policies.pennyworth.placers",
    "cluster.policies.gpu_share_placers",  # fgd, best-fit, dot-product, ... (docs/gpu-frag.md)
    "cluster.policies.hpc",  # fcfs, sjf, easy-backfill (docs/traces.md)
    "cluster.policies.kube",  # kube-default (docs/traces.md)
    "cluster.policies.provisioner",
)
_loaded = False
#: Comma-separated plug-in modules to import on first lookup (set by `--plugin`, inherited
#: by the Ray workers a command starts).
PLUGINS_ENV = "CLUSTEREMU_PLUGINS"


class UnknownPolicyError(KeyError):
    """No policy of that kind is registered under that name."""

    def __init__(self, kind: str, name: str, known: list[str]) -> None:
        self.kind, self.name, self.known = kind, name, known
        super().__init__(f"unknown {kind} {name!r}; registered {kind}s: {', '.join(known)}")

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.kind, self.name, self.known))


T = TypeVar("T", bound=type)


def registrar(table: dict[str, Any], label: str) -> Callable[[str], Callable[[T], T]]:
    """A class-decorator factory that records classes in `table` by name.

    The decorated class gets `name`; a second, different class under the same name is
    refused. Used for policies here and for the scoring scheduler's plugins.
    """

    def register_as(name: str) -> Callable[[T], T]:
        def wrap(cls: T) -> T:
            if name in table and table[name] is not cls:
                raise ValueError(f"{label} {name!r} is already registered by {table[name]!r}")
            cls.name = name  # type: ignore[attr-defined]
            table[name] = cls
            return cls

        return wrap

    return register_as


def register(kind: Kind, name: str) -> Callable[[P], P]:
    """Class decorator: register a policy class under `name`.

    A pair (a class whose `provides` names several extension points) is registered through
    the first of them (`kind`) and listed under each: it must subclass each point's
    protocol (`BASES`).
    """

    def wrap(cls: P) -> P:
        points = provided(kind, cls)
        if points[0] != kind:
            raise ValueError(
                f"{cls.__name__} provides {', '.join(points)}: register it as a {points[0]}"
            )
        for point in points:
            if not issubclass(cls, BASES[point]):
                raise TypeError(f"{cls.__name__} provides {point} but is not a {point} class")
        for point in points:
            registrar(_REGISTRY[point], point)(name)(cls)
        return cls

    return wrap


def provided(kind: Kind, cls: type[Policy]) -> tuple[Kind, ...]:
    """The extension points one policy of `cls` decides for when named at `kind`: its
    `provides` (a pair, first the point it is named through), else `kind` alone."""
    points: tuple[Kind, ...] = tuple(getattr(cls, "provides", ()))
    for point in points:
        if point not in KINDS:
            raise ValueError(f"{cls.__name__}.provides: {point!r} is not one of {KINDS}")
    return points or (kind,)


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in BUILTIN_MODULES:
        import_module(module)
    for ep in entry_points(group="clusteremu.policies"):
        ep.load()
    for module in filter(None, os.environ.get(PLUGINS_ENV, "").split(",")):
        try:
            import_module(module.strip())
        except ImportError as exc:
            # Not importable here (another machine, another PYTHONPATH): its policies stay
            # unknown, and a lookup of one names it with the registered alternatives.
            log.warning(
                "%s names plug-in %r, which cannot be imported: %s", PLUGINS_ENV, module, exc
            )


def names(kind: Kind) -> list[str]:
    _load()
    return sorted(_REGISTRY[kind])


def policy_class(kind: Kind, name: str) -> type[Policy]:
    _load()
    try:
        return _REGISTRY[kind][name]
    except KeyError:
        raise UnknownPolicyError(kind, name, names(kind)) from None


class ParamError(ValueError):
    """A policy parameter is unknown, missing or of the wrong type; `field` names it."""

    def __init__(self, kind: str, name: str, field: str, problem: str) -> None:
        self.kind, self.name, self.field, self.problem = kind, name, field, problem
        super().__init__(f"{kind} {name!r}: params.{field}: {problem}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.kind, self.name, self.field, self.problem))


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass(frozen=True)
class _Signature:
    """What `check_params` reads of a policy constructor, worked out once per class:
    its named parameters (name -> whether required), whether it takes ``**kwargs``, and
    a pydantic validator and a shown type per type-hinted parameter."""

    named: dict[str, bool]
    open_ended: bool
    checks: dict[str, tuple[Any, str]]


@functools.cache
def _signature(cls: type[Policy]) -> _Signature:
    import inspect
    import typing

    from pydantic import TypeAdapter

    signature = inspect.signature(cls.__init__)
    params = list(signature.parameters.values())
    named = {
        p.name: p.default is p.empty
        for p in params[1:]
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }
    open_ended = any(p.kind == p.VAR_KEYWORD for p in params)
    checks: dict[str, tuple[Any, str]] = {}
    try:
        hints = typing.get_type_hints(cls.__init__)
    except Exception:  # noqa: BLE001 - hints that cannot be resolved: the class checks itself
        hints = {}
    for field, hint in hints.items():
        if field not in named:
            continue
        try:
            adapter = TypeAdapter(hint)
        except Exception:  # noqa: BLE001 - a type pydantic cannot check (an array-like)
            continue
        shown = getattr(hint, "__name__", None) or str(hint).replace("typing.", "")
        checks[field] = (adapter, shown.replace("collections.abc.", ""))
    return _Signature(named, open_ended, checks)


def check_params(kind: Kind, name: str, cls: type[Policy], params: dict[str, Any]) -> None:
    """Check `params` against the signature of `cls.__init__` and its type hints (each
    policy's parameters are its constructor's keyword arguments): an unknown or missing
    parameter, or a value of the wrong type, is a `ParamError` naming the parameter. A
    constructor taking ``**kwargs`` checks the rest itself."""
    from pydantic import ValidationError

    sig = _signature(cls)
    for field in params:
        if field not in sig.named and not sig.open_ended:
            close = difflib.get_close_matches(field, list(sig.named), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            known = ", ".join(sig.named) or "none"
            raise ParamError(
                kind, name, field, f"unknown parameter; {hint}expected one of: {known}"
            )
    for field, required in sig.named.items():
        if required and field not in params:
            raise ParamError(kind, name, field, "required")
    for field, value in params.items():
        check = sig.checks.get(field)
        if check is None:
            continue
        adapter, shown = check
        try:
            adapter.validate_python(value, strict=True)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first.get("loc", ()))
            detail = f" ({where}: {first.get('msg', '')})" if where else ""
            raise ParamError(
                kind, name, field, f"expected {shown}, got {_shown(value)}{detail}"
            ) from None


def create(kind: Kind, name: str, **params: Any) -> Policy:
    """Build the policy `name` of the given kind with keyword parameters, checked against
    its constructor's signature and type hints first (`check_params`)."""
    cls = policy_class(kind, name)
    check_params(kind, name, cls, params)
    try:
        return cls(**params)
    except TypeError as exc:
        raise ValueError(f"{kind} {name!r} does not accept parameters {params}: {exc}") from None
