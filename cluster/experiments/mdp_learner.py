"""Learning-and-control loops of the MDP paper (Bodas, Dorsman, Mandjes and Ravner, "Dynamic
Core Allocation for Malleable Jobs with Unknown Speed-up Parameters"; docs/mdp.md):
Algorithms 1a and 1b (section 5) and the non-stationary (change-point) experiment of its
Table 2.

Epoch n runs the system under the policy solved for the current estimates until d_n more
departures (all classes) have happened; then theta_j is re-estimated by maximum likelihood
(`estimator.mle`) and the MDP is re-solved (`solver.solve`) for the next epoch.

- Algorithm 1a: d_n = first + step * n (default 50 + n: the paper's formula did not survive
  in the text we worked from, and 50 + n matches its Table 2 within 1.5%), estimates from
  the last epoch.
- Algorithm 1b: d_n = first (step 0; the paper uses 100), estimates from all data since 0.
- Change points: at given times the *true* theta of some classes changes; the learner is not
  told. The engine is one `Engine` advanced with `step(...)`; at a change time it is
  advanced to that instant (`Engine.advance`) and given the new parameters
  (`Engine.set_speedup`), which recomputes the running jobs' rates. Because sizes are
  exponential, the remaining work of running jobs needs no change.

The engine does not block arrivals (the truncation B lives in the MDP only); the learner
checks that the optimal policy for the true parameters (also after every change point)
blocks a negligible share of arrivals at B. Works for two or more classes.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.layout import FS, JF, JI, Status
from clusteremu.cluster.model import SimulationSpec, StopRule
from clusteremu.cluster.policies.mdp import estimator as est
from clusteremu.cluster.policies.mdp.allocator import MdpAllocator
from clusteremu.cluster.policies.mdp.learn_config import LearnConfig
from clusteremu.cluster.policies.mdp.model import MdpModelError, model_from_spec
from clusteremu.cluster.policies.mdp.solver import check_truncation, evaluate_policy, solve

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]

#: Estimates are kept inside [THETA_FLOOR, 1] before solving (theta = 0 is degenerate).
THETA_FLOOR = 1e-6


@dataclass(frozen=True)
class ChangePoint:
    """From `time_s` on, the true theta of the named classes (by class index) is `theta`."""

    time_s: float
    theta: dict[int, float]


@dataclass
class LearnResult:
    """Per-iteration estimates and the final policy.

    `rows` has one entry per iteration: iteration, departures so far, time_s, the estimates
    and standard errors, the true theta at that time, and the exact E[N] of the policy the
    new estimates give, under the true parameters (`mean_jobs_learned`) against the optimum
    (`mean_jobs_optimal`).
    """

    class_names: tuple[str, ...]
    rows: list[dict[str, float]]
    theta: tuple[float, ...]
    table: FloatArray
    mean_jobs_learned: float
    mean_jobs_optimal: float
    true_theta: tuple[float, ...]
    simulated_mean_jobs: float
    change_times: list[float] = field(default_factory=list)

    def table_arrow(self) -> pa.Table:
        return pa.Table.from_pylist(self.rows)


def resolve_change_points(config: LearnConfig, spec: SimulationSpec) -> list[ChangePoint]:
    """Change points with class names resolved to class indices (0-based)."""
    names = [c.name for c in spec.classes]
    out = []
    for i, cp in enumerate(config.change_points):
        theta: dict[int, float] = {}
        for key, value in cp["theta"].items():
            if isinstance(key, int) and 0 <= key < len(names):
                theta[key] = float(value)
            elif key in names:
                theta[names.index(key)] = float(value)
            else:
                raise MdpModelError(
                    f"learn.change_points.{i}.theta.{key}", f"expected a class name among {names}"
                )
        out.append(ChangePoint(float(cp["time_s"]), theta))
    return out


def learn(
    spec: SimulationSpec,
    config: LearnConfig,
    truncation: int = 20,
    actions: int = 100,
    progress: Callable[[float], None] | None = None,
) -> LearnResult:
    """Run Algorithm 1a or 1b on the scenario (its classes, its true theta)."""
    true_model = model_from_spec(spec, truncation)
    m = true_model.n_classes
    if config.initial_theta is not None and len(config.initial_theta) != m:
        raise MdpModelError(
            "learn.initial_theta",
            f"expected {m} values (one per class), got {len(config.initial_theta)}",
        )
    mu = true_model.service_rate_per_s
    changes = resolve_change_points(config, spec)
    optimal = solve(true_model, actions)
    check_truncation(true_model, optimal.table, config.max_blocking)
    for cp in changes:
        th = list(true_model.theta)
        for c, v in cp.theta.items():
            th[c] = v
        changed = true_model.with_theta(tuple(th))
        check_truncation(changed, solve(changed, actions).table, config.max_blocking)

    # Enough jobs for every epoch (the run must not end before the last departure).
    total = config.total_departures()
    run_spec = replace(spec, stop=StopRule(jobs=total + 10 * truncation + 1000), replications=1)
    theta_hat = tuple(float(t) for t in (config.initial_theta or (0.5,) * m))
    sol = solve(true_model.with_theta(theta_hat), actions)
    allocator = MdpAllocator(table=sol.table)
    engine = Engine(run_spec, allocator=allocator)
    pool = spec.pool_index(spec.classes[0].pool) if spec.classes[0].pool else 0
    cores = float(spec.pools[pool].cores)
    tables: list[tuple[float, FloatArray]] = [(0.0, sol.table)]
    pooled = [est.ClassExposure.empty() for _ in range(m)]
    rows: list[dict[str, float]] = []
    current_true = list(true_model.theta)
    pending = list(changes)
    t_prev, done_prev = 0.0, 0
    values = sol.relative_values
    g_true = {tuple(current_true): optimal.average_cost}
    for n in range(1, config.iterations + 1):
        target = done_prev + config.departures(n)
        while engine.jobs_done < target:
            left = target - engine.jobs_done
            until = pending[0].time_s if pending else math.inf
            status = engine.step(until_s=until, max_events=left)
            if status == Status.PAUSED and pending:
                cp = pending.pop(0)
                apply_change(engine, cp)
                for c, v in cp.theta.items():
                    current_true[c] = v
            elif status == Status.FINISHED:
                raise RuntimeError("the engine ran out of jobs before the last epoch")
        t_now = engine.now
        path = est.path_from_jobs(
            engine.jobs_f[JF.ARRIVAL],
            engine.jobs_f[JF.END],
            engine.jobs_i[JI.CLS],
            tuple(range(m)),
            cores,
            tables,
            (t_prev, t_now),
        )
        estimates = []
        for c in range(m):
            data = est.exposure(path, c)
            if config.algorithm == "1b":
                pooled[c] = pooled[c].combine(data)
                data = pooled[c]
            estimates.append(est.mle(data, mu, fallback=theta_hat[c]))
        theta_hat = tuple(
            float(np.clip(e.theta, THETA_FLOOR, 1.0)) if e.informative else theta_hat[c]
            for c, e in enumerate(estimates)
        )
        sol = solve(true_model.with_theta(theta_hat), actions, initial_values=values)
        values = sol.relative_values
        allocator.set_table(sol.table)
        engine.request_allocation(pool)  # re-decide now with the new table
        tables.append((t_now, sol.table))
        model_now = true_model.with_theta(tuple(current_true))
        key = tuple(current_true)
        if key not in g_true:
            g_true[key] = solve(model_now, actions).average_cost
        row: dict[str, float] = {
            "iteration": n,
            "departures": engine.jobs_done,
            "epoch_departures": config.departures(n),
            "time_s": t_now,
        }
        for c, e in enumerate(estimates):
            row[f"theta{c + 1}_hat"] = e.theta
            row[f"theta{c + 1}_se"] = e.std_error
        for c in range(m):
            row[f"theta{c + 1}_true"] = current_true[c]
        row["mean_jobs_learned"] = evaluate_policy(model_now, sol.table).mean_jobs
        row["mean_jobs_optimal"] = g_true[key]
        rows.append(row)
        t_prev, done_prev = t_now, engine.jobs_done
        if progress is not None:
            progress(n / config.iterations)
    model_end = true_model.with_theta(tuple(current_true))
    run = engine.snapshot()
    area = run.state.area_class.sum()
    measured = float(run.state.fstate[FS.MEASURED_TIME])
    return LearnResult(
        class_names=tuple(c.name for c in spec.classes),
        rows=rows,
        theta=tuple(float(t) for t in theta_hat),
        table=sol.table,
        mean_jobs_learned=evaluate_policy(model_end, sol.table).mean_jobs,
        mean_jobs_optimal=g_true[tuple(current_true)],
        true_theta=tuple(current_true),
        simulated_mean_jobs=float(area / measured) if measured > 0 else math.nan,
        change_times=[cp.time_s for cp in changes],
    )


def apply_change(engine: Engine, cp: ChangePoint) -> None:
    """Change the true speed-up parameters at cp.time_s, exactly at that instant.

    The engine stopped before its first event after cp.time_s; bring the pool's remaining
    work and the time integrals up to cp.time_s, write the new parameters where the compiled
    loop reads them, and recompute the running jobs' rates and the next completion.
    """
    if cp.time_s > engine.now:
        engine.advance(cp.time_s)
    for c, value in cp.theta.items():
        engine.set_speedup(c, [value])
    log.info("t=%.6g s: true theta changed to %s", cp.time_s, cp.theta)


def tracking_delays(result: LearnResult, tolerance: float = 0.1) -> list[int | None]:
    """Epochs until the estimates follow each change point.

    For a change at time t, the change epoch is the first whose end is at or after t (its
    data mix both regimes). The delay is the smallest m >= 1 such that the estimates of
    epoch (change epoch + m) lie within `tolerance` of the new true value for every class
    whose theta changed; None if that never happens before the run ends.
    """
    rows = result.rows
    times = np.array([r["time_s"] for r in rows])
    delays: list[int | None] = []
    for t in result.change_times:
        n_c = int(np.searchsorted(times, t, side="left"))
        if n_c >= len(rows):
            delays.append(None)
            continue
        m = len(result.class_names)
        changed = [
            c
            for c in range(m)
            if n_c == 0 or rows[n_c][f"theta{c + 1}_true"] != rows[n_c - 1][f"theta{c + 1}_true"]
        ]
        found: int | None = None
        for m in range(1, len(rows) - n_c):
            row = rows[n_c + m]
            if all(
                abs(row[f"theta{c + 1}_hat"] - row[f"theta{c + 1}_true"]) <= tolerance
                for c in changed
            ):
                found = m
                break
        delays.append(found)
    return delays
