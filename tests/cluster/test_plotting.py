"""Every chart's value axis is logarithmic when what it plots spans more than 10x (issue "A
newcomer's first hour": the Pennyworth compare chart's $0.04 and $0.88 bars were invisible
on a linear axis to $62). Each plot helper of the package is drawn with wide and narrow
values and its saved figure's axis scales are read back."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
from matplotlib.figure import Figure

from clusteremu.cluster.plotting import is_wide, scale_axis

WIDE = [62.0, 0.04, 0.88]
NARROW = [6.2, 4.0, 8.8]


def test_is_wide_reads_the_positive_finite_values() -> None:
    assert is_wide(WIDE) and not is_wide(NARROW)
    assert not is_wide([1.0, 10.0])  # exactly 10x is not more than 10x
    assert is_wide([1.0, 10.01])
    assert not is_wide([]) and not is_wide([5.0]) and not is_wide([0.0, -100.0, 5.0])
    assert not is_wide([float("nan"), float("inf"), 3.0, None, "x"])
    assert is_wide([0.0, 0.5, 50.0])


def test_scale_axis_sets_log_or_symlog_only_when_wide() -> None:
    fig = Figure()
    a, b, c = (fig.add_subplot(1, 3, i) for i in (1, 2, 3))
    assert scale_axis(a, WIDE) == "log" and a.get_yscale() == "log"
    assert scale_axis(b, [-3.0, 0.0, 0.5, 12.0]) == "symlog" and b.get_yscale() == "symlog"
    assert scale_axis(c, NARROW) == "linear" and c.get_yscale() == "linear"
    assert scale_axis(c, WIDE, axis="x") == "log" and c.get_xscale() == "log"


@pytest.fixture
def saved(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The y scales of each figure saved (one list per figure, one entry per axes)."""
    scales: list[list[str]] = []
    original = Figure.savefig

    def savefig(self: Figure, *args: Any, **kwargs: Any) -> None:
        scales.append([ax.get_yscale() for ax in self.axes])
        original(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    return scales


@pytest.mark.parametrize(("values", "scale"), [(WIDE, "log"), (NARROW, "linear")])
def test_compare_chart(
    values: list[float], scale: str, saved: list[list[str]], tmp_path: Path
) -> None:
    from clusteremu.cluster.compare import plot_comparison

    rows = [{"policy": f"p{i}", "summary": {"cost_usd": v}} for i, v in enumerate(values)]
    spec = SimpleNamespace(name="pennyworth-max", replications=1, seed=1)
    plot_comparison(rows, spec, tmp_path / "compare.png", metric="cost_usd")  # type: ignore[arg-type]
    assert saved == [[scale]] and (tmp_path / "compare.png").stat().st_size > 0


def test_compare_grid_chart_with_a_zero_cost(saved: list[list[str]], tmp_path: Path) -> None:
    from clusteremu.cluster.compare import plot_grid

    records = [
        {"grid": str(n), "cores": n, "policy": p, "normalised_holding_cost": y, "ci95": 0.0,
         "lower_bound": float("nan")}
        for n, ys in ((4, (0.0, 30.0)), (8, (0.2, 20.0)))
        for p, y in zip(("equi", "greedy"), ys, strict=True)
    ]  # fmt: skip
    plot_grid(records, "t", tmp_path)
    assert saved == [["symlog"], ["symlog"]]


class _Tuned:
    def __init__(self, improvements: list[float]) -> None:
        self.imp = np.asarray(improvements)

    def improvements(self) -> np.ndarray:
        return self.imp

    def summary(self) -> dict[str, float]:
        return {"mean_improvement_over_fixed": float(self.imp.mean()), "ci95": float("nan")}


@pytest.mark.parametrize(
    ("tuned", "scales"),
    [
        ({"tpe": [0.001, 0.12], "random": [0.002, 0.002]}, ["log", "log"]),
        ({"tpe": [0.05, 0.06], "random": [0.04, 0.05]}, ["linear", "linear"]),
        ({"tpe": [-0.01, 0.004, 0.2]}, ["symlog", "linear"]),
    ],
)
def test_tune_chart(
    tuned: dict[str, list[float]], scales: list[str], saved: list[list[str]], tmp_path: Path
) -> None:
    from clusteremu.commands.tune import _plot

    _plot({t: _Tuned(v) for t, v in tuned.items()}, tmp_path / "tune.png")
    assert saved == [scales]


class _Replay:
    def __init__(self, top: float) -> None:
        self.top = top

    def curve(self) -> np.ndarray:
        return np.linspace(self.top / 100, self.top, 131)


@pytest.mark.parametrize(("top", "scale"), [(50.0, "log"), (0.0, "linear")])
def test_gpu_frag_chart(top: float, scale: str, saved: list[list[str]], tmp_path: Path) -> None:
    from clusteremu.commands.gpu_frag import _plot

    _plot({"fgd": [_Replay(top)], "best-fit": [_Replay(top)]}, tmp_path / "gpu-frag.png")
    assert saved == [[scale]]


def test_provision_chart(saved: list[list[str]], tmp_path: Path) -> None:
    from clusteremu.commands.provision import _plot

    rows = [
        {"provisioner": "static", "reserved_memory_gb_h": 900.0, "used_memory_gb_h": 40.0,
         "reserved_cpu_core_h": 30.0, "used_cpu_core_h": 20.0, "failed_jobs": 0},
        {"provisioner": "vpa", "reserved_memory_gb_h": 80.0, "used_memory_gb_h": 40.0,
         "reserved_cpu_core_h": 25.0, "used_cpu_core_h": 20.0, "failed_jobs": 2},
    ]  # fmt: skip
    _plot(rows, tmp_path / "provision-compare.png", "ml-workflow")
    assert saved == [["log", "linear"]]


def test_learn_chart(saved: list[list[str]], tmp_path: Path) -> None:
    from clusteremu.commands.learn import plot_learning

    rows = [
        {"iteration": i, "time_s": 10.0 * i, "theta1_hat": 0.5, "theta1_true": 0.5,
         "theta2_hat": 0.02 * i, "theta2_true": 0.9,
         "mean_jobs_learned": 3.0, "mean_jobs_optimal": 2.9}
        for i in range(1, 5)
    ]  # fmt: skip
    result = SimpleNamespace(rows=rows, class_names=("a", "b"), change_times=[])
    plot_learning(result, tmp_path / "estimates.png", "t")  # type: ignore[arg-type]
    assert saved == [["linear", "log", "linear"]]


def test_protocol_chart(saved: list[list[str]], tmp_path: Path) -> None:
    from clusteremu.tuners.protocol import Overlap, Report, Splits, TestSet

    rng = np.random.default_rng(3)
    base = rng.uniform(1.0, 1.1, 20)
    values = {"tree": base * 0.05, "greedy": base * 2.0, "no-tree": base}
    scores = TestSet(range(20)).score(lambda xs: {k: v[list(xs)] for k, v in values.items()})
    test = scores.compare(
        "tree", better="lower", metric="cost", baselines=["greedy"], ablations=["no-tree"]
    )
    splits = Splits(seed=3, sizes={"train": 100, "test": 20})
    report = Report(
        "t", splits, (Overlap("test", 0, 20, 100),), test, test.learned_something("no-tree")
    )
    report.plot(tmp_path / "held-out.png")
    assert saved == [["log"]]


def test_faults_timeline_chart(saved: list[list[str]], tmp_path: Path) -> None:
    from clusteremu.cluster.timeline import Timeline, plot_timeline

    t = np.arange(4.0)
    ints = [np.array(v, dtype=np.int64) for v in ([3, 2, 2, 3], [0, 1, 1, 0], [0] * 4, [0] * 4)]
    timeline = Timeline("x", t, *ints, np.array([0, 200, 3, 0]), np.array([0, 1, 1, 1]))
    plot_timeline(timeline, tmp_path / "timeline.png")
    assert saved == [["linear", "symlog", "linear"]]
