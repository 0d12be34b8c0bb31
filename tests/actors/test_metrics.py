"""Live metrics: Ray's metrics endpoint and a real Prometheus server scraping it
(issue 3 acceptance, "Metrics")."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusteremu.actors.coordinator import RayRunOptions
from clusteremu.actors.launch import run_on_ray
from clusteremu.actors.metrics import METRIC_NAMES
from clusteremu.scenarios.loader import load_scenario

ray = pytest.importorskip("ray")
pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_local")]

#: M/M/10 at load 0.8, paced at 12x the wall clock: up to 250 s of wall time, long enough
#: for a loaded machine to start Ray's metrics agent; the fixture ends it once the tests
#: are done, so an idle machine does not wait for it.
SPEC = ["stop.jobs=24000", "stop.warmup_jobs=10"]
RUN = "metrics-test"


def metrics_url() -> str:
    node = next(n for n in ray.nodes() if n["Alive"])
    return f"http://127.0.0.1:{node['MetricsExportPort']}/metrics"


def scrape(url: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Parse Prometheus text: name -> [(labels, value)] for clusteremu series."""
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for line in text.splitlines():
        m = re.match(r"^(ray_clusteremu_\w+)\{(.*)\} (\S+)$", line)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
            out.setdefault(m.group(1), []).append((labels, float(m.group(3))))
    return out


@pytest.fixture(scope="module")
def live_run() -> Iterator[dict[str, object]]:
    """A real-time run in a background thread, named `metrics-test`."""
    spec = load_scenario("mm-c", SPEC)
    state: dict[str, object] = {}

    def target() -> None:
        try:
            state["result"] = run_on_ray(
                spec, RayRunOptions(window_s=1.0, realtime=12.0, run_name=RUN)
            )
        except Exception as exc:  # ended by the teardown below
            state["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    state["thread"] = thread
    yield state
    # End the run: kill its arrival actor, so the coordinator's next call fails and the
    # run's clean-up (every actor of the run) runs; then wait for that to finish.
    with contextlib.suppress(ValueError):  # ValueError: the run had already ended
        ray.kill(ray.get_actor(f"clusteremu/{RUN}/arrivals"))
    thread.join(timeout=600)
    assert not thread.is_alive(), "the run did not end after its arrival actor was killed"


def test_ray_endpoint_serves_the_project_metrics_during_a_run(live_run: dict[str, object]) -> None:
    url = metrics_url()
    # A safety net, not what decides: the series appear after about 10 s on an idle 2-core
    # machine. 180 s is within the run's paced 250 s, so the run is still alive here.
    deadline = time.monotonic() + 180
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    want = {f"ray_{n}" for n in METRIC_NAMES if "sweep" not in n}
    while time.monotonic() < deadline and not want <= set(found):
        time.sleep(1.0)
        found = {
            k: [(lab, v) for lab, v in rows if lab.get("run") == RUN]
            for k, rows in scrape(url).items()
        }
        found = {k: v for k, v in found.items() if v}
    thread = live_run["thread"]
    assert thread.is_alive(), "the run ended before its metrics were seen"  # type: ignore[attr-defined]
    assert want <= set(found), f"missing {want - set(found)}"
    in_system = {lab["job_class"]: v for lab, v in found["ray_clusteremu_jobs_in_system"]}
    assert set(in_system) == {"a"} and 0 <= in_system["a"] <= 24000
    util = {lab["resource"]: v for lab, v in found["ray_clusteremu_utilization"]}
    assert set(util) == {"core"} and 0.0 <= util["core"] <= 1.0
    sim_time = found["ray_clusteremu_simulated_time_s"][0][1]
    assert 0 < sim_time < 4000  # 24,000 jobs at 8 per second
    assert found["ray_clusteremu_cost_usd"][0][1] == 0.0  # the scenario's nodes are free
    assert found["ray_clusteremu_slo_violations"][0][1] == 0.0
    assert 0 < found["ray_clusteremu_jobs_completed"][0][1] <= 24000
    assert found["ray_clusteremu_decisions_per_second"][0][1] >= 0.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.skipif(
    shutil.which("prometheus") is None,
    reason="Debian's prometheus package is not installed (.ci/run installs it)",
)
def test_prometheus_scrapes_ray_and_answers_queries(
    live_run: dict[str, object], tmp_path: Path
) -> None:
    """A real Prometheus on loopback scrapes Ray's endpoint; its HTTP API returns the
    project's gauge for this run."""
    target = metrics_url().split("//")[1].split("/")[0]
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        f"  - job_name: ray\n    static_configs: [{{targets: ['{target}']}}]\n"
    )
    port = _free_port()
    proc = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        query = urllib.parse.urlencode(
            {"query": 'ray_clusteremu_simulated_time_s{run="metrics-test"}'}
        )
        api = f"http://127.0.0.1:{port}/api/v1/query?{query}"
        deadline = time.monotonic() + 90
        result: list[dict[str, object]] = []
        while time.monotonic() < deadline and not result:
            time.sleep(1.0)
            try:
                reply = json.loads(urllib.request.urlopen(api, timeout=5).read())
            except OSError:
                continue
            assert reply["status"] == "success"
            result = reply["data"]["result"]
        assert result, "Prometheus never returned the project's metric"
        labels = result[0]["metric"]
        value = float(result[0]["value"][1])  # type: ignore[index]
        assert labels["run"] == "metrics-test"  # type: ignore[index]
        assert 0 < value < 4000
    finally:
        proc.terminate()
        proc.wait(timeout=30)
