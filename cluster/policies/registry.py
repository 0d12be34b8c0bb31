"""Policies registered by name, like kube-scheduler's plugin registry.

`register("placer", "first-fit")` decorates a class; `create("placer", "first-fit", **params)`
builds one. Duplicate names are refused. A class that decides for several extension points
with one object (a pair: Pennyworth's planners are a placer and a scaler) declares them in
its `provides`; it is registered through the first and listed under each (how a scheduler's
points are filled and checked: `clusteremu.cluster.policies.points`). Third-party policies register
through the
`clusteremu.policies` entry-point group, loaded on first lookup; scenario files only ever
name policies, never contain code.
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import inspect
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, TypeVar

from clusteremu.cluster.errors import UsageError
from clusteremu.cluster.policies.base import (
    Allocator,
    Placer,
    Policy,
    PolicyError,
    Provisioner,
    Scaler,
)

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
    "clusteremu.cluster.policies.fifo",
    "clusteremu.cluster.policies.wham",
    "clusteremu.cluster.policies.mdp.allocator",
    "clusteremu.cluster.policies.scoring.placer",
    "clusteremu.cluster.policies.pennyworth.placers",
    # fgd, best-fit, dot-product, ... (docs/gpu-frag.md)
    "clusteremu.cluster.policies.gpu_share_placers",
    "clusteremu.cluster.policies.hpc",  # fcfs, sjf, easy-backfill (docs/traces.md)
    "clusteremu.cluster.policies.kube",  # kube-default (docs/traces.md)
    "clusteremu.cluster.policies.provisioner",
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
                taken = table[name]
                raise ValueError(
                    f"{label} {name!r} is already registered by "
                    f"{taken.__module__}.{taken.__qualname__}; register yours under another name"
                )
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


#: The error the plug-ins named in `PLUGINS_ENV` raised when first loaded (raised again by
#: every later lookup in this process: the registry is loaded once).
_load_error: Exception | None = None


def _load() -> None:
    global _loaded, _load_error
    if _loaded:
        if _load_error is not None:
            raise _load_error
        return
    _loaded = True
    for module in BUILTIN_MODULES:
        import_module(module)
    for ep in entry_points(group="clusteremu.policies"):
        ep.load()
    try:
        for entry in env_plugins():
            import_plugin(entry, f"{PLUGINS_ENV} entry {entry!r}")
    except Exception as exc:  # a UsageError naming the entry: every later lookup says it too
        _load_error = exc
        raise


def load() -> None:
    """Register the built-in policies, the entry points' and those of the plug-ins named
    in `PLUGINS_ENV` (once per process); UsageError naming an entry that cannot be
    imported or registers a policy that cannot be used."""
    _load()


def env_plugins() -> list[str]:
    """The plug-ins (module names or .py file paths) named in `PLUGINS_ENV`, in order."""
    return [m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(",") if m.strip()]


def is_path(entry: str) -> bool:
    """Whether a plug-in entry names a file (`./my_placer.py`) rather than a module."""
    return entry.endswith(".py") or "/" in entry or os.sep in entry


def _import_file(entry: str, label: str) -> ModuleType:
    """Import the Python file `entry` as a module named by its stem (once per process)."""
    path = Path(entry).expanduser()
    if not path.is_file():
        what = "a folder" if path.is_dir() else "no such file"
        raise UsageError(f"{label}: expected a Python file (.py) or a module name, got {what}")
    name = path.stem
    if not name.isidentifier():
        raise UsageError(
            f"{label}: the file's name must be a Python module name (letters, digits, _), "
            f"got {name!r}"
        )
    resolved = path.resolve()
    held = sys.modules.get(name)
    if held is not None:
        where = getattr(held, "__file__", None)
        if where is not None and Path(where).resolve() == resolved:
            return held
        raise UsageError(
            f"{label}: a module named {name!r} is already imported "
            f"({where or 'built in'}); rename the file"
        )
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise UsageError(f"{label}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def import_plugin(entry: str, label: str) -> ModuleType:
    """Import plug-in `entry` (a module name, or a .py file path) and check the policies
    it registers as a run would use them: a compiled function that is not in the compiled
    table for the class's extension point, or that does not compile for its signature, is
    refused here, before any work.

    Anything wrong is a `UsageError` (exit status 2) whose message starts with `label`
    (`--plugin NAME`, or the `PLUGINS_ENV` entry) and says why: not found, the module
    raised while being imported (a syntax error, a name already registered), a policy
    whose compiled function does not compile.
    """
    before = {(kind, name): cls for kind in KINDS for name, cls in _REGISTRY[kind].items()}
    try:
        module = _import_file(entry, label) if is_path(entry) else import_module(entry)
    except UsageError:
        raise
    except ModuleNotFoundError as exc:
        top = Path(entry).stem if is_path(entry) else entry.split(".")[0]
        if exc.name is not None and top != exc.name.split(".")[0]:
            raise UsageError(
                f"{label}: the module failed to import: it needs {exc.name!r}, "
                "which is not installed"
            ) from None
        raise UsageError(
            f"{label}: no module named {entry!r}; put the folder that holds "
            f"{top}.py (or the package) on PYTHONPATH, install it, or give the file's path"
        ) from None
    except SystemExit as exc:  # sys.exit() or exit() while being imported
        raise UsageError(
            f"{label}: the module called sys.exit({exc.code!r}) while being "
            "imported; a plug-in module must only register policies"
        ) from None
    except Exception as exc:  # whatever the plug-in's own code raises on import
        raise UsageError(
            f"{label}: the module failed to import: {type(exc).__name__}: {exc}"
        ) from None
    prefix = module.__name__ + "."
    for kind in KINDS:
        for name, cls in list(_REGISTRY[kind].items()):
            mine = cls.__module__ == module.__name__ or cls.__module__.startswith(prefix)
            if before.get((kind, name)) is cls and not mine:
                continue
            if provided(kind, cls)[0] != kind:  # a pair: checked at its first point
                continue
            try:
                check_compiled(kind, cls)
            except ValueError as exc:
                raise UsageError(f"{label}: {kind} {name!r}: {exc}") from None
    return module


def check_compiled(kind: Kind, cls: type[Policy]) -> None:
    """ValueError when `cls` names a compiled function (`compiled = fn`) that a run could
    not call: not registered for one of the class's extension points (an undecorated
    function, or one decorated for another point), or not compiling for that point's
    signature (`compiled_table.CompileError`, which names numba's reason)."""
    function = inspect.getattr_static(cls, "compiled", None)
    if function is None:
        return
    from clusteremu.cluster.policies import compiled_table

    points = [p for p in provided(kind, cls) if p in compiled_table.KINDS]
    shown = getattr(getattr(function, "py_func", function), "__qualname__", repr(function))
    if not points:
        raise ValueError(
            f"{cls.__qualname__}.compiled = {shown}, but a {kind} has no compiled path "
            "(set compiled = None)"
        )
    for point in points:
        if any(f is function for f in compiled_table.TABLE[point]):
            compiled_table.check_compiles(point, function)
            return
    decorators = " or ".join(f"@compiled_{p}" for p in points)
    raise ValueError(
        f"{cls.__qualname__}.compiled = {shown} is not a registered compiled {points[0]}; "
        f"decorate the function with {decorators} (clusteremu.cluster.policies.compiled_table)"
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
    except (ValueError, PolicyError):  # the class's own refusal of its parameters
        raise
    except Exception as exc:  # noqa: BLE001 - a plug-in's constructor failing: bad input
        raise ValueError(
            f"{kind} {name!r} ({cls.__module__}.{cls.__qualname__}) failed to build: "
            f"{type(exc).__name__}: {exc}"
        ) from None
