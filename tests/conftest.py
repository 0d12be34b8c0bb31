"""Fixtures for every test."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# Property tests judge what they draw, never how fast: no per-example deadline and no
# "too slow" health check (a machine ten times slower, or both cores busy, must pass).
settings.register_profile("clusteremu", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("clusteremu")

# Local Ray instances the suite's commands start (`--ray`, sweeps, tuners, the docs' commands)
# come up without their dashboard: about 3 s of CPU less each. The tests of the dashboard
# itself (tests/actors/test_launch.py, test_local_ray.py) turn it back on.
os.environ.setdefault("CLUSTEREMU_DASHBOARD", "0")


@pytest.fixture(autouse=True)
def _no_plugin_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """`--plugin` names its modules in CLUSTEREMU_PLUGINS for worker processes; a command run
    in-process by one test must not hand its plug-ins to the processes of the next: the
    variable is gone before each test and after it (a command run in-process sets it
    outside the monkeypatch, and a module's fixtures start worker processes before the
    next test's own set-up)."""
    monkeypatch.delenv("CLUSTEREMU_PLUGINS", raising=False)
    yield
    os.environ.pop("CLUSTEREMU_PLUGINS", None)


@pytest.fixture(scope="session", autouse=True)
def _ray_down_at_the_end() -> Iterator[None]:
    """The shared test Ray instance (`tests/actors/conftest.py: ray_local`) ends with the
    session."""
    yield
    import sys

    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


# --- the tally of bad inputs tried by the hardening tests (tests/clusteremu/badinput.py) ---
# With two workers (pytest-xdist) each worker counts its own; they send their counts to the
# controller, which prints the sum.


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker
        from tests.clusteremu.badinput import TALLY

        workeroutput["bad_input_tally"] = [[f, k, n] for (f, k), n in TALLY.items()]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    from tests.clusteremu.badinput import TALLY

    for family, kind, count in getattr(node, "workeroutput", {}).get("bad_input_tally", []):
        TALLY[(family, kind)] += count


def pytest_terminal_summary(terminalreporter: Any) -> None:
    from tests.clusteremu.badinput import TALLY

    if not TALLY:
        return
    terminalreporter.section("bad inputs tried (all: exit 2, one error line, no traceback)")
    families = sorted({family for family, _ in TALLY})
    for family in families:
        kinds = {k: n for (f, k), n in TALLY.items() if f == family}
        detail = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
        terminalreporter.write_line(f"{family:<10} {sum(kinds.values()):>4}  ({detail})")
    terminalreporter.write_line(f"{'total':<10} {sum(TALLY.values()):>4}")
