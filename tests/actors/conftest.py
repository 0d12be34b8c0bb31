"""A private Ray instance (2 CPUs, no dashboard, loopback only) for the modules that ask
for it: started by the first, kept for the next (a start costs seconds), shut down at the
end of the session (`tests/conftest.py`) or by a module that needs its own cluster
(`test_multinode.py`), after which the next module starts a fresh one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.actors.helpers import auth_disabled

ray = pytest.importorskip("ray")

from clusteremu.actors.launch import LOCAL_SYSTEM_CONFIG  # noqa: E402


@pytest.fixture(scope="module")
def ray_local() -> Iterator[None]:
    with auth_disabled():  # see helpers.auth_disabled: Ray's token auth, off on purpose
        if not ray.is_initialized():
            # "local": never the cluster a machine-wide ray_current_cluster names
            ray.init(
                "local",
                num_cpus=2,
                include_dashboard=False,
                log_to_driver=False,
                _system_config=LOCAL_SYSTEM_CONFIG,  # workers may start slowly under load
            )
        yield
