"""clusteremu: a cluster emulator for scheduling and provisioning research.

The distribution's front door: the command line (`clusteremu.cli`) and a small Python API.

>>> from clusteremu import load_scenario, run_spec
>>> result = run_spec(load_scenario("mm-c", ["stop.jobs=2000", "stop.warmup_jobs=200"]))
>>> result.summary["jobs_completed"]
1800
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clusteremu.cluster.engine import Engine
    from clusteremu.cluster.runner import ScenarioResult, run_spec, with_policies
    from clusteremu.scenarios.errors import ScenarioError
    from clusteremu.scenarios.loader import load_scenario

#: The small Python API: each name and the module it lives in. Imported on first use, so
#: that importing one of the packages under this root (`clusteremu.scenarios.errors`, say,
#: in a Ray worker) does not load the engine.
_API = {
    "Engine": "clusteremu.cluster.engine",
    "ScenarioResult": "clusteremu.cluster.runner",
    "run_spec": "clusteremu.cluster.runner",
    "with_policies": "clusteremu.cluster.runner",
    "ScenarioError": "clusteremu.scenarios.errors",
    "load_scenario": "clusteremu.scenarios.loader",
}
__all__ = [
    "Engine",
    "ScenarioError",
    "ScenarioResult",
    "load_scenario",
    "run_spec",
    "with_policies",
]


def __getattr__(name: str) -> Any:
    if name in _API:
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'clusteremu' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
