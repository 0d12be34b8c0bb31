"""Compare policies on the same scenario and seeds: rows, a terminal table, a PNG chart."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from cluster.model import SimulationSpec
from cluster.runner import run_spec, with_policies


def compare_policies(
    spec: SimulationSpec,
    variants: list[dict[str, str]],
    progress: Callable[[float], None] | None = None,
) -> list[dict[str, Any]]:
    """Run every policy variant on the same seeds (common random numbers); one row each."""
    rows = []
    for i, variant in enumerate(variants):
        def report(done: float, i: int = i) -> None:
            if progress is not None:
                progress((i + done) / len(variants))

        result = run_spec(with_policies(spec, **variant), report)
        label = ",".join(f"{k}={v}" for k, v in variant.items())
        rows.append({"policy": label, "summary": result.summary})
    return rows


def table_text(rows: list[dict[str, Any]], metric: str) -> str:
    """A plain-text table: one line per policy with the metric and its 95% half-width."""
    width = max(len(r["policy"]) for r in rows)
    lines = [f"{'policy':<{width}}  {metric:>22}  {'ci95':>10}  {'jobs':>9}"]
    for r in rows:
        s = r["summary"]
        ci = s.get("ci95", {}).get(metric, float("nan"))
        lines.append(f"{r['policy']:<{width}}  {s.get(metric, float('nan')):>22.6g}  "
                     f"{ci:>10.3g}  {s['jobs_completed']:>9}")
    return "\n".join(lines)


def plot_comparison(rows: list[dict[str, Any]], spec: SimulationSpec, path: Path, metric: str) -> Path:
    """Bar chart of `metric` per policy with 95% confidence intervals (when replicated)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [r["policy"] for r in rows]
    values = [r["summary"].get(metric, float("nan")) for r in rows]
    errors = [r["summary"].get("ci95", {}).get(metric, 0.0) or 0.0 for r in rows]
    errors = [0.0 if e != e else e for e in errors]
    fig, ax = plt.subplots(figsize=(max(4.0, 1.6 * len(rows) + 2), 4.0))
    ax.bar(range(len(rows)), values, yerr=errors, capsize=6, color="#4c72b0")
    ax.set_xticks(range(len(rows)), labels, rotation=15, ha="right")
    ax.set_ylabel(metric)
    ax.set_title(f"{spec.name}: {spec.replications} replication(s), seed {spec.seed}"
                 + (", 95% CI" if spec.replications > 1 else ""))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
