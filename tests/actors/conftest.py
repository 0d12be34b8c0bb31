"""A private Ray instance per test module (2 CPUs, no dashboard, loopback only)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.actors.helpers import auth_disabled

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def ray_local() -> Iterator[None]:
    if ray.is_initialized():
        ray.shutdown()
    with auth_disabled():  # see helpers.auth_disabled: Ray's token auth, off on purpose
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        try:
            yield
        finally:
            ray.shutdown()
