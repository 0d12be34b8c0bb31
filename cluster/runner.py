"""Run every replication of a scenario in this process and combine the results."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.metrics import combine
from clusteremu.cluster.model import PolicyRef, SimulationSpec
from clusteremu.cluster.policies.points import paired, replaced


@dataclass
class ScenarioResult:
    """All replications: the concatenated per-job table and the combined summary."""

    jobs: pa.Table
    summary: dict[str, Any]
    replications: list[dict[str, Any]]


def run_spec(
    spec: SimulationSpec, progress: Callable[[float], None] | None = None
) -> ScenarioResult:
    """Run `spec.replications` independent replications (seeds spawned from `spec.seed`)."""
    tables, summaries = [], []
    n = spec.replications
    for r in range(n):

        def report(done: float, r: int = r) -> None:
            if progress is not None:
                progress((r + done) / n)

        result = Engine(spec, replication=r).run(report)
        tables.append(result.jobs)
        summaries.append(result.summary)
    return ScenarioResult(pa.concat_tables(tables), combine(summaries), summaries)


def with_policies(spec: SimulationSpec, **names: str) -> SimulationSpec:
    """A copy of `spec` with some of its scheduler's policies replaced by name.

    `names` maps `placer` / `allocator` / `provisioner` / `scaler` to a policy name,
    optionally with parameters as `name:key=value:key=value`. Naming the scenario's own
    policy keeps its parameters (`placer=scoring` on a scenario that configures `scoring`
    runs exactly that configuration); given parameters then override those keys. Another
    policy starts from no parameters.

    Pairs follow their placer as in a scenario (`clusteremu.cluster.policies.points`): replacing a
    Pennyworth planner (the placer and the scaler) replaces both points' policy (with
    another planner, or a placer and the default scaler); a scaler other than the
    planner's raises `clusteremu.cluster.policies.points.PairError` naming `scheduler.scaler`.
    """
    sched = spec.scheduler
    for kind, text in names.items():
        name, *params = text.split(":")
        current: PolicyRef = getattr(sched, kind)
        values: dict[str, Any] = dict(current.params) if current.name == name else {}
        for item in params:
            key, _, raw = item.partition("=")
            values[key] = _parse_scalar(raw)
        sched = replaced(sched, kind, PolicyRef(name, values))  # type: ignore[arg-type]
    return replace(spec, scheduler=paired(sched))


def _parse_scalar(raw: str) -> Any:
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            pass
    return raw
