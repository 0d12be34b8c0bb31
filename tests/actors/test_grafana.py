"""Grafana provisioning, tested against a small local HTTP server that stands in for
Grafana (no Grafana server can be installed on the test machine)."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from clusteremu.actors.grafana import DASHBOARD_PATH, load_dashboard, provision, write_dashboard
from clusteremu.actors.metrics import METRIC_NAMES
from clusteremu.cli import main

pytest.importorskip("grafana_client")


class StandInGrafana(BaseHTTPRequestHandler):
    """Records every request and answers like Grafana's `POST /api/dashboards/db`."""

    requests: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.requests.append(
            {
                "method": "POST",
                "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": json.loads(body),
            }
        )
        reply = json.dumps(
            {
                "id": 7,
                "uid": "clusteremu",
                "url": "/d/clusteremu/clusteremu",
                "status": "success",
                "version": 1,
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def stand_in_grafana() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    StandInGrafana.requests = []
    server = HTTPServer(("127.0.0.1", 0), StandInGrafana)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", StandInGrafana.requests
    finally:
        server.shutdown()


def test_dashboard_charts_every_metric() -> None:
    text = DASHBOARD_PATH.read_text(encoding="utf-8")
    for name in METRIC_NAMES:
        assert f"ray_{name}" in text
    model = load_dashboard("Prom")
    assert model["uid"] == "clusteremu"
    assert {v["name"] for v in model["templating"]["list"]} == {"datasource", "run"}
    assert model["templating"]["list"][0]["current"]["value"] == "Prom"
    assert all(re.search(r"ray_clusteremu_\w+", p["targets"][0]["expr"]) for p in model["panels"])


def test_provision_against_stand_in_grafana_server(
    stand_in_grafana: tuple[str, list[dict[str, Any]]],
) -> None:
    """The exact request grafana-client sends: POST /api/dashboards/db, bearer token,
    the dashboard by uid (no numeric id), overwrite, the folder by uid."""
    url, requests = stand_in_grafana
    reply = provision(url, "glsa_test_token", folder_uid="ops")
    assert reply["uid"] == "clusteremu"
    assert len(requests) == 1
    request = requests[0]
    assert (request["method"], request["path"]) == ("POST", "/api/dashboards/db")
    assert request["headers"]["authorization"] == "Bearer glsa_test_token"
    assert request["headers"]["content-type"].startswith("application/json")
    body = request["body"]
    assert set(body) == {"dashboard", "overwrite", "message", "folderUid"}
    assert body["overwrite"] is True and body["folderUid"] == "ops"
    expected = load_dashboard()
    expected["id"] = None
    assert body["dashboard"] == expected


def test_dashboard_command_uses_environment_and_writes_files(
    stand_in_grafana: tuple[str, list[dict[str, Any]]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, requests = stand_in_grafana
    monkeypatch.setenv("GRAFANA_URL", url)
    monkeypatch.setenv("GRAFANA_TOKEN", "tok")
    assert main(["dashboard"]) == 0
    assert requests[-1]["headers"]["authorization"] == "Bearer tok"
    assert "provisioned dashboard clusteremu" in capsys.readouterr().out
    monkeypatch.delenv("GRAFANA_TOKEN")
    assert main(["dashboard"]) == 2  # a URL without a token is bad input
    assert main(["dashboard", "--out", str(tmp_path)]) == 0
    written = json.loads((tmp_path / "clusteremu_grafana_dashboard.json").read_text())
    assert written == load_dashboard()
    assert write_dashboard(tmp_path / "x.json").name == "x.json"
