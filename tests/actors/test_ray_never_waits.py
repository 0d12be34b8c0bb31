"""`run --ray` never waits for ever (issue 28): resources no node of the cluster has, an
`--address auto` that finds a stale address and a `--dashboard-host` this machine cannot
listen on are refused with one line, before any actor is submitted or Ray is started."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray

from clusteremu.actors import launch
from clusteremu.actors.launch import check_reachable, check_resources, resolve_auto
from clusteremu.cluster.errors import UsageError
from tests.clusteremu.badinput import refused

pytestmark = pytest.mark.ray

SHORT = ["--set", "stop.jobs=400", "--set", "stop.warmup_jobs=20", "--json"]


def _closed_port() -> int:
    """A loopback port where nothing listens (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def ray_not_started(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process looks as if Ray were not running, and starting it fails the test:
    whatever `ensure_ray` refuses, it refuses before `ray.init`."""

    def init(*args: object, **kwargs: object) -> None:
        raise AssertionError("ray.init was called")

    monkeypatch.setattr(launch.ray, "is_initialized", lambda: False)
    monkeypatch.setattr(launch.ray, "init", init)
    yield


def test_resources_are_checked_node_by_node_and_in_total() -> None:
    nodes = [{"CPU": 2.0, "memory": 1e9, "node:127.0.0.1": 1.0}, {"CPU": 4.0, "rack7": 1.0}]
    check_resources([{"CPU": 4.0, "rack7": 1.0}, {"CPU": 2.0}], nodes, "--shard-*")
    with pytest.raises(UsageError, match="no node of the Ray cluster has that much"):
        check_resources([{"CPU": 1.0, "rack8": 1.0}], nodes, "--shard-*")
    with pytest.raises(UsageError, match=r"needs CPU=5 but no node"):
        check_resources([{"CPU": 5.0}], nodes, "--shard-*")
    with pytest.raises(UsageError, match="together need CPU=7, more than the Ray cluster has"):
        check_resources([{"CPU": 4.0}, {"CPU": 2.0}, {"CPU": 1.0}], nodes, "--shard-*")
    check_resources([{"CPU": 0.0}] * 50, nodes, "--shard-*")  # actors that reserve nothing


@pytest.mark.usefixtures("ray_local")
@pytest.mark.parametrize(
    ("options", "expect"),
    [
        (["--shard-resources", "rack7=1"], "an actor needs rack7=1 but no node"),
        (["--shard-cpus", "1000"], "needs CPU=1000 but no node"),
        (["--window", "1", "--shards", "2", "--shard-cpus", "1.5"], "together need CPU=3"),
    ],
    ids=["custom-resource", "cpus", "shards-together"],
)
def test_resources_no_node_can_give_are_refused_before_submitting(
    options: list[str], expect: str
) -> None:
    """The test instance has 2 CPUs and no custom resource: Ray would keep these actors
    pending for ever. (No more shards than the machine has CPUs: that would add a
    warning line.)"""
    began = time.monotonic()
    refused(["run", "mm-c", "--ray", *options, *SHORT], "run", "ray resources", expect)
    assert time.monotonic() - began < 30
    assert not [a for a in ray.util.list_named_actors() if a.startswith("clusteremu/")]


@pytest.mark.parametrize(
    ("options", "expect"),
    [
        (["--shard-resources", "rack7=1"], "an actor needs rack7=1 but no node"),
        (["--shard-cpus", "1000"], "needs CPU=1000 but no node"),
    ],
    ids=["custom-resource", "cpus"],
)
def test_a_local_run_refuses_what_no_actor_can_get_before_ray_starts(
    options: list[str], expect: str, ray_not_started: None
) -> None:
    """A local instance offers this machine's CPUs and no custom resource: an actor asking
    for more is refused before Ray starts (starting it would fail the test)."""
    refused(["run", "mm-c", "--ray", *options, *SHORT], "run", "ray resources", expect)


@pytest.fixture
def private_ray_temp_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Ray's temp dir (where `ray start` records the machine's current cluster in
    `ray_current_cluster`) is a private folder, and Ray keeps 127.0.0.1 as it is (as in
    local-only mode) where it would put the machine's address for it: nothing
    machine-wide is read or written, and a dead address is a closed port on loopback.
    Ray's scan for running GCS processes is made to find none (a stand-in): with `auto`,
    one running instance (another test's, in the other xdist worker) would win over the
    recorded address."""
    from ray._private import services

    monkeypatch.setattr(services, "find_gcs_addresses", lambda: set())
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(services, "get_node_ip_address", lambda address=None: "127.0.0.1")
    (tmp_path / "ray").mkdir()
    return tmp_path / "ray"


@pytest.mark.parametrize("where", ["RAY_ADDRESS", "ray_current_cluster"])
def test_auto_address_that_is_stale_is_given_up_on(
    where: str,
    monkeypatch: pytest.MonkeyPatch,
    private_ray_temp_dir: Path,
    ray_not_started: None,
) -> None:
    """`--address auto` finds what Ray finds ($RAY_ADDRESS, else the cluster `ray start`
    last recorded): a cluster that is gone is refused as fast as the same address given
    explicitly."""
    stale = f"127.0.0.1:{_closed_port()}"
    if where == "RAY_ADDRESS":
        monkeypatch.setenv("RAY_ADDRESS", stale)
    else:
        (private_ray_temp_dir / "ray_current_cluster").write_text(stale)
    assert resolve_auto() == stale
    with pytest.raises(ConnectionError, match=f"nothing answers at {stale}"):
        check_reachable("auto", timeout_s=2)
    began = time.monotonic()
    line = refused(["run", "mm-c", "--ray", "--address", "auto", *SHORT], "run", "ray address")
    assert f"--address auto: no Ray cluster to join (nothing answers at {stale}" in line
    assert time.monotonic() - began < launch.CONNECT_TIMEOUT_S + 5


class _Stop(Exception):
    """Raised by the stand-in `ray.init` once it has seen its arguments."""


@pytest.mark.parametrize("where", ["RAY_ADDRESS", "ray_current_cluster"])
def test_a_local_run_never_joins_a_cluster_recorded_elsewhere(
    where: str, monkeypatch: pytest.MonkeyPatch, private_ray_temp_dir: Path
) -> None:
    """Without `--address` the command starts its own instance, whatever $RAY_ADDRESS or
    the last `ray start` recorded (another user's cluster, or one since gone: `ray.init`
    would join it, then refuse `num_cpus`). The address `ray.init` is given is resolved
    as `ray.init` resolves it: None means a new local instance."""
    from ray._private import services

    stale = f"127.0.0.1:{_closed_port()}"
    if where == "RAY_ADDRESS":
        monkeypatch.setenv("RAY_ADDRESS", stale)
    else:
        (private_ray_temp_dir / "ray_current_cluster").write_text(stale)
    assert services.canonicalize_bootstrap_address(None) == stale  # what Ray would join
    seen: dict[str, object] = {}

    def init(address: str | None = None, **kwargs: object) -> None:
        seen["joins"] = services.canonicalize_bootstrap_address(address)
        raise _Stop

    monkeypatch.setattr(launch.ray, "is_initialized", lambda: False)
    monkeypatch.setattr(launch.ray, "init", init)
    with pytest.raises(_Stop):
        launch.ensure_ray(None, num_cpus=1)
    assert seen == {"joins": None}


@pytest.mark.parametrize("host", ["10.255.255.1", "no-such-host.invalid"])
def test_dashboard_host_that_cannot_be_bound_is_refused_before_ray_starts(
    host: str, ray_not_started: None
) -> None:
    """Ray would retry for a minute, then fail with `Failed to find a valid port`."""
    began = time.monotonic()
    refused(
        ["run", "mm-c", "--ray", "--dashboard-host", host, *SHORT],
        "run",
        "ray dashboard host",
        f"--dashboard-host {host}: this machine cannot listen there",
    )
    assert time.monotonic() - began < 10
