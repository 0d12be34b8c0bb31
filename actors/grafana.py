"""The Grafana dashboard of the project's metrics, and how it gets to a Grafana server.

The dashboard (`monitoring/grafana-dashboard.json`, uid `clusteremu`) charts the gauges of
`clusteremu.actors.metrics` as Ray exports them to Prometheus (`ray_clusteremu_*`). `provision`
pushes it with the maintained `grafana-client` library (`POST /api/dashboards/db`, by
uid, overwrite); the older `grafana-api` package is unmaintained since 2020 and relies on
id-based endpoints that recent Grafana versions disable. Without a Grafana URL the JSON
is written where `clusteremu dashboard --out` says (never into a Ray session's folder
unasked: the latest session on a machine may be another user's).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

#: The dashboard shipped in the repository.
DASHBOARD_PATH = Path(__file__).resolve().parents[1] / "monitoring" / "grafana-dashboard.json"
DASHBOARD_UID = "clusteremu"


def load_dashboard(datasource: str = "Prometheus") -> dict[str, Any]:
    """The dashboard model, its data-source variable defaulting to `datasource`."""
    model: dict[str, Any] = json.loads(DASHBOARD_PATH.read_text(encoding="utf-8"))
    model = copy.deepcopy(model)
    for var in model.get("templating", {}).get("list", []):
        if var.get("name") == "datasource":
            var["current"] = {"text": datasource, "value": datasource}
    return model


def provision(
    url: str,
    token: str,
    folder_uid: str | None = None,
    datasource: str = "Prometheus",
    timeout_s: float = 10.0,
) -> dict[str, Any]:
    """Create or replace the dashboard on the Grafana at `url` (service-account token).

    Returns Grafana's reply (`uid`, `url`, `version`, `status`).
    """
    from grafana_client import GrafanaApi  # the `grafana` extra

    api = GrafanaApi.from_url(url, credential=token, timeout=timeout_s)
    dashboard = load_dashboard(datasource)
    dashboard["id"] = None  # matched by uid, never by numeric id
    payload: dict[str, Any] = {
        "dashboard": dashboard,
        "overwrite": True,
        "message": "provisioned by clusteremu dashboard",
    }
    if folder_uid:
        payload["folderUid"] = folder_uid
    reply: dict[str, Any] = api.dashboard.update_dashboard(payload)
    return reply


def write_dashboard(target: str | Path, datasource: str = "Prometheus") -> Path:
    """Write the dashboard JSON to `target` (a folder, or a path ending in .json)."""
    path = Path(target)
    if path.suffix != ".json":
        path = path / "clusteremu_grafana_dashboard.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(load_dashboard(datasource), indent=2) + "\n", encoding="utf-8")
    return path
