"""Fixtures for every test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _no_plugin_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """`--plugin` names its modules in CLUSTEREMU_PLUGINS for worker processes; a command run
    in-process by one test must not hand its plug-ins to the processes of the next."""
    monkeypatch.delenv("CLUSTEREMU_PLUGINS", raising=False)
    yield


@pytest.fixture(scope="session", autouse=True)
def _ray_down_at_the_end() -> Iterator[None]:
    """The shared test Ray instance (`tests/actors/conftest.py: ray_local`) ends with the
    session."""
    yield
    import sys

    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()
