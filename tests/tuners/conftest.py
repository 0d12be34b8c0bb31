"""The Ray fixture of the actor tests, shared with the sweep tests."""

from tests.actors.conftest import ray_local  # noqa: F401
