"""The kernel and the scenario layer never import Ray (imports flow cluster <- actors)."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import sys
sys.modules["ray"] = None  # any `import ray` now raises ImportError
import clusteremu.cluster.engine, clusteremu.cluster.runner, clusteremu.cluster.metrics
import clusteremu.cluster.kernel, clusteremu.scenarios.loader
import clusteremu.cli
from clusteremu.cluster.policies import registry
for kind in registry.KINDS:
    for name in registry.names(kind):
        registry.policy_class(kind, name)
from clusteremu.scenarios.loader import load_scenario
from clusteremu.cluster.runner import run_spec
result = run_spec(load_scenario("mm-c", ["stop.jobs=200", "stop.warmup_jobs=10"]))
assert result.summary["jobs_completed"] == 190
assert not any(m == "ray" or m.startswith("ray.") for m in sys.modules if sys.modules[m])
print("ok")
"""


def test_cluster_and_scenarios_import_without_ray() -> None:
    done = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
