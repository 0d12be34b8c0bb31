"""`clusteremu dashboard`: provision the Grafana dashboard of the project's metrics.

With `GRAFANA_URL` and `GRAFANA_TOKEN` set (or `--url` / `--token`), the dashboard JSON
shipped in `monitoring/grafana-dashboard.json` is pushed to that Grafana through the
maintained `grafana-client` library (`pip install clusteremu[grafana]`); `--out` writes it
to a file or folder instead (for Ray's own Grafana provisioning, the session's
`metrics/grafana/dashboards/` folder). With neither it is refused: it is never written
into a Ray session the command did not start.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

#: The dashboard's file name in an output folder (what `clusteremu.actors.grafana.write_dashboard`
#: uses).
DASHBOARD_FILE = "clusteremu_grafana_dashboard.json"


def add_parser(sub: Any) -> None:
    p = sub.add_parser("dashboard", help="provision the clusteremu Grafana dashboard")
    p.add_argument("--url", help="Grafana base URL, http(s)://HOST[:PORT] (default: $GRAFANA_URL)")
    p.add_argument("--token", help="Grafana service-account token (default: $GRAFANA_TOKEN)")
    p.add_argument(
        "--folder", default=None, help="Grafana folder uid to put it in (default: General)"
    )
    p.add_argument(
        "--datasource",
        default="Prometheus",
        help="name of the Prometheus data source the panels query",
    )
    p.add_argument(
        "--out",
        metavar="PATH",
        help="write the JSON here instead (a folder, or a file ending in .json)",
    )
    p.set_defaults(func=cmd_dashboard)


def cmd_dashboard(args: argparse.Namespace) -> int:
    from clusteremu.cluster.errors import UsageError

    url = args.url or os.environ.get("GRAFANA_URL")
    token = args.token or os.environ.get("GRAFANA_TOKEN")
    if args.out:
        return _write_out(args.out, args.datasource)
    if url:
        if not token:
            raise UsageError("GRAFANA_URL is set but GRAFANA_TOKEN (or --token) is not")
        return _provision(url, token, args.folder, args.datasource)
    # Never into whichever Ray session is latest on the machine: it may be another
    # user's, or a run's that this command did not start.
    raise UsageError(
        "nowhere to put the dashboard: set GRAFANA_URL and GRAFANA_TOKEN (or --url and "
        "--token) to push it to Grafana, or give --out PATH (for Ray's own Grafana, --out "
        "<the Ray session folder>/metrics/grafana/dashboards)"
    )


def _write_out(out: str, datasource: str) -> int:
    """`--out`: a folder (the dashboard file goes in it, with the folder's manifest) or a
    path ending in .json (that one file, written atomically; it claims no folder)."""
    from clusteremu.actors.grafana import load_dashboard
    from clusteremu.cluster.errors import UsageError
    from clusteremu.cluster.io import OutputError, check_output_file, output_folder, write_json

    path = Path(out)
    try:
        if path.suffix == ".json":
            check_output_file(path, "dashboard")
            write_json(load_dashboard(datasource), path)
            print(f"wrote {path}")
            return 0
        with output_folder(path, "dashboard", [DASHBOARD_FILE], label="grafana") as stage:
            write_json(load_dashboard(datasource), stage / DASHBOARD_FILE)
    except OutputError as exc:
        raise UsageError(str(exc)) from None
    print(f"wrote {path / DASHBOARD_FILE}")
    return 0


def _provision(url: str, token: str, folder: str | None, datasource: str) -> int:
    """Push the dashboard to the Grafana at `url`; a clear error when it cannot."""
    from urllib.parse import urlparse

    from clusteremu.cli import UsageError, require_extra

    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise UsageError(f"--url {url!r}: expected http(s)://HOST[:PORT][/PATH]")
    require_extra("grafana_client", "grafana", "dashboard --url")
    from grafana_client.client import GrafanaException

    from clusteremu.actors.grafana import provision

    try:
        result = provision(url, token, folder_uid=folder, datasource=datasource)
    except OSError as exc:  # the HTTP client's connection errors (requests, niquests) too
        raise UsageError(
            f"cannot reach Grafana at {url} ({type(exc).__name__}); check --url / $GRAFANA_URL "
            "and that Grafana is running"
        ) from None
    except GrafanaException as exc:
        status = getattr(exc, "status_code", None)
        if status in (401, 403):
            why = (
                "the token was refused: expected a service-account token that may write dashboards"
            )
        elif status == 404:
            why = "no Grafana API there (or no such --folder)"
        else:
            why = f"{type(exc).__name__}"
        raise UsageError(
            f"Grafana at {url} did not take the dashboard (HTTP {status}): {why}"
        ) from None
    where = f"{url.rstrip('/')}{result.get('url', '')}"
    print(f"provisioned dashboard {result.get('uid')} at {where}")
    return 0
