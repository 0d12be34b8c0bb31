"""Load-time checks that build a scenario's plug-ins: its policies and its usage model.

`check_policy_params(spec, source)` builds every policy of the scheduler with its parameters
and runs the policy's own `check_spec` (cheap; part of `build_spec`). `check_policies(spec,
source)` also sets every policy up as a run would (as costly as the policy's set-up, e.g. an
MDP solve). `check_usage(spec, source)` runs the usage model on no jobs. Every problem
raises `ScenarioError` naming `scheduler.<kind>` or `workload.usage`.
"""

from __future__ import annotations

import numpy as np

from clusteremu.cluster.jobs import Jobs
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies import registry
from clusteremu.cluster.policies.base import PolicyError
from clusteremu.cluster.policies.points import PairError, scheduler_points
from clusteremu.cluster.usage import draw_usage
from clusteremu.scenarios.errors import ScenarioError, clip


def check_policy_params(spec: SimulationSpec, source: str) -> None:
    """Build every policy of `spec` with its parameters and run its `check_spec` (cheap):
    ScenarioError naming `scheduler.<kind>.params[.<field>]` or the policy's own fields."""
    _build_each(spec, source, set_up=False)


def check_policies(spec: SimulationSpec, source: str) -> None:
    """Build and set up every policy of `spec` as a run would, without running it.

    A scenario the policies cannot serve (an MDP allocator with one class, parameters a
    policy does not take) raises ScenarioError naming `scheduler.<kind>`: what `validate`
    accepts, `run` accepts too. Set-up may be as costly as the policy's (an MDP solve).
    """
    _build_each(spec, source, set_up=True)


def _build_each(spec: SimulationSpec, source: str, set_up: bool) -> None:
    """Build each policy of `spec` from the registry (a pair once, at its first point) and
    check it (`check_spec`), or set it up as a run would (`set_up`); every failure is a
    ScenarioError naming the field (one mapping for both checks)."""
    from clusteremu.cluster.policies.mdp.model import MdpModelError

    rng = np.random.default_rng(0)
    try:
        points = scheduler_points(spec.scheduler)
    except PairError as exc:
        raise ScenarioError(source, [(exc.field, clip(exc.problem))]) from None
    except registry.UnknownPolicyError as exc:
        raise ScenarioError(source, [(f"scheduler.{exc.kind}.name", str(exc))]) from None
    for point in points:
        if not point.primary:  # a pair's other point: its object is the primary's
            continue
        kind, ref = point.kind, point.ref
        where = f"scheduler.{kind}"
        try:
            policy = registry.create(kind, ref.name, **ref.params)
            if set_up:
                policy.setup(spec, rng)
                problems = []
            else:
                problems = policy.check_spec(spec)
        except registry.UnknownPolicyError as exc:
            raise ScenarioError(source, [(f"{where}.name", str(exc))]) from None
        except PolicyError as exc:
            problem = exc.problem if isinstance(exc.problem, str) else str(exc)
            raise ScenarioError(source, [(where, clip(problem))]) from None
        except MdpModelError as exc:
            raise ScenarioError(source, [(f"{where}.params.{exc.field}", exc.expected)]) from None
        except registry.ParamError as exc:
            raise ScenarioError(
                source, [(f"{where}.params.{exc.field}", clip(exc.problem))]
            ) from None
        except (ValueError, TypeError) as exc:
            raise ScenarioError(source, [(f"{where}.params", clip(str(exc)))]) from None
        if problems:
            raise ScenarioError(source, problems)


def check_usage(spec: SimulationSpec, source: str) -> None:
    """Run the usage model on no jobs, so that bad `params` fail before any work."""
    if spec.usage is None:
        return
    empty = Jobs(np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0))
    try:
        draw_usage(spec, empty, np.random.default_rng(0))
    except ValueError as exc:
        raise ScenarioError(source, [("workload.usage.params", clip(str(exc)))]) from None
