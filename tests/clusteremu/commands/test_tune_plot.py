"""tune.png draws a 95% interval only where the table has one: with one experiment the
table says n/a and the plot draws no error bar (issue 41, "truthful output"). The figure is
drawn from stand-in results, so no tuning runs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from matplotlib.container import ErrorbarContainer

from clusteremu.commands.tune import _figure


class Results:
    """What `_figure` reads of a tuner's results: its improvements and its summary."""

    def __init__(self, improvements: list[float], out_of_sample: bool = True) -> None:
        self.imp = np.array(improvements)
        self.out_of_sample = out_of_sample

    def improvements(self) -> np.ndarray:
        return self.imp

    def summary(self) -> dict[str, Any]:
        n = self.imp.size
        ci = float("nan") if n < 2 else 0.01
        part = {"mean_improvement_over_fixed": float(self.imp.mean()), "ci95": ci}
        return {**part, "out_of_sample": dict(part) if self.out_of_sample else None}


def _error_bars(results: dict[str, Any]) -> tuple[int, str]:
    import matplotlib.pyplot as plt

    fig = _figure(results)
    try:
        bars = fig.axes[1]
        drawn = [c for c in bars.containers if isinstance(c, ErrorbarContainer)]
        return sum(len(c.lines[2][0].get_segments()) for c in drawn), bars.get_ylabel()
    finally:
        plt.close(fig)


@pytest.mark.parametrize("out_of_sample", [True, False])
def test_one_experiment_draws_no_error_bars(out_of_sample: bool) -> None:
    drawn, label = _error_bars({"tpe": Results([0.05], out_of_sample)})
    assert drawn == 0
    assert "no interval" in label and "95%" not in label


def test_several_experiments_draw_one_error_bar_per_bar() -> None:
    drawn, label = _error_bars({"tpe": Results([0.05, 0.07]), "random": Results([0.01, 0.02])})
    assert drawn == 4  # two tuners, in sample and out of sample
    assert "95% interval" in label
