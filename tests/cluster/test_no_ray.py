"""Imports flow one way: `clusteremu.cluster` and `clusteremu.scenarios` never import Ray (or
the actor layer)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

BLOCK_AND_RUN = textwrap.dedent(
    """
    import importlib.abc, pkgutil, sys

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "ray" or name.startswith(
                ("clusteremu.actors", "clusteremu.tuners")
            ):
                raise ImportError(f"{name} is blocked in this test")
            return None

    sys.meta_path.insert(0, Block())
    from clusteremu import cluster, scenarios
    for package in (cluster, scenarios):
        for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            __import__(module.name)
    from clusteremu import load_scenario, run_spec
    spec = load_scenario("mm-c", ["stop.jobs=500", "stop.warmup_jobs=50"])
    print(run_spec(spec).summary["jobs_completed"])
    """
)


def test_cluster_and_scenarios_run_with_ray_blocked() -> None:
    done = subprocess.run(
        [sys.executable, "-c", BLOCK_AND_RUN], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "450"
