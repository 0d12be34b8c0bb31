"""`clusteremu dashboard`: provision the Grafana dashboard of the project's metrics.

With `GRAFANA_URL` and `GRAFANA_TOKEN` set (or `--url` / `--token`), the dashboard JSON
shipped in `monitoring/grafana-dashboard.json` is pushed to that Grafana through the
maintained `grafana-client` library (`pip install clusteremu[grafana]`). Otherwise it is
written into the folder Ray's own Grafana provisioning reads
(`<ray session>/metrics/grafana/dashboards/`, see `ray.init`'s `metrics` folder), or to
`--out`.
"""

from __future__ import annotations

import argparse
import os
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("dashboard", help="provision the clusteremu Grafana dashboard")
    p.add_argument("--url", help="Grafana base URL (default: $GRAFANA_URL)")
    p.add_argument("--token", help="Grafana service-account token (default: $GRAFANA_TOKEN)")
    p.add_argument("--folder", default=None, help="Grafana folder uid to put it in")
    p.add_argument(
        "--datasource",
        default="Prometheus",
        help="name of the Prometheus data source the panels query",
    )
    p.add_argument("--out", help="write the JSON here instead (a folder or a .json file)")
    p.set_defaults(func=cmd_dashboard)


def cmd_dashboard(args: argparse.Namespace) -> int:
    from actors.grafana import provision, ray_provisioning_dir, write_dashboard
    from clusteremu.cli import UsageError

    url = args.url or os.environ.get("GRAFANA_URL")
    token = args.token or os.environ.get("GRAFANA_TOKEN")
    if args.out:
        path = write_dashboard(args.out, args.datasource)
        print(f"wrote {path}")
        return 0
    if url:
        if not token:
            raise UsageError("GRAFANA_URL is set but GRAFANA_TOKEN (or --token) is not")
        result = provision(url, token, folder_uid=args.folder, datasource=args.datasource)
        where = f"{url.rstrip('/')}{result.get('url', '')}"
        print(f"provisioned dashboard {result.get('uid')} at {where}")
        return 0
    target = ray_provisioning_dir()
    if target is None:
        raise UsageError(
            "no GRAFANA_URL / GRAFANA_TOKEN and no Ray session on this machine: "
            "set them, start Ray (`ray start --head`), or pass --out"
        )
    path = write_dashboard(target, args.datasource)
    print(f"wrote {path} (Ray's Grafana provisioning folder)")
    return 0
