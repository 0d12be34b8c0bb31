"""Multi-node: shard actors pinned to emulated machines give the one-node results
(issue 3 acceptance, "Multi-node")."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from clusteremu.actors.coordinator import RayRunOptions
from clusteremu.actors.launch import LOCAL_SYSTEM_CONFIG, run_on_ray
from clusteremu.cluster.runner import run_spec
from clusteremu.scenarios.loader import load_scenario
from tests.actors.helpers import assert_same_jobs, auth_disabled

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.ray

#: Short: the check is that pinned shards give the one-node table, window by window.
OVERRIDES = ["stop.time_s=50", "stop.warmup_s=5"]
PINNED = RayRunOptions(
    shards=2,
    window_s=1.0,
    run_name="pinned",
    shard_resources=({"machine-a": 1.0}, {"machine-b": 1.0}),
)


@pytest.fixture(scope="module")
def one_node_tables() -> Iterator[dict[str, object]]:
    """Results on a one-node Ray instance (windowed, 2 shards; exact, 2 shards)."""
    if ray.is_initialized():
        ray.shutdown()
    spec = load_scenario("hetero-placement", OVERRIDES)
    with auth_disabled():
        ray.init(
            "local",
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            _system_config=LOCAL_SYSTEM_CONFIG,
        )
        try:
            tables = {"windowed": run_on_ray(spec, RayRunOptions(shards=2, window_s=1.0)).jobs}
        finally:
            ray.shutdown()
    yield tables


def test_pinned_shards_on_three_nodes_match_one_node(
    one_node_tables: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ray.cluster_utils import Cluster
    from ray.util.state import list_actors

    # The cluster is private to this test: Ray's test cluster would write its address to
    # the machine-wide <ray temp dir>/ray_current_cluster (which every `ray.init()` without
    # an address on the machine then joins) and delete that file, whoever wrote it, at
    # shutdown; and it would insist on the default dashboard port, which another instance
    # may hold ("dashboard_port": None lets Ray pick a free one).
    monkeypatch.setattr(ray._private.utils, "write_ray_address", lambda *args, **kwargs: None)
    monkeypatch.setattr(ray._common.utils, "reset_ray_address", lambda *args, **kwargs: None)
    spec = load_scenario("hetero-placement", OVERRIDES)
    with auth_disabled():
        cluster = Cluster(
            initialize_head=True, head_node_args={"num_cpus": 1, "dashboard_port": None}
        )
        try:
            node_a = cluster.add_node(num_cpus=1, resources={"machine-a": 4})
            node_b = cluster.add_node(num_cpus=1, resources={"machine-b": 4})
            cluster.connect()
            cluster.wait_for_nodes()
            assert len([n for n in ray.nodes() if n["Alive"]]) == 3

            seen: dict[str, str] = {}
            result = run_on_ray(spec, PINNED)
            assert_same_jobs(one_node_tables["windowed"], result.jobs)  # type: ignore[arg-type]

            # Actor names and placement, from Ray's state API (what the dashboard shows).
            actors = list_actors(
                cluster.address, filters=[("state", "=", "DEAD")], limit=1000, detail=True
            )
            for actor in actors:
                name = actor.name or ""
                if name.startswith("clusteremu/pinned/node-shard-"):
                    seen[name] = actor.node_id
            assert seen["clusteremu/pinned/node-shard-0"] == node_a.node_id
            assert seen["clusteremu/pinned/node-shard-1"] == node_b.node_id

            exact = run_on_ray(
                spec,
                RayRunOptions(shards=2, shard_resources=({"machine-a": 1.0}, {"machine-b": 1.0})),
            )
            assert_same_jobs(run_spec(spec).jobs, exact.jobs)
        finally:
            ray.shutdown()
            cluster.shutdown()
