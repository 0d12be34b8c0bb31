"""clusteremu: a cluster emulator for scheduling and provisioning research.

The distribution's front door: the command line (`clusteremu.cli`) and a small Python API.

>>> from clusteremu import load_scenario, run_spec
>>> result = run_spec(load_scenario("mm-c", ["stop.jobs=2000", "stop.warmup_jobs=200"]))
>>> result.summary["jobs_completed"]
1800
"""

from __future__ import annotations

from cluster.engine import Engine
from cluster.runner import ScenarioResult, run_spec, with_policies
from scenarios.errors import ScenarioError
from scenarios.loader import load_scenario

__all__ = [
    "Engine",
    "ScenarioError",
    "ScenarioResult",
    "load_scenario",
    "run_spec",
    "with_policies",
]
