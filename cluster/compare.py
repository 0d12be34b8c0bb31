"""Compare policies on the same scenario and seeds: rows, a terminal table, a PNG chart;
and sweeps of one scenario field (`--grid`) that draw the WHAM paper's Section 7 figures
(normalised holding cost vs n with the mean-field lower bound, WHAM vs heuristics)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clusteremu.cluster.io import number_text
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.plotting import scale_axis
from clusteremu.cluster.runner import run_spec, with_policies


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


#: Scenario-selected and world-model metrics shown next to the charted one when present.
EXTRA_COLUMNS = ("score", "mean_setup_s")
#: A usage model's keys shown next to it when the runs have usages (requests against real
#: usage: docs/provisioner.md).
USAGE_COLUMNS = (
    "reserved_memory_gb_h",
    "reserved_cpu_core_h",
    "oom_kills",
    "wasted_core_s",
    "failed_jobs",
    "mean_run_makespan_s",
)


def table_text(rows: list[dict[str, Any]], metric: str) -> str:
    """A plain-text table: one line per policy with the metric and its 95% half-width, plus
    the scenario's selected metrics (`score`) and the mean set-up delay (s) when the runs
    report them, and with usages the reserved GB-h and core-h, OOM kills, wasted core-s,
    failed jobs and mean run makespan (s). A value without meaning (one replication's
    interval, a metric of a zero-length window) is `n/a`."""
    width = max(len(r["policy"]) for r in rows)
    shown = EXTRA_COLUMNS
    if any("reserved_memory_gb_h" in r["summary"] for r in rows):
        shown += USAGE_COLUMNS
    extra = [k for k in shown if k != metric and any(k in r["summary"] for r in rows)]
    head = f"{'policy':<{width}}  {metric:>22}  {'ci95':>10}  {'jobs':>9}"
    lines = [head + "".join(f"  {k:>{max(12, len(k))}}" for k in extra)]
    for r in rows:
        s = r["summary"]
        ci = s.get("ci95", {}).get(metric)
        lines.append(
            f"{r['policy']:<{width}}  {number_text(s.get(metric)):>22}  "
            f"{number_text(ci, '.3g'):>10}  {s['jobs_completed']:>9}"
            + "".join(f"  {number_text(s.get(k)):>{max(12, len(k))}}" for k in extra)
        )
    return "\n".join(lines)


def plot_comparison(
    rows: list[dict[str, Any]], spec: SimulationSpec, path: Path, metric: str
) -> Path:
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
    scale_axis(ax, values)  # a log axis when the bars span more than 10x
    ax.set_xticks(range(len(rows)), labels, rotation=15, ha="right")
    ax.set_ylabel(metric)
    ax.set_title(
        f"{spec.name}: {spec.replications} replication(s), seed {spec.seed}"
        + (", 95% CI" if spec.replications > 1 else "")
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# --- sweeps over one scenario field (the WHAM paper, Section 7) ----------------------------

#: Policies whose curves go on the convergence figure (a); all others go on figure (b).
OPTIMAL_POLICIES = ("wham", "fw-cam")


def total_cores(spec: SimulationSpec) -> float:
    """n: the cores of every pool plus every node (the WHAM paper's normalisation of the cost)."""
    return float(sum(p.cores for p in spec.pools) + sum(spec.node_type(t).cpu for t in spec.nodes))


def short_label(variant: dict[str, str]) -> str:
    """'allocator=wham' -> 'wham'; several kinds keep the kind=name form."""
    if len(variant) == 1:
        return next(iter(variant.values()))
    return ",".join(f"{k}={v}" for k, v in variant.items())


def compare_grid(
    load: Callable[[str], SimulationSpec],
    values: list[str],
    variants: list[dict[str, str]],
    progress: Callable[[float], None] | None = None,
) -> list[dict[str, Any]]:
    """Run every policy variant at every grid value (common random numbers at each value).

    `load(value)` builds the scenario for one grid value. One record per (value, policy):
    the grid value, n (`total_cores`), the mean-field lower bound (NaN where it does not
    apply), the normalised holding cost holding_cost_rate / n with its 95% half-width
    (over replications), and the full summary.
    """
    from clusteremu.cluster.policies.relaxed_bound import BoundError, scenario_bound

    records: list[dict[str, Any]] = []
    for g, value in enumerate(values):
        spec = load(value)
        n = total_cores(spec)
        try:
            bound = scenario_bound(spec).lower_bound
        except BoundError:
            bound = float("nan")

        def report(done: float, g: int = g) -> None:
            if progress is not None:
                progress((g + done) / len(values))

        for variant, row in zip(variants, compare_policies(spec, variants, report), strict=True):
            summary = row["summary"]
            ci = summary.get("ci95", {}).get("holding_cost_rate", float("nan"))
            records.append(
                {
                    "grid": value,
                    "cores": n,
                    "policy": short_label(variant),
                    "normalised_holding_cost": summary["holding_cost_rate"] / n,
                    "ci95": ci / n,
                    "lower_bound": bound,
                    "replications": spec.replications,
                    "summary": summary,
                }
            )
    return records


def grid_table_text(records: list[dict[str, Any]]) -> str:
    """One line per grid value: the bound and each policy's cost +- 95% half-width, gap %."""
    policies = list(dict.fromkeys(r["policy"] for r in records))
    values = list(dict.fromkeys(r["grid"] for r in records))
    head = f"{'n':>8}  {'bound':>8}  " + "  ".join(f"{p:>24}" for p in policies)
    lines = [head + "   (normalised holding cost ± 95% CI  [gap to bound])"]
    for value in values:
        rows = {r["policy"]: r for r in records if r["grid"] == value}
        first = next(iter(rows.values()))
        bound = first["lower_bound"]
        cells = []
        for p in policies:
            r = rows[p]
            gap = (
                100.0 * (r["normalised_holding_cost"] / bound - 1.0) if bound == bound else math.nan
            )
            ci = r["ci95"]
            ci_text = f"±{ci:.4f}" if ci == ci else "±  n/a "
            gap_text = f"{gap:+5.1f}%" if gap == gap else "  n/a "
            cost = number_text(r["normalised_holding_cost"], ".4f")
            cells.append(f"{cost}{ci_text} [{gap_text}]")
        lines.append(
            f"{first['cores']:>8g}  {number_text(bound, '.5f'):>8}  "
            + "  ".join(f"{c:>24}" for c in cells)
        )
    return "\n".join(lines)


def plot_grid(records: list[dict[str, Any]], title: str, out_dir: Path) -> list[Path]:
    """The two figures of the WHAM paper's Section 7 as PNGs.

    (a) `convergence.png`: WHAM and FW-CAM (and any other policy in OPTIMAL_POLICIES) vs n,
    with the mean-field lower bound; (b) `heuristics.png`: WHAM vs every other policy
    (EQUI, GREEDY, ...). Error bars are 95% confidence intervals over replications.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    policies = list(dict.fromkeys(r["policy"] for r in records))
    optimal = [p for p in policies if p in OPTIMAL_POLICIES]
    others = [p for p in policies if p not in OPTIMAL_POLICIES]
    figures = [
        ("convergence.png", optimal or policies, "(a) convergence to the lower bound"),
        (
            "heuristics.png",
            [p for p in ("wham",) if p in policies] + others,
            "(b) WHAM against heuristics",
        ),
    ]
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, shown, subtitle in figures:
        fig, ax = plt.subplots(figsize=(6.4, 4.4))
        for p in shown:
            rows = [r for r in records if r["policy"] == p]
            x = [r["cores"] for r in rows]
            y = [r["normalised_holding_cost"] for r in rows]
            err = [0.0 if r["ci95"] != r["ci95"] else r["ci95"] for r in rows]
            ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=p)
        bound_rows = [r for r in records if r["policy"] == policies[0]]
        if any(r["lower_bound"] == r["lower_bound"] for r in bound_rows):
            ax.plot(
                [r["cores"] for r in bound_rows],
                [r["lower_bound"] for r in bound_rows],
                "k--",
                label="lower bound (3)",
            )
        ax.set_xscale("log", base=2)
        shown_y = [r["normalised_holding_cost"] for r in records if r["policy"] in shown]
        if shown_y and min(shown_y) > 0 and max(shown_y) > 4 * min(shown_y):
            ax.set_yscale("log")  # FW-CAM far from the bound at small n would flatten the rest
        else:
            scale_axis(ax, shown_y)  # wide with zeros among them: symlog
        ax.set_xlabel("n (cores)")
        ax.set_ylabel("normalised holding cost (1/n) Σ c_i λ_i E[T_i]")
        ax.set_title(f"{title}: {subtitle}")
        ax.legend()
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        path = out_dir / name
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    return paths
