"""Whether a run can stream its results (compaction and a `StreamSink`), from its
scenario and its policies alone, before any job is drawn: what `Engine(spec,
sink=StreamSink())` refuses (`facade.compaction_refusal`, `StreamSink.refusal`), asked
before an engine is built (`clusteremu.cluster.runner.run_spec`, `clusteremu run`)."""

from __future__ import annotations

from clusteremu.cluster.engine.compaction import python_refusal
from clusteremu.cluster.engine.sinks import table_refusal
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies import compiled_table
from clusteremu.cluster.policies.points import build_policies, distinct
from clusteremu.cluster.world import World


def _compiled(policy: object, kind: str) -> bool:
    """Whether `policy` decides at point `kind` with a compiled function (what the engine's
    `builder.compiled_functions` takes)."""
    function = compiled_table.compiled_of(policy)
    return function is not None and getattr(function, "extension_point", None) == kind


def stream_refusal(spec: SimulationSpec) -> str | None:
    """Why a run of `spec` cannot stream its results (None: it can): policies that decide
    in Python (they see job numbers, which compaction renumbers), or metrics that need the
    whole per-job table at once (an SLO, a world model, a score metric, a usage model,
    policies that add to the summary). Builds the policies (not set up); draws nothing.

    A usage model that only a trace's columns bring, and a policy that becomes compiled
    only in its `setup`, are seen by the engine alone (`CompactionRefused`)."""
    policies = build_policies(spec)
    python = [
        kind
        for kind in ("placer", "allocator", "scaler")
        if not _compiled(policies[kind], kind)
        and (kind != "allocator" or spec.pools)
        and (kind != "scaler" or not policies["scaler"].static)  # type: ignore[attr-defined]
    ]
    if python:
        return python_refusal(python)
    world = World.from_spec(spec).active
    return table_refusal(
        spec, world, spec.usage is not None, tuple(p for _, p in distinct(policies))
    )


__all__ = ["stream_refusal"]
