"""A scheduler's policies by extension point (placer, allocator, provisioner, scaler): the
one place that fills, lists, builds and sets them up, for every mode (one engine, Ray's
exact and windowed modes, compare and sweeps).

A policy decides for one point, or for several with one object: a *pair* declares them in
its class's `provides` (Pennyworth's planners, ``("placer", "scaler")``: they plan a batch,
rent its VMs and place each VM's jobs). A pair is named through its first point, its
*primary* (``scheduler.placer``); each other point it provides follows it. Left at its
default (``scaler: static``, or left out) such a point gets the same policy (name and
params); naming the same policy there, with no params or the same, is the same; anything
else is refused with a `PairError` naming the field, as is a pair named at a point other
than its primary.

* `paired`: a `SchedulerSpec` with its pairs filled in (the scenario loader, `with_policies`);
* `replaced`: one point replaced, a pair named there before leaving the points it filled;
* `scheduler_points`: every point of a scheduler, paired, with its policy class, for the
  checks that look at the policies (the loader's, windowed mode's);
* `build_policies`: the objects, one per pair (the engine), given objects replacing the
  scenario's; `setup_policies`: each object set up once, with the stream of its first point;
  `distinct`: each object once, in point order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from clusteremu.cluster.jobs import Purpose, stream
from clusteremu.cluster.model import PolicyRef, SchedulerSpec, SimulationSpec
from clusteremu.cluster.policies import compiled_table, registry
from clusteremu.cluster.policies.base import Policy, PolicyError
from clusteremu.cluster.policies.registry import Kind

#: The extension points, in the order the engine builds and sets them up.
POINTS: tuple[Kind, ...] = registry.KINDS
_DEFAULTS = SchedulerSpec()
#: The random stream of each point (a pair's object gets its first point's).
PURPOSES: dict[Kind, Purpose] = {
    "placer": Purpose.PLACER,
    "allocator": Purpose.ALLOCATOR,
    "provisioner": Purpose.PROVISIONER,
    "scaler": Purpose.SCALER,
}


def default_ref(kind: Kind) -> PolicyRef:
    """What a scheduler names at `kind` when a scenario leaves it out."""
    ref: PolicyRef = getattr(_DEFAULTS, kind)
    return ref


class PairError(ValueError):
    """A point names a pair's policy where the pair does not allow it, or a point a pair
    fills names another policy; `field` names it (``scheduler.scaler``, or ``scaler=`` for
    an object given to the engine)."""

    def __init__(self, field: str, problem: str) -> None:
        self.field, self.problem = field, problem
        super().__init__(f"{field}: {problem}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.field, self.problem))


@dataclass(frozen=True)
class Point:
    """One extension point of a scheduler: the policy it names and the points that one
    object of that policy decides for (`kind` alone, or a pair's)."""

    kind: Kind
    ref: PolicyRef
    cls: type[Policy]
    points: tuple[Kind, ...]

    @property
    def primary(self) -> bool:
        """Whether the point's object is built here (a pair's other points share it)."""
        return self.points[0] == self.kind

    @property
    def rents(self) -> bool:
        """Whether the policy rents and releases nodes: it decides for the scaler point and
        is not the static scaler (whichever point it is named at)."""
        return "scaler" in self.points and not getattr(self.cls, "static", False)


def _points(kind: Kind, ref: PolicyRef) -> tuple[Kind, ...]:
    return registry.provided(kind, registry.policy_class(kind, ref.name))


def _both(points: tuple[Kind, ...]) -> str:
    return " and ".join(points)


def paired(sched: SchedulerSpec, given: frozenset[Kind] = frozenset()) -> SchedulerSpec:
    """`sched` with each pair's other points filled with the pair (see the module doc);
    `PairError` names the field a pair cannot share. `given`: points the engine was handed
    objects for (their refs are not read; a pair may not fill them)."""
    refs = {kind: getattr(sched, kind) for kind in POINTS}
    for kind in POINTS:
        if kind in given:
            continue
        ref = refs[kind]
        points = _points(kind, ref)
        if len(points) == 1:
            continue
        primary = points[0]
        if kind != primary:
            if primary in given or refs[primary].name != ref.name:
                raise PairError(
                    f"scheduler.{kind}",
                    f"{kind} {ref.name!r} is one policy for the {_both(points)}, named as the "
                    f"{primary}: name it as scheduler.{primary} (its {kind} follows), or "
                    f"choose another {kind}",
                )
            continue
        for other in points[1:]:
            seen = refs[other]
            if other in given:
                raise PairError(
                    f"{other}=",
                    f"the scenario's {primary} {ref.name!r} is the {other} too (one policy for "
                    f"the {_both(points)}): give {primary}= as well, or leave {other}= out",
                )
            same = seen.name == ref.name and (not seen.params or seen.params == ref.params)
            if seen == default_ref(other) or same:
                refs[other] = ref
                continue
            got = f"{seen.name!r}" + (" with other params" if seen.name == ref.name else "")
            raise PairError(
                f"scheduler.{other}",
                f"{primary} {ref.name!r} is the run's {other} too (one policy for the "
                f"{_both(points)}); expected the {other} left out, "
                f"{default_ref(other).name!r} or {ref.name!r} with no params, got {got}",
            )
    return dataclasses.replace(sched, **refs)


def replaced(sched: SchedulerSpec, kind: Kind, ref: PolicyRef) -> SchedulerSpec:
    """`sched` with `ref` at `kind`; a pair named at `kind` (its primary) before leaves the
    other points it filled, back to their defaults."""
    old: PolicyRef = getattr(sched, kind)
    try:
        points = _points(kind, old)
    except registry.UnknownPolicyError:  # replaced anyway
        points = (kind,)
    changes = {kind: ref}
    if points[0] == kind:
        for other in points[1:]:
            if getattr(sched, other) == old:
                changes[other] = default_ref(other)
    return dataclasses.replace(sched, **changes)


def scheduler_points(
    sched: SchedulerSpec, given: frozenset[Kind] = frozenset()
) -> tuple[Point, ...]:
    """Every point of `sched` (paired first), in `POINTS` order, but the `given` ones."""
    sched = paired(sched, given)
    out = []
    for kind in POINTS:
        if kind in given:
            continue
        ref: PolicyRef = getattr(sched, kind)
        cls = registry.policy_class(kind, ref.name)
        out.append(Point(kind, ref, cls, registry.provided(kind, cls)))
    return tuple(out)


def build_policies(spec: SimulationSpec, **given: Policy | None) -> dict[Kind, Policy]:
    """The policy object of each point of `spec`'s scheduler, one per pair, built from the
    registry, or the object `given` for that point (which replaces the scenario's policy
    there, and the points a pair named there filled). A given pair's object must be given
    at each of its points (`PairError` otherwise)."""
    for kind in given:
        if kind not in POINTS:
            raise ValueError(f"{kind!r} is not an extension point ({', '.join(POINTS)})")
    objects = {cast(Kind, kind): p for kind, p in given.items() if p is not None}
    for kind, policy in objects.items():
        points = registry.provided(kind, type(policy))
        missing = [q for q in points if objects.get(q) is not policy]
        if missing:
            calls = ", ".join(f"{q}=policy" for q in points)
            raise PairError(
                f"{missing[0]}=",
                f"{kind} {policy.name!r} ({type(policy).__name__}) decides for the "
                f"{_both(points)} with one object: pass it as each (Engine(spec, {calls}))",
            )
    sched = spec.scheduler
    for kind in objects:
        sched = replaced(sched, kind, default_ref(kind))
    out: dict[Kind, Policy] = dict(objects)
    listed = scheduler_points(sched, frozenset(objects))
    for point in listed:
        if point.primary:
            out[point.kind] = registry.create(point.kind, point.ref.name, **point.ref.params)
    for point in listed:
        if not point.primary:
            out[point.kind] = out[point.points[0]]
    for kind in POINTS:
        _check(kind, out[kind])
    return {kind: out[kind] for kind in POINTS}


def _check(kind: Kind, policy: Any) -> None:
    base = registry.BASES[kind]
    if not isinstance(policy, Policy) or not isinstance(policy, base):
        raise TypeError(f"{policy!r} is not a {base.__name__}")
    function = compiled_table.compiled_of(policy)
    if function is None:
        return
    points = [k for k in (policy.provides or (kind,)) if k in compiled_table.KINDS]
    if not points:
        raise PolicyError(policy.name, 0.0, f"a {kind} has no compiled path (compiled = None)")
    problems = []
    for point in points:
        try:
            compiled_table.code_of(point, function)
            return
        except ValueError as exc:
            problems.append(str(exc))
    raise PolicyError(policy.name, 0.0, problems[0])


def distinct(policies: Mapping[Kind, Policy]) -> tuple[tuple[Kind, Policy], ...]:
    """Each object once (a pair's at its first point), in `POINTS` order."""
    seen: set[int] = set()
    out = []
    for kind in POINTS:
        policy = policies[kind]
        if id(policy) not in seen:
            seen.add(id(policy))
            out.append((kind, policy))
    return tuple(out)


def setup_policies(
    policies: Mapping[Kind, Policy], spec: SimulationSpec, seq: np.random.SeedSequence
) -> None:
    """Set each object up once, with the random stream of its first point."""
    for kind, policy in distinct(policies):
        policy.setup(spec, stream(seq, PURPOSES[kind]))
