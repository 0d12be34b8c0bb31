"""A run's timeline: nodes up and down, jobs waiting and node failures over simulated time.

`sample_timeline(engine, every_s)` runs an engine to the end, reading its state every
`every_s` simulated seconds through the engine's API (a run in pieces equals the run in one
go, so sampling changes nothing); `plot_timeline(timeline, path)` draws the three panels
as a PNG (docs/faults.md shows one)::

    from clusteremu.cluster.engine import Engine
    from clusteremu.cluster.timeline import plot_timeline, sample_timeline
    from clusteremu import load_scenario

    result, timeline = sample_timeline(Engine(load_scenario("faults-edge")), every_s=5.0)
    plot_timeline(timeline, "faults-edge-timeline.png")
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.layout import IS, JI, JobState, NodeStatus, Status
from clusteremu.cluster.metrics import RunResult

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Timeline:
    """State sampled at `time_s` (seconds): node rows up (taking jobs), down (failed),
    draining and booting; jobs waiting for a node; node failures so far (from the end of
    the warm-up, as the summary's `node_failures`)."""

    scenario: str
    time_s: FloatArray
    nodes_up: IntArray
    nodes_down: IntArray
    nodes_draining: IntArray
    nodes_booting: IntArray
    jobs_waiting: IntArray
    node_failures: IntArray


def sample_timeline(engine: Engine, every_s: float) -> tuple[RunResult, Timeline]:
    """Run `engine` to the end, sampling its state every `every_s` seconds from its clock
    now; return the run's result and the timeline."""
    if not (every_s > 0 and math.isfinite(every_s)):
        raise ValueError(f"every_s must be a finite number of seconds > 0, got {every_s}")
    rows: list[tuple[float, int, int, int, int, int, int]] = []
    t = engine.now
    while True:
        status = engine.step(until_s=t)
        if status == Status.YIELDED:
            continue
        s = engine.state
        nodes = s.nodes_i[1, : engine.nodes_used]
        rows.append(
            (
                min(t, engine.now) if status == Status.FINISHED else t,
                int(np.count_nonzero(nodes == NodeStatus.UP)),
                int(np.count_nonzero(nodes == NodeStatus.DOWN)),
                int(np.count_nonzero(nodes == NodeStatus.DRAINING)),
                int(np.count_nonzero(nodes == NodeStatus.BOOTING)),
                int(np.count_nonzero(s.jobs_i[JI.STATE] == JobState.QUEUED)),
                int(s.istate[IS.NODE_FAILURES]),
            )
        )
        if status == Status.FINISHED:
            break
        t += every_s
    columns = list(zip(*rows, strict=True))
    timeline = Timeline(
        engine.spec.name,
        np.asarray(columns[0], dtype=np.float64),
        *(np.asarray(c, dtype=np.int64) for c in columns[1:]),
    )
    return engine.result(), timeline


def plot_timeline(timeline: Timeline, path: str | Path) -> Path:
    """Three panels over time: nodes by state, jobs waiting, node failures so far."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from clusteremu.cluster.plotting import scale_axis

    t = timeline.time_s
    fig, axes = plt.subplots(3, 1, figsize=(8, 7), sharex=True)
    nodes, waiting, failures = axes
    for values, label in (
        (timeline.nodes_up, "up"),
        (timeline.nodes_down, "down (failed)"),
        (timeline.nodes_draining, "draining"),
        (timeline.nodes_booting, "booting"),
    ):
        if np.any(values):
            nodes.step(t, values, where="post", label=label)
    nodes.set_ylabel("nodes")
    nodes.legend(loc="best")
    waiting.step(t, timeline.jobs_waiting, where="post", color="tab:red")
    waiting.set_ylabel("jobs waiting")
    scale_axis(waiting, timeline.jobs_waiting)
    failures.step(t, timeline.node_failures, where="post", color="tab:purple")
    failures.set_ylabel("node failures so far")
    failures.set_xlabel("simulated time (s)")
    nodes.set_title(f"{timeline.scenario}: nodes, queue and failures over time")
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


__all__ = ["Timeline", "plot_timeline", "sample_timeline"]
