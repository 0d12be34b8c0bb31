"""Conformance suites every policy's tests inherit (after Optuna's `optuna.testing`).

Subclass one in a test module and define how to build the policy; pytest collects the
inherited tests:

- `PlacerConformance`: define `make_placer()`; optionally `placement_scenario()` and
  `gpu_scenario()` (a scenario dict as in a YAML file, or a `SimulationSpec`).
- `AllocatorConformance`: define `make_allocator()`; optionally `pool_scenario()` and
  `check_allocation(view, cores)` for the policy's own invariants.
- `ScalerConformance`: define `make_scaler()`; optionally `scale_scenario()`.

Every suite checks, on whole runs and on hand-made views: decisions name real jobs and
nodes; capacity (cores, GB, worker slots, milli-GPU per GPU, a pool's cores) is never
exceeded; the view is not mutated; an empty queue, pool or cluster is handled; runs are
deterministic for a seed; the policy pickles (it travels to Ray workers). Placers are also
run with worker slots, inactive (booting and released) nodes, a failed and a draining node
(docs/faults.md), patience timeouts and shared GPUs (two 0.5-GPU jobs share one GPU, a
1.0-GPU job needs a wholly free one); scalers with failing nodes and views holding down
and draining ones. Policies with a compiled path (`compiled`, a function registered in
`clusteremu.cluster.policies.compiled_table`) must give the same per-job table on both paths. A
placer's whole runs are made on each path it has (the Python path, every decision checked
as it is made, and the compiled one, checked by the engine and over the whole run); a
compiled placer without its Python twin is checked on the compiled path, and the tests
that need the twin are skipped saying so (docs/adding_a_policy.md, "The Python twin").

The `check_*` functions are the rules themselves, usable on their own: each returns the
list of problems with one decision list (empty when legal).

The code lives in sibling modules, by job, and this module re-exports it (import from here
or from `clusteremu.cluster.testing`): `conformance_scenarios` (the scenarios and the spec
edits the tests make), `rules` (the `check_*` rules and their helpers), and one suite per
extension point: `placer_suite`, `allocator_suite`, `scaler_suite`.
"""

from __future__ import annotations

# Public: the names in `__all__`. The helpers stay importable from here too, for test
# modules that import them from this module (`as_spec`): hence the noqa on the imports.
from clusteremu.cluster.testing.allocator_suite import AllocatorConformance
from clusteremu.cluster.testing.conformance_scenarios import (  # noqa: F401
    Scenario,
    as_spec,
    gpu_scenario,
    small_placement_scenario,
    small_pool_scenario,
    small_scale_scenario,
    with_failures,
    with_startup_delay,
    with_timeline,
    with_timeouts,
    with_worker_slots,
)
from clusteremu.cluster.testing.placer_suite import (  # noqa: F401
    TWIN_DOC,
    PlacerConformance,
)
from clusteremu.cluster.testing.rules import (  # noqa: F401
    EPS,
    FloatArray,
    check_allocation,
    check_placements,
    check_scaling,
    default_gpus,
    equal_tables,
    gpu_share,
    mutated,
    placed_jobs,
    run_capacity_violations,
    view_arrays,
)
from clusteremu.cluster.testing.scaler_suite import ScalerConformance

__all__ = [
    "AllocatorConformance",
    "PlacerConformance",
    "ScalerConformance",
    "check_allocation",
    "check_placements",
    "check_scaling",
    "equal_tables",
    "gpu_scenario",
    "run_capacity_violations",
    "small_placement_scenario",
    "small_pool_scenario",
    "small_scale_scenario",
]
